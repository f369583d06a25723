"""A sampled, seeded slice of the grammar fuzz campaign (:mod:`.fuzz`, :mod:`.grammar`) in the default suite:
a fixed number of grammar strings per tokenizer and backend against tiktoken / Hugging Face ``tokenizers``, the
lone-surrogate rule of both families, and the shrinker the campaign reports with."""

from __future__ import annotations

import random

import pytest

from app.engine import get_tokenizer
from app.engine.encoding import scrub_surrogates

from . import fuzz, grammar
from .reference import TALLY

#: Strings per tokenizer and backend (the long campaign runs far more: ``python -m tests.engine.exactness.fuzz``).
N = 2500
SEED = 20261201


@pytest.fixture(scope="module")
def strings() -> list[str]:
    return fuzz.batch(random.Random(SEED), N)


@pytest.mark.parametrize("name", fuzz.NAMES)
def test_grammar_strings_equal_the_reference(name: str, backend: str, strings: list[str]) -> None:
    ref = fuzz.reference_encoder(name)
    encode, count = fuzz.ours_encoder(name, backend)
    bad = []
    for text in strings:
        want = ref(text)
        got = encode(text)
        if got != want or count(text) != len(want):
            bad.append(text)
    TALLY.add(f"{name}/{backend}", "grammar_fuzz", len(strings), len(bad))
    if bad:
        repro = fuzz.shrink(bad[0], lambda s: fuzz.differs(encode, count, ref, s))
        pytest.fail(f"{name}/{backend}: {len(bad)} of {len(strings)} grammar strings differ; minimal repro "
                    f"{repro!r}: ours {encode(repro)} reference {ref(repro)}")


def test_the_grammar_covers_its_productions(strings: list[str]) -> None:
    """The sample really holds what the campaign is for (so a grammar edit cannot quietly drop a family)."""
    blob = "".join(strings)
    for needle in ["'", "\r\n", "\x0b", "\x0c", "\x85", "\u00a0", "\u2028", "\u3000", "\u200d", "<|", "1234"]:
        assert needle in blob, repr(needle)
    assert any(len(s) > 1000 for s in strings)
    assert 0.02 < sum(scrub_surrogates(s) != s for s in strings) / len(strings) < 0.1
    assert list(fuzz.batch(random.Random(SEED), 5)) == strings[:5]  # seeded


@pytest.mark.parametrize("name", fuzz.NAMES)
def test_lone_surrogates_follow_the_documented_rule(name: str, backend: str) -> None:
    """Lone surrogates become U+FFFD before encoding (tiktoken does the same itself; Hugging Face refuses such a
    string outright, so its reference is the scrubbed text); ours never raises."""
    rng = random.Random(SEED + 1)
    tok = get_tokenizer(name, backend=backend)
    ref = fuzz.reference_encoder(name)
    for _ in range(150):
        text = grammar.surrogate_text(rng)
        clean = scrub_surrogates(text)
        assert clean != text
        ids = tok.encode(text)
        assert ids == tok.encode(clean) == ref(text)
        assert tok.count(text) == len(ids)


def test_the_references_disagree_on_raw_surrogates() -> None:
    """The evidence behind the rule's two reference shapes: tiktoken scrubs, Hugging Face raises."""
    from tests.engine.pipeline.reference import reference

    from .reference import reference_encoding

    text = "a\ud800b"
    assert reference_encoding("cl100k_base").encode_ordinary(text) == reference_encoding(
        "cl100k_base").encode_ordinary("a\ufffdb")
    with pytest.raises(TypeError):
        reference("qwen3").encode(text, add_special_tokens=False)


def test_shrink_finds_a_minimal_repro() -> None:
    def failing(s: str) -> bool:
        return "'S" in s and "\u2029" in s

    text = "hello world \u2029 and more 'S things 123 " * 3
    assert fuzz.shrink(text, failing) in ("\u2029'S", "'S\u2029")
    assert fuzz.shrink("xyz", lambda s: "y" in s) == "y"
