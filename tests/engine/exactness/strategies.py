"""Hypothesis strategies for the exactness suite: full Unicode, and text biased to the classes that break tokenizers."""

from __future__ import annotations

from hypothesis import strategies as st

from . import corpus

#: Every code point, lone surrogates included (both sides replace them with U+FFFD).
any_char = st.characters(exclude_categories=())
#: Every Unicode scalar value (valid text).
scalar_char = st.characters(exclude_categories=["Cs"])

_TRICKY_CHARS = (
    " \t\n\r\x0b\x0c\x85\u00a0\u1680\u2000\u2028\u2029\u202f\u205f\u3000\x1c\x1d\x1e\x1f\x00\x7f"
    "'’sStTlLvVeErRmMdDſKkİı"
    "aAzZ0159٣१𝟙½²Ⅻ"
    '.,!?/\\-_<>|^$#@&*()[]{}"`~'
    "\u0301\u0308\u20e3\u200d\u200b\ufe0f\u034f\u093f\u094d\u0e33"
    "ǅǈʰªµßΣς日本語한ก\u0627\u05d0न👍🏽👨\U0001f3fb\U000e0001\ue000\U0010ffff\ufffd"
)
#: Characters from the tricky classes (whitespace kinds, contraction letters and their case folds, digits of
#: several scripts, combining marks, joiners, Lt/Lm letters, emoji parts, controls).
tricky_char = st.sampled_from(_TRICKY_CHARS)

#: Whole hostile fragments (contractions, special-token strings, CRLF runs, emoji sequences, …).
fragment = st.sampled_from(corpus.ALL_FRAGMENTS)


def valid_text(max_size: int = 60) -> st.SearchStrategy[str]:
    """Valid Unicode text: full range, tricky characters, and concatenated fragments, mixed."""
    piece = st.one_of(
        st.text(scalar_char, min_size=1, max_size=8),
        st.text(tricky_char, min_size=1, max_size=8),
        fragment,
        st.builds(lambda c, n: c * n, tricky_char, st.integers(1, 40)),
    )
    return st.lists(piece, max_size=max(1, max_size // 6)).map("".join)


def any_text(max_size: int = 60) -> st.SearchStrategy[str]:
    """Like :func:`valid_text` but lone surrogates may appear anywhere."""
    return st.one_of(
        st.text(any_char, max_size=max_size),
        st.lists(st.one_of(valid_text(12), st.text(any_char, min_size=1, max_size=4)), max_size=6).map("".join),
    )
