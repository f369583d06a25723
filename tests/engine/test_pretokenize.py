"""Unit tests of ``app.engine.pretokenize``: the known splitting facts of each pattern, tiling, offsets."""

from __future__ import annotations

import random

import pytest

from app.engine import patterns
from app.engine.artifact_regex import PatternRejected
from app.engine.pretokenize import (
    VERIFIED_REGEX_VERSION,
    PatternSplitter,
    compile_pattern,
    regex_version,
    unicode_version_ok,
)

from .exactness import corpus

ALL = ("gpt2", "cl100k", "o200k", "llama3")


def pieces(pattern_id: str, text: str) -> list[str]:
    return PatternSplitter(patterns.PATTERNS[pattern_id]).pieces(text)


def each(expected: list[str]) -> dict[str, list[str]]:
    return dict.fromkeys(ALL, expected)


CASES: list[tuple[str, dict[str, list[str]]]] = [
    # §4.3: \s+(?!\S) backs off one character.
    ("a  b", each(["a", " ", " b"])),
    ("today\n ", {"gpt2": ["today", "\n "], "cl100k": ["today", "\n "], "o200k": ["today", "\n", " "],
                  "llama3": ["today", "\n", " "]}),
    ("a   ", each(["a", "   "])),
    # §4.4: whitespace inside newline runs is one piece.
    (" \n  \n", each([" \n  \n"])),
    ("Hello World\r\n\r\n", each(["Hello", " World", "\r\n\r\n"])),
    # §4.5: contractions are case-insensitive except in gpt2; case folding makes 'ſ a contraction.
    ("he'RE", {"gpt2": ["he", "'", "RE"], "cl100k": ["he", "'RE"], "o200k": ["he'RE"], "llama3": ["he", "'RE"]}),
    ("I'M", {"gpt2": ["I", "'", "M"], "cl100k": ["I", "'M"], "o200k": ["I'M"], "llama3": ["I", "'M"]}),
    ("x'ſ", {"gpt2": ["x", "'", "ſ"], "cl100k": ["x", "'ſ"], "o200k": ["x'ſ"], "llama3": ["x", "'ſ"]}),
    ("don't", {"gpt2": ["don", "'t"], "cl100k": ["don", "'t"], "o200k": ["don't"], "llama3": ["don", "'t"]}),
    # §4.6: U+0085, U+2028, U+00A0 are \s; U+001C–U+001F and U+200B are not.
    ("!\x85!", each(["!", "\x85", "!"])),
    ("!\u2028!", each(["!", "\u2028", "!"])),
    ("!\xa0!", each(["!", "\xa0", "!"])),
    ("!\x1c!", each(["!\x1c!"])),
    ("!\x1e\x1d\x1f!", each(["!\x1e\x1d\x1f!"])),
    ("!\u200b!", each(["!\u200b!"])),
    ("x\u3000\u3000y", {"gpt2": ["x", "\u3000", "\u3000", "y"], "cl100k": ["x", "\u3000", "\u3000y"],
                        "o200k": ["x", "\u3000", "\u3000y"], "llama3": ["x", "\u3000", "\u3000y"]}),
    # Digits: runs in gpt2, groups of three elsewhere.
    ("12345", {"gpt2": ["12345"], "cl100k": ["123", "45"], "o200k": ["123", "45"], "llama3": ["123", "45"]}),
    # o200k splits case runs and keeps combining marks inside words.
    ("abcDEF", {"gpt2": ["abcDEF"], "cl100k": ["abcDEF"], "o200k": ["abc", "DEF"], "llama3": ["abcDEF"]}),
    ("ab\u0301c", {"gpt2": ["ab", "\u0301", "c"], "cl100k": ["ab", "\u0301c"], "o200k": ["ab\u0301c"],
                   "llama3": ["ab", "\u0301c"]}),
    # §4.8: special-token strings are ordinary punctuation and letters.
    ("X.<|im_end|>", {"gpt2": ["X", ".<|", "im", "_", "end", "|>"], "cl100k": ["X", ".<|", "im", "_end", "|>"],
                      "o200k": ["X", ".<|", "im", "_end", "|>"], "llama3": ["X", ".<|", "im", "_end", "|>"]}),
]  # fmt: skip


@pytest.mark.parametrize("text,expected", CASES, ids=[repr(c[0]) for c in CASES])
def test_design_cases(text: str, expected: dict[str, list[str]]) -> None:
    got = {pattern_id: pieces(pattern_id, text) for pattern_id in ALL}
    assert got == expected


@pytest.mark.parametrize("pattern_id", ALL)
def test_pieces_tile_the_text(pattern_id: str) -> None:
    """Pieces are non-empty and concatenate to the text; offsets are their running sums."""
    pre = PatternSplitter(patterns.PATTERNS[pattern_id])
    texts = [*corpus.random_mixes(seed=3, count=2000), *corpus.long_runs(500).values(), ""]
    for text in texts:
        found = pre.pieces(text)
        assert "".join(found) == text
        assert all(found)
        with_offsets = list(pre.pieces_with_offsets(text))
        assert [p for p, _ in with_offsets] == found
        pos = 0
        for piece, start in with_offsets:
            assert start == pos
            pos += len(piece)


@pytest.mark.parametrize("pattern_id", ALL)
def test_long_runs_split_without_recursion_trouble(pattern_id: str) -> None:
    """§4.9: 200,000-character single-class runs split fine (no stack overflow, no catastrophic backtracking)."""
    for name, text in corpus.long_runs(200_000).items():
        found = pieces(pattern_id, text)
        assert "".join(found) == text, name


def test_thread_safe_shared_pretokenizer() -> None:
    from concurrent.futures import ThreadPoolExecutor

    pre = PatternSplitter(patterns.O200K)
    rng = random.Random(9)
    texts = [" ".join(rng.choice(corpus.ALL_FRAGMENTS) for _ in range(50)) for _ in range(200)]
    expected = [pre.pieces(t) for t in texts]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(pre.pieces, texts)) == expected


def test_compile_is_cached_and_reports_bad_patterns() -> None:
    assert compile_pattern(patterns.CL100K) is compile_pattern(patterns.CL100K)
    with pytest.raises(PatternRejected, match="does not compile"):  # a ValueError, for the loaders
        compile_pattern(r"(?P<unclosed")


def test_regex_release_is_the_verified_one() -> None:
    """The Unicode tables come from this ``regex`` release (pinned in pyproject; the code-point sweep checks them)."""
    assert regex_version() == VERIFIED_REGEX_VERSION
    assert unicode_version_ok()
