"""Inputs for the family tests: hostile strings every family must survive and a seeded sample of real text."""

from __future__ import annotations

import random
from functools import lru_cache

from tests.engine.exactness.realtext import always_available

#: Spacing, ``▁`` itself, NFKC-changing characters, accents and CJK, long words, control characters, scripts
#: that need byte fallback, emoji sequences.
HOSTILE = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "hello", " hello", "hello ", "  hello  world  ", "a  b   c",
    "\u2581", "\u2581\u2581 x", "a\u2581b", " \u2581 ", "\u2581hello\u2581", "▁▁▁▁",
    "ｆｕｌｌｗｉｄｔｈ", "ﬁﬂ", "①②③", "㎏㍱", "Ǆǅǆ", "ﾊﾝｶｸｶﾀｶﾅ", "\u3000a\u3000b\u3000", "x\u00a0y", "Å Å Å",
    "é", "e\u0301", "ｅ\u0301", "Crème brûlée à la café", "ÀÉÎÕÜ ÇÑ", "Straße ΣΊΣΥΦΟΣ", "İstanbul ıI",
    "日本語のテキスト", "中文字符和標點。", "한국어 텍스트 ㄱㄴ", "\u1100\u1161\u11a8", "𠀀𪜀𫝀\U0002b820\U0002b920",
    "x" * 101, "y" * 250, "supercalifragilisticexpialidocious" * 4, "a" * 1000,
    "\x00\x01\x02 text \x7f\x1b[0m", "zero\u200bwidth\u200djoiner\ufeff", "\u00ad soft hyphen", "\r\n\r\n",
    "ትግርኛ ᐃᓄᒃᑎᑐᑦ ꦗꦮ 𐌰𐌱", "\U0001F9D1\u200d\U0001F4BB \U0001F1FA\U0001F1F8 👍🏽", "\u0e01\u0e33\u0e44\u0e17\u0e22",
    "ק\u05b8מ\u05b7ץ", "🙂" * 20, "don't won't I'm we're 's", "12345678901234567890", "3.14159 -42 1e10",
    "[INST] hi [/INST]", "[REF]a[REF] b", "a  [REF]  b", "<0x41><0x0A>", "tab\there",
]

#: Strings that are special tokens of some bundled family (kept out of the reference comparisons where the
#: reference would match them as tokens; the engine never does, which its own tests check).
SPECIAL_STRINGS = ("<s>", "</s>", "<unk>", "<pad>", "<mask>", "[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]",
                   "<|endoftext|>", "<|im_start|>", "<|im_end|>", "[INST]", "[/INST]")


@lru_cache(maxsize=1)
def _documents() -> list[str]:
    return [d.text for d in always_available() if d.text]


def sample(n_docs: int, n_slices: int, *, seed: int, max_doc: int = 2000) -> list[str]:
    """``n_docs`` real documents (their first ``max_doc`` characters) and ``n_slices`` random slices of up to 300
    characters (seeded), after the hostile strings."""
    docs = _documents()
    rng = random.Random(seed)
    picked = [d[:max_doc] for d in rng.sample(docs, min(n_docs, len(docs)))]
    for _ in range(n_slices):
        d = rng.choice(docs)
        i = rng.randrange(max(1, len(d) - 300))
        picked.append(d[i:i + rng.randrange(1, 300)])
    return [*HOSTILE, *picked]
