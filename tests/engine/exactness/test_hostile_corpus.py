"""(a) The generated hostile corpus (every known edge case) through our engine and tiktoken: ids must be identical."""

from __future__ import annotations

import pytest

from . import corpus
from .reference import assert_same, compare, ours, reference_encoding


def test_fragment_pairs(tokenizer: str, backend: str) -> None:
    """Every ordered pair of the ~320 hostile fragments (whitespace, contractions, digits, emoji, scripts, …)."""
    assert assert_same(tokenizer, corpus.pairs(), source="pairs", backend=backend) > 100_000


def test_glued_triples(tokenizer: str, backend: str) -> None:
    """Words/scripts/digits glued to contractions, special-token strings, whitespace and combining marks."""
    assert assert_same(tokenizer, corpus.glued_triples(), source="triples", backend=backend) > 20_000


def test_exhaustive_small_alphabets(tokenizer: str, backend: str) -> None:
    """Every short string over alphabets that stress \\s+(?!\\S), \\r\\n runs, contractions with ſ, '/' runs."""
    assert assert_same(tokenizer, corpus.exhaustive(), source="exhaustive", backend=backend) > 40_000


def test_random_mixes(tokenizer: str, backend: str) -> None:
    """Seeded random mixes of fragments, random code points from tricky ranges and whitespace runs."""
    assert (
        assert_same(tokenizer, corpus.random_mixes(seed=20260611, count=20_000), source="random", backend=backend)
        == 20_000
    )


def test_lone_surrogates(tokenizer: str, backend: str) -> None:
    """Lone surrogates: both sides replace them with U+FFFD (tiktoken's rule) and then agree."""
    texts = list(corpus.surrogate_strings())
    assert assert_same(tokenizer, texts, source="surrogates", backend=backend) == len(texts)
    enc = ours(tokenizer, backend)
    assert enc.encode("a\ud800b") == enc.encode("a\ufffdb")
    assert enc.encode("\ud83d\ude00") == enc.encode("\U0001f600")


def test_special_strings_glued(tokenizer: str, backend: str) -> None:
    """Special-token strings glued to words and punctuation (``X.<|im_end|>``) are plain text on both sides."""
    texts = [
        f"{left}{special}{right}"
        for special in corpus.SPECIALS
        for left in ("", "X.", "a", " ", "\n", "'s", "日本", "1")
        for right in ("", ".", "x", " ", "\n", "<|endoftext|>")
    ]
    assert assert_same(tokenizer, texts, source="specials", backend=backend) == len(texts)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 63, 64, 65, 127, 128, 129, 130, 1000, 4097])
def test_long_runs_moderate(tokenizer: str, backend: str, n: int) -> None:
    """Single-class runs around the cache (64 chars) and heap (128 bytes) thresholds and a few thousand long."""
    texts = list(corpus.long_runs(n).values())
    assert assert_same(tokenizer, texts, source="long_runs", backend=backend) == len(texts)


@pytest.mark.slow
def test_long_runs_200k(tokenizer: str, backend: str) -> None:
    """200,000-character runs: "a", "^", digits, whitespace, newlines, base64, random letters, CJK, NUL, …

    The pure-Python engine takes 50,000-character runs: the same code paths (every threshold is under 200
    characters) in a quarter of its time."""
    texts = list(corpus.long_runs(200_000 if backend == "native" else 50_000).values())
    assert assert_same(tokenizer, texts, source="long_runs", backend=backend) == len(texts)


def test_batch_with_threads_equals_tiktoken_batch(tokenizer: str, backend: str) -> None:
    """encode_batch over a thread pool gives tiktoken's encode_ordinary_batch, in order."""
    texts = list(corpus.random_mixes(seed=99, count=400))
    got = ours(tokenizer, backend).encode_batch(texts, num_threads=2)
    want = reference_encoding(tokenizer).encode_ordinary_batch(texts, num_threads=2)
    bad = [t for t, a, b in zip(texts, got, want, strict=True) if a != b]
    assert not bad, bad[:3]
    enc = ours(tokenizer, backend)
    assert not compare(tokenizer, texts, source="batch", backend=backend, encode=lambda t: enc.encode_batch([t])[0])


def test_python_engine_without_cache_is_identical(tokenizer: str) -> None:
    """The pre-token cache changes nothing: a cache-less Python engine gives the reference ids too."""
    from app.engine import RankBPETokenizer, get_store

    uncached = RankBPETokenizer.from_spec(get_store().spec(tokenizer), cache_size=0, backend="python")
    texts = [*corpus.random_mixes(seed=77, count=2000), *corpus.long_runs(100).values()]
    bad = compare(tokenizer, texts, source="python_no_cache", backend="python", encode=uncached.encode)
    assert not bad, bad[0].describe()
    assert uncached.cache_stats().size == 0


def test_encode_parts_equals_tiktoken_per_part(tokenizer: str, backend: str) -> None:
    """``encode_parts`` = each text part as tiktoken's encode_ordinary, special parts as their ids, in order."""
    from app.engine import Special

    enc, ref = ours(tokenizer, backend), reference_encoding(tokenizer)
    specials = list(enc.special_tokens)
    rng_texts = list(corpus.random_mixes(seed=8, count=200))
    for i in range(0, len(rng_texts), 4):
        texts = rng_texts[i : i + 4]
        special = specials[i % len(specials)]
        parts = [texts[0], Special(special), *texts[1:]]
        want = [*ref.encode_ordinary(texts[0]), enc.special_tokens[special]]
        for text in texts[1:]:
            want += ref.encode_ordinary(text)
        assert enc.encode_parts(parts) == want
