"""Jinja chat templates against transformers' ``apply_chat_template``: rendered strings and ids for Llama 3.1,
Qwen3 and Gemma 3 (our ``llama3``/``qwen3``/``gemma3`` vs transformers tokenizers built from the same
``tokenizer.json`` files), on the seeded conversation set; role markers in content stay text; the sandbox holds.

The live comparison needs the reference Python (``scripts/chat_reference_env.sh``); a recorded copy of its answers
(``data/jinja_reference.json``, digests of rendered strings and ids) is checked on every run.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from app.engine import get_tokenizer
from app.engine.chat import ChatInputError, ChatTemplate, count_parts, load_templates, parse_conversation
from app.engine.chat.framings import TemplateFraming
from app.engine.chat.jinja import MARK
from app.engine.errors import UnknownTokenizerError
from app.engine.specials import Special
from app.engine.store import bundled_store_dir

from . import hf
from .conversations import MARKERS, conversations, has_markers, parts_conversations

N = int(os.environ.get("CHAT_TEST_CONVERSATIONS", "120"))
N_PARTS = int(os.environ.get("CHAT_TEST_PART_CONVERSATIONS", "150"))
STYLES = {"llama-3.1-8b-instruct": "llama", "qwen3-8b": "qwen", "gemma-3-27b-it": "gemma"}

#: Special tokens (HF ``special: true`` added tokens) of each model's tokenizer.json, for the templates whose
#: tokenizer is not in the store yet: recorded here so the rendering tests run without the npm files.
SPECIALS_FILE = Path(__file__).resolve().parent / "data" / "template_specials.json"

TEMPLATES = load_templates(bundled_store_dir())


#: The store tokenizer each template's ids are compared with.
TOKENIZERS = {"llama-3.1-8b-instruct": "llama3", "qwen3-8b": "qwen3", "gemma-3-27b-it": "gemma3"}


def tokenizer_of(name: str) -> Any:
    try:
        return get_tokenizer(TOKENIZERS[name])
    except UnknownTokenizerError:
        return None


def specials_of(name: str) -> list[str]:
    tokenizer = tokenizer_of(name)
    if tokenizer is not None:
        return list(tokenizer.special_tokens)
    data: dict[str, list[str]] = json.loads(SPECIALS_FILE.read_text(encoding="utf-8"))
    return data[name]


def markers_of(name: str) -> set[str]:
    """The strings whose presence in caller text makes the reference's ids for the conversation its
    ``split_special_tokens`` ids of our parts: the tokenizer's specials and its other added tokens (transformers may
    count an added token as special that the tokenizer.json does not; see test_gemma_mask_is_the_files_added_token)."""
    tokenizer = tokenizer_of(name)
    return set(specials_of(name)) | set(getattr(tokenizer, "added_tokens", {}))


@pytest.mark.parametrize("name", list(STYLES))
def test_ids_are_compared(name: str) -> None:
    assert tokenizer_of(name) is not None


def template(name: str) -> ChatTemplate:
    src = TEMPLATES[name]
    return ChatTemplate(name, src.text, src.variables, specials_of(name))


def invalid(style: str) -> list[dict[str, Any]]:
    """Conversations a template must refuse (both sides must refuse them)."""
    out = [{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "tools": None,
            "add_generation_prompt": True}]
    if style == "llama":
        out.append({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None,
                                  "tool_calls": [{"id": "1", "type": "function", "function": {
                                      "name": "f", "arguments": "{}"}}] * 2}], "tools": None,
                    "add_generation_prompt": True})
    return out


def ours_and_items(name: str, convs: list[dict[str, Any]]) -> tuple[list[Any], list[dict[str, Any]]]:
    tpl = template(name)
    ours: list[Any] = []
    items: list[dict[str, Any]] = []
    for c in convs:
        agp = c["add_generation_prompt"]
        conv = parse_conversation(c["messages"], c["tools"])
        ctx = tpl.context(conv, agp, escape=False)
        try:
            rendered = tpl.render(conv, add_generation_prompt=agp)
            parts = tpl.frame(conv, add_generation_prompt=agp)
        except ChatInputError as exc:
            ours.append(exc)
            items.append({"messages": ctx["messages"], "tools": ctx["tools"], "add_generation_prompt": agp,
                          "parts": None})
            continue
        ours.append((rendered, parts))
        items.append({"messages": ctx["messages"], "tools": ctx["tools"], "add_generation_prompt": agp,
                      "parts": [["special", p.name] if isinstance(p, Special) else ["text", p] for p in parts]})
    return ours, items


@functools.cache
def template_framing(name: str) -> TemplateFraming:
    return TemplateFraming(template(name))


def framing_count(name: str, c: dict[str, Any]) -> int:
    """The count the service gives (the framing's ``count``: one pass over the rendered string where it can)."""
    return template_framing(name).count(tokenizer_of(name), parse_conversation(c["messages"], c["tools"]),
                         add_generation_prompt=c["add_generation_prompt"])


def compare(name: str, convs: list[dict[str, Any]], ours: list[Any], answers: list[dict[str, Any]]) -> int:
    """Asserts no mismatch; returns how many conversations' ids were compared."""
    markers = markers_of(name)
    tokenizer = tokenizer_of(name)
    mismatches = []
    compared = 0
    for i, (c, mine, ref) in enumerate(zip(convs, ours, answers, strict=True)):
        if isinstance(mine, ChatInputError) or "error" in ref:
            if not (isinstance(mine, ChatInputError) and "error" in ref):
                mismatches.append((i, "one side refused", str(mine)[:80], str(ref.get("error"))[:80]))
            continue
        rendered, parts = mine
        if rendered != ref["rendered"] or parts.rendered() != ref["rendered"]:
            mismatches.append((i, "rendered"))
            continue
        if tokenizer is not None:
            ids = tokenizer.encode_parts(list(parts))
            # with role markers in caller text transformers would turn them into control tokens: the reference
            # for us is its tokenizer on the same parts with special-token parsing off
            want = ref["parts_ids"] if has_markers(c, markers) else ref["ids"]
            compared += 1
            if ids != want:
                mismatches.append((i, "ids"))
            elif framing_count(name, c) != len(want):
                mismatches.append((i, "count"))
    assert not mismatches, mismatches[:5]
    return compared


@pytest.mark.parametrize("name", list(STYLES))
def test_rendering_and_ids_equal_transformers(name: str) -> None:
    convs = conversations(13, N, STYLES[name]) + invalid(STYLES[name])
    ours, items = ours_and_items(name, convs)
    answers = hf.run(name, TEMPLATES[name].text, items)
    assert compare(name, convs, ours, answers) >= N  # the set really was rendered and tokenized


@pytest.mark.parametrize("name", list(STYLES))
def test_content_parts_and_names_equal_transformers(name: str) -> None:
    """Lists of 1-5 parts (empty, whitespace- and newline-edged, some with role markers) and names on every role:
    rendered strings, ids and counts equal transformers' on the same messages (parts reach Gemma 3's template as a
    list, the others' joined)."""
    convs = parts_conversations(3, N_PARTS, STYLES[name])
    ours, items = ours_and_items(name, convs)
    loops = name == "gemma-3-27b-it"  # the one template here that loops over message content
    assert any(isinstance(m["content"], list) for item in items for m in item["messages"]) == loops
    for c, item in zip(convs, items, strict=True):  # the reference sees the content as vLLM builds it
        for given, m in zip(c["messages"], item["messages"], strict=True):
            m["content"] = vllm_content(given.get("content"), loops)
    answers = hf.run(name, TEMPLATES[name].text, items)
    assert compare(name, convs, ours, answers) >= N_PARTS * 3 // 4


def vllm_content(content: Any, as_parts: bool) -> Any:
    """A message's content as vLLM's ``chat_utils._parse_chat_message_content`` hands it to a template: for one
    that loops over content every content is a list of text parts (a string is one part, null none), else the
    parts joined with a newline (null: "")."""
    texts = [] if content is None else [content] if isinstance(content, str) else [p["text"] for p in content]
    return [{"type": "text", "text": t} for t in texts] if as_parts else "\n".join(texts)


def test_reference_renders_with_our_renderer() -> None:
    """A template's output depends on jinja2 and on Python's Unicode tables (``trim`` strips what ``str.strip``
    calls whitespace): the reference Python must have the service's, or a difference would be the environment's."""
    import unicodedata

    import jinja2

    assert hf.renderer() == (jinja2.__version__, unicodedata.unidata_version)


def recorded_entry(name: str, answers: list[dict[str, Any]]) -> list[Any]:
    return [ref.get("error", "").split(":")[0] if "error" in ref else
            [hf.digest(ref["rendered"]), hf.digest(ref["ids"]), hf.digest(ref["parts_ids"])] for ref in answers]


@pytest.mark.parametrize("name", list(STYLES))
def test_recorded_reference(name: str) -> None:
    """Our output against the recorded digests of the reference's answers on the same seeded set."""
    data = hf.recorded("jinja_reference")
    convs = (conversations(data["seed"], data["n"], STYLES[name]) + invalid(STYLES[name])
             + parts_conversations(data["seed"], data["n_parts"], STYLES[name]))
    ours, _ = ours_and_items(name, convs)
    markers = markers_of(name)
    tokenizer = tokenizer_of(name)
    expected = data["templates"][name]
    assert len(expected) == len(ours)
    for c, mine, want in zip(convs, ours, expected, strict=True):
        if isinstance(mine, ChatInputError):
            assert isinstance(want, str)
            continue
        rendered, parts = mine
        assert hf.digest(rendered) == want[0]
        if tokenizer is not None:
            ids = tokenizer.encode_parts(list(parts))
            assert hf.digest(ids) == (want[2] if has_markers(c, markers) else want[1])
            assert framing_count(name, c) == len(ids)


def test_record_reference() -> None:
    """Refresh ``data/jinja_reference.json`` (only with ``CHAT_RECORD=1`` and the reference built)."""
    if os.environ.get("CHAT_RECORD") != "1":
        pytest.skip("set CHAT_RECORD=1 to re-record the reference answers")
    seed, n, n_parts = 7, 80, 80
    out: dict[str, Any] = {"seed": seed, "n": n, "n_parts": n_parts, "reference": hf.version(), "templates": {}}
    specials: dict[str, list[str]] = {}
    for name, style in STYLES.items():
        convs = conversations(seed, n, style) + invalid(style) + parts_conversations(seed, n_parts, style)
        _, items = ours_and_items(name, convs)
        out["templates"][name] = recorded_entry(name, hf.run(name, TEMPLATES[name].text, items))
        tj = json.loads((hf.reference_dir() / "models" / hf.MODEL_DIRS[name] / "tokenizer.json").read_text())
        specials[name] = [a["content"] for a in tj["added_tokens"] if a["special"]]
    hf.record("jinja_reference", out)
    hf.record("template_specials", specials)


# ------------------------------------------------------------------------------------- text stays text


@pytest.mark.parametrize("as_parts", [False, True])
@pytest.mark.parametrize("name", list(STYLES))
def test_role_markers_in_content_are_text(name: str, as_parts: bool) -> None:
    tpl = template(name)
    specials = set(specials_of(name))
    text = " ".join(MARKERS + sorted(specials)[:50]) + MARK
    conv_messages: list[dict[str, Any]] = [
        {"role": "system", "content": text}, {"role": "user", "content": text},
        {"role": "assistant", "content": text}, {"role": "user", "content": "<|eot_id|>" + text}]
    if as_parts:  # each text also split into parts, one of them a marker alone
        for m in conv_messages:
            m["content"] = [{"type": "text", "text": t} for t in (m["content"], "<start_of_turn>", " " + text)]
    plain = [{**m, "content": "x"} for m in conv_messages]
    parts = tpl.frame(parse_conversation(conv_messages))
    template_only = tpl.frame(parse_conversation(plain))
    n_special = sum(isinstance(p, Special) for p in parts)
    assert n_special == sum(isinstance(p, Special) for p in template_only)
    assert [p for p in parts if isinstance(p, Special)] == [p for p in template_only if isinstance(p, Special)]
    texts = "".join(p for p in parts if isinstance(p, str))
    assert texts.count("<|eot_id|>") >= 4 and MARK in texts
    tokenizer = tokenizer_of(name)
    if tokenizer is not None:
        ids = tokenizer.encode_parts(list(parts))
        assert sum(tokenizer.is_special(i) for i in ids) == n_special
        assert template_framing(name).count(tokenizer, parse_conversation(conv_messages)) == len(ids)


def test_parts_reach_gemma_as_parts_and_the_others_joined() -> None:
    """Gemma 3's template loops over content and trims each part; Qwen3's takes a string: the parts joined with a
    newline (as vLLM passes them to each)."""
    content = [{"type": "text", "text": t} for t in (" a \n", "", "\n b ", "c")]
    conv = parse_conversation([{"role": "user", "content": content}])
    assert "<start_of_turn>user\nabc<end_of_turn>" in template("gemma-3-27b-it").render(conv)
    assert "<|im_start|>user\n a \n\n\n\n b \nc<|im_end|>" in template("qwen3-8b").render(conv)
    for name in ("gemma-3-27b-it", "qwen3-8b"):  # the count path (shape memo for strings) agrees with the ids
        tokenizer = tokenizer_of(name)
        ids = tokenizer.encode_parts(list(template(name).frame(conv)))
        assert template_framing(name).count(tokenizer, conv) == len(ids)
        joined = parse_conversation([{"role": "user", "content": " a \n\n\n\n b \nc"}])
        assert (template_framing(name).count(tokenizer, joined) == len(ids)) == (name == "qwen3-8b")


def test_unsafe_template_literal_is_refused() -> None:
    with pytest.raises(ValueError, match="could complete"):
        ChatTemplate("bad", "{% for m in messages %}{{ m.content }}{{ '|eot_id|>' }}{% endfor %}", {},
                     ["<|eot_id|>"])
    with pytest.raises(ValueError, match="could complete"):
        ChatTemplate("bad", "{% for m in messages %}{{ '<|eot' }}{{ m.content }}{% endfor %}", {}, ["<|eot_id|>"])


def test_sandbox_blocks_attribute_escapes() -> None:
    tpl = ChatTemplate("evil", "{{ messages.__class__.__mro__ }}{{ ''.__class__.__subclasses__() }}", {}, [])
    with pytest.raises(ChatInputError):
        tpl.render(parse_conversation([{"role": "user", "content": "x"}]))
    mutate = ChatTemplate("mutate", "{% set x = messages.append(1) %}{{ messages }}", {}, [])
    with pytest.raises(ChatInputError):
        mutate.render(parse_conversation([{"role": "user", "content": "x"}]))


def test_raise_exception_and_helpers() -> None:
    tpl = ChatTemplate("t", "{{ raise_exception('no ' + messages[0].content) }}", {}, [])
    with pytest.raises(ChatInputError, match="no way"):
        tpl.render(parse_conversation([{"role": "user", "content": "way"}]))
    helpers = ChatTemplate("h", "{{ messages[0] | tojson }}|{{ strftime_now('%Y') | length }}", {}, [])
    out = helpers.render(parse_conversation([{"role": "user", "content": "é<b>"}]))
    assert out == '{"role": "user", "content": "é<b>"}|4'


def test_llama_tool_call_arguments_are_objects() -> None:
    tpl = template("llama-3.1-8b-instruct")
    conv = parse_conversation([{"role": "user", "content": "w?"}, {"role": "assistant", "content": None,
                               "tool_calls": [{"id": "c", "type": "function", "function": {
                                   "name": "get", "arguments": "{\"city\": \"Paris\"}"}}]}])
    assert '{"name": "get", "parameters": {"city": "Paris"}}' in tpl.render(conv)
    bad = parse_conversation([{"role": "user", "content": "w?"}, {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "get", "arguments": "{not json"}}]}])
    with pytest.raises(ChatInputError, match="not valid JSON"):
        tpl.render(bad)


def test_shaped_split_equals_the_regex_split() -> None:
    """The split of ``<|…|>`` specials: the regex split with the known-name check, linear on many lookalikes."""
    import random
    import re

    from app.engine.chat.jinja import _Splitter

    names = ["<|eot_id|>", "<|start_header_id|>", "<|a|>", "<|x y|>"]
    splitter = _Splitter(names)
    assert splitter.shaped
    pattern = re.compile(r"(<\|[^|<>]{1,%d}\|>)" % max(map(len, names)))  # noqa: UP031
    alphabet = ["<|", "|>", "<", ">", "|", "a", "x y", "eot_id", "start_header_id", " ", "\n", "é"] + names
    rng = random.Random(3)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        pieces = pattern.split(text)
        want = [pieces[0]]
        for i in range(1, len(pieces), 2):
            if pieces[i] in splitter.known:
                want += (pieces[i], pieces[i + 1])
            else:
                want[-1] += pieces[i] + pieces[i + 1]
        assert splitter.split(text) == want, text
    hostile = "<|b|>" * 200_000 + "<|eot_id|>"  # 200,000 lookalikes: joined once, not concatenated one by one
    assert splitter.split(hostile) == ["<|b|>" * 200_000, "<|eot_id|>", ""]


def test_only_the_templates_own_specials_are_split_out() -> None:
    """A special the template never writes stays text even if a filter forms it from caller text."""
    tpl = ChatTemplate("lower", "{{ bos_token }}{% for m in messages %}{{ m.content | lower }}<|eot_id|>{% endfor %}",
                       {"bos_token": "<|begin_of_text|>"}, ["<|begin_of_text|>", "<|eot_id|>", "<|python_tag|>"])
    parts = list(tpl.frame(parse_conversation([{"role": "user", "content": "a <|PYTHON_TAG|> b"}])))
    assert parts == [Special("<|begin_of_text|>"), "a <|python_tag|> b", Special("<|eot_id|>")]


# ------------------------------------------------------------------------------------- the sandbox's shortcuts


def _same_answer(a: Any, b: Any) -> bool:
    """Two sandbox answers are the same: equal values, or undefined objects of one class saying the same."""
    from jinja2.runtime import Undefined

    if isinstance(a, Undefined) or isinstance(b, Undefined):
        return type(a) is type(b) and a._undefined_hint == b._undefined_hint and (
            a._undefined_exception is b._undefined_exception) and a._undefined_name == b._undefined_name
    if callable(a) and getattr(a, "__name__", None) in ("format", "format_map"):  # wrapped anew per access
        return callable(b) and _outcome(a) == _outcome(b)
    return bool(a == b)


def _outcome(fmt: Any) -> Any:
    """What a bound ``str.format``/``format_map`` (sandboxed or not) gives: its result or its exception's type."""
    try:
        return fmt({"k": "v"}) if fmt.__name__ == "format_map" else fmt("v")
    except Exception as exc:  # noqa: BLE001 -- the exception's type is the outcome
        return type(exc)


def test_sandbox_shortcuts_answer_as_jinja2s_sandbox() -> None:
    """Every (object, name) lookup through our sandbox gives what jinja2's own immutable sandbox gives: values,
    unsafe-attribute refusals (message and exception) and undefined results, on every type the shortcuts cover and
    on hostile names (dunders, private names, mutators, ``format``, ``mro``)."""
    from jinja2.runtime import LoopContext, Undefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.utils import Namespace

    from app.engine.chat.jinja import _Sandbox

    assert _Sandbox.is_safe_attribute is ImmutableSandboxedEnvironment.is_safe_attribute  # the verdicts' premise
    ours, stock = _environment_pair()
    loop = LoopContext(["a", "b", "c"], Undefined)
    next(iter(loop))
    objects: list[Any] = ["héllo {0}", "{0.__class__}", "{k.__class__}", "", [1, 2], (1, 2), 3, 2.5, True, None,
                          {"role": "user", "keys": 1},
                          loop, Namespace(x=1, format="f", items=[1]), len, _environment_pair]
    names = sorted({n for o in objects for n in dir(o)} | {"role", "keys", "x", "missing", "format", "format_map",
                                                           "mro", "__class__", "__mro__", "_private", "index0",
                                                           "append", "pop", "clear", "update", "items"})
    for _ in range(2):  # the second pass answers from the remembered verdicts
        for obj in objects:
            for name in names:
                for lookup in ("getattr", "getitem"):
                    a = getattr(ours, lookup)(obj, name)
                    b = getattr(stock, lookup)(obj, name)
                    assert _same_answer(a, b), (obj, name, lookup, a, b)
    assert ours._verdicts  # the shortcut really ran


def _environment_pair() -> tuple[Any, Any]:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from app.engine.chat.jinja import _environment

    return _environment(), ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)


# ------------------------------------------------------------------------------------- counting = the parts


def hostile_conversations(seed: int, n: int, style: str, specials: list[str]) -> list[dict[str, Any]]:
    """Contents that start or end with spaces and newlines, role words, the framing's own text and specials,
    escape-marker lookalikes, characters that merge with the framing text around them, on top of the seeded set."""
    import random

    rng = random.Random(seed)
    edges = ["", " ", "  ", "\n", "\n\n", "\t", " \n", "\r\n", "\u00a0", "user", "assistant", "system", "model",
             "\n\nuser", ":", "'s", "123", "é", "\u0301", "😀", "<", ">", "|", "<|", "|>", MARK, MARK + "1" + MARK,
             MARK + "0" + MARK, "<think>", "</think>", "<tool_response>", "<start_of_turn>", *specials[:8]]
    out = conversations(seed, n, style)
    for c in out:
        for m in c["messages"]:
            if isinstance(m.get("content"), str) and rng.random() < 0.7:
                m["content"] = rng.choice(edges) + rng.choice(edges) + m["content"] + rng.choice(edges) + rng.choice(
                    edges)
    return out


@pytest.mark.parametrize("name", list(STYLES))
def test_framing_count_equals_counting_the_parts(name: str) -> None:
    """The framing's count (rendered string read directly where no caller text needed escaping) against the parts
    of ``frame``, counted and encoded, on hostile contents."""
    tokenizer = tokenizer_of(name)
    framing = TemplateFraming(template(name))
    convs = hostile_conversations(29, N, STYLES[name], sorted(specials_of(name), key=len, reverse=True))
    checked = direct = 0
    for c in convs:
        conv = parse_conversation(c["messages"], c["tools"])
        agp = c["add_generation_prompt"]
        try:
            parts = framing.frame(conv, add_generation_prompt=agp)
        except ChatInputError:
            with pytest.raises(ChatInputError):
                framing.count(tokenizer, conv, add_generation_prompt=agp)
            continue
        got = framing.count(tokenizer, conv, add_generation_prompt=agp)
        assert got == count_parts(tokenizer, parts) == len(tokenizer.encode_parts(list(parts))), c
        checked += 1
        direct += MARK not in framing.template.render_escaped(conv, add_generation_prompt=agp)
    assert checked >= N * 0.8 and 0 < direct < checked  # both paths ran


@pytest.mark.parametrize("names", [["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<pad>"],
                                   ["<|eot_id|>", "<|start_header_id|>", "<|a|>"], ["[INST]", "<s>", "</s>", "▁x"]])
def test_escaper_probe_never_misses(names: list[str]) -> None:
    """``may_hold`` may raise false alarms but never says no to a string holding a special token or the marker."""
    import random

    from app.engine.chat.jinja import _Escaper

    escaper = _Escaper(names)
    rng = random.Random(11)
    alphabet = [*names, *(n[:-1] for n in names), *(n[1:] for n in names), "<", ">", "|", "b", "os", "e", " ",
                "é", "日本", MARK, "x"]
    for _ in range(3000):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        holds = MARK in value or any(n in value for n in names)
        if holds:
            assert escaper.may_hold(value), value
        if not escaper.may_hold(value):
            assert escaper.escape(value) == value


@pytest.mark.parametrize("name", list(STYLES))
def test_marker_inside_a_lookalike_stays_caller_text(name: str) -> None:
    """Found by the chat fuzz (tests/engine/chat/fuzz.py): a ``<|…|>`` lookalike that is no special but holds the
    escape marker (``<|vision\\ue0001\\ue000_pad|>``) kept the marker unescaped, so unescaping turned the caller's
    characters into a special-token name (a wrong count) or refused the conversation."""
    tpl = template(name)
    tokenizer = tokenizer_of(name)
    texts = [f"<|vision{MARK}1{MARK}_pad|>", f"<|a{MARK}|>", f"<|{MARK}0{MARK}|> and {MARK}", f"<|x{MARK}2{MARK}|>"]
    for text in texts:
        conv = parse_conversation([{"role": "user", "content": text}])
        parts = tpl.frame(conv)
        assert parts.rendered() == tpl.render(conv)
        assert text in "".join(p for p in parts if isinstance(p, str))
        assert template_framing(name).count(tokenizer, conv) == len(tokenizer.encode_parts(list(parts)))


def test_gemma_mask_is_the_files_added_token() -> None:
    """Gemma 3's tokenizer.json lists ``<mask>`` (id 4) as an added token that is not special, so ``<mask>`` in
    caller text is that one token: as Hugging Face ``tokenizers`` reads the text, and as transformers' ids of the
    rendered prompt have it. transformers alone also counts it special (its Gemma tokenizer class defaults
    ``mask_token`` to ``<mask>``; the file does not name it), so its ``split_special_tokens`` ids split it. The
    service follows the file. Pinned both ways, so a change in either reference shows here."""
    from tests.engine.pipeline.reference import reference

    name = "gemma-3-27b-it"
    tokenizer = tokenizer_of(name)
    messages = [{"role": "user", "content": "fill <mask> in"}]
    conv = parse_conversation(messages)
    parts = template(name).frame(conv, add_generation_prompt=True)
    ids = tokenizer.encode_parts(list(parts))
    assert ids.count(4) == 1 and not tokenizer.is_special(4) and tokenizer.added_tokens["<mask>"] == 4
    text = next(p for p in parts if isinstance(p, str) and "<mask>" in p)
    assert 4 in reference("gemma3").encode(text, add_special_tokens=False).ids
    assert template_framing(name).count(tokenizer, conv, add_generation_prompt=True) == len(ids)
    _, items = ours_and_items(name, [{"messages": messages, "tools": None, "add_generation_prompt": True}])
    (ref,) = hf.run(name, TEMPLATES[name].text, items)
    assert ref["rendered"] == parts.rendered()
    assert ids == ref["ids"]
    assert 4 not in ref["parts_ids"] and len(ref["parts_ids"]) == len(ids) + 1  # " <", "mask", ">" for " ", 4
