"""Subword regularisation on the SentencePiece and GGUF families: Unigram lattice and n-best sampling (xlm-roberta)
and SentencePiece BPE-dropout (mistral-v1, llama2). The most likely segmentation is the most frequent sample, every
sample decodes to what the best one decodes to, a seed reproduces its sample, the switches that turn sampling off
give the deterministic ids, and BPE-dropout's edges equal ``sentencepiece``'s own sampling."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from app.engine import Special, get_tokenizer
from app.engine.pipeline import Pipeline
from app.engine.sampling import Sample, SamplingError
from harness.texts import SPECIAL_STRINGS, sample

from .references import sentencepiece_reference

TEXTS = ["Tokenization is unbelievably interesting", "Überraschung: 日本語のテキスト, naïve café!"]


@pytest.mark.parametrize(("name", "options"), [("xlm-roberta-sentencepiece", {"alpha": 0.5}),
                                               ("xlm-roberta-sentencepiece", {"alpha": 0.5, "nbest": 8}),
                                               ("mistral-v1", {"dropout": 0.1}), ("llama2", {"dropout": 0.1})])
@pytest.mark.parametrize("text", TEXTS)
def test_distribution(name: str, options: dict[str, float], text: str) -> None:
    tok = get_tokenizer(name)
    best = tuple(tok.encode(text))
    counts = Counter(tuple(tok.encode(text, sample=Sample(seed=s, **options))) for s in range(300))  # type: ignore[arg-type]
    assert len(counts) > 5  # it does sample
    assert counts.most_common(1)[0][0] == best  # the most likely segmentation dominates
    assert all(tok.decode(list(ids)) == tok.decode(list(best)) for ids in counts)


def test_small_alpha_spreads_and_large_alpha_concentrates() -> None:
    tok, text = get_tokenizer("xlm-roberta-sentencepiece"), TEXTS[0]
    best = tuple(tok.encode(text))
    for nbest in (-1, 16):
        flat = Counter(tuple(tok.encode(text, sample=Sample(seed=s, alpha=0.0, nbest=nbest))) for s in range(200))
        sharp = Counter(tuple(tok.encode(text, sample=Sample(seed=s, alpha=50.0, nbest=nbest))) for s in range(200))
        assert len(flat) > 10 and flat[best] < 40
        assert sharp[best] >= 190


def test_seeded_and_switchable() -> None:
    x, m = get_tokenizer("xlm-roberta-sentencepiece"), get_tokenizer("mistral-v1")
    text = TEXTS[0]
    assert x.encode(text, sample=Sample(seed=7)) == x.encode(text, sample=Sample(seed=7))
    assert len({tuple(x.encode(text, sample=Sample(seed=s, alpha=0.0))) for s in range(20)}) > 1
    assert x.encode(text, sample=Sample(nbest=1)) == x.encode(text)
    assert m.encode(text, sample=Sample(dropout=0.0)) == m.encode(text)
    chars = m.encode("abc", sample=Sample(dropout=1.0))  # every merge dropped: one piece per character
    assert isinstance(m, Pipeline)
    assert [m.model.id_to_token(i) for i in chars] == ["\u2581", "a", "b", "c"]


@pytest.mark.parametrize("name", ["mistral-v1", "mistral-v3", "llama2"])
def test_bpe_dropout_edges_equal_sentencepiece(name: str) -> None:
    """``dropout=0`` is ``sentencepiece``'s encoding; ``dropout=1`` is its BPE sampling with alpha 1 (every merge
    skipped: characters, byte fallback, user-defined pieces whole) — exactly, on hostile and real text."""
    tok, ref = get_tokenizer(name), sentencepiece_reference(name)
    rng = random.Random(4)
    texts = [t for t in sample(3, 80, seed=5) if not any(s in t for s in SPECIAL_STRINGS)]
    texts += ["".join(rng.choice("ab ▁é日\n\t  x") for _ in range(rng.randint(0, 40))) for _ in range(100)]
    for text in texts:
        assert tok.encode(text, sample=Sample(seed=1, dropout=0.0)) == ref.encode(text), text
        assert tok.encode(text, sample=Sample(seed=1, dropout=1.0)) == ref.encode(
            text, enable_sampling=True, alpha=1.0, nbest_size=-1), text


def test_special_tokens_as_without_sampling() -> None:
    for name, how in [("xlm-roberta-sentencepiece", Sample(seed=3, nbest=4)),
                      ("mistral-v1", Sample(seed=3, dropout=0.3))]:
        tok = get_tokenizer(name)
        text = "<s> a [INST] text </s>"
        body = tok.encode(text, sample=how)
        assert not any(tok.is_special(i) for i in body)  # special strings in text stay text
        wrapped = tok.encode(text, add_special_tokens=True, prefix=["</s>"], suffix=["</s>"], sample=how)
        around = tok.encode("", add_special_tokens=True, prefix=["</s>"], suffix=["</s>"])
        k = len(tok.template.prefix) + 1  # the template's prefix, then the named one
        assert wrapped == [*around[:k], *body, *around[k:]]
        # parts: the texts are drawn in order from one generator; special parts draw nothing
        first, both = tok.encode("a", sample=how), tok.encode_parts(["a", "b c"], sample=how)
        parts = tok.encode_parts(["a", Special("</s>"), "b c"], sample=how)
        assert both[:len(first)] == first and parts == [*first, tok.special_token_id("</s>"), *both[len(first):]]


def test_refusals() -> None:
    with pytest.raises(ValueError, match="nbest"):
        Sample(nbest=0)
    with pytest.raises(ValueError, match="nbest"):
        Sample(nbest=513)
    with pytest.raises(SamplingError, match="cannot sample") as err:
        get_tokenizer("bge-small-en-v1.5").encode("hi", sample=Sample())
    assert err.value.model == "WordPiece"
    with pytest.raises(SamplingError, match="not 'dropout'"):
        get_tokenizer("xlm-roberta-sentencepiece").encode("hi", sample=Sample(dropout=0.1))
    with pytest.raises(SamplingError, match="not 'alpha'"):
        get_tokenizer("mistral-v1").encode("hi", sample=Sample(alpha=0.1))
