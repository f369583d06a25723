"""The ``sample=`` contract of the :class:`~app.engine.tokenizer.Tokenizer` interface (app/engine/sampling.py,
app/engine/tokenizer.py) for one tokenizer of every family: off by default, seeded and reproducible, the same on
every backend, batches item by item with ``seed + i``, counts equal to the sampled ids, special tokens untouched,
every sample decoding to the deterministic encoding's text, and a clear :class:`SamplingError` where a tokenizer
cannot sample."""

from __future__ import annotations

import pytest

from app.engine import Special, get_tokenizer
from app.engine.char_bpe import CharBPEEncoding
from app.engine.sampling import MAX_NBEST, Sample, SamplingError
from app.engine.training.char_bpe import train_char_bpe

#: (tokenizer, a sampling that applies to it): byte-level over ranks, its tekken relative, byte-level
#: tokenizer.json on the fast path, merge-list BPE with byte fallback, SentencePiece BPE, Unigram (both modes).
CASES = [("cl100k_base", Sample(seed=5, dropout=0.2)), ("mistral-nemo", Sample(seed=5, dropout=0.2)),
         ("qwen3", Sample(seed=5, dropout=0.2)), ("gemma3", Sample(seed=5, dropout=0.2)),
         ("mistral-v3", Sample(seed=5, dropout=0.2)), ("xlm-roberta-sentencepiece", Sample(seed=5, alpha=0.2)),
         ("xlm-roberta-sentencepiece", Sample(seed=5, alpha=0.5, nbest=6))]
TEXTS = ["Tokenization is unbelievably interesting.",
         "naïve café, 日本語 and  spaces\n\t12345 \U0001F9D1\u200d\U0001F4BB", "", "x" * 120, "lone \ud800 surrogate"]


@pytest.mark.parametrize(("name", "sample"), CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_contract(name: str, sample: Sample) -> None:
    tok = get_tokenizer(name)
    for text in TEXTS:
        ids = tok.encode(text, sample=sample)
        assert ids == tok.encode(text, sample=sample)  # reproducible
        assert tok.decode(ids) == tok.decode(tok.encode(text))  # a segmentation of the same text
        assert tok.count(text, sample=sample) == len(ids)
        assert not any(tok.is_special(i) for i in ids)
    drawn = {tuple(tok.encode(TEXTS[0] + TEXTS[1], sample=sample.at(s))) for s in range(30)}
    assert len(drawn) > 2  # it does sample (gemma3's merge list makes its words sticky: fewest distinct draws)
    # batches: item i is sampled with seed + i; counts likewise
    assert tok.encode_batch(TEXTS, sample=sample) == [tok.encode(t, sample=sample.at(i)) for i, t in enumerate(TEXTS)]
    assert tok.count_batch(TEXTS, sample=sample, num_threads=2) == [len(ids) for ids in
                                                                     tok.encode_batch(TEXTS, sample=sample)]
    # special tokens are where they are without sampling
    special = next(iter(tok.special_tokens))
    sid = tok.special_token_id(special)
    body = tok.encode(TEXTS[0], sample=sample)
    assert tok.encode(TEXTS[0], prefix=[special], suffix=[special], add_special_tokens=True, sample=sample) == [
        *tok.template.prefix_ids, sid, *body, sid, *tok.template.suffix_ids]
    parts = tok.encode_parts([TEXTS[0], Special(special)], add_special_tokens=True, sample=sample)
    assert parts == [*tok.template.prefix_ids, *body, sid, *tok.template.suffix_ids]


@pytest.mark.parametrize(("name", "sample"), [c for c in CASES if c[0] in ("cl100k_base", "gemma3")],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_same_samples_on_every_backend(name: str, sample: Sample) -> None:
    """Sampling always runs the pure-Python model: the compiled and the python backend draw the same ids."""
    native, python = get_tokenizer(name), get_tokenizer(name, backend="python")
    assert native.backend == "native" and python.backend == "python"
    for text in TEXTS:
        assert native.encode(text, sample=sample) == python.encode(text, sample=sample)


def test_off_by_default_and_validated() -> None:
    tok = get_tokenizer("cl100k_base")
    assert tok.encode(TEXTS[0]) == tok.encode(TEXTS[0], sample=None) == tok.encode(TEXTS[0],
                                                                                   sample=Sample(dropout=0.0))
    for bad in ({"alpha": -0.1}, {"alpha": float("nan")}, {"alpha": float("inf")}, {"nbest": 0}, {"nbest": -2},
                {"nbest": MAX_NBEST + 1}, {"dropout": 1.5}, {"dropout": -0.01}, {"seed": 1.5}, {"seed": True},
                {"seed": -1}):
        with pytest.raises(ValueError):
            Sample(**bad)  # type: ignore[arg-type]
    assert Sample(seed=3).at(4) == Sample(seed=7)


def test_classic_character_bpe() -> None:
    classic = CharBPEEncoding("c", train_char_bpe({"low": 5, "lower": 2, "newest": 3}, num_merges=8,
                                                  min_frequency=1))
    text = "lower newest low"
    assert classic.encode(text, sample=Sample(dropout=0.0)) == classic.encode(text)
    chars = classic.encode(text, sample=Sample(dropout=1.0))
    assert len(chars) == len(text.replace(" ", "")) + 3  # characters and one </w> per word
    drawn = {tuple(classic.encode(text, sample=Sample(seed=s, dropout=0.3))) for s in range(30)}
    assert len(drawn) > 3 and all(classic.decode(list(ids)) == text for ids in drawn)
    with pytest.raises(SamplingError, match="not 'alpha'"):
        classic.encode(text, sample=Sample(alpha=0.1))


def test_tokenizers_that_cannot_sample() -> None:
    wordpiece = get_tokenizer("bge-small-en-v1.5")
    with pytest.raises(SamplingError, match="WordPiece model") as err:
        wordpiece.encode("hi", sample=Sample())
    assert isinstance(err.value, ValueError) and err.value.tokenizer == "bge-small-en-v1.5"
    for call in (lambda: wordpiece.count("hi", sample=Sample()),
                 lambda: wordpiece.encode_batch(["hi"], sample=Sample()),
                 lambda: wordpiece.encode_parts(["hi"], sample=Sample()), lambda: wordpiece.check_sample(Sample())):
        with pytest.raises(SamplingError):
            call()
    with pytest.raises(SamplingError, match="not 'alpha'"):
        get_tokenizer("cl100k_base").encode("hi", sample=Sample(nbest=2))
    with pytest.raises(SamplingError, match="not 'dropout'"):
        get_tokenizer("xlm-roberta-sentencepiece").count("hi", sample=Sample(dropout=0.5))
