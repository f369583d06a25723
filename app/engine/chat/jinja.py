"""Open-weight chat templates (Jinja2), rendered the way ``transformers``' ``apply_chat_template`` renders them,
producing parts in which only the template's own special tokens are special.

The environment is jinja2's ``ImmutableSandboxedEnvironment`` with ``trim_blocks``, ``lstrip_blocks`` and the
``loopcontrols`` extension, plus the helpers templates expect: ``raise_exception(msg)`` (-> :class:`ChatInputError`),
``strftime_now(fmt)`` and a ``tojson`` filter equal to ``json.dumps(x, ensure_ascii=False, indent=None,
separators=None, sort_keys=False)`` (jinja2's own escapes HTML characters). Messages are passed as dicts with
``content`` as a string (``""`` for null) and tool-call ``arguments`` parsed from JSON into objects (as vLLM does).

Text stays text: before rendering, every string the caller supplied is escaped so that no special-token string
survives in it (each occurrence becomes a private-use marker group ``\\ue000<n>\\ue000``; a literal ``\\ue000`` is
group 0). The rendered string is then split on the special-token strings — which can now only come from the
template — and each text piece is unescaped back to the caller's characters. Escaping commutes with what templates
do to content (trim, split on ordinary markers, ``in`` tests, JSON quoting), because the markers are neither
whitespace nor ASCII. A special token could still be completed across a boundary if a template literal began or
ended with part of one; :class:`ChatTemplate` refuses such templates when it loads them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .messages import ChatInputError, Conversation
from .parts import Parts, special_part

MARK = "\ue000"
_GROUP = re.compile(MARK + r"(\d+)" + MARK)


def _same(value: Any) -> Any:
    return value


def _raise_exception(message: str) -> None:
    raise ChatInputError(f"the chat template rejected the conversation: {message}")


def _tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


class _Splitter:
    """``finditer`` over the special-token strings of a text; names shaped ``<|…|>`` (most tokenizers) are found
    with one candidate pattern and a set lookup, which stays fast with hundreds of names."""

    _SHAPED = re.compile(r"<\|[^|<>]+\|>")

    def __init__(self, names: list[str]) -> None:
        self.known = frozenset(names)
        shaped = all(self._SHAPED.fullmatch(n) for n in names)
        longest = max(map(len, names))
        self.pattern = (re.compile(r"<\|[^|<>]{1,%d}\|>" % longest) if shaped  # noqa: UP031
                        else re.compile("|".join(map(re.escape, names))))
        self.shaped = shaped
        self.splitter = re.compile(f"({self.pattern.pattern})")

    def split(self, text: str) -> list[str]:
        """``[text, special, text, special, …, text]`` (always odd length; texts may be empty)."""
        pieces = self.splitter.split(text)
        if not self.shaped:
            return pieces
        out = [pieces[0]]
        for i in range(1, len(pieces), 2):
            if pieces[i] in self.known:
                out += (pieces[i], pieces[i + 1])
            else:  # a lookalike that is no special of this tokenizer: text
                out[-1] += pieces[i] + pieces[i + 1]
        return out


def _splitter(names: list[str]) -> _Splitter | None:
    return _Splitter(names) if names else None


class _Escaper:
    """Reversible removal of special-token strings from caller text (see the module docstring)."""

    def __init__(self, specials: Iterable[str]) -> None:
        self.names = sorted(set(specials), key=len, reverse=True)
        self.index = {name: i + 1 for i, name in enumerate(self.names)}
        self.split = _splitter(self.names)
        if self.split is not None and self.split.shaped:
            self.find = re.compile(re.escape(MARK) + "|" + self.split.pattern.pattern)
        else:
            self.find = re.compile("|".join([re.escape(MARK), *map(re.escape, self.names)]))
        self.first_chars = tuple(sorted({n[0] for n in self.names} | {MARK}))

    def _group(self, m: re.Match[str]) -> str:
        found = m.group()
        if found == MARK:
            return f"{MARK}0{MARK}"
        n = self.index.get(found)
        return found if n is None else f"{MARK}{n}{MARK}"  # a <|…|> lookalike that is not a special: unchanged

    def escape(self, value: Any) -> Any:
        if isinstance(value, str):
            for c in self.first_chars:  # substring tests are fast; most text has none of these characters
                if c in value:
                    return self.find.sub(self._group, value)
            return value
        if isinstance(value, Mapping):
            return {self.escape(k): self.escape(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.escape(v) for v in value]
        return value

    def unescape(self, text: str) -> str:
        if MARK not in text:
            return text

        def group(m: re.Match[str]) -> str:
            n = int(m.group(1))
            if n > len(self.names):
                raise ChatInputError("the chat template altered the caller's text in a way that cannot be undone")
            return MARK if n == 0 else self.names[n - 1]

        out = _GROUP.sub(group, text)
        if out.count(MARK) != sum(1 for m in _GROUP.finditer(text) if m.group(1) == "0"):
            raise ChatInputError("the chat template altered the caller's text in a way that cannot be undone")
        return out


class ChatTemplate:
    """A compiled chat template with its tokenizer-config variables (``bos_token``, …).

    Raises ``ValueError`` at construction for a template that does not compile, or whose literal text could join
    caller text into one of ``specials`` (see the module docstring).
    """

    def __init__(self, name: str, source: str, variables: Mapping[str, str], specials: Iterable[str]) -> None:
        self.name = name
        self.source = source
        self.variables = dict(variables)
        self.specials = tuple(specials)
        env = _environment()
        try:
            ast = env.parse(source)
            self._template = env.from_string(source)
        except jinja2.TemplateError as exc:
            raise ValueError(f"chat template {name!r} does not compile: {exc}") from None
        self._escaper = _Escaper(self.specials)
        self._check_literals(ast)

    def _check_literals(self, ast: nodes.Template) -> None:
        literals = [n.value for n in ast.find_all(nodes.Const) if isinstance(n.value, str)]
        literals += [n.data for n in ast.find_all(nodes.TemplateData)]
        for literal in literals:
            for special in self.specials:
                for k in range(1, len(special)):
                    if literal.startswith(special[k:]) or literal.endswith(special[:k]):
                        raise ValueError(f"chat template {self.name!r}: the literal {literal[:40]!r} could complete "
                                         f"the special token {special!r} with caller text")

    def context(self, conv: Conversation, add_generation_prompt: bool, escape: bool) -> dict[str, Any]:
        """The variables the template sees (escaped caller strings when ``escape``)."""
        messages: list[dict[str, Any]] = []
        text = self._escaper.escape if escape else _same
        for i, m in enumerate(conv.messages):
            item: dict[str, Any] = {"role": m.role, "content": text(m.content)}
            if m.name is not None:
                item["name"] = text(m.name)
            if m.tool_calls:
                item["tool_calls"] = text([
                    {**({"id": c.id} if c.id is not None else {}), "type": "function",
                     "function": {"name": c.name,
                                  "arguments": c.arguments_value(f"messages[{i}].tool_calls[{j}].function")}}
                    for j, c in enumerate(m.tool_calls)])
            if m.tool_call_id is not None:
                item["tool_call_id"] = text(m.tool_call_id)
            messages.append(item)
        tools = text([dict(t.raw) for t in conv.tools]) if conv.tools else None
        return {**self.variables, "messages": messages, "tools": tools, "documents": None,
                "add_generation_prompt": add_generation_prompt}

    def render(self, conv: Conversation, *, add_generation_prompt: bool = True) -> str:
        """The template's output as one string, exactly as ``apply_chat_template(tokenize=False)`` returns it."""
        return self._render(self.context(conv, add_generation_prompt, escape=False))

    def _render(self, context: dict[str, Any]) -> str:
        try:
            return self._template.render(**context)
        except ChatInputError:
            raise
        except jinja2.exceptions.SecurityError as exc:
            raise ChatInputError(f"the chat template tried an unsafe operation: {exc}") from None
        except (jinja2.TemplateError, TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise ChatInputError(f"the chat template cannot render this conversation: {exc}") from None

    def frame(self, conv: Conversation, *, add_generation_prompt: bool = True) -> Parts:
        """The rendered prompt as parts: the template's special-token strings as specials, the rest as text."""
        rendered = self._render(self.context(conv, add_generation_prompt, escape=True))
        out = Parts()
        splitter = self._escaper.split
        pieces = splitter.split(rendered) if splitter is not None else [rendered]
        unescape = self._escaper.unescape
        items = out.items
        last = len(pieces) - 1
        for i in range(0, len(pieces), 2):
            text = pieces[i]
            if text:
                items.append(unescape(text) if MARK in text else text)
            if i < last:
                items.append(special_part(pieces[i + 1]))
        return out
