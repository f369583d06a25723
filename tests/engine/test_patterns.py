"""Unit tests of ``app.engine.patterns``: the named expressions are the references' strings and need ``regex``."""

from __future__ import annotations

import re

import pytest
import regex
import tiktoken_ext.openai_public as openai_public

from app.engine import patterns
from app.engine.patterns import PATTERNS, resolve_pattern

#: Meta's Llama 3 ``pat_str`` (llama_models/llama3/tokenizer.py), verbatim.
META_LLAMA3 = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"""
    r"""\s+(?!\S)|\s+"""
)


def test_named_patterns() -> None:
    assert set(PATTERNS) == {"gpt2", "cl100k", "o200k", "llama3"}
    assert PATTERNS["gpt2"] is patterns.GPT2 and PATTERNS["llama3"] is patterns.LLAMA3


def test_gpt2_is_tiktokens_constant() -> None:
    assert patterns.GPT2 == openai_public.r50k_pat_str


def test_llama3_is_metas_string() -> None:
    assert patterns.LLAMA3 == META_LLAMA3


def test_o200k_last_alternatives_in_tiktokens_order() -> None:
    alternatives = patterns.O200K.split("|")
    assert alternatives[-5:] == [r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"]


@pytest.mark.parametrize("pattern_id", sorted(PATTERNS))
def test_patterns_compile_with_regex_but_not_re(pattern_id: str) -> None:
    """They use \\p{…} classes (and possessive quantifiers), which Python's ``re`` rejects."""
    regex.compile(PATTERNS[pattern_id])
    with pytest.raises(re.error):
        re.compile(PATTERNS[pattern_id])


def test_resolve_pattern() -> None:
    assert resolve_pattern("cl100k", None) == (patterns.CL100K, "cl100k")
    assert resolve_pattern(None, r"\w+|\s+") == (r"\w+|\s+", None)
    with pytest.raises(KeyError, match="known: cl100k, gpt2, llama3, o200k"):
        resolve_pattern("p50k", None)
    with pytest.raises(ValueError):
        resolve_pattern("gpt2", r"\w+")
    with pytest.raises(ValueError):
        resolve_pattern(None, None)
