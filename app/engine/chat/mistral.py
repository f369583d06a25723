"""Mistral's instruct framing, as ``mistral-common`` 1.13.1's ``MistralTokenizer.encode_chat_completion`` builds it
from an OpenAI-shaped conversation (``ChatCompletionRequest.from_openai``, validation mode ``test``).

Three steps, each matching the reference's semantics:

1. **Checks** (its request validator): conversation order (``system`` -> user/assistant/system, ``user`` ->
   assistant/system/user, ``assistant`` -> assistant/user/tool, ``tool`` -> assistant/tool/user; a single message
   is user or system; a longer one does not end with an assistant message), tool calls answered by as many tool
   results before the next assistant message, an assistant message has content or tool calls but not both (v7:
   not checked; the merged message must have one or both), function names ``[a-zA-Z0-9_-]{1,64}``, tool
   parameters a valid JSON Schema (draft 7: ``jsonschema.Draft7Validator.check_schema``, as
   ``mistral_common/utils/json_utils.py`` calls it, with its format checker, except that a ``regex``-format
   value — ``pattern``, ``patternProperties`` keys — is checked by :func:`check_regex`: at most
   :data:`~.limits.MAX_PATTERN_CHARS` characters, compiled without entering Python's process-wide ``re`` cache,
   and a pattern ``re`` cannot compile for its size or nesting (``OverflowError``, ``RecursionError``, on which the
   reference itself fails) refused like an invalid one), and from v3 on tool-call ids of 9 letters/digits on both sides.
   Fields the reference cannot take (null content of user/system/tool messages, a tool message without
   ``tool_call_id``, a call without ``arguments``) are refused too. A refusal is a
   :class:`~app.engine.chat.messages.ChatInputError` stating the rule.
2. **Normalization**: ``developer`` is ``system``; names of user/assistant messages are dropped; runs of
   consecutive messages of one role become one message (texts and list parts joined with ``"\\n\\n"``, empty ones
   skipped); call arguments and (v1/v3) tool results are re-serialized as JSON when they parse (``""`` -> ``{}``).
   v1/v3 join every system message into one prompt (``"\\n\\n"``) put before the first (v1) or last (v3) user
   message; v7 keeps them in place. A conversation whose first kept message is not a user message gets an empty one
   first (v1/v3).
3. **Tokens**: ``<s>``, then per message — v1: ``"[INST] text [/INST]"`` as plain text (its vocabulary has no
   control tokens), assistant text then ``</s>``; tools are not encoded and tool messages/calls are refused.
   v3/v7: ``[AVAILABLE_TOOLS] json [/AVAILABLE_TOOLS]`` before the last user message, ``[INST] text [/INST]``,
   assistant text (trailing spaces removed) and/or ``[TOOL_CALLS] json`` then ``</s>``; tool results
   ``[TOOL_RESULTS] {"content", "call_id"} [/TOOL_RESULTS]`` (v3) or ``[TOOL_RESULTS] id [TOOL_CONTENT] text
   [/TOOL_RESULTS]`` (v7); v7 system messages ``[SYSTEM_PROMPT] text [/SYSTEM_PROMPT]``.

Every text is its own part (the reference encodes each separately), so any tokenizer's ``encode_parts`` gives the
reference's ids; text never becomes a control token (``[INST]`` typed in content is text). There is no separate
generation prompt: ``[/INST]`` ends every user turn, so ``add_generation_prompt`` changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from re import _compiler as re_compiler  # type: ignore[attr-defined]  # re.compile's compiler, without the cache
from typing import Any

import jsonschema

from .limits import MAX_PATTERN_CHARS, preview
from .messages import ChatInputError, ChatMessage, Conversation, Tool, ToolCall
from .parts import Parts

VERSIONS = ("v1", "v3", "v7")
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # re.match, as the reference (so a trailing "\n" passes)
_CALL_ID = re.compile(r"^[a-zA-Z0-9]{9}$")
_NEXT = {"system": {"user", "assistant", "system"}, "user": {"assistant", "system", "user"},
         "assistant": {"assistant", "user", "tool"}, "tool": {"assistant", "tool", "user"}}
_JOIN = "\n\n"


def _texts(m: ChatMessage) -> list[str]:
    """The message's texts as the reference sees them (a list's parts, or the one string)."""
    return list(m.content_parts) if m.content_parts is not None else ([m.content] if m.content_given else [])


def _has_content(m: ChatMessage) -> bool:
    """The reference's truthiness of ``content``: a non-empty string, or a non-empty list (even of empty parts)."""
    return bool(m.content_parts) if m.content_parts is not None else (m.content_given and m.content != "")


def _join(messages: Sequence[ChatMessage]) -> str:
    return _JOIN.join(t for m in messages for t in _texts(m) if t)


def _json_text(text: str) -> str:
    if not text:
        return "{}"
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        return text
    except RecursionError:
        raise _refuse("a JSON value is nested too deeply") from None


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
    except RecursionError:
        raise _refuse("a JSON value is nested too deeply") from None


def _refuse(message: str, path: str = "messages", limit: tuple[str, int] | None = None) -> ChatInputError:
    return ChatInputError(f"the Mistral framing refuses this conversation: {message}", path, limit)


class PatternTooLong(ValueError):
    """A regex of a tool schema longer than :data:`~.limits.MAX_PATTERN_CHARS` (refused before compiling it)."""

    def __init__(self, length: int) -> None:
        super().__init__(f"a regex of {length} characters")
        self.length = length


def check_regex(pattern: object) -> bool:
    """The ``regex`` format check of the tool-schema validation: True for a string ``re.compile`` accepts (non
    strings pass, as jsonschema's own check). Raises :class:`PatternTooLong` past the size limit and ``re.error``
    for an invalid pattern, one too large (``OverflowError``) or nested too deeply (``RecursionError``) for ``re``.
    The pattern is compiled by the function ``re.compile`` calls, so it never enters the process-wide cache."""
    if not isinstance(pattern, str):
        return True
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternTooLong(len(pattern))
    try:
        re_compiler.compile(pattern, 0)
    except (OverflowError, RecursionError, MemoryError) as exc:
        raise re.error(f"cannot be compiled: {type(exc).__name__}") from None
    return True


def _format_checker() -> jsonschema.FormatChecker:
    """Draft 7's format checker with its ``regex`` check replaced by :func:`check_regex`."""
    checker = jsonschema.FormatChecker(())
    checker.checkers = {**jsonschema.Draft7Validator.FORMAT_CHECKER.checkers, "regex": (check_regex, re.error)}
    return checker


_FORMATS = _format_checker()


@dataclass(frozen=True)
class _Msg:
    """A normalized message."""

    role: str
    content: str = ""
    has_content: bool = False
    calls: tuple[ToolCall, ...] = ()
    call_id: str | None = None


def _role(m: ChatMessage) -> str:
    return "system" if m.role == "developer" else m.role


def _check_fields(conv: Conversation) -> None:
    for i, m in enumerate(conv.messages):
        where = f"messages[{i}]"
        if _role(m) in ("user", "system", "tool") and not m.content_given:
            raise _refuse(f"{where}.content must be a string or a list of text parts for a {m.role} message",
                          f"{where}.content")
        if m.role == "tool" and m.tool_call_id is None:
            raise _refuse(f"{where}.tool_call_id is required", f"{where}.tool_call_id")
        for j, call in enumerate(m.tool_calls):
            if not call.arguments_given:
                raise _refuse(f"{where}.tool_calls[{j}].function.arguments is required",
                              f"{where}.tool_calls[{j}].function.arguments")


def _check_structure(roles: list[str], messages: Sequence[ChatMessage]) -> None:
    if len(roles) == 1 and roles[0] not in ("user", "system"):
        raise _refuse("a conversation of one message must be a user or system message")
    if len(roles) > 1 and roles[-1] == "assistant":
        raise _refuse("the last message must not be an assistant message (expected a user or tool message)",
                      f"messages[{len(roles) - 1}]")
    for i in range(1, len(roles)):
        if roles[i] not in _NEXT[roles[i - 1]]:
            raise _refuse(f"a {roles[i]} message cannot follow a {roles[i - 1]} message", f"messages[{i}]")
    expected = 0
    for i in range(1, len(roles)):  # the reference starts counting at the second message
        if roles[i] == "tool":
            expected -= 1
        elif roles[i] == "assistant":
            if expected != 0:
                raise _refuse("not the same number of tool calls and tool results", f"messages[{i}]")
            expected = len(messages[i].tool_calls)


def _check_call_id(call_id: str | None, path: str) -> None:
    if call_id is None or call_id == "null":
        raise _refuse("tool call ids must be given (9 letters or digits)", path)
    if not _CALL_ID.match(call_id):
        raise _refuse(f"tool call id {preview(call_id)} must be 9 letters or digits", path)


def _check_content(version: str, messages: Sequence[ChatMessage]) -> None:
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if m.role == "assistant":
            # v7 checks neither rule here (only that the merged message has something)
            if version != "v7" and _has_content(m) == bool(m.tool_calls):
                raise _refuse("an assistant message has either content or tool calls, not both and not neither",
                              where)
            for j, call in enumerate(m.tool_calls):
                path = f"{where}.tool_calls[{j}]"
                if version != "v1":
                    _check_call_id(call.id, f"{path}.id")
                if not _NAME.match(call.name):
                    raise _refuse(f"function name {preview(call.name)} must be 1-64 of a-z, A-Z, 0-9, _ and -",
                                  f"{path}.function.name")
        elif m.role == "tool":
            if m.name is not None and not _NAME.match(m.name):
                raise _refuse(f"tool name {preview(m.name)} must be 1-64 of a-z, A-Z, 0-9, _ and -",
                              f"{where}.name")
            if version != "v1":
                _check_call_id(m.tool_call_id, f"{where}.tool_call_id")


def _check_tools(tools: Sequence[Tool]) -> None:
    for i, tool in enumerate(tools):
        where = f"tools[{i}].function.parameters"
        try:
            jsonschema.Draft7Validator.check_schema(dict(tool.parameters or {}), format_checker=_FORMATS)
        except PatternTooLong as exc:
            raise _refuse(f"tools[{i}]: {exc} in the tool schema; the limit is {MAX_PATTERN_CHARS} "
                          "(MAX_PATTERN_CHARS)", where, ("MAX_PATTERN_CHARS", MAX_PATTERN_CHARS)) from None
        except RecursionError:  # not reached within MAX_JSON_DEPTH (parse_conversation's check): a last resort
            raise _refuse(f"tools[{i}]: the tool schema is nested too deeply", where) from None
        except jsonschema.exceptions.SchemaError as exc:
            raise _refuse(f"tools[{i}]: invalid tool schema at {_schema_path(exc)}: {_schema_reason(exc)}",
                          where) from None
        if not _NAME.match(tool.name):
            raise _refuse(f"function name {preview(tool.name)} must be 1-64 of a-z, A-Z, 0-9, _ and -",
                          f"tools[{i}].function.name")


def _schema_path(exc: jsonschema.exceptions.SchemaError) -> str:
    return "/" + "/".join(preview(str(p), 20)[1:-1] for p in list(exc.path)[:8]) if exc.path else "the top level"


def _schema_reason(exc: jsonschema.exceptions.SchemaError) -> str:
    """jsonschema's message for ``exc`` with its echo of the offending value cut to a short prefix."""
    instance = exc.instance
    if exc.validator == "format":
        return f"{preview(instance)} is not a valid {exc.validator_value!r}"
    if exc.validator == "type":
        return f"{preview(instance)} is not of type {preview(exc.validator_value)}"
    if exc.validator in ("enum", "const"):
        return f"{preview(instance)} is not one of the allowed values"
    return exc.message if len(exc.message) <= 200 else f"{exc.validator!r} check failed on {preview(instance)}"


def _normalize(version: str, messages: Sequence[ChatMessage]) -> tuple[list[_Msg], str | None]:
    """Runs of one role merged; (messages, system prompt for v1/v3)."""
    system: str | None = None
    if version != "v7":
        prompts = [_join([m]) for m in messages if _role(m) == "system" and _has_content(m)]
        system = _JOIN.join(prompts) if prompts else None
    out: list[_Msg] = []
    i = 0
    while i < len(messages):
        role = _role(messages[i])
        j = i
        while j < len(messages) and _role(messages[j]) == role:
            j += 1
        run = messages[i:j]
        if role == "tool":
            for m in run:
                text = _join([m])
                out.append(_Msg("tool", text if version == "v7" else _json_text(text), True, (), m.tool_call_id))
        elif role == "assistant":
            calls = tuple(ToolCall(c.name, _json_text(c.arguments), c.id) for m in run for c in m.tool_calls)
            text = _join(run)
            out.append(_Msg("assistant", text, bool(text), calls))
        elif role == "user":
            out.append(_Msg("user", _join(run), True))
        elif version == "v7":
            out.extend(_Msg("system", _join([m]), True) for m in run)
        i = j
    if not out or (version != "v7" and out[0].role != "user"):
        out.insert(0, _Msg("user", "", True))
    return out, system


def _tools_json(tools: Sequence[Tool]) -> str:
    dumped = []
    for t in tools:
        dumped.append({"type": "function", "function": {
            "name": t.name, "description": "" if t.description is None else t.description,
            "parameters": dict(t.parameters) if t.parameters is not None else {}}})
    return json.dumps(dumped, ensure_ascii=False)


def frame(version: str, conv: Conversation) -> Parts:
    """The prompt ``encode_chat_completion`` builds for ``conv`` under instruct ``version`` (``v1``/``v3``/``v7``);
    raises :class:`ChatInputError` where the reference refuses the conversation."""
    if version not in VERSIONS:
        raise ValueError(f"unknown Mistral instruct version {version!r}")
    messages = conv.messages
    _check_fields(conv)
    _check_structure([_role(m) for m in messages], messages)
    _check_content(version, messages)
    _check_tools(conv.tools)
    normalized, system = _normalize(version, messages)
    users = [k for k, m in enumerate(normalized) if m.role == "user"] or [-1]
    first, last = users[0], users[-1]
    out = Parts()
    out.special("<s>")
    for k, m in enumerate(normalized):
        if m.role == "user":
            if version == "v1":
                text = system + _JOIN + m.content if k == first and system else m.content
                out.text(f"[INST] {text} [/INST]")
                continue
            if k == last and conv.tools:
                out.special("[AVAILABLE_TOOLS]")
                out.text(_tools_json(conv.tools))
                out.special("[/AVAILABLE_TOOLS]")
            out.special("[INST]")
            out.text(system + _JOIN + m.content if k == last and system else m.content)
            out.special("[/INST]")
        elif m.role == "assistant":
            if version == "v1":
                if m.calls:
                    raise _refuse("tool calls are not supported by this model's tokenizer (v1)")
                if not m.content:
                    raise _refuse("an assistant message needs content")
                out.text(m.content)
            else:
                if version == "v3" and m.has_content and m.calls:
                    raise _refuse("consecutive assistant messages with content and tool calls cannot be merged")
                if m.has_content:
                    out.text(m.content.rstrip(" "))
                if m.calls:
                    out.special("[TOOL_CALLS]")
                    calls = []
                    for c in m.calls:
                        item: dict[str, Any] = {"name": c.name, "arguments": _json_value(c.arguments)}
                        if c.id and c.id != "null":
                            item["id"] = c.id
                        calls.append(item)
                    out.text(json.dumps(calls, ensure_ascii=False))
                if not m.has_content and not m.calls:
                    raise _refuse("an assistant message needs content or tool calls")
            out.special("</s>")
        elif m.role == "tool":
            if version == "v1":
                raise _refuse("tool messages are not supported by this model's tokenizer (v1)")
            out.special("[TOOL_RESULTS]")
            if version == "v7":
                out.text(m.call_id or "")
                out.special("[TOOL_CONTENT]")
                out.text(m.content)
            else:
                out.text(json.dumps({"content": _json_value(m.content), "call_id": m.call_id}, ensure_ascii=False))
            out.special("[/TOOL_RESULTS]")
        else:  # v7 system message
            out.special("[SYSTEM_PROMPT]")
            out.text(m.content)
            out.special("[/SYSTEM_PROMPT]")
    return out
