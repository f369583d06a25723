"""A weighted generative grammar of hostile strings for the byte-level BPE and tokenizer.json families.

Each production draws a fragment aimed at one part of the split patterns or the merges: contractions in every case,
digit runs of every length, runs of every Unicode whitespace (``\\r\\n``, ``\\v``, ``\\f``, U+0085, U+00A0,
U+2000–200A, U+2028/2029, U+3000 …) before or after letters and at the end of text, letters of every general
category (Lu Ll Lt Lm Lo and the marks; o200k's case-aware pattern), CJK/Thai/Arabic/Devanagari, emoji with ZWJ,
skin tones and variation selectors, controls and format characters, punctuation runs with newlines, very long words
and long runs of one character (the pre-token cache and the long-word paths), strings that look like special
tokens, and the fixed hostile fragments of :mod:`.corpus`. A string joins 1–12 productions.

Everything is drawn from one ``random.Random``: the same seed gives the same strings. :func:`text` never yields a
lone surrogate; :func:`surrogate_text` always holds at least one.
"""

from __future__ import annotations

import random
import sys
import unicodedata
from collections.abc import Callable, Iterator
from functools import cache

from .corpus import ALL_FRAGMENTS, CONTRACTION_STEMS, SPECIALS

#: Every character Python calls whitespace, plus the two the patterns treat apart (``\r\n`` is one production).
WHITESPACE_CHARS = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()] + ["\u200b", "\u180e", "\ufeff"]
NEWLINES = ["\n", "\r", "\r\n", "\n\n", "\r\n\r\n", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"]

#: General categories drawn as "letters" and their neighbours.
CATEGORIES = ("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf",
              "Po", "Sm", "Sc", "Sk", "So", "Zs", "Cc", "Cf", "Co", "Cn")

#: Special-token lookalikes beyond :data:`corpus.SPECIALS`: every family's markers, and near misses.
SPECIAL_LIKE = [
    *SPECIALS, "<|endofprompt|>", "<|fim_suffix|>", "<|im_sep|>", "<|return|>", "<|call|>", "<|constrain|>",
    "<|end_header_id|>", "<|eom_id|>", "<|end_of_text|>", "<|finetune_right_pad_id|>", "<|step_id|>",
    "<|reserved_special_token_250|>", "<|reserved_200000|>", "<|startoftext|>", "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜tool▁calls▁begin｜>", "<think>", "</think>",
    "<tool_call>", "</tool_call>", "<|vision_start|>", "<|box_start|>", "<|quad_end|>", "<|object_ref_start|>",
    "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[@BOS@]", "<start_of_image>",
    "<image_soft_token>", "<unused0>", "<unused99>", "[INST]", "[/INST]", "<s>", "</s>", "<|ENDOFTEXT|>",
    "< |endoftext|>", "<|endoftext|", "|endoftext|>", "<<|endoftext|>>", "<|endoftext|><|endoftext|>",
]  # fmt: skip

EMOJI_BASES = ["👍", "👨", "👩", "🧑", "👧", "🏳", "❤", "☺", "✌", "🤷", "🫶", "🐻", "⛹", "🏃", "😀", "🇯", "🇵"]
EMOJI_MODIFIERS = ["\U0001f3fb", "\U0001f3fc", "\U0001f3fd", "\U0001f3fe", "\U0001f3ff", "\ufe0f", "\ufe0e",
                   "\u20e3", "\u200d", "\U000e0067", "\U000e007f"]
SCRIPT_RANGES = [
    (0x4E00, 0x9FFF), (0x3040, 0x309F), (0x30A0, 0x30FF), (0xAC00, 0xD7A3), (0x0E00, 0x0E7F), (0x0600, 0x06FF),
    (0x0900, 0x097F), (0x0590, 0x05FF), (0x0400, 0x04FF), (0x0370, 0x03FF), (0x20000, 0x2A6DF), (0xFF00, 0xFFEF),
    (0x1780, 0x17FF), (0x0B80, 0x0BFF), (0x10A0, 0x10FF), (0x1200, 0x137F),
]  # fmt: skip
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["…", "—", "–", "«", "»", "“", "”", "‘", "’", "、", "。",
                                                      "！", "？", "؟", "।", "·", "•", "§", "¶", "†", "‰", "¿"]


@cache
def category_pools() -> dict[str, list[int]]:
    """The code points of each of :data:`CATEGORIES` (Python's Unicode tables; surrogates excluded)."""
    pools: dict[str, list[int]] = {c: [] for c in CATEGORIES}
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        pool = pools.get(unicodedata.category(chr(cp)))
        if pool is not None:
            pool.append(cp)
    return pools


def _length(rng: random.Random, hi: int) -> int:
    """A length in 1..``hi``, small ones far more likely (log-uniform)."""
    return max(1, min(hi, int(2 ** (rng.random() * hi.bit_length()))))


def _cat(rng: random.Random, categories: tuple[str, ...], n: int) -> str:
    pools = category_pools()
    return "".join(chr(rng.choice(pools[rng.choice(categories)])) for _ in range(n))


def contraction(rng: random.Random) -> str:
    stem = rng.choice(CONTRACTION_STEMS + ["ve", "ll", "re"])
    cased = "".join(c.upper() if rng.random() < 0.5 else c for c in stem)
    if rng.random() < 0.1:
        cased = cased.replace("s", "ſ").replace("k", "\u212a")
    apostrophe = rng.choice(["'"] * 8 + ["’", "`", "''"])
    before = rng.choice(["", "", "x", "I", "don", "DON", "we", "1", " ", "日本", "é", "'"])
    after = rng.choice(["", "", "", "x", " ", "'", "s", "\n", "1"])
    return before + apostrophe + cased + after


def digits(rng: random.Random) -> str:
    n = _length(rng, 40)
    r = rng.random()
    if r < 0.6:
        run = "".join(rng.choice("0123456789") for _ in range(n))
    elif r < 0.8:
        run = _cat(rng, ("Nd",), n)
    else:
        run = _cat(rng, ("Nd", "Nl", "No"), n)
    sep = rng.choice(["", "", "", ",", ".", " ", "_", "-", "e"])
    if sep and rng.random() < 0.5:
        run += sep + "".join(rng.choice("0123456789") for _ in range(_length(rng, 8)))
    return run


def whitespace(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.4:
        return "".join(rng.choice(WHITESPACE_CHARS) for _ in range(_length(rng, 12)))
    if r < 0.7:
        return "".join(rng.choice([" ", " ", "\t", *NEWLINES]) for _ in range(_length(rng, 8)))
    return rng.choice([" ", "\n", "\t", "\u00a0", "\u3000", "\r\n"]) * _length(rng, 30)


def letters(rng: random.Random) -> str:
    """A word of letters (and marks) of every category, often with the case shapes o200k's pattern splits on."""
    n = _length(rng, 16)
    shape = rng.random()
    if shape < 0.3:
        return _cat(rng, ("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me"), n)
    if shape < 0.5:  # upper run then lower run, or the reverse, or title-case starts
        a = _cat(rng, ("Lu", "Lt"), _length(rng, 6))
        b = _cat(rng, ("Ll", "Lm", "Lo", "Mn"), _length(rng, 6))
        return a + b if rng.random() < 0.5 else b + a
    if shape < 0.7:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))
        return "".join(c.upper() if rng.random() < 0.3 else c for c in word)
    if shape < 0.85:
        base = _cat(rng, ("Lu", "Ll", "Lo"), n)
        return "".join(c + _cat(rng, ("Mn", "Mc", "Me"), rng.randint(0, 2)) for c in base)
    return rng.choice(["straße", "İstanbul", "ǅemal", "ΣΑΣ", "ς", "ﬁ", "Ⅻ", "ʰʲ", "ꞵ", "𝐀𝐁𝐂", "µ", "ª", "McDonald"])


def script(rng: random.Random) -> str:
    lo, hi = rng.choice(SCRIPT_RANGES)
    return "".join(chr(rng.randint(lo, hi)) for _ in range(_length(rng, 12)))


def emoji(rng: random.Random) -> str:
    out = []
    for _ in range(_length(rng, 5)):
        out.append(rng.choice(EMOJI_BASES))
        for _ in range(rng.randint(0, 3)):
            out.append(rng.choice(EMOJI_MODIFIERS))
        if rng.random() < 0.4:
            out.append("\u200d")
    return "".join(out)


def control(rng: random.Random) -> str:
    return _cat(rng, ("Cc", "Cf", "Co", "Cn", "Zs"), _length(rng, 4))


def punctuation(rng: random.Random) -> str:
    run = "".join(rng.choice(PUNCT) for _ in range(_length(rng, 10)))
    if rng.random() < 0.4:
        run = _cat(rng, ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So"), _length(rng, 6))
    if rng.random() < 0.5:
        run += "".join(rng.choice(NEWLINES) for _ in range(_length(rng, 4)))
    if rng.random() < 0.3:
        run = " " + run
    return run


def long_word(rng: random.Random) -> str:
    """A very long word, a long run of one character, or a long repeat of a short unit."""
    n = rng.randint(64, 3000)
    r = rng.random()
    if r < 0.35:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(n))
    if rng.random() < 0.5:
        unit = rng.choice(["a", "A", "1", " ", "\n", "'", "日", "ก", "👍", "=", "\u0301", "x\u0301", "\u00a0", "ab",
                           "'s", "\r\n", " a", "1 "])
    else:
        unit = rng.choice(ALL_FRAGMENTS)
    return (unit * (n // len(unit) + 1))[:n] if len(unit) < n else unit


#: Piece lengths around the engines' size thresholds (parts before the merge heap takes over, the stack buffers,
#: the pre-token cache's key and piece limits), in characters; with 2-4 byte letters they also cross them in bytes.
BOUNDARY_LENGTHS = [15, 16, 17, 20, 24, 39, 40, 41, 47, 48, 49, 63, 64, 65, 127, 128, 129, 170, 255, 256, 511, 512, 513]


def boundary_word(rng: random.Random) -> str:
    """One word whose length sits at a size threshold, of 1-, 2- or 3-byte letters, or a long digit/space run."""
    n = rng.choice(BOUNDARY_LENGTHS)
    alphabet = rng.choice(["abcdefghijklmnopqrstuvwxyz", "etaoinsh", "ab", "éèçñüöäßøå", "日本語中文字",
                           "ABCdefGHIjkl", "ก่า", "xyzXYZ\u0301"])
    word = "".join(rng.choice(alphabet) for _ in range(n))
    return rng.choice(["", "", " ", "'", "\n"]) + word + rng.choice(["", "", "'s", " ", "\n", "1"])


def special_like(rng: random.Random) -> str:
    s = rng.choice(SPECIAL_LIKE)
    r = rng.random()
    if r < 0.1:
        return s[: rng.randint(1, len(s))]
    if r < 0.2:
        return s.upper()
    return s


def fragment(rng: random.Random) -> str:
    return rng.choice(ALL_FRAGMENTS)


#: The productions and their weights.
PRODUCTIONS: list[tuple[Callable[[random.Random], str], float]] = [
    (contraction, 8), (digits, 10), (whitespace, 14), (letters, 16), (script, 6), (emoji, 4), (control, 3),
    (punctuation, 9), (long_word, 0.6), (boundary_word, 3), (special_like, 5), (fragment, 10),
]  # fmt: skip
_FUNCS = [p for p, _ in PRODUCTIONS]
_WEIGHTS = [w for _, w in PRODUCTIONS]


def text(rng: random.Random) -> str:
    """One string: 1–12 productions, sometimes glued with spaces/newlines, sometimes ending in whitespace."""
    parts = []
    for _ in range(rng.randint(1, 12)):
        parts.append(rng.choices(_FUNCS, _WEIGHTS)[0](rng))
        if rng.random() < 0.25:
            parts.append(rng.choice([" ", " ", "\n", "  ", "\r\n", "\t"]))
    if rng.random() < 0.15:
        parts.append(whitespace(rng))
    return "".join(parts)


LONE_SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00", "\ud83d\ude00"]


def surrogate_text(rng: random.Random) -> str:
    """A grammar string with lone surrogates (or a pair written as two code units) inserted at random places."""
    s = text(rng)
    for _ in range(rng.randint(1, 3)):
        i = rng.randint(0, len(s))
        s = s[:i] + rng.choice(LONE_SURROGATES) + s[i:]
    return s


def texts(seed: int, count: int) -> Iterator[str]:
    """``count`` grammar strings for ``seed`` (deterministic)."""
    rng = random.Random(seed)
    for _ in range(count):
        yield text(rng)
