"""Named pre-tokenizer patterns, exactly as the reference implementations define them.

The strings are the ones tiktoken (``tiktoken_ext/openai_public.py``), Meta (``llama_models/llama3/tokenizer.py``)
and Mistral's tekken files use; the test suite compares them with the reference sources and sweeps every code
point through both. They need the third-party ``regex`` module (possessive quantifiers, Unicode property classes,
Unicode ``\\s``); Python's ``re`` would silently give different pieces.
"""

from __future__ import annotations

#: GPT-2 / r50k_base / p50k_base (tiktoken's possessive form, same splits as the original GPT-2 regex).
GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

#: cl100k_base.
CL100K = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)

#: o200k_base and o200k_harmony.
O200K = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

#: Llama 3 / 3.1 / 3.2 / 3.3 (Meta's ``Tokenizer.pat_str``).
LLAMA3 = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"""
    r"""\s+(?!\S)|\s+"""
)

#: Qwen2 / Qwen2.5 / Qwen3 (the ``Split`` pre-tokenizer of their ``tokenizer.json``): Llama 3's with single digits.
QWEN2 = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"""
    r"""\s+(?!\S)|\s+"""
)

#: Mistral tekken (the ``config.pattern`` of ``mistral-common``'s ``tekken_240718.json`` and ``tekken_240911.json``):
#: o200k's without the contraction suffixes and with single digits.
TEKKEN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*""",
        r"""\p{N}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

#: Pattern id -> regular expression. Manifest entries name a pattern by one of these ids (``"pattern"``) or carry
#: their own expression (``"pattern_regex"``, for trained tokenizers with a custom pre-tokenizer).
PATTERNS: dict[str, str] = {
    "gpt2": GPT2,
    "cl100k": CL100K,
    "o200k": O200K,
    "llama3": LLAMA3,
    "qwen2": QWEN2,
    "tekken": TEKKEN,
}

#: DeepSeek-V3: its ``tokenizer.json`` splits three times in turn (Hugging Face ``Split``, ``Isolated``; each regex
#: runs on every piece of the previous one, unmatched stretches kept): digits in groups of up to three, runs of CJK
#: ideographs/kana, then the main expression. Not one regex: :data:`SPLIT_SEQUENCES` holds it, not :data:`PATTERNS`.
DEEPSEEK_V3_SPLITS: tuple[str, ...] = (
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    (
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
        "[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
        " ?[\\p{P}\\p{S}]+[\r\n]*|"
        "\\s*[\r\n]+|"
        "\\s+(?!\\S)|"
        "\\s+"
    ),
)

#: Split-sequence id -> its regexes in order (a native scanner runs the whole sequence as one pass).
SPLIT_SEQUENCES: dict[str, tuple[str, ...]] = {"deepseek_v3": DEEPSEEK_V3_SPLITS}


def resolve_pattern(pattern_id: str | None, pattern_regex: str | None) -> tuple[str, str | None]:
    """Return ``(regex, pattern_id)`` for a manifest's pattern fields.

    Exactly one of the two must be given. Raises ``KeyError`` for an unknown id and ``ValueError`` when both or
    neither are given.
    """
    if (pattern_id is None) == (pattern_regex is None):
        raise ValueError("give exactly one of 'pattern' (a named pattern) and 'pattern_regex'")
    if pattern_id is not None:
        if pattern_id not in PATTERNS:
            raise KeyError(f"unknown pattern id {pattern_id!r}; known: {', '.join(sorted(PATTERNS))}")
        return PATTERNS[pattern_id], pattern_id
    assert pattern_regex is not None
    return pattern_regex, None
