"""JSON-schema function parameters as the TypeScript-like text the Harmony format (gpt-oss) puts in the developer
message, with the same layout, comments and defaults as ``openai-harmony``'s renderer (its output is the reference;
tests compare the two on many schemas).

Key order is the schema's own (JSON objects keep insertion order). Defaults are shown as compact JSON, strings
quoted except an enum's string default on a property.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def json_text(value: Any) -> str:
    """Compact JSON the way Rust's ``serde_json`` prints a value (``1e21``, not ``1e+21``)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "null"
        text = repr(value)
        if "e" in text:
            mantissa, exponent = text.split("e")
            return f"{mantissa}e{int(exponent)}"
        return text
    if isinstance(value, int | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{json_text(v)}"
                              for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


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


def _nullable(schema: Any, type_str: str) -> str:
    if _get(schema, "nullable") is True and "null" not in type_str:
        return f"{type_str} | null"
    return type_str


def _default_comment(schema: Any, default: Any, *, quote_enum: bool) -> str:
    """``default: …`` text: a string default is quoted unless it belongs to an enum and ``quote_enum`` is off."""
    if isinstance(default, str):
        if not _is_enum(schema):
            return f'default: "{default}"'
        return f"default: {json_text(default) if quote_enum else default}"
    return f"default: {json_text(default)}"


def to_typescript(schema: Any, indent: str = "") -> str:
    """The TypeScript-like type of a JSON schema."""
    one_of = _get(schema, "oneOf")
    if isinstance(one_of, list):
        out = []
        for variant in one_of:
            out.append(f"\n{indent} | ")
            out.append(_nullable(variant, to_typescript(variant, indent + "   ")))
            comments = []
            desc = _get(variant, "description")
            if isinstance(desc, str):
                comments.append(desc)
            if isinstance(variant, Mapping) and "default" in variant:
                comments.append(_default_comment(variant, variant["default"], quote_enum=True))
            if comments:
                out.append(" // " + " ".join(comments))
        return "".join(out)
    types = _get(schema, "type")
    if isinstance(types, list):
        names = ["number" if t == "integer" else t for t in types if isinstance(t, str)]
        if names:
            return " | ".join(names)
    if isinstance(types, str):
        if types == "object":
            return _object(schema, indent)
        if types == "string":
            enum = _get(schema, "enum")
            if isinstance(enum, list):
                names = [f'"{v}"' for v in enum if isinstance(v, str)]
                if names:
                    return " | ".join(names)
            return "string"
        if types in ("number", "integer"):
            return "number"
        if types == "boolean":
            return "boolean"
        if types == "array":
            items = _get(schema, "items")
            if isinstance(schema, Mapping) and "items" in schema:
                return f"{to_typescript(items, indent)}[]"
            return "Array<any>"
    return "any"


def _object(schema: Mapping[str, Any], indent: str) -> str:
    out = []
    desc = schema.get("description")
    if isinstance(desc, str):
        out.append(f"{indent}// {desc}\n")
    out.append("{\n")
    props = schema.get("properties")
    if isinstance(props, Mapping):
        req = schema.get("required")
        required = {r for r in req if isinstance(r, str)} if isinstance(req, list) else set()
        for key, val in props.items():
            mark = "" if key in required else "?"
            title = _get(val, "title")
            if isinstance(title, str):
                out.append(f"{indent}// {title}\n{indent}//\n")
            one_of = _get(val, "oneOf")
            pdesc = _get(val, "description")
            if one_of is None and isinstance(pdesc, str):
                out.append(f"{indent}// {pdesc}\n")
            examples = _get(val, "examples")
            if isinstance(examples, list) and examples:
                out.append(f"{indent}// Examples:\n")
                out.extend(f'{indent}// - "{ex}"\n' for ex in examples if isinstance(ex, str))
            if isinstance(one_of, list):
                out.append(_one_of_property(val, one_of, key, mark, indent))
                continue
            out.append(f"{indent}{key}{mark}: ")
            out.append(_nullable(val, to_typescript(val, indent + "    ")))
            out.append(",")
            if one_of is None and isinstance(val, Mapping) and "default" in val:
                out.append(" // " + _default_comment(val, val["default"], quote_enum=False))
            out.append("\n")
    out.append(f"{indent}}}")
    return "".join(out)


def _one_of_property(val: Mapping[str, Any], one_of: list[Any], key: str, mark: str, indent: str) -> str:
    out = []
    pdesc = val.get("description")
    pdesc = pdesc if isinstance(pdesc, str) else None
    skip = pdesc is not None and bool(one_of) and _get(one_of[0], "description") == pdesc
    above = False
    if not skip and pdesc is not None:
        out.append(f"{indent}// {pdesc}\n")
        above = True
    if "default" in val:
        out.append(f"{indent}// " + _default_comment(val, val["default"], quote_enum=False) + "\n")
    out.append(f"{indent}{key}{mark}:\n")
    for i, variant in enumerate(one_of):
        out.append(f"{indent} | ")
        out.append(_nullable(variant, to_typescript(variant, indent + "   ")))
        comments = []
        vdesc = _get(variant, "description")
        if not (i == 0 and above) and isinstance(vdesc, str) and vdesc != pdesc:
            comments.append(vdesc)
        if isinstance(variant, Mapping) and "default" in variant:
            comments.append(_default_comment(variant, variant["default"], quote_enum=False))
        if comments:
            out.append(" // " + " ".join(comments))
        out.append("\n")
    out.append(f"{indent},\n")
    return "".join(out)
