"""JSON-schema function parameters as the TypeScript-like text the Harmony format (gpt-oss) puts in the developer
message, with the same layout, comments and defaults as ``openai-harmony``'s renderer (its output is the reference;
tests compare the two on many schemas).

Key order is the schema's own (JSON objects keep insertion order). Defaults are shown as compact JSON, strings
quoted except an enum's string default on a property. Numbers are printed as ``serde_json`` prints the value it
parsed: an integer outside the 64-bit range (below ``-2**63`` or above ``2**64 - 1``) is a double there, so it is
printed as one (``1.8446744073709552e19``); one too large for a double is refused (:class:`ChatInputError`; the
reference cannot parse it).

Cost is linear in the output: every piece is appended once to one :class:`_Writer` (no level re-joins the text of
the levels below it), and the one question asked of a rendered sub-type -- does it contain ``null`` -- is answered
from the writer's record of the last ``null`` it wrote. The output itself grows with the nesting (each line is
indented), which :data:`~.limits.MAX_JSON_DEPTH` bounds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .messages import ChatInputError

_I64_MIN, _U64_MAX = -(2**63), 2**64 - 1


class _Writer:
    """Append-only text with the start of the last ``"null"`` written (for :meth:`null_since`)."""

    __slots__ = ("parts", "length", "tail", "last_null")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.tail = ""  # the last 3 characters written (a "null" may straddle two pieces)
        self.last_null = -1

    def write(self, text: str) -> None:
        if not text:
            return
        joined = self.tail + text
        found = joined.rfind("null")
        if found >= 0:
            self.last_null = self.length - len(self.tail) + found
        self.parts.append(text)
        self.length += len(text)
        self.tail = joined[-3:]

    def null_since(self, start: int) -> bool:
        """True when the text written from offset ``start`` on contains ``null``."""
        return self.last_null >= start

    def text(self) -> str:
        return "".join(self.parts)


def _float_text(value: float) -> str:
    if not math.isfinite(value):
        return "null"
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa}e{int(exponent)}"
    return text


def _json_into(out: list[str], value: Any) -> None:
    if isinstance(value, bool) or value is None:
        out.append(json.dumps(value))
    elif isinstance(value, float):
        out.append(_float_text(value))
    elif isinstance(value, int):
        if _I64_MIN <= value <= _U64_MAX:
            out.append(str(value))
        else:
            try:
                out.append(_float_text(float(value)))
            except OverflowError:
                raise ChatInputError("a number in a tool schema is too large for a double (openai-harmony cannot "
                                     "read it)", "tools") from None
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, list):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _json_into(out, v)
        out.append("]")
    elif isinstance(value, Mapping):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if i:
                out.append(",")
            out.append(json.dumps(str(k), ensure_ascii=False))
            out.append(":")
            _json_into(out, v)
        out.append("}")
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def json_text(value: Any) -> str:
    """Compact JSON the way Rust's ``serde_json`` prints a value (``1e21``, not ``1e+21``; an integer past 64 bits as
    the double it parses to). Raises :class:`ChatInputError` for an integer too large for a double."""
    out: list[str] = []
    _json_into(out, value)
    return "".join(out)


def rust_lines(text: str) -> list[str]:
    """``str::lines`` of Rust: split on ``\\n`` (a ``\\r`` before it is dropped); no final empty line."""
    if not text:
        return []
    pieces = text.split("\n")
    if pieces[-1] == "":
        pieces.pop()
    else:
        last = pieces.pop()
        return [p[:-1] if p.endswith("\r") else p for p in pieces] + [last]
    return [p[:-1] if p.endswith("\r") else p for p in pieces]


def _get(schema: Any, key: str) -> Any:
    return schema.get(key) if isinstance(schema, Mapping) else None


def _is_enum(schema: Any) -> bool:
    enum = _get(schema, "enum")
    return isinstance(enum, list) and bool(enum)


def _nullable_type(w: _Writer, schema: Any, indent: str) -> None:
    """The type of ``schema``, then `` | null`` when it is ``nullable`` and its type text has no ``null``."""
    start = w.length
    _type(w, schema, indent)
    if _get(schema, "nullable") is True and not w.null_since(start):
        w.write(" | null")


def _default_comment(schema: Any, default: Any, *, quote_enum: bool) -> str:
    """``default: …`` text: a string default is quoted unless it belongs to an enum and ``quote_enum`` is off."""
    if isinstance(default, str):
        if not _is_enum(schema):
            return f'default: "{default}"'
        return f"default: {json_text(default) if quote_enum else default}"
    return f"default: {json_text(default)}"


def to_typescript(schema: Any, indent: str = "") -> str:
    """The TypeScript-like type of a JSON schema."""
    w = _Writer()
    _type(w, schema, indent)
    return w.text()


def _type(w: _Writer, schema: Any, indent: str) -> None:
    one_of = _get(schema, "oneOf")
    if isinstance(one_of, list):
        for variant in one_of:
            w.write(f"\n{indent} | ")
            _nullable_type(w, variant, indent + "   ")
            comments = []
            desc = _get(variant, "description")
            if isinstance(desc, str):
                comments.append(desc)
            if isinstance(variant, Mapping) and "default" in variant:
                comments.append(_default_comment(variant, variant["default"], quote_enum=True))
            if comments:
                w.write(" // " + " ".join(comments))
        return
    types = _get(schema, "type")
    if isinstance(types, list):
        names = ["number" if t == "integer" else t for t in types if isinstance(t, str)]
        if names:
            w.write(" | ".join(names))
            return
    if isinstance(types, str):
        if types == "object":
            _object(w, schema, indent)
            return
        if types == "string":
            enum = _get(schema, "enum")
            if isinstance(enum, list):
                names = [f'"{v}"' for v in enum if isinstance(v, str)]
                if names:
                    w.write(" | ".join(names))
                    return
            w.write("string")
            return
        if types in ("number", "integer"):
            w.write("number")
            return
        if types == "boolean":
            w.write("boolean")
            return
        if types == "array":
            if isinstance(schema, Mapping) and "items" in schema:
                _type(w, schema["items"], indent)
                w.write("[]")
                return
            w.write("Array<any>")
            return
    w.write("any")


def _object(w: _Writer, schema: Mapping[str, Any], indent: str) -> None:
    desc = schema.get("description")
    if isinstance(desc, str):
        w.write(f"{indent}// {desc}\n")
    w.write("{\n")
    props = schema.get("properties")
    if isinstance(props, Mapping):
        req = schema.get("required")
        required = {r for r in req if isinstance(r, str)} if isinstance(req, list) else set()
        for key, val in props.items():
            mark = "" if key in required else "?"
            title = _get(val, "title")
            if isinstance(title, str):
                w.write(f"{indent}// {title}\n{indent}//\n")
            one_of = _get(val, "oneOf")
            pdesc = _get(val, "description")
            if one_of is None and isinstance(pdesc, str):
                w.write(f"{indent}// {pdesc}\n")
            examples = _get(val, "examples")
            if isinstance(examples, list) and examples:
                w.write(f"{indent}// Examples:\n")
                for ex in examples:
                    if isinstance(ex, str):
                        w.write(f'{indent}// - "{ex}"\n')
            if isinstance(one_of, list):
                _one_of_property(w, val, one_of, key, mark, indent)
                continue
            w.write(f"{indent}{key}{mark}: ")
            _nullable_type(w, val, indent + "    ")
            w.write(",")
            if one_of is None and isinstance(val, Mapping) and "default" in val:
                w.write(" // " + _default_comment(val, val["default"], quote_enum=False))
            w.write("\n")
    w.write(f"{indent}}}")


def _one_of_property(w: _Writer, val: Mapping[str, Any], one_of: list[Any], key: str, mark: str,
                     indent: str) -> None:
    pdesc = val.get("description")
    pdesc = pdesc if isinstance(pdesc, str) else None
    skip = pdesc is not None and bool(one_of) and _get(one_of[0], "description") == pdesc
    above = False
    if not skip and pdesc is not None:
        w.write(f"{indent}// {pdesc}\n")
        above = True
    if "default" in val:
        w.write(f"{indent}// " + _default_comment(val, val["default"], quote_enum=False) + "\n")
    w.write(f"{indent}{key}{mark}:\n")
    for i, variant in enumerate(one_of):
        w.write(f"{indent} | ")
        _nullable_type(w, variant, indent + "   ")
        comments = []
        vdesc = _get(variant, "description")
        if not (i == 0 and above) and isinstance(vdesc, str) and vdesc != pdesc:
            comments.append(vdesc)
        if isinstance(variant, Mapping) and "default" in variant:
            comments.append(_default_comment(variant, variant["default"], quote_enum=False))
        if comments:
            w.write(" // " + " ".join(comments))
        w.write("\n")
    w.write(f"{indent},\n")
