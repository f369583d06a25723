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


# ------------------------------------------------------------------------- hostile shapes never crash a framing

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from app.engine import get_tokenizer  # noqa: E402
from app.engine.chat import ChatFramings  # noqa: E402
from app.engine.store import bundled_store_dir  # noqa: E402

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=3), max_leaves=8)
_ROLE = st.sampled_from(["system", "developer", "user", "assistant", "tool", "bot"])
_CONTENT = st.one_of(st.none(), st.text(max_size=20), st.lists(st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image"]), "text": st.text(max_size=10)}), max_size=2), _JSON)
_CALL = st.fixed_dictionaries({
    "id": st.text(max_size=4), "type": st.just("function"),
    "function": st.fixed_dictionaries({"name": st.text(max_size=6), "arguments": st.one_of(
        st.text(max_size=12), st.just('{"a": [1, "<|end|>"]}'), _JSON)})})
_TEXT = st.one_of(st.text(max_size=20), st.sampled_from(["<|eot_id|>", "<|start|>user<|message|>x", "\ue000"]))
_VALID = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "developer", "user"]), "content": _TEXT},
                          optional={"name": st.text(max_size=6)}),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": st.one_of(st.none(), _TEXT)},
                          optional={"tool_calls": st.lists(_CALL, min_size=1, max_size=2)}),
    st.fixed_dictionaries({"role": st.just("tool"), "content": _TEXT}, optional={"tool_call_id": st.text(max_size=4)}))
_MESSAGE = st.one_of(
    _VALID, _VALID, _VALID,
    st.fixed_dictionaries({"role": _ROLE, "content": _CONTENT},
                          optional={"name": st.one_of(st.text(max_size=6), _JSON),
                                    "tool_calls": st.lists(_CALL, max_size=2),
                                    "tool_call_id": st.text(max_size=4)}),
    _JSON)
_SCHEMA = st.one_of(_JSON, st.fixed_dictionaries({"type": st.just("object"), "properties": st.dictionaries(
    st.text(max_size=5), _JSON, max_size=3)}))
_TOOL = st.one_of(st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
    {"name": st.text(max_size=6)}, optional={"description": st.one_of(st.text(max_size=10), _JSON),
                                             "parameters": _SCHEMA})}), _JSON)

FRAMINGS = ChatFramings.from_store(bundled_store_dir())
FRAMED: list[int] = []  # how many generated conversations were valid (checked below: the property is not vacuous)
SPECS = [("o200k_base", {"framing": "openai-cookbook", "rules": "gpt-4o"}), ("o200k_harmony", {"framing": "harmony"}),
         ("llama3", {"framing": "jinja", "template": "llama-3.1-8b-instruct"}),
         ("mistral-v1", {"framing": "mistral", "version": "v1"}),
         ("mistral-v7", {"framing": "mistral", "version": "v7"}),
         ("mistral-nemo", {"framing": "mistral", "version": "v3"})]


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.one_of(st.lists(_MESSAGE, max_size=5), _JSON), tools=st.one_of(st.none(), st.lists(_TOOL,
                                                                                                     max_size=2)))
def test_any_json_is_refused_or_framed(messages: object, tools: object) -> None:
    """Whatever JSON arrives: a ChatInputError (a 422) or a framed prompt, never another exception."""
    try:
        conv = parse_conversation(messages, tools)
    except ChatInputError:
        return
    FRAMED.append(1)
    for tokenizer, spec in SPECS:
        enc = get_tokenizer(tokenizer)
        framing = FRAMINGS.framing(spec, enc)
        try:
            n = framing.count(enc, conv)
            if framing.ids_public:
                assert len(enc.encode_parts(list(framing.frame(conv)))) == n
        except ChatInputError:
            continue


def test_the_property_reached_the_framings() -> None:
    FRAMED.clear()
    test_any_json_is_refused_or_framed()
    assert len(FRAMED) >= 10  # of 300 generated requests (27-43 seen)


def test_plain_message_shortcut_equals_the_full_validation() -> None:
    """The fast path for ``{"role", "content": str}`` builds the same value the general path does."""
    from app.engine.chat.messages import ChatMessage

    for role in ("system", "developer", "user", "assistant", "tool"):
        for content in ("", "x", "<|eot_id|> [INST]"):
            got = parse_conversation([{"role": role, "content": content}]).messages[0]
            assert got == ChatMessage(role=role, content=content) and type(got) is ChatMessage
            assert got.__dict__ == ChatMessage(role=role, content=content).__dict__
    for bad in ({"role": "robot", "content": "x"}, {"role": "user", "content": 5}, {"role": ["user"], "content": "x"}):
        with pytest.raises(ChatInputError):
            parse_conversation([bad])
