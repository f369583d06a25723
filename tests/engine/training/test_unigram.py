"""Unigram training: the seeds' segmentation and pruning examples, the learner's invariants, and the
``tokenizer.json`` (Hugging Face ``tokenizers`` and this engine encode identically with it)."""

from __future__ import annotations

import json
import math
import random
from collections import Counter

import pytest
from tokenizers import Tokenizer

from app.engine.pipeline.base import Piece
from app.engine.pipeline.hf_json import from_hf_json
from app.engine.pipeline.pre_tokenizers import Metaspace
from app.engine.training.trainer import train_on
from app.engine.training.unigram import (
    UnigramTrainer,
    _em_step,
    character_coverage,
    learn_unigram,
    likelihood_without,
    log_likelihood,
    metaspace_words,
    viterbi,
)

from .family_corpus import corpus_text, hostile_samples

PROBS = {"a": 0.4, "b": 0.3, "ab": 0.2, "ba": 0.1}
LOG = {p: math.log(q) for p, q in PROBS.items()}


def test_aba_segmentations_viterbi_and_forward() -> None:
    pieces, score = viterbi("aba", LOG)
    assert pieces == ["ab", "a"] and math.exp(score) == pytest.approx(0.08)
    assert math.exp(LOG["a"] + LOG["ba"]) == pytest.approx(0.04)
    assert math.exp(LOG["a"] + LOG["b"] + LOG["a"]) == pytest.approx(0.048)
    assert math.exp(log_likelihood("aba", LOG)) == pytest.approx(0.168)  # 0.08 + 0.04 + 0.048


def test_pruning_comparison() -> None:
    corpus = {"aba": 1}
    without_ab = math.exp(likelihood_without(corpus, PROBS, "ab"))
    without_ba = math.exp(likelihood_without(corpus, PROBS, "ba"))
    assert without_ab == pytest.approx(0.15625)
    assert without_ba == pytest.approx(40 / 243)
    assert without_ab < without_ba < 0.168  # both lower the likelihood; removing ba costs less: prune ba


def test_em_never_lowers_the_likelihood_and_required_characters_stay() -> None:
    rng = random.Random(3)
    words = Counter("".join(rng.choice("abcab") for _ in range(rng.randint(1, 7))) for _ in range(300))
    pieces, _ = learn_unigram(words, vocab_size=12, required=list("abc"), seed_size=200)
    names = [p for p, _ in pieces]
    assert len(names) <= 12 and {"a", "b", "c"} <= set(names)
    assert [s for _, s in pieces] == sorted((s for _, s in pieces), reverse=True)
    assert sum(math.exp(s) for _, s in pieces) == pytest.approx(1.0)
    # EM on a fixed piece set: each step's likelihood is at least the previous one's
    seed = ["a", "b", "c", "ab", "ba", "ca", "abc", "bca"]
    scores = {p: math.log(1 / len(seed)) for p in seed}
    last = -math.inf
    items = list(words.items())
    for _ in range(5):
        freq, ll = _em_step(items, seed, scores, 16)
        assert ll >= last - 1e-9
        last = ll
        total = sum(freq.values())
        scores = {p: math.log(max(freq[p], 1e-12) / total) for p in seed}


def test_character_coverage_keeps_the_most_frequent() -> None:
    counts = {"a": 50, "b": 30, "c": 15, "d": 4, "e": 1}
    assert character_coverage(counts, 1.0) == ["a", "b", "c", "d", "e"]
    assert character_coverage(counts, 0.95) == ["a", "b", "c"]
    assert character_coverage(counts, 0.5) == ["a"]


def test_metaspace_words_match_the_engine_pre_tokenizer() -> None:
    rng = random.Random(9)
    meta = Metaspace("\u2581", "always", True)
    for _ in range(500):
        line = "".join(rng.choice(" ab\u2581\t") for _ in range(rng.randint(0, 12)))
        expected = [p.text for p in meta.pre_tokenize([Piece(line, first=True)]) if p.text]
        assert metaspace_words(line) == expected, repr(line)


@pytest.fixture(scope="module")
def trained() -> bytes:
    return train_on(UnigramTrainer(vocab_size=2500, special_tokens=["<s>", "</s>"]), [corpus_text()]).data


def test_hf_tokenizers_and_this_engine_encode_identically(trained: bytes) -> None:
    hf = Tokenizer.from_str(trained.decode("utf-8"))
    ours = from_hf_json(trained, "uni")
    assert hf.get_vocab_size() == ours.n_vocab == 2500
    doc = json.loads(trained)
    for s in hostile_samples(corpus_text(), 400):
        if "<s>" in s or "</s>" in s or "<unk>" in s:  # Hugging Face matches special tokens in text; we never do
            assert not {1, 2} & set(ours.encode(s))
            continue
        theirs = hf.encode(s, add_special_tokens=False).ids
        assert list(ours.encode(s)) == theirs, s  # exact, score ties included
        assert ours.decode(theirs) == hf.decode(theirs, skip_special_tokens=False)
    assert doc["model"]["vocab"][:3] == [["<unk>", 0.0], ["<s>", 0.0], ["</s>", 0.0]]
    text = "the tokenizer loads the artifact"
    assert ours.decode(ours.encode(text)) == text
    assert len(ours.encode(text)) < len(text) / 2


def test_training_is_deterministic() -> None:
    text = corpus_text(50_000)
    a = train_on(UnigramTrainer(vocab_size=600), [text]).data
    cut = text.index("\n", 777) + 1  # chunks end at line ends
    b = train_on(UnigramTrainer(vocab_size=600), [text[:cut], text[cut:]]).data
    assert a == b
