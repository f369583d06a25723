"""``serde_f64`` against the numbers Hugging Face ``tokenizers`` actually reads from a ``tokenizer.json``."""

from __future__ import annotations

import json
import random

import pytest
from tokenizers import Tokenizer

from app.engine.pipeline.json_numbers import serde_f64


def _literal(rng: random.Random) -> str:
    """A JSON number: short and long significands (past 64 bits), fractions, exponents down to underflow."""
    text = ("-" if rng.random() < 0.7 else "") + str(rng.randint(0, 10 ** rng.randint(0, 25)))
    if rng.random() < 0.8:
        text += "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 25)))
    if rng.random() < 0.3:
        exp = str(rng.randint(0, 20)) if rng.random() < 0.5 else f"-{rng.randint(0, 340)}"
        text += rng.choice("eE") + exp
    return text


def _hf_scores(literals: list[str]) -> list[float]:
    """The doubles ``tokenizers`` holds after parsing ``literals`` as Unigram scores (written back by its shortest
    round-trip printer, so ``float()`` of what it writes is exactly what it holds)."""
    vocab = ",".join(f'["t{k}", {lit}]' for k, lit in enumerate(literals))
    empty = json.dumps({"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
                        "post_processor": None, "decoder": None,
                        "model": {"type": "Unigram", "unk_id": 0, "vocab": "VOCAB"}})
    doc = empty.replace('"VOCAB"', f"[{vocab}]")
    back = json.loads(Tokenizer.from_str(doc).to_str())["model"]["vocab"]
    return [float(score) for _, score in back]


def test_serde_f64_equals_hugging_face_parsing() -> None:
    rng = random.Random(11)
    literals = [_literal(rng) for _ in range(20_000)]
    literals += ["0", "-0", "0.0", "-0.0", "1e-400", "-15.275492379532281", "18446744073709551615.5",
                 "18446744073709551616.5", "184467440737095516159", "0.000000000000000000000012345678901234567890123"]
    theirs = _hf_scores(literals)
    mine = [serde_f64(lit) for lit in literals]
    assert [(lit, a) for lit, a, b in zip(literals, mine, theirs, strict=True) if a != b] == []
    # the point of it: Python's correctly rounded float() differs on a good share of these
    assert sum(float(lit) != b for lit, b in zip(literals, theirs, strict=True)) > 1000


def test_out_of_range_is_refused() -> None:
    for literal in ("1e400", "-2e308", "1e99999999999"):
        with pytest.raises(ValueError):
            serde_f64(literal)
    assert serde_f64("1e-99999999999") == 0.0
    assert serde_f64("0e99999999999") == 0.0
