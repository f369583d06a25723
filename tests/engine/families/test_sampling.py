"""Subword regularisation: Unigram lattice sampling (xlm-roberta) and BPE-dropout (mistral-v1). The most likely
segmentation is the most frequent sample, every sample decodes to what the best one decodes to, a seed reproduces
its sample, and the switches that turn sampling off give the deterministic ids."""

from __future__ import annotations

from collections import Counter

import pytest

from app.engine import get_encoding
from app.engine.pipeline.sampling import Sample, encode_sampled

TEXTS = ["Tokenization is unbelievably interesting", "Überraschung: 日本語のテキスト, naïve café!"]


@pytest.mark.parametrize(("name", "options"), [("xlm-roberta", {"alpha": 0.5}), ("mistral-v1", {"p": 0.1})])
@pytest.mark.parametrize("text", TEXTS)
def test_distribution(name: str, options: dict[str, float], text: str) -> None:
    tok = get_encoding(name)
    best = tuple(tok.encode(text))
    counts = Counter(tuple(encode_sampled(tok, text, Sample(seed=s, **options))) for s in range(300))
    assert len(counts) > 5  # it does sample
    assert counts.most_common(1)[0][0] == best  # the most likely segmentation dominates
    assert all(tok.decode(list(ids)) == tok.decode(list(best)) for ids in counts)


def test_seeded_and_switchable() -> None:
    x, m = get_encoding("xlm-roberta"), get_encoding("mistral-v1")
    text = TEXTS[0]
    assert encode_sampled(x, text, Sample(seed=7)) == encode_sampled(x, text, Sample(seed=7))
    assert len({tuple(encode_sampled(x, text, Sample(seed=s, alpha=0.0))) for s in range(20)}) > 1
    assert encode_sampled(x, text, Sample(nbest=1)) == x.encode(text)
    assert encode_sampled(m, text, Sample(p=0.0)) == m.encode(text)
    chars = encode_sampled(m, "abc", Sample(p=1.0))  # every merge dropped: one piece per character
    assert [m.model.id_to_token(i) for i in chars] == ["\u2581", "a", "b", "c"]


def test_refusals() -> None:
    with pytest.raises(ValueError, match="nbest"):
        Sample(nbest=5)
    with pytest.raises(ValueError, match="cannot sample"):
        encode_sampled(get_encoding("bge-small-en-v1.5"), "hi", Sample())
