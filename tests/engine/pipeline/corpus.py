"""Hostile strings for the ``tokenizer.json`` differential tests, built per tokenizer (its added and special
tokens' strings alone and glued to words) on top of the exactness suite's fragments. Deterministic (seeded)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from tests.engine.exactness.corpus import (
    ALL_FRAGMENTS,
    COMBINING,
    DIGITS,
    EMOJI,
    SCRIPTS,
    WHITESPACE,
    WORDS,
    contractions,
    long_runs,
    random_mixes,
)

#: Characters whose normalization (NFC/NFKC) changes them or their length.
NFKC_SENSITIVE = [
    "ﬁ", "ﬀi", "①", "ｈｅｌｌｏ", "Ⅻ", "㎏", "ǅ", "½", "e\u0301", "E\u0301\u0323", "\u1100\u1161\u11a8", "\u212b",
    "\u2126", "ﷺ", "ǈ", "\u0041\u030a", "Å", "\u00c5\u0316", "ḕ", "\u0390", "ΐ", "\u1e9b\u0323", "ｶﾞ", "㌀", "ⁿ",
    "\u0344", "\u0958", "\uf900", "\u2fd5", "\U0002f800", "\u0f73", "\u0f75\u0f71", "a\u0328\u0301", "\u3131",
    "\u00a8", "\u2025", "\u3000", "\u00b5", "\u017f\u0307",
]  # fmt: skip
CONTROLS = ["\x00", "\x01", "\x08", "\x1b", "\x1c", "\x1d", "\x1e", "\x1f", "\x7f", "\x80", "\x9f", "\u200b",
            "\u200c", "\u200e", "\u2066", "\ufeff", "\ufffd", "\ufff9", "\U000e0001", "\U0010ffff", "\ue000"]
SPACES = ["", " ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "\r\n", "\u00a0", "\u3000", " " * 17]

FAMILIES = {
    "words": WORDS, "digits": DIGITS, "emoji": EMOJI, "combining": COMBINING, "scripts": SCRIPTS,
    "whitespace": WHITESPACE, "contractions": contractions(), "nfkc": NFKC_SENSITIVE, "controls": CONTROLS,
}


def token_strings(tokens: Sequence[str], rng: random.Random, limit: int) -> list[str]:
    """Each token's string alone, glued to words, spaced, doubled and cut short (at most ``limit`` tokens,
    sampled)."""
    chosen = list(tokens) if len(tokens) <= limit else rng.sample(list(tokens), limit)
    out: list[str] = []
    for t in chosen:
        w = rng.choice(WORDS)
        out += [t, w + t, t + w, f" {t} ", f"{w} {t}{w}", t + t, t[:-1], t[1:], f"{t}\n{w}", f"  {t}  {w}",
                f"{rng.choice(SCRIPTS)}{t}{rng.choice(EMOJI)}", f"{t}{rng.choice(NFKC_SENSITIVE)}", f"\n{t}\n\n"]
    return out


def hostile(tokens: Sequence[str], *, seed: int, count: int, token_limit: int) -> Iterator[str]:
    """Spaces around fragments, every family, the tokens' strings, then ``count`` seeded random mixes with the
    tokens' strings and spaces mixed in."""
    rng = random.Random(seed)
    for family in FAMILIES.values():
        for f in family:
            for left in SPACES[:6]:
                yield left + f
                yield f + left
                yield left + f + left + f
    yield from token_strings(tokens, rng, token_limit)
    pool = [*ALL_FRAGMENTS, *NFKC_SENSITIVE, *CONTROLS, *tokens[:2000]]
    mixes = random_mixes(seed, count // 2)
    for _ in range(count - count // 2):
        yield "".join(rng.choice(pool) + rng.choice(SPACES) for _ in range(rng.randint(1, 10)))
    yield from mixes


def long_strings(n: int) -> list[str]:
    """100k-character-class runs from the exactness suite plus a few of our own."""
    runs = list(long_runs(n).values())
    rng = random.Random(11)
    runs.append("".join(rng.choice(NFKC_SENSITIVE) for _ in range(n // 4)))
    runs.append(("hello world " * (n // 12))[:n])
    runs.append("\n" * (n // 2) + "x" + "\t" * (n // 2))
    return runs
