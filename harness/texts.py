"""Inputs for the family tests: hostile strings every family must survive and a seeded sample of real text."""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from functools import lru_cache

from .realtext import always_available

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
def real_documents() -> list[str]:
    """Every always-available real document (:func:`harness.realtext.always_available`), in its order."""
    return [d.text for d in always_available() if d.text]


def pieces(total: int, size: int = 10_000) -> list[str]:
    """About ``total`` UTF-8 bytes of real text in many languages and forms: consecutive pieces of at most ``size``
    bytes (cut at character boundaries), taken in turn from every real document, so that even a small ``total``
    mixes scripts. Deterministic."""
    cursors = [(d.encode("utf-8"), 0) for d in real_documents()]
    out: list[str] = []
    taken = 0
    while taken < total and cursors:
        kept = []
        for raw, at in cursors:
            if taken >= total:
                break
            piece = raw[at:at + size].decode("utf-8", "ignore")
            if piece:
                out.append(piece)
                taken += len(piece.encode("utf-8"))
            if at + size < len(raw):
                kept.append((raw, at + size))
        cursors = kept
    return out


def sample(n_docs: int, n_slices: int, *, seed: int, max_doc: int = 2000) -> list[str]:
    """``n_docs`` real documents (their first ``max_doc`` characters) and ``n_slices`` random slices of up to 300
    characters (seeded), after the hostile strings."""
    docs = real_documents()
    rng = random.Random(seed)
    picked = [d[:max_doc] for d in rng.sample(docs, min(n_docs, len(docs)))]
    for _ in range(n_slices):
        d = rng.choice(docs)
        i = rng.randrange(max(1, len(d) - 300))
        picked.append(d[i:i + rng.randrange(1, 300)])
    return [*HOSTILE, *picked]


def _cycle(unit: str) -> Callable[[int], str]:
    return lambda n: (unit * (n // len(unit) + 1))[:n]


def _b64(n: int) -> str:
    rng = random.Random(64)
    return base64.b64encode(rng.randbytes(n * 3 // 4 + 3)).decode("ascii")[:n]


#: Adversarial inputs for doubling tests: name -> (n -> a string of n characters).
HOSTILE_RUNS: dict[str, Callable[[int], str]] = {
    "a_run": lambda n: "a" * n,  # one giant letter run: one pre-token, worst case for BPE
    "caret_run": lambda n: "^" * n,  # one giant punctuation run
    "digits": _cycle("1234567890"),
    "spaces": lambda n: " " * n,
    "whitespace_mix": _cycle(" \t\n\r\n  "),
    "base64": _b64,
    "cjk_run": _cycle("\u4e00\u4e8c\u4e09\u56db\u4e94"),
}


#: Planes 4-13 hold no assigned character and planes 15-16 only private use (and the two non-characters that end
#: each plane): every code point of such a plane has the same Unicode properties, so its two ends and one in 97
#: stand for it (``tests/engine/test_native_scanner.py`` checks the uniformity against the ``regex`` tables).
UNIFORM_PLANES = frozenset({4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16})


def plane_sample(lo: int) -> list[int]:
    """The code points a sweep checks in the plane starting at ``lo``: all of them, or the first and last 256 and
    one in 97 between of a uniform plane (surrogates included: callers drop them where text cannot hold them)."""
    if lo >> 16 not in UNIFORM_PLANES:
        return list(range(lo, lo + 0x10000))
    return sorted({*range(lo, lo + 256), *range(lo + 256, lo + 0xFF00, 97), *range(lo + 0xFF00, lo + 0x10000)})


def swept_scalars(*, full: bool = False) -> tuple[int, ...]:
    """Every Unicode scalar value (surrogates excluded) with ``full``, else the uniform planes sampled as
    :func:`plane_sample` does (about 31% of them)."""
    if full:
        return tuple(c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    return tuple(c for lo in range(0, 0x110000, 0x10000) for c in plane_sample(lo) if not 0xD800 <= c <= 0xDFFF)
