"""Unit tests of ``app.engine.patterns``: the named expressions are the references' strings and need ``regex``."""

from __future__ import annotations

import json
import lzma
import re
from pathlib import Path

import mistral_common
import pytest
import regex
import tiktoken_ext.openai_public as openai_public

import tokenizers_store
from app.engine import patterns
from app.engine.patterns import PATTERNS, resolve_pattern

#: Meta's Llama 3 ``pat_str`` (llama_models/llama3/tokenizer.py), verbatim.
META_LLAMA3 = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"""
    r"""\s+(?!\S)|\s+"""
)


def test_named_patterns() -> None:
    assert set(PATTERNS) == {"gpt2", "cl100k", "o200k", "llama3", "qwen2", "tekken"}
    assert PATTERNS["gpt2"] is patterns.GPT2 and PATTERNS["llama3"] is patterns.LLAMA3


def test_gpt2_is_tiktokens_constant() -> None:
    assert patterns.GPT2 == openai_public.r50k_pat_str


def test_llama3_is_metas_string() -> None:
    assert patterns.LLAMA3 == META_LLAMA3


def test_qwen2_is_llama3_with_single_digits() -> None:
    """Qwen2/2.5/3 ``tokenizer.json`` files split with Llama 3's expression, ``\\p{N}`` instead of ``\\p{N}{1,3}``
    (the bundled file's own string is compared by the fast-path tests)."""
    assert patterns.QWEN2 == META_LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
    assert patterns.QWEN2 != patterns.LLAMA3


def test_tekken_is_the_files_pattern_and_o200k_without_contractions_with_single_digits() -> None:
    """Every tekken file ``mistral-common`` ships, and the bundled one, split with :data:`patterns.TEKKEN`."""
    files = sorted((Path(mistral_common.__file__).parent / "data").glob("tekken_*.json"))
    assert files
    for path in files:
        assert json.loads(path.read_text(encoding="utf-8"))["config"]["pattern"] == patterns.TEKKEN, path.name
    with lzma.open(Path(tokenizers_store.__file__).parent / "mistral-nemo.tekken.json.xz") as f:
        assert json.load(f)["config"]["pattern"] == patterns.TEKKEN
    o200k_without_contractions = patterns.O200K.replace("(?i:'s|'t|'re|'ve|'m|'ll|'d)?", "")
    assert patterns.TEKKEN == o200k_without_contractions.replace(r"\p{N}{1,3}", r"\p{N}")


def test_split_sequences_compile_and_are_not_named_patterns() -> None:
    for sources in patterns.SPLIT_SEQUENCES.values():
        for source in sources:
            regex.compile(source)
    assert patterns.SPLIT_SEQUENCES["deepseek_v3"] is patterns.DEEPSEEK_V3_SPLITS
    assert not set(patterns.SPLIT_SEQUENCES) & set(PATTERNS)


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
    with pytest.raises(KeyError, match="known: cl100k, gpt2, llama3, o200k, qwen2, tekken"):
        resolve_pattern("p50k", None)
    with pytest.raises(ValueError):
        resolve_pattern("gpt2", r"\w+")
    with pytest.raises(ValueError):
        resolve_pattern(None, None)
