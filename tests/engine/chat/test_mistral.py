"""Mistral framing against mistral-common 1.13.1's ``encode_chat_completion`` (``ChatCompletionRequest.from_openai``,
the reference's own v1/v3/v7 SentencePiece and tekken files, which the store bundles): ids equal, and the same
conversations refused, on a seeded set of valid and deliberately irregular conversations (multi-turn, system and
developer prompts, tools, tool calls and results, merged same-role runs, list content, multilingual and long text,
Mistral's and other families' control strings typed in content)."""

from __future__ import annotations

import json
import os
import random
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mistral_common.protocol.instruct.request import ChatCompletionRequest
from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

from app.engine import get_tokenizer
from app.engine.chat import ChatInputError, parse_conversation
from app.engine.chat.framings import MistralFraming
from app.engine.specials import Special

from .conversations import MARKERS, TOOLS, WORDS, _text
from .test_messages import _JSON, _MESSAGE, _TOOL

N = int(os.environ.get("CHAT_TEST_CONVERSATIONS_MISTRAL", "400"))

#: store tokenizer -> (instruct version, the reference's tokenizer for the same file)
CASES = {
    "mistral-v1": ("v1", MistralTokenizer.v1),
    "mistral-v3": ("v3", MistralTokenizer.v3),
    "mistral-v7": ("v7", MistralTokenizer.v7),
    "mistral-nemo": ("v3", lambda: MistralTokenizer.v3(is_tekken=True)),
}

MISTRAL_MARKERS = ["[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
                   "[/TOOL_RESULTS]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]", "<s>", "</s>",
                   "<unk>", "[IMG]", "[control_12]", "▁", "▁[INST]"]


def _words(rng: random.Random, markers: bool) -> str:
    if rng.random() < 0.5:
        return _text(rng, markers=markers, long=rng.random() < 0.04)
    n = rng.choice([0, 1, 3, 8, 20])
    pool = WORDS + (MISTRAL_MARKERS + MARKERS if markers else [])
    text = " ".join(rng.choice(pool) for _ in range(n))
    return rng.choice(["", " ", "  ", "\n"]) + text + rng.choice(["", " ", "   ", "\n", " \n"]) \
        if rng.random() < 0.3 else text


def _call_id(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.04:
        return "call_1"  # the wrong shape: v3/v7 refuse it
    if r < 0.06:
        return "null"
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(9))


def _content(rng: random.Random, markers: bool) -> Any:
    if rng.random() < 0.1:
        return [{"type": "text", "text": _words(rng, markers)} for _ in range(rng.randint(0, 3))]
    return _words(rng, markers)


def _result(rng: random.Random, markers: bool) -> str:
    r = rng.random()
    if r < 0.5:
        return json.dumps({"result": _words(rng, markers), "n": rng.randint(-5, 10 ** 12)},
                          ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2]))
    if r < 0.6:
        return ""
    return _words(rng, markers)  # not JSON: kept as text


def _arguments(rng: random.Random, markers: bool) -> str:
    r = rng.random()
    if r < 0.05:
        return ""
    if r < 0.1:
        return "{not json " + _words(rng, markers)
    value = {"location": _words(rng, markers), "unit": rng.choice(["celsius", "fahrenheit"]),
             "n": rng.choice([1, 2.5, None, True, [1, {"x": "日本"}]])}
    return json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 1]))


def conversation(rng: random.Random) -> dict[str, Any]:
    markers = rng.random() < 0.35
    irregular = rng.random() < 0.25  # orders and shapes the reference may refuse or merge
    tools = rng.sample(TOOLS, rng.randint(1, len(TOOLS))) if rng.random() < 0.45 else None
    if tools and rng.random() < 0.05:
        tools = [*tools, {"type": "function", "function": {"name": "bad name!", "parameters": {}}}]
    if tools and rng.random() < 0.04:
        tools = [*tools, {"type": "function", "function": {"name": "bad_schema", "parameters": {"type": 5}}}]
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.6:
        messages.append({"role": rng.choice(["system", "system", "developer"]), "content": _content(rng, markers)})
    for _turn in range(rng.randint(1, 6)):
        messages.append({"role": "user", "content": _content(rng, markers)})
        if irregular and rng.random() < 0.2:
            messages.append({"role": "user", "content": _content(rng, markers)})
        if irregular and rng.random() < 0.15:
            messages.append({"role": "system", "content": _content(rng, markers)})
        if tools and rng.random() < 0.5:
            calls = [{"id": _call_id(rng), "type": "function",
                      "function": {"name": rng.choice(tools)["function"]["name"],
                                   "arguments": _arguments(rng, markers)}} for _ in range(rng.randint(1, 3))]
            assistant: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
            if rng.random() < 0.1:
                assistant["content"] = _words(rng, markers) or "x"  # v7 takes both; v1/v3 refuse
            messages.append(assistant)
            results = calls if not (irregular and rng.random() < 0.2) else calls[:-1]
            for call in results:
                tool: dict[str, Any] = {"role": "tool", "tool_call_id": call["id"], "content": _result(rng, markers)}
                if rng.random() < 0.3:
                    tool["name"] = call["function"]["name"]
                messages.append(tool)
            if rng.random() < 0.5:
                continue  # the next user message follows the tool results
        reply: dict[str, Any] = {"role": "assistant", "content": _content(rng, markers)}
        if not irregular and not reply["content"]:
            reply["content"] = "ok"
        messages.append(reply)
        if irregular and rng.random() < 0.15:
            messages.append({"role": "assistant", "content": _content(rng, markers)})
    if messages[-1]["role"] == "assistant" and not (irregular and rng.random() < 0.3):
        messages.append({"role": "user", "content": _content(rng, markers)})
    return {"messages": messages, "tools": tools}


def conversations(seed: int, n: int) -> list[dict[str, Any]]:
    rng = random.Random(f"{seed}-mistral")
    return [conversation(rng) for _ in range(n)]


def reference(mt: MistralTokenizer, c: dict[str, Any]) -> list[int] | Exception:
    try:
        request = ChatCompletionRequest.from_openai(messages=c["messages"], tools=c["tools"])
        return list(mt.encode_chat_completion(request).tokens)
    except Exception as exc:  # every refusal of the reference (its exceptions, pydantic's, KeyError, ...)
        return exc


def ours(framing: MistralFraming, tokenizer: Any, c: dict[str, Any]) -> list[int] | ChatInputError:
    try:
        conv = parse_conversation(c["messages"], c["tools"])
        return tokenizer.encode_parts(list(framing.frame(conv)))
    except ChatInputError as exc:
        return exc


@pytest.fixture(scope="module")
def convs() -> list[dict[str, Any]]:
    return conversations(5, N)


@pytest.mark.parametrize("name", list(CASES))
def test_ids_equal_mistral_common(name: str, convs: list[dict[str, Any]]) -> None:
    version, make = CASES[name]
    mt, tokenizer, framing = make(), get_tokenizer(name), MistralFraming(version)
    mismatches, framed, refused, with_tools = [], 0, 0, 0
    for i, c in enumerate(convs):
        want, got = reference(mt, c), ours(framing, tokenizer, c)
        if isinstance(want, Exception) or isinstance(got, Exception):
            if not (isinstance(want, Exception) and isinstance(got, Exception)):
                mismatches.append((i, "one side refused", repr(want)[:160], repr(got)[:160]))
            refused += 1
            continue
        framed += 1
        with_tools += bool(c["tools"])
        if got != want:
            mismatches.append((i, "ids", c))
        assert framing.count(tokenizer, parse_conversation(c["messages"], c["tools"])) == len(want)
    assert not mismatches, (len(mismatches), mismatches[:3])
    assert framed >= N // 3 and refused >= N // 20  # both sides were really exercised
    if version != "v1":
        assert with_tools >= N // 10


def test_markers_in_content_stay_text() -> None:
    text = " ".join(MISTRAL_MARKERS + MARKERS)
    conv = parse_conversation([{"role": "system", "content": text}, {"role": "user", "content": text},
                               {"role": "assistant", "content": text}, {"role": "user", "content": text}])
    plain = parse_conversation([{"role": "system", "content": "x"}, {"role": "user", "content": "x"},
                                {"role": "assistant", "content": "x"}, {"role": "user", "content": "x"}])
    for name, (version, _) in CASES.items():
        tokenizer, framing = get_tokenizer(name), MistralFraming(version)
        parts, template = list(framing.frame(conv)), list(framing.frame(plain))
        assert [p for p in parts if isinstance(p, Special)] == [p for p in template if isinstance(p, Special)]
        ids = tokenizer.encode_parts(parts)
        assert sum(tokenizer.is_special(i) for i in ids) == sum(isinstance(p, Special) for p in parts)


@pytest.mark.parametrize(("messages", "reason"), [
    ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "last message"),
    ([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}, {"role": "tool", "tool_call_id":
      "abcdefghi", "content": "x"}], "cannot follow"),
    ([{"role": "assistant", "content": "b"}], "one message"),
    ([{"role": "user", "content": "a"}, {"role": "tool", "tool_call_id": "abcdefghi", "content": "x"}],
     "cannot follow"),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "x"}], "9 letters or digits"),
    ([{"role": "user", "content": None}], "content must be"),
])
def test_refusals_state_the_rule(messages: list[dict[str, Any]], reason: str) -> None:
    for version in ("v3", "v7"):
        with pytest.raises(ChatInputError, match=reason):
            MistralFraming(version).frame(parse_conversation(messages))
        mt = CASES["mistral-v7" if version == "v7" else "mistral-v3"][1]()
        assert isinstance(reference(mt, {"messages": messages, "tools": None}), Exception)  # refused there too


def test_v1_refuses_tools_and_ignores_definitions() -> None:
    framing = MistralFraming("v1")
    with_tools = parse_conversation([{"role": "user", "content": "hi"}], TOOLS)
    without = parse_conversation([{"role": "user", "content": "hi"}])
    assert list(framing.frame(with_tools)) == list(framing.frame(without))  # v1 does not encode tool definitions
    calls = parse_conversation([{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [
        {"id": "abcdefghi", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "abcdefghi", "content": "x"}])
    with pytest.raises(ChatInputError, match="v1"):
        framing.frame(calls)


_REFS: dict[str, MistralTokenizer] = {}
AGREED: list[bool] = []  # True where our framing produced ids (the property below is not vacuous)


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.one_of(st.lists(_MESSAGE, min_size=1, max_size=5), _JSON),
       tools=st.one_of(st.none(), st.lists(_TOOL, max_size=2)))
def test_arbitrary_json_agrees_with_mistral_common(messages: object, tools: object) -> None:
    """Whatever JSON our validator accepts: our ids equal the reference's, or both refuse."""
    try:
        conv = parse_conversation(messages, tools)
    except ChatInputError:
        return
    c = {"messages": messages, "tools": tools}
    for name in ("mistral-v3", "mistral-v7"):
        version, make = CASES[name]
        mt = _REFS.get(name) or _REFS.setdefault(name, make())
        tokenizer = get_tokenizer(name)
        want = reference(mt, c)
        try:
            got: list[int] | None = tokenizer.encode_parts(list(MistralFraming(version).frame(conv)))
        except ChatInputError:
            got = None
        assert (got is None) == isinstance(want, Exception), (name, c, want)
        assert got is None or got == want
        AGREED.append(got is not None)


def test_the_property_reached_the_framing() -> None:
    AGREED.clear()
    test_arbitrary_json_agrees_with_mistral_common()
    assert sum(AGREED) >= 3 and len(AGREED) >= 20


PATTERNS = ["^[a-z]+$", r"\d{3}-\d{4}", "(?P<x>a)(?P=x)", "[", "a{2,1}", "(?<=a+)b", "a{99999999999}", "*",
            "(" * 200 + ")" * 200, "\\", "x" * 900]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_tool_patterns_agree_with_mistral_common(pattern: str) -> None:
    """A ``pattern`` (and a ``patternProperties`` key) is accepted where mistral-common accepts it and refused
    where it refuses (or fails: ``a{99999999999}`` raises OverflowError there)."""
    import re

    params = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}},
              "patternProperties": {pattern: {"type": "string"}}}
    c = {"messages": [{"role": "user", "content": "x"}],
         "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}]}
    version, make = CASES["mistral-v3"]
    mt = _REFS.get("mistral-v3") or _REFS.setdefault("mistral-v3", make())
    want = reference(mt, c)
    re.purge()  # the reference compiled the pattern into the cache; ours must not
    got = ours(MistralFraming(version), get_tokenizer("mistral-v3"), c)
    assert isinstance(got, ChatInputError) == isinstance(want, Exception), (pattern[:40], want, got)
    assert got == want or isinstance(got, ChatInputError)
    assert not any(pattern in key for key in re._cache)  # type: ignore[attr-defined]


def test_check_regex_bounds() -> None:
    import re

    from app.engine.chat.limits import MAX_PATTERN_CHARS
    from app.engine.chat.mistral import PatternTooLong, check_regex

    assert check_regex("^ok$") and check_regex(3)
    with pytest.raises(PatternTooLong):
        check_regex("a" * (MAX_PATTERN_CHARS + 1))
    for bad in ("[", "a{99999999999}"):
        with pytest.raises(re.error):
            check_regex(bad)
