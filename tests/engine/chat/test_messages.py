"""The conversation validator: accepted shapes, normalisation (list content, null content, object arguments) and
errors that name the offending field."""

from __future__ import annotations

import pytest

from app.core.model_table import ModelInfo, ModelTable
from app.engine.chat import ChatInputError, parse_conversation


def test_normalisation() -> None:
    conv = parse_conversation([
        {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "user", "content": "hi", "name": "zoë"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": "é"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
    ], [{"type": "function", "function": {"name": "f"}}])
    dev, user, assistant, tool = conv.messages
    assert dev.content == "a\nb" and user.name == "zoë"
    assert assistant.content == "" and not assistant.content_given
    assert assistant.tool_calls[0].arguments == '{"x": "é"}' and assistant.tool_calls[0].arguments_value("p") == {
        "x": "é"}
    assert tool.tool_call_id == "c1" and conv.tools[0].parameters is None
    assert conv.texts() == ["a\nb", "hi", "zoë", "", "f", '{"x": "é"}', "1"]


@pytest.mark.parametrize(("messages", "tools", "path"), [
    (None, None, "messages"),
    ([], None, "messages"),
    (["x"], None, "messages[0]"),
    ([{"role": "user"}], None, "messages[0].content"),
    ([{"role": "user", "content": "x", "tool_calls": []}], None, "messages[0].tool_calls"),
    ([{"role": "user", "content": "x", "tool_call_id": "1"}], None, "messages[0].tool_call_id"),
    ([{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "", "arguments": "{}"}}]}],
     None, "messages[0].tool_calls[0].function.name"),
    ([{"role": "assistant", "tool_calls": [{"type": "code", "function": {"name": "f"}}]}], None,
     "messages[0].tool_calls[0].type"),
    ([{"role": "user", "content": "x", "name": 3}], None, "messages[0].name"),
    ([{"role": "user", "content": "x"}], {"a": 1}, "tools"),
    ([{"role": "user", "content": "x"}], [{"type": "function", "function": {"name": "f", "parameters": []}}],
     "tools[0].function.parameters"),
    ([{"role": "user", "content": "x"}], [{"type": "retrieval"}], "tools[0]"),
])
def test_errors_name_the_field(messages: object, tools: object, path: str) -> None:
    with pytest.raises(ChatInputError) as info:
        parse_conversation(messages, tools)
    assert info.value.path == path


def test_snapshot_names_resolve_to_the_longest_prefix() -> None:
    table = ModelTable({n: ModelInfo(name=n, tokenizer="t") for n in ("gpt-4", "gpt-4o", "gpt-4o-mini",
                                                                     "gpt-3.5-turbo")})
    assert table.resolve("gpt-4o-mini-2024-07-18").name == "gpt-4o-mini"  # type: ignore[union-attr]
    assert table.resolve("gpt-4o-2024-08-06").name == "gpt-4o"  # type: ignore[union-attr]
    assert table.resolve("gpt-4-0613").name == "gpt-4"  # type: ignore[union-attr]
    assert table.resolve("gpt-3.5-turbo-0301").name == "gpt-3.5-turbo"  # type: ignore[union-attr]
    assert table.resolve("gpt-4o") is table.get("gpt-4o")
    assert table.resolve("gpt-40") is None and table.resolve("gpt") is None
