"""Random small merge-list BPE configurations (``tokenizer.json`` model sections) and texts over their alphabet,
for the tests of the compiled merge-list BPE (``test_merge_bpe_native.py``, ``test_merge_bpe_dump.py``).
Deterministic for a given ``random.Random``."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

ALPHABET = "abcdé▁ 中\n"


def random_bpe_config(rng: random.Random, *, wide: bool = False, reorder: bool = True,
                      missing: Sequence[int] = (0, 0, 3, 40)) -> dict[str, Any]:
    """A random BPE configuration: some of ALPHABET's characters, maybe <0xNN> tokens (byte fallback) with
    ``rng.choice(missing)`` bytes missing, maybe <unk> (fused or not), merges of existing tokens with duplicate pairs
    (the last rank wins).

    ``reorder``: duplicates only half the time, merges sometimes out of creation order, the vocabulary sometimes
    renumbered, some merges written as ``"left right"`` strings; without it, duplicates always and nothing else.
    ``wide``: some merge results, and ``zzz``, get ids of 2**20 or more, so the compiled model keeps its wide pair
    table (not with ``reorder``, whose renumbering would undo it)."""
    assert not (wide and reorder), "renumbering the vocabulary would drop the wide ids"
    chars = rng.sample(ALPHABET, rng.randint(2, len(ALPHABET)))
    vocab: dict[str, int] = {}
    byte_fallback = rng.random() < 0.6
    if byte_fallback:
        absent = set(rng.sample(range(256), rng.choice(missing)))
        for b in range(256):
            if b not in absent:
                vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    unk = "<unk>" if rng.random() < 0.6 else None
    if unk:
        vocab.setdefault(unk, len(vocab))
    for c in chars:
        vocab.setdefault(c, len(vocab))
    tokens = list(chars)
    merges: list[list[str]] = []
    for _ in range(rng.randint(0, 60)):
        left, right = rng.choice(tokens), rng.choice(tokens)
        if len(left) + len(right) > 8:
            continue
        vocab.setdefault(left + right, len(vocab) + (1 << 20 if wide and rng.random() < 0.3 else 0))
        tokens.append(left + right)
        merges.append([left, right])
    if merges and (not reorder or rng.random() < 0.5):  # duplicate pairs: the last rank wins
        merges += rng.sample(merges, min(len(merges), 5))
    if wide:
        vocab.setdefault("zzz", (1 << 20) + 7)
    written: list[list[str] | str] = list(merges)
    if reorder:
        rng.shuffle(merges) if rng.random() < 0.3 else None  # ranks out of creation order
        if rng.random() < 0.5:
            shuffled = list(vocab)
            rng.shuffle(shuffled)
            vocab = {t: i for i, t in enumerate(shuffled)}
        written = [" ".join(m) if " " not in m[0] + m[1] and rng.random() < 0.5 else m for m in merges]
    return {"type": "BPE", "vocab": vocab, "merges": written, "unk_token": unk, "byte_fallback": byte_fallback,
            "fuse_unk": rng.random() < 0.5}


def random_text(rng: random.Random, n: int) -> str:
    """``n`` characters of ALPHABET and a few others (an astral one, a combining mark)."""
    pool = ALPHABET + "xyz😀ß\u0301"
    return "".join(rng.choice(pool) for _ in range(n))
