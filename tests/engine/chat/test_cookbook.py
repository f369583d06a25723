"""OpenAI cookbook counting: the cookbook's own example numbers, and agreement with its functions (restated
below exactly as published, running on tiktoken over the store's files) on the seeded conversation set."""

from __future__ import annotations

from typing import Any

import pytest
import tiktoken

from app.engine import get_tokenizer
from app.engine.chat import parse_conversation
from app.engine.chat.cookbook import RULES, count_conversation, count_messages, count_tools
from harness.references import reference_encoding

from .conversations import conversations

EXAMPLE_MESSAGES = [
    {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate jargon "
                                  "into plain English."},
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
    {"role": "system", "name": "example_user", "content": "Let's circle back when we have more bandwidth to touch "
                                                          "base on opportunities for increased leverage."},
    {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less busy about how to "
                                                               "do better."},
    {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for the client "
                                "deliverable."},
]
TOOL_EXAMPLE_TOOLS = [{"type": "function", "function": {
    "name": "get_current_weather", "description": "Get the current weather in a given location",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
        "unit": {"type": "string", "description": "The unit of temperature to return",
                 "enum": ["celsius", "fahrenheit"]}},
        "required": ["location"]}}}]
TOOL_EXAMPLE_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant that can answer to questions about the weather."},
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]
TOKENIZER = {"gpt-4o": "o200k_base", "gpt-4": "cl100k_base"}


@pytest.mark.parametrize(("rules", "messages", "tools"), [("gpt-4o", 124, 101), ("gpt-4", 129, 105)])
def test_cookbook_examples(rules: str, messages: int, tools: int) -> None:
    tokenizer = get_tokenizer(TOKENIZER[rules])
    assert count_messages(tokenizer.count, parse_conversation(EXAMPLE_MESSAGES), RULES[rules]) == messages
    conv = parse_conversation(TOOL_EXAMPLE_MESSAGES, TOOL_EXAMPLE_TOOLS)
    assert count_conversation(tokenizer.count, conv, RULES[rules]) == tools


class _TextOnly:
    """tiktoken's ``encode`` refuses special-token strings in text by default (the published functions would raise
    on role markers in content); the service counts them as text, i.e. ``disallowed_special=()``."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self._encoding = encoding

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(text, disallowed_special=())


# The cookbook's functions, as published (only the model switch folded into ``func_init``).
def cookbook_messages(encoding: _TextOnly, messages: list[dict[str, Any]]) -> int:
    num_tokens = 0
    for message in messages:
        num_tokens += 3
        for key, value in message.items():
            num_tokens += len(encoding.encode(value))
            if key == "name":
                num_tokens += 1
    num_tokens += 3
    return num_tokens


def cookbook_tools(encoding: _TextOnly, functions: list[dict[str, Any]], func_init: int) -> int:
    prop_init, prop_key, enum_init, enum_item, func_end = 3, 3, -3, 3, 12
    func_token_count = 0
    if len(functions) > 0:
        for f in functions:
            func_token_count += func_init
            function = f["function"]
            f_name = function["name"]
            f_desc = function["description"]
            if f_desc.endswith("."):
                f_desc = f_desc[:-1]
            line = f_name + ":" + f_desc
            func_token_count += len(encoding.encode(line))
            if len(function["parameters"]["properties"]) > 0:
                func_token_count += prop_init
                for key in list(function["parameters"]["properties"].keys()):
                    func_token_count += prop_key
                    p_name = key
                    p_type = function["parameters"]["properties"][key]["type"]
                    p_desc = function["parameters"]["properties"][key]["description"]
                    if "enum" in function["parameters"]["properties"][key].keys():
                        func_token_count += enum_init
                        for item in function["parameters"]["properties"][key]["enum"]:
                            func_token_count += enum_item
                            func_token_count += len(encoding.encode(item))
                    if p_desc.endswith("."):
                        p_desc = p_desc[:-1]
                    line = f"{p_name}:{p_type}:{p_desc}"
                    func_token_count += len(encoding.encode(line))
        func_token_count += func_end
    return func_token_count


def _cookbook_shaped(c: dict[str, Any]) -> bool:
    """Conversations the published functions can run on: string values only, full tool definitions."""
    for m in c["messages"]:
        if not all(isinstance(v, str) for v in m.values()):
            return False
    for t in c["tools"] or []:
        fn = t["function"]
        props = (fn.get("parameters") or {}).get("properties")
        if "description" not in fn or props is None:
            return False
        if not all(isinstance(p.get("type"), str) and "description" in p for p in props.values()):
            return False
    return True


@pytest.mark.parametrize("rules", ["gpt-4o", "gpt-4"])
def test_equals_the_cookbook_functions(rules: str) -> None:
    ref = _TextOnly(reference_encoding(TOKENIZER[rules]))
    ours = get_tokenizer(TOKENIZER[rules])
    checked = 0
    for c in conversations(3, 400, "openai"):
        if not _cookbook_shaped(c):
            continue
        conv = parse_conversation(c["messages"], c["tools"])
        want = cookbook_messages(ref, c["messages"]) + cookbook_tools(ref, c["tools"] or [], RULES[rules].func_init)
        assert count_conversation(ours.count, conv, RULES[rules]) == want
        checked += 1
    assert checked >= 150


def test_decisions_where_the_cookbook_is_silent() -> None:
    tokenizer = get_tokenizer("o200k_base")
    rules = RULES["gpt-4o"]
    as_list = parse_conversation([{"role": "user", "content": [{"type": "text", "text": "a"},
                                                               {"type": "text", "text": "b"}]}])
    as_text = parse_conversation([{"role": "user", "content": "a\nb"}])
    assert count_messages(tokenizer.count, as_list, rules) == count_messages(tokenizer.count, as_text, rules)
    call = parse_conversation([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}])
    count = tokenizer.count
    assert count_messages(count, call, rules) == (3 + count("assistant") + count("get_weather")
                                                  + count("{\"city\":\"Paris\"}") + 3)
    bare = parse_conversation([{"role": "user", "content": "x"}],
                              [{"type": "function", "function": {"name": "ping"}}])
    assert count_tools(tokenizer.count, bare.tools, rules) == 7 + tokenizer.count("ping:") + 12
