"""The Unigram model against Hugging Face ``tokenizers`` on vocabularies built to tie: few distinct scores, pieces
that overlap in many ways, characters no piece covers (single and multi-byte), partial byte fallback."""

from __future__ import annotations

import random

from tokenizers import Tokenizer, models

from app.engine.pipeline.hf_json import from_hf_json
from app.engine.pipeline.models.unigram import Unigram

ALPHABET = "abcé日"  # pieces are built from these
UNKNOWN = "xyü\u0800🙂"  # no piece covers these (1 to 4 UTF-8 bytes)


def _vocab(rng: random.Random) -> tuple[list[tuple[str, float]], bool]:
    """``<unk>`` first (its ``<`` never occurs in the texts), then pieces; scores from a small set so that many
    segmentations tie exactly — dyadic (ties survive any summation order) or 17-digit decimals (ties decided by
    rounding, so by both sides reading the very same doubles)."""
    if rng.random() < 0.5:
        levels = [-0.5, -1.0, -1.5, -2.0, -3.0, -4.25]
    else:
        levels = [-rng.uniform(5.0, 17.0) for _ in range(6)]  # 17 digits: read differently by Rust's JSON
    pieces = set(ALPHABET) if rng.random() < 0.8 else set(ALPHABET[:3])
    while len(pieces) < 30:
        pieces.add("".join(rng.choice(ALPHABET) for _ in range(rng.randint(2, 4))))
    byte_fallback = rng.random() < 0.3
    vocab = [("<unk>", 0.0)] + [(p, rng.choice(levels)) for p in sorted(pieces)]
    if byte_fallback:  # some bytes only: an unknown run missing one falls back to <unk>
        vocab += [(f"<0x{b:02X}>", -1.0) for b in sorted({*b"xy", *"ü".encode()})]
    if rng.random() < 0.3:  # a fused run of unknowns that is itself a piece
        vocab.append(("xy", rng.choice(levels)))
    return vocab, byte_fallback


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET * 3 + UNKNOWN) for _ in range(rng.randint(0, 80)))


def test_ties_and_unknowns_resolve_as_hugging_face_does() -> None:
    rng = random.Random(20261201)
    compared = 0
    for _ in range(60):
        vocab, byte_fallback = _vocab(rng)
        hf = Tokenizer(models.Unigram(vocab, 0, byte_fallback))
        ours = Unigram.from_hf({"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": byte_fallback})
        # the same model through a tokenizer.json on both sides (scores re-read by each side's JSON parser)
        document = hf.to_str()
        hf_file, ours_file = Tokenizer.from_str(document), from_hf_json(document, "ties", backend="python")
        for _ in range(100):
            text = _text(rng)
            expected = hf.encode(text, add_special_tokens=False).ids
            assert ours.tokenize(text) == expected, (vocab, text)
            assert list(ours_file.encode(text)) == hf_file.encode(text, add_special_tokens=False).ids, (vocab, text)
            compared += 1
    assert compared == 6000
