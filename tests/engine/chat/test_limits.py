"""The chat JSON limits (:mod:`app.engine.chat.limits`) and their checks in ``parse_conversation``."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.chat import ChatInputError, parse_conversation
from app.engine.chat.limits import MAX_JSON_DEPTH, depth_exceeds, preview, text_depth_exceeds
from app.engine.chat.messages import MAX_ERROR_CHARS


def nested(n: int, leaf: Any = 1) -> Any:
    for i in range(n):
        leaf = [leaf] if i % 2 else {"k": leaf}
    return leaf


def test_depth_of_values() -> None:
    assert not depth_exceeds(1, 0) and not depth_exceeds("x", 0)
    for n in (1, 2, 10, 64):
        assert not depth_exceeds(nested(n), n) and depth_exceeds(nested(n), n - 1)
    assert not depth_exceeds(nested(5000), 5000)  # iterative: no recursion limit
    wide = {"a": [1] * 10_000, "b": {"c": nested(3)}}
    assert depth_exceeds(wide, 4) and not depth_exceeds(wide, 5)


@pytest.mark.parametrize("text,depth", [("{}", 1), ("[[1]]", 2), ('["[[[[", {"a": "]]]"}]', 2), ("[" * 70, 70),
                                        ("[]" * 500, 1), ('"' + "[" * 100 + '"', 0), ("not json ]]]] [[", 2),
                                        ('["\\"[[[["]', 1), ("{" * 30 + "[" * 30, 60)])
def test_depth_of_json_text(text: str, depth: int) -> None:
    assert not text_depth_exceeds(text, depth)
    assert text_depth_exceeds(text, depth - 1) == (depth > 0)


def test_preview_is_short_and_says_how_long() -> None:
    assert preview("abc") == "'abc'"
    long = preview("Z" * 1_000_000)
    assert len(long) < 80 and "1000000 characters" in long
    assert len(preview(list(range(10**5)))) < 60


def _message(extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "hi", **extra}]


def test_parse_conversation_refuses_past_the_depth_limit() -> None:
    def call(arguments: Any) -> list[dict[str, Any]]:
        return [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "abcdefghi", "type": "function", "function": {"name": "f", "arguments": arguments}}]}]

    parse_conversation(call("[" * (MAX_JSON_DEPTH - 4) + "]" * (MAX_JSON_DEPTH - 4)))
    cases = [call("[" * (MAX_JSON_DEPTH - 3)), call(nested(MAX_JSON_DEPTH)),
             [{"role": "user", "content": [{"type": "text", "text": nested(MAX_JSON_DEPTH)}]}]]
    for messages in cases:
        with pytest.raises(ChatInputError) as info:
            parse_conversation(messages)
        assert info.value.limit == ("MAX_JSON_DEPTH", MAX_JSON_DEPTH) and "MAX_JSON_DEPTH" in str(info.value)
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "default":
                                                                        nested(MAX_JSON_DEPTH - 3)}}}
    parse_conversation(_message({}), [tool])  # tool(1) > function(2) > parameters(3) > default(4) … = 64
    tool["function"]["parameters"]["default"] = nested(MAX_JSON_DEPTH - 2)
    with pytest.raises(ChatInputError) as info:
        parse_conversation(_message({}), [tool])
    assert info.value.path == "tools[0]" and info.value.limit is not None


def test_error_messages_are_bounded() -> None:
    with pytest.raises(ChatInputError) as info:
        parse_conversation([{"role": "user", "content": "x", "Z" * 100_000: 1}])
    assert len(str(info.value)) <= MAX_ERROR_CHARS and len(info.value.path) <= 200
    assert len(str(ChatInputError("x" * 10**6))) == MAX_ERROR_CHARS
