"""``serde_f64`` against the numbers Hugging Face ``tokenizers`` actually reads from a ``tokenizer.json``."""

from __future__ import annotations

import json
import math
import random

import pytest
from tokenizers import Tokenizer

from app.engine.pipeline.json_numbers import f32, f32_list, serde_f64


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


def test_f32_list_equals_f32_one_by_one() -> None:
    rng = random.Random(5)
    values = [rng.uniform(-1e6, 1e6) for _ in range(20_000)]
    values += [rng.gauss(0, 1) * 10.0 ** rng.randint(-46, 37) for _ in range(20_000)]
    values += [math.nan, math.inf, -math.inf, -0.0, 0.0, 3.4028234663852886e38, 1.401298464324817e-45, 7e-46, -1e-50]
    got = f32_list(values)
    want = [f32(v) for v in values]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1.0, g) == math.copysign(1.0, w))
    for beyond in (1e300, 3.4028235677973366e38, -1e39):  # f32 refuses these; so does the list form
        with pytest.raises(OverflowError):
            f32(beyond)
        with pytest.raises(OverflowError):
            f32_list([1.0, beyond])
