"""The generated hostile corpus (known edge cases of the patterns and BPE): systematic products of tricky
fragments plus seeded random mixes.

Everything is deterministic (fixed seeds), so a failure reproduces. Strings may contain lone surrogates (only in
:func:`surrogate_strings`); every other generator yields valid Unicode.
"""

from __future__ import annotations

import base64
import itertools
import random
from collections.abc import Iterator

WHITESPACE = [
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r", "\r\n", "\r\n\r\n", " \n", "\n ", " \n  \n", "\t\n", " \r\n ",
    "\x0b", "\x0c", "\u00a0", "\u2003", "\u3000", "\u2028", "\u2029", "\x85", "\u1680", "\u202f", "\u205f",
]  # fmt: skip

CONTRACTION_STEMS = ["s", "t", "re", "ve", "m", "ll", "d"]


def contractions() -> list[str]:
    """Every contraction in every letter case, with ``ſ`` (U+017F) for ``s``, and near misses."""
    out: list[str] = []
    for stem in CONTRACTION_STEMS:
        for cased in itertools.product(*[(c.lower(), c.upper()) for c in stem]):
            out.append("'" + "".join(cased))
    out += ["'ſ", "'ſt", "'K", "'\u212a", "'İ", "'ı", "’s", "’S", "''s", "'", "'x", "'ver", "'lls", "'dd", "'s'"]
    return out


WORDS = [
    "a", "I", "x", "hello", "Hello", "HELLO", "hELLO", "don", "DON", "it", "we", "they", "straße", "STRASSE",
    "İstanbul", "ǅemal", "ǈ", "ʰʲ", "ſ", "ﬁ", "ΣΑΣ", "ς", "Ⅻ", "ⅻ", "naïve", "café", "Ægir", "x86_64", "iPhone",
    "McDonald", "ABCdef", "abcDEF", "ȺȾ", "ǲ", "ꞵ", "𝐀𝐁𝐂", "𝒶𝒷", "Ω", "µ", "ª", "º",
]  # fmt: skip

DIGITS = [
    "0", "1", "12", "123", "1234", "12345", "123456", "1234567890", "007", "3.14", "1,000,000", "10/10", "1e-9",
    "٠١٢٣٤", "۱۲۳", "१२३४", "೧೨", "𝟙𝟚𝟛𝟜", "½", "²³", "Ⅷ", "①②", "〇", "二〇二四", "0x1F", "9999999999999",
]  # fmt: skip

EMOJI = [
    "👍", "👍🏽", "👍🏿", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "❤", "🇯🇵", "🇺🇳🇪🇺", "👩🏿‍💻", "1️⃣", "#️⃣", "🫠", "🧑‍🤝‍🧑",
    "😀😃😄", "☺︎", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "⌚", "©️", "™",
]  # fmt: skip

COMBINING = [
    "e\u0301", "a\u0300\u0316", "Z\u0324\u0354\u0367\u0311\u0313", "\u0301", "\u0301\u0301", "o\u0308\u0304",
    "\u20dd", "x\u20e3", "ก\u0e33", "\u093f", "\u094d", "\u05b8", "\u0670", "\ufe0f", "\u200d", "\u034f",
]  # fmt: skip

SCRIPTS = [
    "日本語のテキスト", "東京都", "ｶﾀｶﾅ", "中文字符，标点。", "繁體中文", "한국어 텍스트", "한글",
    "ภาษาไทยง่ายนิดเดียว", "สวัสดี", "مرحبا بالعالم", "العربية", "ﷺ", "שָׁלוֹם עולם", "עברית",
    "नमस्ते दुनिया", "क्षत्रिय", "हिन्दी", "Привет, мир", "ПРИВЕТ", "Καλημέρα κόσμε", "Ελληνικά",
    "Tiếng Việt", " Việt", "Việt", "ქართული", "Հայերեն", "ᐃᓄᒃᑎᑐᑦ", "ትግርኛ", "ꦗꦮ", "𓀀𓀁", "𐌰𐌱", "ᚠᛇᚻ",
    "தமிழ்", "ಕನ್ನಡ", "ລາວ", "မြန်မာ", "ខ្មែរ", "සිංහල", "ᠮᠣᠩᠭᠣᠯ", "ߒߞߏ",
]  # fmt: skip

CONTROLS = [
    "\x00", "\x01", "\x07", "\x08", "\x1b", "\x1c", "\x1d", "\x1e", "\x1f", "\x7f", "\x80", "\x85", "\x9f",
    "\u2028", "\u2029", "\ufeff", "\u200b", "\u200c", "\u200e", "\u202e", "\u2066", "\ufffd", "\ufffe",
    "\uffff", "\U0010ffff", "\U000e0001", "\ue000", "\U000f0000", "\u0378", "\U0001fffe",
]  # fmt: skip

SPECIALS = [
    "<|endoftext|>", "<|im_end|>", "<|im_start|>", "<|eot_id|>", "<|begin_of_text|>", "<|start_header_id|>",
    "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|endofprompt|>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|reserved_200018|>", "<|reserved_special_token_5|>", "<|python_tag|>", "<|", "|>", "<||>", "<|endoftext",
]  # fmt: skip

PUNCT = [
    ".", ",", "!", "?", "...", "…", "—", "-", "--", "/", "//", "\\", "(", ")", "[]", "{}", "<", ">", "@", "#",
    "$", "%", "^", "&", "*", "_", "~", "`", '"', "'", "''", "«", "»", "、", "。", "！", "؟", "।", "•", "·",
    "::", "->", "=>", "!=", "/*", "*/", "#!/", ".\n", ",\r\n", "?!\n\n", "/\n", "//\r\n",
]  # fmt: skip

CODE = [
    "def f(x):\n    return x\n", "if (a && b) {\n\treturn;\n}\n", "http://example.com/a/b?c=d&e=f#g",
    "SGVsbG8gV29ybGQ=", "/usr/bin/env python3", "#!/bin/sh\n", "x = [1, 2, 3]  # comment", "<div class=\"a\">",
    "SELECT * FROM t WHERE id=1;", "α := β ∘ γ", "C:\\Windows\\System32", "fn main() -> i32 { 0 }",
    "    \n    pass\n\n\n", "a\tb\tc\n1\t2\t3\n", "key: value\n  - item\n", "foo_bar.baz(qux)", "i++;j--",
]  # fmt: skip

#: Fragment families, by name (the generators draw from these).
FAMILIES: dict[str, list[str]] = {
    "whitespace": WHITESPACE,
    "contraction": contractions(),
    "word": WORDS,
    "digits": DIGITS,
    "emoji": EMOJI,
    "combining": COMBINING,
    "script": SCRIPTS,
    "control": CONTROLS,
    "special": SPECIALS,
    "punct": PUNCT,
    "code": CODE,
}

ALL_FRAGMENTS: list[str] = [f for family in FAMILIES.values() for f in family]


def pairs() -> Iterator[str]:
    """Every ordered pair of fragments (about 100,000 strings)."""
    for a, b in itertools.product(ALL_FRAGMENTS, repeat=2):
        yield a + b


def glued_triples() -> Iterator[str]:
    """Fragment, glue, fragment: contractions, specials and punctuation glued to words, spaces and newlines."""
    left = WORDS[:12] + SCRIPTS[::4] + DIGITS[::4] + EMOJI[::4] + PUNCT[::6]
    glue = ["", " ", "  ", "\n", " \n", "\r\n", "'s", "'S", "'ſ", ".", "X.", "/", "\t"]
    right = contractions()[::3] + SPECIALS[::2] + WHITESPACE[::3] + COMBINING[::3] + DIGITS[::5]
    for a, g, b in itertools.product(left, glue, right):
        yield a + g + b


def small_alphabet_strings(alphabet: str, max_len: int) -> Iterator[str]:
    """Every string of length 1..``max_len`` over ``alphabet`` (exhaustive boundary cases)."""
    for n in range(1, max_len + 1):
        for chars in itertools.product(alphabet, repeat=n):
            yield "".join(chars)


#: Exhaustive alphabets: whitespace/newline interplay, contractions and case folding, classes that border letters.
ALPHABETS: dict[str, tuple[str, int]] = {
    "whitespace": (" \n\r\ta\u00a0\x85", 5),
    "contraction": ("'sSſtlLa ", 4),
    "classes": ("aA1 .\u0301\u01c5\u02b0\n", 4),
    "slash": ("/\n a.\r", 5),
}


def exhaustive() -> Iterator[str]:
    """All strings of the :data:`ALPHABETS`."""
    for alphabet, max_len in ALPHABETS.values():
        yield from small_alphabet_strings(alphabet, max_len)


def random_mixes(seed: int, count: int) -> Iterator[str]:
    """``count`` seeded random concatenations of 1–12 fragments and random code points from tricky ranges."""
    rng = random.Random(seed)
    ranges = [
        (0x00, 0x7F), (0x80, 0x2FF), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x52F), (0x590, 0x6FF),
        (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x3000, 0x30FF), (0x4E00, 0x9FFF),
        (0xAC00, 0xD7A3), (0xE000, 0xF8FF), (0xFB00, 0xFFFF), (0x1F300, 0x1FAFF), (0x1D400, 0x1D7FF),
        (0x20000, 0x2A6DF), (0xE0000, 0xE01EF), (0x10FF00, 0x10FFFF),
    ]  # fmt: skip
    for _ in range(count):
        parts: list[str] = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.7:
                parts.append(rng.choice(ALL_FRAGMENTS))
            elif r < 0.9:
                lo, hi = rng.choice(ranges)
                parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 6))))
            else:
                parts.append(rng.choice(WHITESPACE) * rng.randint(1, 40))
        yield "".join(parts)


def surrogate_strings() -> Iterator[str]:
    """Strings with lone surrogates (and split pairs), which both sides replace by U+FFFD before encoding."""
    lone = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]
    for s in lone:
        for ctx in ["{s}", "a{s}b", " {s}", "{s}{s}", "{s}'s", "x {s}\n", "日本{s}語", "👍{s}", "1{s}2"]:
            yield ctx.format(s=s)
    yield "\ud83d\ude00"  # a high+low pair written as two code units: one character after scrubbing
    yield "a\ud83d\ude00b\ud83d"
    yield "\ude00\ud83d"


def long_runs(n: int, seed: int = 7) -> dict[str, str]:
    """Long single-class inputs of about ``n`` characters (the worst cases for BPE and the scanner), by name."""
    rng = random.Random(seed)
    raw = bytes(rng.getrandbits(8) for _ in range(n))
    letters = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))
    return {
        "a": "a" * n,
        "caret": "^" * n,
        "digits": "1" * n,
        "random_digits": "".join(rng.choice("0123456789") for _ in range(n)),
        "spaces": " " * n,
        "newlines": "\n" * n,
        "space_newline": " \n" * (n // 2),
        "crlf_trailing": "x" + "\r\n" * (n // 2) + "   ",
        "spaces_then_word": " " * n + "word",
        "letters": letters,
        "base64": base64.b64encode(raw).decode("ascii")[:n],
        "cjk": "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(n // 4)),
        "emoji_zwj": "👨‍👩‍👧‍👦" * (n // 11),
        "combining": "a" + "\u0301" * (n // 2),
        "nul": "\x00" * n,
        "unicode_space": "\u3000" * n,
    }
