"""Chat conversations in the OpenAI Chat Completions shape, validated into immutable values.

:func:`parse_conversation` is the one validator for every caller (HTTP API, CLI, library). Accepted shape::

    messages: [{"role": "system"|"developer"|"user"|"assistant"|"tool",
                "content": str | null | [{"type": "text", "text": str}, ...],
                "name": str,                       # optional
                "tool_calls": [{"id": str, "type": "function",
                                "function": {"name": str, "arguments": str}}],   # assistant only
                "tool_call_id": str}]              # tool only
    tools:    [{"type": "function", "function": {"name": str, "description": str, "parameters": {...}}}]

Decisions: a list ``content`` keeps its text parts (``content_parts``) and, as ``content``, their join with ``"\\n"``
(what vLLM gives templates that take string content); each framing uses the form its reference uses (Jinja
templates that loop over content and Harmony take the parts). ``content: null`` is the empty string. Bad input
raises :class:`ChatInputError` whose ``path`` names the offending field (``messages[2].content``).

Limits (:mod:`.limits`), checked here before any framing work: no message or tool nests deeper than
:data:`~.limits.MAX_JSON_DEPTH` (a tool call's ``arguments`` text counted where it stands). Error messages quote at
most a short prefix of a caller value and are at most :data:`MAX_ERROR_CHARS` long.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .limits import ARGUMENTS_DEPTH, MAX_JSON_DEPTH, depth_exceeds, preview, text_depth_exceeds

ROLES = ("system", "developer", "user", "assistant", "tool")
#: Longest error message (a longer one is cut): refusals never echo megabytes of caller input.
MAX_ERROR_CHARS = 500


class ChatInputError(ValueError):
    """A conversation that does not have the accepted shape, or that a framing cannot render. ``limit`` is set
    (``(name, value)``) when it is over one of the limits of :mod:`.limits`."""

    def __init__(self, message: str, path: str = "messages", limit: tuple[str, int] | None = None) -> None:
        if len(message) > MAX_ERROR_CHARS:
            message = message[:MAX_ERROR_CHARS - 1] + "…"
        super().__init__(message)
        self.path = path[:200]
        self.limit = limit


def _too_deep(path: str, what: str) -> ChatInputError:
    return ChatInputError(f"{path}: {what} nests JSON more than {MAX_JSON_DEPTH} deep (the limit on chat JSON "
                          "nesting, MAX_JSON_DEPTH)", path, ("MAX_JSON_DEPTH", MAX_JSON_DEPTH))


@dataclass(frozen=True)
class ToolCall:
    """An assistant's function call: ``arguments`` is the JSON text the model produced."""

    name: str
    arguments: str
    id: str | None = None
    arguments_given: bool = True  # False when the caller left 'arguments' out ("{}" is assumed)

    def arguments_value(self, path: str) -> Any:
        """``arguments`` parsed from JSON (templates receive objects, as vLLM passes them)."""
        try:
            return json.loads(self.arguments)
        except ValueError:
            raise ChatInputError(f"{path}: 'arguments' is not valid JSON", path) from None


@dataclass(frozen=True)
class ChatMessage:
    """One message; ``content`` is plain text (never parsed for special tokens)."""

    role: str
    content: str
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    content_given: bool = True  # False when the caller sent null or left it out (assistant with tool_calls)
    content_parts: tuple[str, ...] | None = None  # the text parts when content was a list (framings that take
    # parts or join them differently -- Jinja templates that loop over content, Harmony, Mistral -- use these)


@dataclass(frozen=True)
class Tool:
    """An OpenAI function tool; ``raw`` is the definition as given (templates receive it unchanged)."""

    name: str
    description: str | None
    parameters: Mapping[str, Any] | None
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Conversation:
    """Messages and tools, validated."""

    messages: tuple[ChatMessage, ...]
    tools: tuple[Tool, ...] = ()

    def texts(self) -> list[str]:
        """Every text a caller wrote (contents, names, call arguments): what limits and lookalike counts apply to."""
        out: list[str] = []
        for m in self.messages:
            out.append(m.content)
            if m.name:
                out.append(m.name)
            for call in m.tool_calls:
                out.extend((call.name, call.arguments))
        return out

    def replace_messages(self, messages: Sequence[ChatMessage]) -> Conversation:
        return Conversation(tuple(messages), self.tools)


def _str(value: Any, path: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ChatInputError(f"{path} must be a string", path)
    return value


def _content(value: Any, path: str) -> tuple[str, bool, tuple[str, ...] | None]:
    if value is None:
        return "", False, None
    if isinstance(value, str):
        return value, True, None
    if isinstance(value, list):
        texts = []
        for i, part in enumerate(value):
            where = f"{path}[{i}]"
            if not isinstance(part, Mapping) or part.get("type") != "text" or set(part) - {"type", "text"}:
                raise ChatInputError(f"{where} must be {{\"type\": \"text\", \"text\": ...}} (only text parts are "
                                     "supported)", where)
            texts.append(_str(part.get("text"), f"{where}.text"))
        joined = tuple(t for t in texts if t is not None)
        return "\n".join(joined), True, joined
    raise ChatInputError(f"{path} must be a string, null or a list of text parts", path)


def _tool_call(value: Any, path: str) -> ToolCall:
    if not isinstance(value, Mapping) or set(value) - {"id", "type", "function"}:
        raise ChatInputError(f"{path} must be {{id, type: \"function\", function: {{name, arguments}}}}", path)
    if value.get("type", "function") != "function":
        raise ChatInputError(f"{path}.type must be \"function\"", f"{path}.type")
    fn = value.get("function")
    if not isinstance(fn, Mapping) or set(fn) - {"name", "arguments"}:
        raise ChatInputError(f"{path}.function must be {{name, arguments}}", f"{path}.function")
    name = _str(fn.get("name"), f"{path}.function.name")
    given = "arguments" in fn
    arguments = fn.get("arguments", "{}")
    if isinstance(arguments, Mapping):  # some clients send an object; keep its JSON text
        arguments = json.dumps(arguments, ensure_ascii=False)
    arguments = _str(arguments, f"{path}.function.arguments")
    assert name is not None and arguments is not None
    if text_depth_exceeds(arguments, MAX_JSON_DEPTH - ARGUMENTS_DEPTH):
        raise _too_deep(f"{path}.function.arguments", "the arguments text")
    if not name:
        raise ChatInputError(f"{path}.function.name must not be empty", f"{path}.function.name")
    return ToolCall(name=name, arguments=arguments, id=_str(value.get("id"), f"{path}.id", optional=True),
                    arguments_given=given)


_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})
_ROLE_SET = frozenset(ROLES)
#: Each role name -> the one string object of :data:`ROLES`: a message keeps that, not the caller's copy (memo keys
#: of role sequences then hold pointers to five shared strings).
_CANON = {r: r for r in ROLES}
_PLAIN = {"role", "content"}


_PLAIN_DEFAULTS = {"name": None, "tool_calls": (), "tool_call_id": None, "content_given": True,
                   "content_parts": None}
_new = object.__new__


def _plain_message(role: str, content: str) -> ChatMessage:
    """``ChatMessage(role, content)`` (every other field at its default), built without the frozen dataclass's
    per-field ``object.__setattr__`` calls: most messages are this shape and validation is on the hot path."""
    m = _new(ChatMessage)
    d = m.__dict__
    d["role"] = role
    d["content"] = content
    d.update(_PLAIN_DEFAULTS)
    return m


def _message(value: Any, path: str) -> ChatMessage:
    if type(value) is dict and value.keys() == _PLAIN:  # the common shape: {"role", "content": str}
        role, content = value["role"], value["content"]
        if type(content) is str and type(role) is str and role in _ROLE_SET:
            return _plain_message(_CANON[role], content)
    if not isinstance(value, Mapping):
        raise ChatInputError(f"{path} must be an object", path)
    if depth_exceeds(value, MAX_JSON_DEPTH):
        raise _too_deep(path, "the message")
    extra = sorted(map(str, set(value) - _MESSAGE_KEYS))
    if extra:
        raise ChatInputError(f"{path}: unknown field {preview(extra[0])} (allowed: "
                             f"{', '.join(sorted(_MESSAGE_KEYS))})", f"{path}.{extra[0][:40]}")
    role = value.get("role")
    if role not in ROLES:
        raise ChatInputError(f"{path}.role must be one of {', '.join(ROLES)}", f"{path}.role")
    content, given, parts = _content(value.get("content"), f"{path}.content")
    name = _str(value.get("name"), f"{path}.name", optional=True)
    raw_calls = value.get("tool_calls")
    calls: tuple[ToolCall, ...] = ()
    if raw_calls is not None:
        if role != "assistant":
            raise ChatInputError(f"{path}.tool_calls: only assistant messages have tool calls", f"{path}.tool_calls")
        if not isinstance(raw_calls, list):
            raise ChatInputError(f"{path}.tool_calls must be a list", f"{path}.tool_calls")
        calls = tuple(_tool_call(c, f"{path}.tool_calls[{i}]") for i, c in enumerate(raw_calls))
    call_id = _str(value.get("tool_call_id"), f"{path}.tool_call_id", optional=True)
    if call_id is not None and role != "tool":
        raise ChatInputError(f"{path}.tool_call_id: only tool messages answer a tool call", f"{path}.tool_call_id")
    if "content" not in value and not calls:
        raise ChatInputError(f"{path}.content is required", f"{path}.content")
    return ChatMessage(role=_CANON[role], content=content, name=name, tool_calls=calls, tool_call_id=call_id,
                       content_given=given, content_parts=parts)


def _tool(value: Any, path: str) -> Tool:
    if not isinstance(value, Mapping) or value.get("type") != "function" or not isinstance(
            value.get("function"), Mapping):
        raise ChatInputError(f"{path} must be {{\"type\": \"function\", \"function\": {{name, description, "
                             "parameters}}}}", path)
    if depth_exceeds(value, MAX_JSON_DEPTH):
        raise _too_deep(path, "the tool")
    fn = value["function"]
    name = _str(fn.get("name"), f"{path}.function.name")
    assert name is not None
    if not name:
        raise ChatInputError(f"{path}.function.name must not be empty", f"{path}.function.name")
    description = _str(fn.get("description"), f"{path}.function.description", optional=True)
    parameters = fn.get("parameters")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise ChatInputError(f"{path}.function.parameters must be a JSON schema object", f"{path}.function.parameters")
    return Tool(name=name, description=description, parameters=parameters, raw=value)


def parse_conversation(messages: Any, tools: Any = None) -> Conversation:
    """Validate ``messages`` (a non-empty list) and ``tools`` (a list or None); raises :class:`ChatInputError`."""
    if not isinstance(messages, list) or not messages:
        raise ChatInputError("'messages' must be a non-empty list of messages")
    out: list[ChatMessage] = []
    append = out.append
    for i, value in enumerate(messages):
        if type(value) is dict and value.keys() == _PLAIN:  # the common shape, inline (see _message)
            role, content = value["role"], value["content"]
            if type(content) is str and type(role) is str and role in _ROLE_SET:
                append(_plain_message(_CANON[role], content))
                continue
        append(_message(value, f"messages[{i}]"))  # the path is formatted only for the other shapes
    parsed = tuple(out)
    if tools is None:
        return Conversation(parsed)
    if not isinstance(tools, list):
        raise ChatInputError("'tools' must be a list of function tools", "tools")
    return Conversation(parsed, tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(tools)))
