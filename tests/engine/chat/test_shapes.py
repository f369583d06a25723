"""The shape memo of chat templates: its prompt is the template's own render or nothing.

Differential: the memo's output against a full render of the same conversation, for the bundled templates on
hostile plain conversations (edges that trim, empty and blank contents, the markers the templates look for, the
slot character, repeated shapes with other observations), and for small templates that inspect contents in every
way we could think of (the memo must decline or agree, never differ).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.engine.chat import ChatTemplate, load_templates, parse_conversation
from app.engine.chat.shapes import SLOT
from app.engine.store import bundled_store_dir

from .test_jinja import STYLES, specials_of

TEMPLATES = load_templates(bundled_store_dir())

EDGES = ["", " ", "  ", "\n", "\n\n", "\t", " \n", "\r\n", "\u00a0", "\u3000", "user", "assistant", "system", "model",
         "\n\nuser", ":", "'s", "é", "\u0301", "😀", "<", ">", "<|", "|>", "<think>", "</think>", "\n</think>\n",
         "<tool_response>", "</tool_response>", "<start_of_turn>", SLOT, SLOT + "0" + SLOT, "\ue000", "x"]
WORDS = ["hello", "world", "Grüße", "日本語", "a", "b", " the", "123", "don't", "\n- item", "<b>bold</b>"]


def _content(rng: random.Random) -> str:
    body = "".join(rng.choice(WORDS) + rng.choice([" ", "", "\n"]) for _ in range(rng.choice([0, 0, 1, 3, 8])))
    return rng.choice(EDGES) + rng.choice(EDGES) + body + rng.choice(EDGES) + rng.choice(EDGES)


def _plain_conversations(seed: int, n: int, style: str) -> list[tuple[list[dict[str, Any]], bool]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        msgs = [{"role": "system", "content": _content(rng)}] if rng.random() < 0.6 else []
        turns = rng.randint(1, 5)
        for i in range(turns):
            role = "user" if i % 2 == 0 else "assistant"
            if style == "qwen" and rng.random() < 0.15:
                role = rng.choice(["system", "user", "assistant"])
            msgs.append({"role": role, "content": _content(rng)})
        out.append((msgs, rng.random() < 0.8))
    return out


@pytest.mark.parametrize("name", list(STYLES))
def test_memo_equals_the_full_render(name: str) -> None:
    src = TEMPLATES[name]
    tpl = ChatTemplate(name, src.text, src.variables, specials_of(name))
    assert tpl.shapes.enabled, tpl.shapes.reason
    hits = declined = 0
    for msgs, agp in _plain_conversations(17, 1500, STYLES[name]):
        conv = parse_conversation(msgs)
        got = tpl.shapes.render(conv, agp)
        try:
            want = tpl.render(conv, add_generation_prompt=agp)  # unescaped: what the memo renders
        except Exception:  # noqa: BLE001 -- the template refused it: the memo must not answer
            assert got is None
            continue
        if got is None:
            declined += 1
            continue
        assert got == want, msgs
        hits += 1
        if not tpl._escaper.needed(conv):  # then the count path takes the memo's string
            assert tpl.render_escaped(conv, add_generation_prompt=agp) == want
            assert tpl.render_for_count(conv, add_generation_prompt=agp) == want
    assert hits > 400  # the memo really answered (declines: refusals, slot marks, <think> branches, many outcomes)


PROBES = [
    "{{ messages[0].content | length }}", "{% if messages[0].content == 'a' %}A{% endif %}",
    "{% if messages[0].content != 'a' %}N{% endif %}{{ messages[0].content }}", "{{ messages[0].content[0] }}",
    "{{ messages[0].content[1:] }}", "{{ messages[0].content | upper }}",
    "{% if messages[0].content in 'abc xyz' %}IN{% endif %}", "{% if messages[0].content not in 'abc' %}OUT{% endif %}",
    "{{ messages[0].content ~ 'x' }}", "{% set x %}{{ messages[0].content }}{% endset %}{{ x | length }}",
    "{{ messages[0].content * 2 }}", "{{ '%s|' % messages[0].content }}", "{{ messages[0].content.upper() }}",
    "{{ messages | tojson }}", "{{ messages[0] | tojson }}", "{{ messages[0].content.startswith('a') }}",
    "{{ messages[0].content.endswith(('a', 'c')) }}", "{% if messages[0].content %}T{% else %}F{% endif %}",
    "{{ messages[0].content | trim | length }}", "{{ (messages[0].content | trim) == '' }}",
    "{% if messages[0].content | trim %}T{% endif %}[{{ messages[0].content | trim }}]",
    "{% for c in messages[0].content %}{{ c }},{% endfor %}", "{{ 'abc'.startswith(messages[0].content) }}",
    "{{ messages[0].content is sequence }}{{ messages[0].content is string }}{{ messages[0].content is number }}",
    "{{ strftime_now('%Y') }}{{ messages[0].content }}", "{{ raise_exception('no') }}",
    "{% if 'a' in messages[0].content %}HAS{% endif %}{{ messages[0].content }}",
    "{{ messages[0].content | replace('a', 'b') }}", "{{ messages[0].content + messages[1].content }}",
    "{{ dict(a=messages[0].content) }}", "{{ namespace(a=messages[0].content).a }}", "{{ '\\ue001' }}",
    "{{ messages[0].content | trim('a') }}", "{{ messages[0].content | trim(messages[1].content) }}",
    "{{ messages | map(attribute='content') | join(',') }}", "{{ messages | selectattr('content') | list }}",
    "{{ messages[0].content | first }}", "{% if messages[0].content < 'b' %}LT{% endif %}",
    "{{ messages[0].content.split('a') }}", "{{ [messages[0].content] | sort }}",
    "{% if messages[0].content in ['a', 'abc'] %}L{% endif %}", "{{ {messages[0].content: 1} }}",
    "{{ messages[0].content | format }}", "{{ messages[0].content.__class__ }}", "{{ messages[0].content | e }}",
    "{{ lipsum(1) | length > 0 }}{{ messages[0].content }}", "{{ cycler('a', messages[0].content).next() }}",
    "{{ messages[0].content | string | length }}", "{{ messages[0].content | list }}",
    "{% set ns = namespace(c=messages[0].content) %}{{ ns.c }}", "{{ (messages[0].content + 'x') == 'ax' }}",
    "{{ ('x' + messages[0].content) | trim }}", "{{ messages[0].content | trim | trim }}|{{ messages[0].content }}",
    "{{ messages[0].content if messages[0].content | trim else 'EMPTY' }}", "{{ messages[0].content.strip() }}",
    "{{ messages[0]['content'] | wordcount }}", "{{ messages[0].content | tojson }}", "{{ messages | length }}",
    "{{ messages[0].content is in(['a']) }}", "{{ messages[0].content is eq('a') }}",
    "{% set f = messages[0].content.startswith %}{{ f('a') }}",
    "{{ messages[0].content.startswith }}", "{% set f = messages[0].content.startswith %}{{ f('a') }}{{ f }}",
    "{{ messages[0].content.startswith('a', 1) }}", "{{ messages[0].content.startswith(messages[1].content) }}",
    "{{ messages }}", "{{ messages[0] }}", "{{ messages[0].content | default('d') }}",
    "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}",
    "{% block b %}{{ messages[0].content }}{% endblock %}{% if self.b() == 'a' %}SAME{% endif %}",
    "{% for m in messages recursive %}{{ m.content }}{% endfor %}",
    "{% for m in [messages] recursive %}{% if loop(m) == 'ab' %}X{% endif %}{{ m.content }}{% endfor %}",
]
VALUES = ["a", "abc", "", " ", " a ", "A", "b", "ab", "x" + SLOT, "c", "\n", "a\n", "xyz"]


@pytest.mark.parametrize("source", PROBES)
def test_memo_declines_or_agrees_on_inspecting_templates(source: str) -> None:
    tpl = ChatTemplate("probe", source, {}, [])
    rng = random.Random(source)
    answered = 0
    for _ in range(60):
        msgs = [{"role": "user", "content": rng.choice(VALUES)}, {"role": "assistant", "content": rng.choice(VALUES)}]
        conv = parse_conversation(msgs)
        got = tpl.shapes.render(conv, True)
        try:
            want = tpl.render(conv)
        except Exception:  # noqa: BLE001 -- a refusal: the memo must not have answered
            assert got is None, (source, msgs)
            continue
        if "strftime_now" in source or "lipsum" in source:
            assert got is None
        if got is not None:
            assert got == want, (source, msgs, got, want)
            answered += 1
    if source in ("{% if messages[0].content %}T{% else %}F{% endif %}", "{{ messages | length }}",
                  "{% set f = messages[0].content.startswith %}{{ f('a') }}",
                  "{{ messages[0].content + messages[1].content }}", "{{ messages[0].content | trim('a') }}"):
        assert answered > 0  # what the memo does cover, it answers


def test_memo_under_threads_gives_the_single_threaded_counts() -> None:
    """Eight threads learning and reusing shapes at once on one template: the counts of a fresh template's memo,
    counted one conversation at a time, and of the full parts path."""
    from concurrent.futures import ThreadPoolExecutor

    from app.engine import get_tokenizer
    from app.engine.chat import count_parts
    from app.engine.chat.framings import TemplateFraming

    name = "llama-3.1-8b-instruct"
    src = TEMPLATES[name]
    tokenizer = get_tokenizer("llama3")
    convs = [(parse_conversation(m), agp) for m, agp in _plain_conversations(23, 400, "llama")]
    shared = TemplateFraming(ChatTemplate(name, src.text, src.variables, tokenizer.special_tokens))

    def count(item: tuple[Any, bool]) -> int:
        return shared.count(tokenizer, item[0], add_generation_prompt=item[1])

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(count, convs * 3))
    alone = TemplateFraming(ChatTemplate(name, src.text, src.variables, tokenizer.special_tokens))
    want = [count_parts(tokenizer, alone.frame(c, add_generation_prompt=agp)) for c, agp in convs]
    assert got == want * 3


def _long_shape(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """``n`` messages alternating user/assistant runs of random lengths: a new role sequence each call."""
    msgs, role = [], "user"
    while len(msgs) < n:
        for _ in range(rng.randint(1, 3)):
            msgs.append({"role": role, "content": f"m{len(msgs)}"})
        role = "assistant" if role == "user" else "user"
    return msgs[:n]


def test_memo_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Distinct 1,024-message role sequences (hundreds of kilobytes of memo each) stop being learnt once the memo
    holds its byte budget (lowered to 2 MiB here to keep the test short): what it keeps stays within that budget
    (measured with tracemalloc), and its answers are still the template's render."""
    import tracemalloc

    from app.engine.chat import shapes

    name = "llama-3.1-8b-instruct"  # learns any role sequence (Qwen3's declines long ones, Gemma 3's needs turns)
    budget = 2 * 2**20
    monkeypatch.setattr(shapes, "MAX_MEMO_BYTES", budget, raising=False)
    src = TEMPLATES[name]
    tpl = ChatTemplate(name, src.text, src.variables, specials_of(name))
    assert tpl.shapes.enabled, tpl.shapes.reason
    rng = random.Random(5)
    convs = [parse_conversation(_long_shape(rng, 1024)) for _ in range(14)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        learnt = [tpl.shapes.render(conv, True) is not None for conv in convs]  # the prompts are not kept
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert learnt[0]  # the first shapes are learnt
    for conv in (convs[0], convs[-1]):
        out = tpl.shapes.render(conv, True)
        assert out is None or out == tpl.render(conv, add_generation_prompt=True)
    assert kept <= budget * 1.25, f"{kept / 2**20:.1f} MiB kept for a {budget / 2**20:.0f} MiB budget"
