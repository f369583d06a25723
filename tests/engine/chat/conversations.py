"""A seeded, varied conversation set for the chat framing tests: multi-turn, system prompts, names, tools, tool
calls and results, multilingual and long content, whitespace edge cases and role markers typed in content.

``conversations(seed, n, style)`` shapes each conversation to what a framing accepts: ``openai`` and ``harmony``
take anything; ``llama`` one tool call per assistant turn and a user message first when tools are given; ``qwen``
anything; ``gemma`` no tools, strictly alternating user/assistant after an optional system message.
"""

from __future__ import annotations

import json
import random
from typing import Any

#: Role markers and control tokens of every family, typed by a caller: they must stay text.
MARKERS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>",
    "<|call|>", "<|return|>", "<|constrain|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|eot_id|>", "<|eom_id|>", "<|python_tag|>", "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>",
    "<|endofprompt|>", "[INST]", "[/INST]", "<s>", "</s>", "<think>", "</think>", "<tool_call>", "\ue000",
    "\ue0001\ue000", "<|reserved_special_token_5|>", "<|fim_prefix|>",
]

WORDS = [
    "hello", "world", "the", "weather", "in", "Paris", "is", "sunny", "today", "tokens", "count", "billing",
    "Grüße", "naïve", "café", "日本語", "の", "テキスト", "Привет", "мир", "مرحبا", "بالعالم", "नमस्ते", "你好",
    "世界", "Việt", "Nam", "😀", "👩‍💻", "🇫🇷", "e\u0301", "1234567", "3.14159", "don't", "WE'RE", "it's",
    "def", "f(x):", "return", "x*2", "{", "}", "[1,", "2]", "http://example.com/a?b=c", "--", "...", "¿Qué?",
]

SPACES = [" ", " ", " ", " ", "  ", "\n", "\n\n", "\t", " \n ", "\r\n", "\u00a0", "\u3000"]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_current_weather", "description": "Get the current weather in a given location",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
            "unit": {"type": "string", "description": "The unit of temperature to return",
                     "enum": ["celsius", "fahrenheit"]}},
            "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "search_docs", "description": "Search the documentation.\nReturns the best passages.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "description": "How many results", "default": 5},
            "filters": {"type": "object", "description": "Optional filters", "properties": {
                "lang": {"type": "string", "enum": ["en", "fr", "ja"], "default": "en"},
                "since": {"type": ["string", "null"], "description": "ISO date"}}},
            "tags": {"type": "array", "items": {"type": "string"}, "examples": ["api", "cli"]},
            "mode": {"oneOf": [{"type": "string", "description": "a named mode"},
                               {"type": "number", "description": "a numeric mode"}],
                     "description": "Search mode"},
            "strict": {"type": "boolean", "nullable": True}},
            "required": ["query"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time <|eot_id|> in UTC."}},
    {"type": "function", "function": {
        "name": "translate", "description": "Translate text <|im_end|> between languages",
        "parameters": {"type": "object", "properties": {
            "text": {"type": "string", "description": "Text to translate, may hold <|end|> markers"},
            "target": {"type": "string", "title": "Target", "description": "ISO code", "default": "fr"}},
            "required": ["text", "target"]}}},
]


def _text(rng: random.Random, *, markers: bool, long: bool = False) -> str:
    n = rng.choice([0, 1, 2, 5, 12, 30]) if not long else rng.randint(400, 1500)
    out = []
    for _ in range(n):
        r = rng.random()
        if markers and r < 0.12:
            out.append(rng.choice(MARKERS))
        else:
            out.append(rng.choice(WORDS))
        out.append(rng.choice(SPACES) if rng.random() < 0.3 else " ")
    text = "".join(out)
    if rng.random() < 0.15:
        text = rng.choice(SPACES) + text + rng.choice(SPACES)
    return text


def _arguments(rng: random.Random, markers: bool) -> str:
    value = {"location": _text(rng, markers=markers) or "Paris", "unit": rng.choice(["celsius", "fahrenheit"])}
    if rng.random() < 0.3:
        value["nested"] = {"list": [1, 2.5, None, True], "s": _text(rng, markers=markers)}
    return json.dumps(value, ensure_ascii=rng.random() < 0.5)


def conversation(rng: random.Random, style: str, *, markers: bool | None = None) -> dict[str, Any]:
    """One conversation ``{"messages", "tools", "add_generation_prompt"}`` for ``style`` (see the module doc)."""
    if markers is None:
        markers = rng.random() < 0.35
    tools_allowed = style != "gemma"
    tools = rng.sample(TOOLS, rng.randint(1, len(TOOLS))) if tools_allowed and rng.random() < 0.4 else None
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.7:
        role = "developer" if style in ("openai", "harmony") and rng.random() < 0.2 else "system"
        messages.append({"role": role, "content": _text(rng, markers=markers, long=rng.random() < 0.05)})
    turns = rng.randint(1, 6)
    call_id = 0
    for turn in range(turns):
        user: dict[str, Any] = {"role": "user", "content": _text(rng, markers=markers, long=rng.random() < 0.05)}
        if style in ("openai", "harmony") and rng.random() < 0.25:
            user["name"] = rng.choice(["alice", "bob_2", "Zoë"])
        if rng.random() < 0.1:
            user["content"] = [{"type": "text", "text": _text(rng, markers=markers)} for _ in range(2)]
        messages.append(user)
        last = turn == turns - 1
        if last and rng.random() < 0.6:
            break
        if tools and style != "gemma" and rng.random() < 0.5:
            n_calls = 1 if style == "llama" else rng.randint(1, 2)
            calls = []
            for _ in range(n_calls):
                call_id += 1
                fn = rng.choice(tools)["function"]["name"]
                calls.append({"id": f"call_{call_id}", "type": "function",
                              "function": {"name": fn, "arguments": _arguments(rng, markers)}})
            assistant: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
            if style in ("openai", "qwen", "harmony") and rng.random() < 0.3:
                assistant["content"] = _text(rng, markers=markers)
            messages.append(assistant)
            for call in calls:
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": json.dumps({"result": _text(rng, markers=markers)})})
            messages.append({"role": "assistant", "content": _text(rng, markers=markers)})
        else:
            messages.append({"role": "assistant", "content": _text(rng, markers=markers)})
    if style == "llama" and tools and (messages[0]["role"] == "system") and messages[1]["role"] != "user":
        messages.insert(1, {"role": "user", "content": "hi"})
    return {"messages": messages, "tools": tools, "add_generation_prompt": rng.random() < 0.85}


def conversations(seed: int, n: int, style: str) -> list[dict[str, Any]]:
    rng = random.Random(f"{seed}-{style}")
    return [conversation(rng, style) for _ in range(n)]


def has_markers(conv: dict[str, Any], specials: set[str]) -> bool:
    """True if any caller string of ``conv`` holds one of ``specials``."""
    blob = json.dumps(conv, ensure_ascii=False)
    return any(s in blob for s in specials)


#: Part texts with the edges that matter when parts are trimmed, joined or encoded one by one.
EDGES = ["", " ", "\n", "\n\n", " \n", "\t", "\u00a0", "\u3000", "  x  "]


def _part(rng: random.Random, markers: bool) -> str:
    r = rng.random()
    if r < 0.15:
        return ""
    if r < 0.25:
        return rng.choice(EDGES)
    text = _text(rng, markers=markers)
    if rng.random() < 0.5:
        text = rng.choice(EDGES) + text
    if rng.random() < 0.5:
        text += rng.choice(EDGES)
    return text


def _content(rng: random.Random, markers: bool) -> str | list[dict[str, str]]:
    """Mostly a list of 1-5 text parts (empty parts, whitespace and newline edges), sometimes a string."""
    if rng.random() < 0.2:
        return _part(rng, markers)
    return [{"type": "text", "text": _part(rng, markers)} for _ in range(rng.randint(1, 5))]


NAMES = ["alice", "bob_2", "Zoë", "sys", "helper-1", "x y"]


def parts_conversation(rng: random.Random, style: str) -> dict[str, Any]:
    """A conversation whose contents are lists of parts and whose messages carry names on every role (shaped for
    ``style`` as :func:`conversation` is)."""
    markers = rng.random() < 0.3
    named = rng.random() < 0.8

    def msg(role: str, content: Any, **extra: Any) -> dict[str, Any]:
        m = {"role": role, "content": content, **extra}
        if named and rng.random() < 0.7:
            m["name"] = rng.choice(NAMES)
        return m

    tools = rng.sample(TOOLS, rng.randint(1, 2)) if style != "gemma" and rng.random() < 0.35 else None
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.6:
        role = "developer" if style == "harmony" and rng.random() < 0.3 else "system"
        messages.append(msg(role, _content(rng, markers)))
    call_id = 0
    turns = rng.randint(1, 4)
    for turn in range(turns):
        messages.append(msg("user", _content(rng, markers)))
        if turn == turns - 1 and rng.random() < 0.6:
            break
        if tools and rng.random() < 0.5:
            call_id += 1
            fn = rng.choice(tools)["function"]["name"]
            call = {"id": f"call_{call_id}", "type": "function",
                    "function": {"name": fn, "arguments": _arguments(rng, markers)}}
            content = _content(rng, markers) if style in ("qwen", "harmony") and rng.random() < 0.5 else None
            messages.append(msg("assistant", content, tool_calls=[call]))
            messages.append(msg("tool", _content(rng, markers), tool_call_id=call["id"]))
        messages.append(msg("assistant", _content(rng, markers)))
    if style == "llama" and tools and messages[0]["role"] == "system" and messages[1]["role"] != "user":
        messages.insert(1, {"role": "user", "content": "hi"})
    return {"messages": messages, "tools": tools, "add_generation_prompt": rng.random() < 0.85}


def parts_conversations(seed: int, n: int, style: str) -> list[dict[str, Any]]:
    rng = random.Random(f"parts-{seed}-{style}")
    return [parts_conversation(rng, style) for _ in range(n)]
