"""The providers' counting calls, answered for the models this service frames: OpenAI's
``POST /v1/responses/input_tokens`` and Anthropic's ``POST /v1/messages/count_tokens``.

Both map the request to a Chat Completions conversation and count it as ``POST /count`` with ``messages`` does, so
the count is the model's framed prompt: exact for open-weight models (their chat template, Harmony, mistral-common),
OpenAI's published counting rules (the cookbook's, :mod:`app.engine.chat.cookbook`) for OpenAI's models.

Responses -> messages follows vLLM's Responses endpoint, ``vllm/entrypoints/openai/responses/utils.py``
(``construct_input_messages``, ``_construct_message_from_response_item``) with the ``function_call`` parsing of
``vllm/entrypoints/openai/responses/protocol.py``: ``instructions`` become a first system message; a string
``input`` is one user message; a ``message`` item with role user/system/developer keeps its content (``input_text``
parts are text parts, joined as Chat Completions list content is); an assistant ``message`` item contributes its
*first* ``output_text`` part; a ``function_call`` becomes a tool call, added to the previous message when that is an
assistant message; an assistant message after an assistant message without content fills that content;
``function_call_output`` is a ``tool`` message (``tool_call_id`` = ``call_id``); function ``tools``
``{type, name, description, parameters}`` become Chat Completions tools.

Anthropic -> messages follows vLLM's Anthropic endpoint, ``vllm/entrypoints/anthropic/serving.py``
(``_convert_anthropic_to_openai_request``, used by its ``count_tokens``) and ``protocol.py``: ``system`` (a string,
or text blocks joined with no separator; empty blocks dropped) is one system message; ``text`` blocks (empty ones
dropped) are the content, a single one as a string; ``tool_use`` blocks are tool calls (``arguments`` =
``json.dumps(input)``); each ``tool_result`` block of a user message is a ``tool`` message placed before what
remains of that message (``tool_call_id`` = ``tool_use_id``; list content: its text blocks joined with ``"\\n"``),
and a user message left without content is dropped; tools ``{name, description, input_schema}`` become function
tools (``"type": "object"`` added to a schema without ``type``).

Every field of both request shapes is honoured, accepted because it does not change the prompt (as in vLLM), or
refused with a 422 naming it; :data:`RESPONSES_FIELDS` and :data:`ANTHROPIC_FIELDS` list which. Caller text stays
text: a special-token string anywhere in the request is encoded as ordinary characters.
"""

from __future__ import annotations

import json
import time
from collections.abc import MutableMapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .. import metrics, serialize
from ..deps import ServiceState
from ..errors import ApiError
from .chat import chat_conversation
from .chat_options import ChatOptions, framed_count, open_framing, refuse
from .common import OpResult, parse

#: Field -> what this service does with it: ``count`` (changes the count as in the original server), ``accepted``
#: (validated; the original server's prompt does not depend on it either), ``refused`` (422 naming it unless null).
RESPONSES_FIELDS: dict[str, str] = {
    "model": "count", "input": "count", "instructions": "count", "tools": "count", "reasoning": "count",
    "tool_choice": "accepted", "parallel_tool_calls": "accepted", "truncation": "accepted",
    "text": "refused", "conversation": "refused", "previous_response_id": "refused", "personality": "refused",
}
ANTHROPIC_FIELDS: dict[str, str] = {
    "model": "count", "messages": "count", "system": "count", "tools": "count", "chat_template_kwargs": "count",
    "tool_choice": "accepted", "cache_control": "accepted", "thinking": "accepted",
    "output_config": "refused", "output_format": "refused", "speed": "refused", "mcp_servers": "refused",
    "context_management": "refused", "user_profile_id": "refused", "workspace_id": "refused",
}

_STRICT = ConfigDict(strict=True, extra="forbid")


class ResponsesInputTokensRequest(BaseModel):
    """Body of ``POST /v1/responses/input_tokens`` (OpenAI's Responses parameters that a count takes)."""

    model_config = ConfigDict(strict=True, extra="forbid", json_schema_extra={"examples": [
        {"model": "qwen3-8b", "instructions": "Be brief.", "input": "What is 2+2?"},
        {"model": "llama-3.1-8b-instruct", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "18C, clear"}],
         "tools": [{"type": "function", "name": "get_weather", "description": "Current weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]},
    ]})

    model: str | None = Field(None, min_length=1, max_length=256, description="model name (GET /models); optional "
                              "when the service has a default model")
    input: str | list[dict[str, Any]] | None = Field(None, description="a string (one user message) or items: "
                                                     "message, function_call, function_call_output")
    instructions: str | None = Field(None, description="a system message put first")
    tools: list[dict[str, Any]] | None = Field(None, description="function tools {type: function, name, "
                                               "description, parameters}")
    reasoning: dict[str, Any] | None = Field(None, description="{effort}: passed to a chat template as "
                                             "reasoning_effort (as vLLM does); Harmony models take only medium")
    tool_choice: str | dict[str, Any] | None = Field(None, description="accepted; does not change the prompt")
    parallel_tool_calls: bool | None = Field(None, description="accepted; does not change the prompt")
    truncation: str | None = Field(None, description="'disabled' (the count is never truncated); 'auto' is refused")
    text: dict[str, Any] | None = Field(None, description="refused (structured output formats are not counted)")
    conversation: str | dict[str, Any] | None = Field(None, description="refused (no stored conversations)")
    previous_response_id: str | None = Field(None, description="refused (no stored responses)")
    personality: str | None = Field(None, description="refused")


class AnthropicCountTokensRequest(BaseModel):
    """Body of ``POST /v1/messages/count_tokens`` (Anthropic's Messages body without ``max_tokens``)."""

    model_config = ConfigDict(strict=True, extra="forbid", json_schema_extra={"examples": [
        {"model": "qwen3-8b", "system": "Be brief.", "messages": [{"role": "user", "content": "Hello"}]},
    ]})

    model: str | None = Field(None, min_length=1, max_length=256, description="model name (GET /models); Claude "
                              "models are refused (their tokenizer is not public); optional with a default model")
    messages: list[dict[str, Any]] = Field(description="user/assistant messages: string content or text, "
                                           "tool_use and tool_result blocks")
    system: str | list[dict[str, Any]] | None = Field(None, description="a string or text blocks")
    tools: list[dict[str, Any]] | None = Field(None, description="custom tools {name, description, input_schema}")
    tool_choice: dict[str, Any] | None = Field(None, description="accepted; does not change the prompt")
    thinking: dict[str, Any] | None = Field(None, description="accepted; does not change the prompt (as in vLLM, "
                                            "whose count_tokens has no such option); use chat_template_kwargs for "
                                            "a template's thinking switch")
    cache_control: dict[str, Any] | None = Field(None, description="accepted; does not change the count")
    chat_template_kwargs: dict[str, Any] | None = Field(None, description="vLLM's extension: extra chat-template "
                                                        "variables, e.g. {\"enable_thinking\": false}")
    output_config: dict[str, Any] | None = Field(None, description="refused")
    output_format: dict[str, Any] | None = Field(None, description="refused")
    speed: str | None = Field(None, description="refused")
    mcp_servers: list[Any] | None = Field(None, description="refused")
    context_management: dict[str, Any] | None = Field(None, description="refused")
    user_profile_id: str | None = Field(None, description="refused")
    workspace_id: str | None = Field(None, description="refused")


def _bad(path: str, message: str) -> ApiError:
    return ApiError(422, "invalid_request", f"{path}: {message}", {"field": path})


def _check_refused(req: BaseModel, fields: dict[str, str]) -> None:
    for name, verdict in fields.items():
        if verdict == "refused" and getattr(req, name) is not None:
            raise refuse(name, "not supported by this counting service")


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _bad(path, "must be a string")
    return value


def _only(item: dict[str, Any], allowed: set[str], path: str) -> None:
    extra = sorted(set(item) - allowed)
    if extra:
        raise _bad(f"{path}.{extra[0]}", f"unknown or unsupported field (allowed: {', '.join(sorted(allowed))})")


# ---------------------------------------------------------------------------- OpenAI Responses


_INPUT_PART_KEYS = {"type", "text", "annotations", "logprobs"}


def _response_parts(content: Any, path: str, *, first_only: bool) -> str | list[dict[str, str]]:
    """A Responses message content as Chat Completions content: a string stays; ``input_text``/``output_text``
    parts become text parts (``first_only``: the first part's text, as vLLM takes an assistant message's)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(path, "must be a string or a list of input_text/output_text parts")
    parts: list[dict[str, str]] = []
    for i, part in enumerate(content):
        where = f"{path}[{i}]"
        if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text"):
            kind = part.get("type") if isinstance(part, dict) else None
            raise _bad(f"{where}.type", f"content part type {kind!r} is not supported (only input_text and "
                       "output_text: this service counts text)")
        _only(part, _INPUT_PART_KEYS, where)
        parts.append({"type": "text", "text": _text(part.get("text"), f"{where}.text")})
    if first_only:
        return parts[0]["text"] if parts else ""
    return parts


def _responses_item(item: Any, path: str, out: list[dict[str, Any]]) -> None:
    if not isinstance(item, dict):
        raise _bad(path, "must be an object")
    kind = item.get("type", "message")
    prev = out[-1] if out and out[-1].get("role") == "assistant" else None
    if kind == "function_call":
        _only(item, {"type", "id", "call_id", "name", "arguments", "status", "namespace"}, path)
        if item.get("namespace") is not None:
            raise _bad(f"{path}.namespace", "namespaced tools are not supported")
        call = {"id": _text(item.get("call_id"), f"{path}.call_id"), "type": "function",
                "function": {"name": _text(item.get("name"), f"{path}.name"),
                             "arguments": _text(item.get("arguments"), f"{path}.arguments")}}
        if prev is not None:
            prev.setdefault("tool_calls", []).append(call)
        else:
            out.append({"role": "assistant", "tool_calls": [call]})
    elif kind == "function_call_output":
        _only(item, {"type", "id", "call_id", "output", "status"}, path)
        output = item.get("output")
        content = output if isinstance(output, str) else _response_parts(output, f"{path}.output", first_only=False)
        out.append({"role": "tool", "content": content, "tool_call_id": _text(item.get("call_id"),
                                                                               f"{path}.call_id")})
    elif kind == "message":
        _only(item, {"type", "role", "content", "id", "status", "phase"}, path)
        role = item.get("role")
        if role not in ("user", "system", "developer", "assistant"):
            raise _bad(f"{path}.role", "must be user, system, developer or assistant")
        if item.get("status") in ("in_progress", "incomplete"):
            raise _bad(f"{path}.status", "a partial message to continue is not supported")
        if role != "assistant":
            out.append({"role": role, "content": _response_parts(item.get("content"), f"{path}.content",
                                                                 first_only=False)})
            return
        text = _response_parts(item.get("content"), f"{path}.content", first_only=True)
        if prev is not None and "content" not in prev:
            prev["content"] = text
        else:
            out.append({"role": "assistant", "content": text})
    else:
        raise _bad(f"{path}.type", f"item type {kind!r} is not supported (message, function_call and "
                   "function_call_output are)")


def _responses_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise _bad(f"{path}.type", f"tool type {kind!r} is not supported (function tools are)")
        _only(tool, {"type", "name", "description", "parameters", "strict", "defer_loading"}, path)
        if tool.get("defer_loading"):
            raise _bad(f"{path}.defer_loading", "deferred tools are not supported")
        fn: dict[str, Any] = {"name": _text(tool.get("name"), f"{path}.name")}
        for key in ("description", "parameters", "strict"):
            if tool.get(key) is not None:
                fn[key] = tool[key]
        out.append({"type": "function", "function": fn})
    return out


def responses_messages(req: ResponsesInputTokensRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The Chat Completions messages and tools of a Responses request (see the module docstring); 422 naming the
    first field that cannot be mapped."""
    messages: list[dict[str, Any]] = []
    if req.instructions:
        messages.append({"role": "system", "content": req.instructions})
    if isinstance(req.input, str):
        messages.append({"role": "user", "content": req.input})
    elif req.input is not None:
        for i, item in enumerate(req.input):
            _responses_item(item, f"input[{i}]", messages)
    if not messages:
        raise _bad("input", "nothing to count: give 'input' (or 'instructions')")
    for m in messages:  # an assistant message made of tool calls alone: content null, as Chat Completions has it
        if m["role"] == "assistant" and "content" not in m:
            m["content"] = None
    return messages, _responses_tools(req.tools) if req.tools else None


def responses_input_tokens(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """``POST /v1/responses/input_tokens``: ``{"object": "response.input_tokens", "input_tokens": N}``."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    req = parse(ResponsesInputTokensRequest, body)
    _check_refused(req, RESPONSES_FIELDS)
    if req.truncation not in (None, "disabled"):
        raise refuse("truncation", "only 'disabled' (a count is never truncated)")
    _, tokenizer, _, framing = open_framing(svc, req.model, labels)
    variables: dict[str, Any] | None = None
    if req.reasoning is not None:
        _only(req.reasoning, {"effort", "summary", "generate_summary"}, "reasoning")
        effort = req.reasoning.get("effort")
        if effort is not None:
            if framing.kind == "jinja":
                variables = {"reasoning_effort": effort}
            elif not (framing.kind == "harmony" and effort == "medium"):
                raise refuse("reasoning", f"reasoning.effort changes the prompt of {framing.kind} framings in a way "
                             "this service does not model" + (" (gpt-oss: only 'medium')"
                                                              if framing.kind == "harmony" else ""))
    messages, tools = responses_messages(req)
    conv, nbytes = chat_conversation(svc, messages, tools)
    timings["parse"] = time.perf_counter() - start
    start = time.perf_counter()
    n = framed_count(svc, tokenizer, framing, conv, ChatOptions(variables=variables))
    timings["tokenize"] = time.perf_counter() - start
    metrics.cache_used(tokenizer)
    return OpResult(serialize.dumps({"object": "response.input_tokens", "input_tokens": n}), tokenizer.name, n, nbytes,
                    timings)


# ---------------------------------------------------------------------------- Anthropic Messages

BILLING_HEADER = "x-anthropic-billing-header"
_BLOCK_KEYS = {"text": {"type", "text", "cache_control", "citations"},
               "tool_use": {"type", "id", "name", "input", "cache_control"},
               "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"}}


def _anthropic_text_blocks(blocks: Any, path: str) -> list[str]:
    if not isinstance(blocks, list):
        raise _bad(path, "must be a string or a list of text blocks")
    texts = []
    for i, block in enumerate(blocks):
        where = f"{path}[{i}]"
        if not isinstance(block, dict) or block.get("type") != "text":
            raise _bad(f"{where}.type", "only text blocks are supported here")
        _only(block, _BLOCK_KEYS["text"], where)
        if block.get("citations"):
            raise _bad(f"{where}.citations", "citations are not supported")
        texts.append(_text(block.get("text"), f"{where}.text"))
    return texts


def _anthropic_message(msg: Any, path: str, out: list[dict[str, Any]]) -> None:
    if not isinstance(msg, dict):
        raise _bad(path, "must be an object")
    _only(msg, {"role", "content"}, path)
    role = msg.get("role")
    if role not in ("user", "assistant"):
        raise _bad(f"{path}.role", "must be user or assistant")
    content = msg.get("content")
    if isinstance(content, str):
        out.append({"role": role, "content": content})
        return
    if not isinstance(content, list):
        raise _bad(f"{path}.content", "must be a string or a list of blocks")
    parts: list[dict[str, str]] = []
    calls: list[dict[str, Any]] = []
    for i, block in enumerate(content):
        where = f"{path}.content[{i}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in _BLOCK_KEYS:
            raise _bad(f"{where}.type", f"block type {kind!r} is not supported (text, tool_use and tool_result are: "
                       "this service counts text)")
        assert isinstance(block, dict)
        _only(block, _BLOCK_KEYS[kind], where)
        if kind == "text":
            if block.get("citations"):
                raise _bad(f"{where}.citations", "citations are not supported")
            text = _text(block.get("text"), f"{where}.text")
            if text:
                parts.append({"type": "text", "text": text})
        elif kind == "tool_use":
            if role != "assistant":
                raise _bad(f"{where}", "tool_use blocks belong to assistant messages")
            arguments = block.get("input")
            if not isinstance(arguments, dict):
                raise _bad(f"{where}.input", "must be an object")
            calls.append({"id": _text(block.get("id"), f"{where}.id"), "type": "function",
                          "function": {"name": _text(block.get("name"), f"{where}.name"),
                                       "arguments": json.dumps(arguments)}})
        else:
            if role != "user":
                raise _bad(f"{where}", "tool_result blocks belong to user messages")
            result = block.get("content")
            if result is None:
                text = ""
            elif isinstance(result, str):
                text = result
            else:
                text = "\n".join(_anthropic_text_blocks(result, f"{where}.content"))
            out.append({"role": "tool", "tool_call_id": _text(block.get("tool_use_id"), f"{where}.tool_use_id"),
                        "content": text})
    message: dict[str, Any] = {"role": role}
    if calls:
        message["tool_calls"] = calls
    if parts:
        message["content"] = parts[0]["text"] if len(parts) == 1 else parts
    elif role == "user":
        return  # only tool results: vLLM drops the emptied user message
    else:
        message["content"] = None if calls else ""
    out.append(message)


def _anthropic_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type", "custom") != "custom":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise _bad(f"{path}.type", f"tool type {kind!r} is not supported (custom tools with input_schema are)")
        _only(tool, {"type", "name", "description", "input_schema", "cache_control"}, path)
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise _bad(f"{path}.input_schema", "must be a JSON schema object")
        if "type" not in schema:
            schema = {**schema, "type": "object"}
        fn: dict[str, Any] = {"name": _text(tool.get("name"), f"{path}.name")}
        if tool.get("description") is not None:
            fn["description"] = _text(tool["description"], f"{path}.description")
        fn["parameters"] = schema
        out.append({"type": "function", "function": fn})
    return out


def anthropic_messages(req: AnthropicCountTokensRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The Chat Completions messages and tools of an Anthropic request (see the module docstring); 422 naming the
    first field that cannot be mapped."""
    messages: list[dict[str, Any]] = []
    if req.system is not None:
        texts = [req.system] if isinstance(req.system, str) else _anthropic_text_blocks(req.system, "system")
        # vLLM drops Claude Code's per-request attribution block (it defeats prefix caching)
        joined = "".join(t for t in texts if not (isinstance(req.system, list) and t.startswith(BILLING_HEADER)))
        if joined:
            messages.append({"role": "system", "content": joined})
    for i, msg in enumerate(req.messages):
        _anthropic_message(msg, f"messages[{i}]", messages)
    if not messages:
        raise _bad("messages", "nothing to count")
    return messages, _anthropic_tools(req.tools) if req.tools else None


def anthropic_count_tokens(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """``POST /v1/messages/count_tokens``: ``{"input_tokens": N}``. The model is checked first: a Claude model (or
    any without a public tokenizer) is the 422 ``no_public_tokenizer`` of /count, naming the field and Anthropic's
    own endpoint (:mod:`app.core.priced_models`), before any refused field is reported."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    req = parse(AnthropicCountTokensRequest, body)
    if req.model is not None:
        svc.model(req.model)  # 422 unknown_model / no_public_tokenizer before the other fields
    _check_refused(req, ANTHROPIC_FIELDS)
    _, tokenizer, _, framing = open_framing(svc, req.model, labels)
    messages, tools = anthropic_messages(req)
    conv, nbytes = chat_conversation(svc, messages, tools)
    timings["parse"] = time.perf_counter() - start
    start = time.perf_counter()
    n = framed_count(svc, tokenizer, framing, conv, ChatOptions(variables=req.chat_template_kwargs or None))
    timings["tokenize"] = time.perf_counter() - start
    metrics.cache_used(tokenizer)
    return OpResult(serialize.dumps({"input_tokens": n}), tokenizer.name, n, nbytes, timings)
