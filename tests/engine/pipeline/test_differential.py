"""Differential tests: the bundled ``tokenizer.json`` tokenizers against Hugging Face ``tokenizers`` 0.23 on the
same files (special-token matching off, ``add_special_tokens`` both ways): ids, counts, offsets, decoding.

The default run is a seeded sample (hostile strings, real multilingual text, 100k-character runs); set
``PIPELINE_DIFF_SCALE`` to multiply the sample (development runs use hundreds of thousands of strings).
"""

from __future__ import annotations

import os
import random

import pytest

from harness import realtext
from tests.engine.exactness.corpus import long_runs

from .corpus import hostile, long_strings
from .reference import HF_JSON, compare, ours

SCALE = float(os.environ.get("PIPELINE_DIFF_SCALE", "1"))
#: Per tokenizer (gemma3's pipeline runs slowest in Python, so it gets fewer).
HOSTILE = {"qwen3": 1500, "deepseek-v3": 1500, "gemma3": 600}
REAL = {"qwen3": 300, "deepseek-v3": 300, "gemma3": 150}
#: 100k-character runs compared by default (every run of the corpus with PIPELINE_DIFF_SCALE >= 2).
LONG = ("a", "spaces", "newlines", "cjk", "combining", "emoji_zwj", "base64")


def _check(result_name: str, result) -> None:  # type: ignore[no-untyped-def]
    assert result.compared > 0
    assert not result.mismatches, f"{len(result.mismatches)} of {result.compared} differ:\n" + "\n".join(
        result.mismatches[:10])


@pytest.mark.parametrize("name", HF_JSON)
def test_hostile_strings(name: str) -> None:
    tok = ours(name)
    strings = [*tok.special_tokens, *tok.added_tokens]
    texts = list(hostile(strings, seed=20261201, count=int(HOSTILE[name] * SCALE), token_limit=int(30 * SCALE)))
    _check(name, compare(name, texts))


@pytest.mark.parametrize("name", HF_JSON)
def test_real_multilingual_text(name: str) -> None:
    texts = [s for doc in realtext.documents() for s in realtext.strings(doc)]
    rng = random.Random(7)
    sample = rng.sample(texts, min(len(texts), int(REAL[name] * SCALE)))
    whole = [doc.text for doc in realtext.documents() if len(doc.text) < 40_000 * SCALE][:: max(1, int(24 / SCALE))]
    _check(name, compare(name, [*sample, *whole], with_template=False))


LONG_INDEX = [list(long_runs(8)).index(k) for k in LONG]


@pytest.mark.parametrize("name", HF_JSON)
def test_long_runs(name: str) -> None:
    runs = long_strings(100_000)
    if SCALE < 2:
        runs = [runs[k] for k in LONG_INDEX]
    _check(name, compare(name, runs, with_template=False, count=False))
