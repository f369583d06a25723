"""(f) Llama 3: we follow plain tiktoken with Meta's pattern, NOT Meta's wrapper chunking.

Meta's ``Tokenizer.encode`` (llama_models/llama3/tokenizer.py) first cuts the input into 400,000-character chunks
and then cuts every run of more than 25,000 characters that are all ``str.isspace()`` or all not, and encodes the
pieces separately. On such input its ids differ from plain tiktoken. Our choice (documented in docs/exactness.md):
the ids of plain tiktoken over the whole text, so that a token count never depends on where a wrapper cut.

``meta_chunks`` is this test's own implementation of that rule, written from its description.
"""

from __future__ import annotations

import itertools
import random

from .reference import TALLY, ours, reference_encoding

META_MAX_CHARS = 400_000
META_MAX_RUN = 25_000


def meta_chunks(text: str, max_chars: int = META_MAX_CHARS, max_run: int = META_MAX_RUN) -> list[str]:
    """The substrings Meta's wrapper encodes one by one (their concatenation is ``text``).

    Within each ``max_chars`` chunk, a maximal run of same-kind characters (whitespace or not, by
    ``str.isspace``) longer than ``max_run`` is cut every ``max_run`` characters from the run's start.
    """
    out: list[str] = []
    for base in range(0, len(text), max_chars):
        chunk = text[base : base + max_chars]
        cuts: list[int] = []
        pos = 0
        for _, run in itertools.groupby(chunk, key=str.isspace):
            length = sum(1 for _ in run)
            cuts.extend(range(pos + max_run, pos + length, max_run))
            pos += length
        bounds = [0, *cuts, len(chunk)]
        out.extend(chunk[a:b] for a, b in itertools.pairwise(bounds))
    return out or [""]


def meta_encode(text: str) -> list[int]:
    """Ids as Meta's wrapper computes them (plain text, no specials): tiktoken on each of :func:`meta_chunks`."""
    ref = reference_encoding("llama3")
    return [i for part in meta_chunks(text) for i in ref.encode_ordinary(part)]


def test_meta_chunks_rule() -> None:
    assert meta_chunks("") == [""]
    assert meta_chunks("ab cd", max_run=2) == ["ab cd"]
    assert meta_chunks("abcde", max_run=2) == ["ab", "cd", "e"]
    assert meta_chunks("xx     yyy", max_run=2) == ["xx  ", "  ", " yy", "y"]
    assert meta_chunks("a" * 7, max_chars=3, max_run=100) == ["aaa", "aaa", "a"]
    text = "a" * 30_000 + " " * 26_000 + "b"
    parts = meta_chunks(text)
    assert "".join(parts) == text
    assert [len(p) for p in parts] == [25_000, 5_000 + 25_000, 1_000 + 1]


def test_long_letter_run_follows_plain_tiktoken(backend: str) -> None:
    """A 30,000-letter run: ours == plain tiktoken != Meta's chunked ids."""
    texts = [
        "b" + "a" * 29_999,  # the cut at 25,000 falls inside an 8-"a" token
        "example" * 4_286,  # 25,000 is not a multiple of 7
        "abc" * 10_000,
        "Llama " + "x" * 30_000 + " end",
    ]
    for text in texts:
        plain = reference_encoding("llama3").encode_ordinary(text)
        got = ours("llama3", backend).encode(text)
        assert got == plain
        assert got != meta_encode(text)
        TALLY.add(f"llama3/{backend}", "meta_chunking", 1, int(got != plain))


def test_aligned_runs_happen_to_agree(backend: str) -> None:
    """Where plain tiktoken already has a token boundary at the cut, the cut is invisible: ``"a" * 30_000`` is
    3,750 tokens of eight "a"s (25,000 is a multiple of 8); random letters make short tokens that often end there."""
    rng = random.Random(3)
    for text in ["a" * 30_000, "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(30_000))]:
        plain = reference_encoding("llama3").encode_ordinary(text)
        assert ours("llama3", backend).encode(text) == plain == meta_encode(text)


def test_long_whitespace_run_follows_plain_tiktoken(backend: str) -> None:
    text = "x" + " " * 30_001 + "y"
    plain = reference_encoding("llama3").encode_ordinary(text)
    assert ours("llama3", backend).encode(text) == plain
    assert plain != meta_encode(text)


def test_ordinary_text_all_three_agree(backend: str) -> None:
    """On text with no 25,000-character run (and under 400,000 characters) the wrapper changes nothing."""
    rng = random.Random(4)
    words = ["Hello", "world", "Llama", "日本語", "  ", "\n", "don't", "12345", "👍🏽", "Việt", "<|eot_id|>"]
    texts = [" ".join(rng.choice(words) for _ in range(n)) for n in (1, 10, 1000, 20_000)]
    texts.append("b" * 25_000)  # exactly at the limit: not cut
    for text in texts:
        assert meta_chunks(text) == [text]
        plain = reference_encoding("llama3").encode_ordinary(text)
        assert ours("llama3", backend).encode(text) == plain == meta_encode(text)
        TALLY.add(f"llama3/{backend}", "meta_chunking", 1, 0)
