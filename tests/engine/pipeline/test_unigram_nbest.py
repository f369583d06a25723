"""Unigram n-best lists and sampling among them (app/engine/pipeline/models/unigram_nbest.py): the n best
segmentations, pieces and order, equal ``sentencepiece``'s ``NBestEncodeAsIds`` on a SentencePiece model trained
here, on random tie-heavy vocabularies with user-defined and unused pieces, and on xlm-roberta's real vocabulary;
long inputs hit SentencePiece's search bounds (agenda cuts, the fall-back to the Viterbi path) in the same place."""

from __future__ import annotations

import io
import math
import random
from collections import Counter
from functools import lru_cache

import pytest
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

from app.engine import get_tokenizer
from app.engine.pipeline import Pipeline
from app.engine.pipeline.added import AddedToken
from app.engine.pipeline.models import unigram_nbest
from app.engine.pipeline.models.unigram import Unigram
from app.engine.pipeline.pre_tokenizers import Metaspace
from app.engine.pipeline.sampling import nbest_encodings
from app.engine.pipeline.sentencepiece import build_pipeline, parse_model
from app.engine.sampling import Sample
from harness.texts import SPECIAL_STRINGS, real_documents

from ..families.references import sentencepiece_reference


@lru_cache(maxsize=1)
def _corpus() -> list[str]:
    return [line for d in real_documents()[:200] for line in d.splitlines() if line.strip()][:20000]


@lru_cache(maxsize=1)
def trained() -> tuple[bytes, Pipeline]:
    """A real SentencePiece Unigram model trained by ``sentencepiece`` on real text (with user-defined pieces and
    byte fallback), and our pipeline for it."""
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_corpus()), model_writer=buf, vocab_size=800,
                                   model_type="unigram", character_coverage=0.9995, byte_fallback=True,
                                   user_defined_symbols=["[X]", "naïve"], minloglevel=2)
    data = buf.getvalue()
    return data, build_pipeline("trained", parse_model(data, "trained.model"), source="trained.model")


def _ours(tok: Pipeline, text: str, n: int) -> list[list[int]]:
    return [ids for ids, _ in nbest_encodings(tok, text, n)]


def test_trained_model_equals_sentencepiece() -> None:
    data, tok = trained()
    ref = spm.SentencePieceProcessor(model_proto=data)
    rng = random.Random(1)
    corpus = _corpus()
    full = 0
    for _ in range(250):
        line = rng.choice(corpus)
        start = rng.randrange(len(line))
        text = line[start:start + rng.randint(1, 60)]
        if rng.random() < 0.2:
            text += rng.choice([" [X] naïve", "  ▁x ", "\u00e9\u0301 ﬁ", " 日本\x00"])
        n = rng.choice([2, 5, 17, 64, 512])
        expected = ref.nbest_encode_as_ids(text, n)
        assert _ours(tok, text, n) == expected, (text, n)
        full += len(expected) == n
    assert full > 70  # many lists are full length: the order of many segmentations was compared


def _random_model(rng: random.Random, ties: bool) -> bytes:
    """A small Unigram ``.model``: characters (one missing: unknown nodes), random pieces with scores from a few
    integers (many exactly equal path scores: the agenda's order decides) or random, user-defined pieces, an
    unused piece."""
    proto = pb.ModelProto()
    proto.pieces.add(piece="<unk>", score=0.0, type=2)
    proto.pieces.add(piece="<s>", score=0.0, type=3)
    proto.pieces.add(piece="</s>", score=0.0, type=3)
    alphabet = "ab▁cé"
    pieces = set(alphabet) - {"c"}
    while len(pieces) < 40:
        pieces.add("".join(rng.choice(alphabet) for _ in range(rng.randint(2, 5))))
    user = {"".join(rng.choice(alphabet) for _ in range(rng.randint(2, 6))) for _ in range(3)} | {"[X]"}
    for piece in sorted(pieces - user):
        proto.pieces.add(piece=piece, score=-float(rng.randint(1, 4)) if ties else -rng.uniform(0.05, 6.0), type=1)
    for piece in sorted(user):
        proto.pieces.add(piece=piece, score=0.0, type=4)
    if "bbb" not in pieces | user:
        proto.pieces.add(piece="bbb", score=-0.5, type=5)  # unused: never in the lattice
    ts = proto.trainer_spec
    ts.model_type = pb.TrainerSpec.UNIGRAM
    ts.vocab_size = len(proto.pieces)
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = 0, 1, 2, -1
    ns = proto.normalizer_spec
    ns.name, ns.add_dummy_prefix, ns.remove_extra_whitespaces, ns.escape_whitespaces = "identity", True, False, True
    return proto.SerializeToString()


def test_random_vocabularies_with_ties_equal_sentencepiece() -> None:
    rng = random.Random(3)
    compared = 0
    for k in range(16):
        data = _random_model(rng, ties=k % 2 == 0)
        ref = spm.SentencePieceProcessor(model_proto=data)
        tok = build_pipeline(f"nb{k}", parse_model(data, "nb.model"), source="nb.model")
        for _ in range(40):
            text = "".join(rng.choice("ab cé[X]xy") for _ in range(rng.randint(0, rng.choice([10, 30, 200]))))
            n = rng.choice([2, 3, 10, 100, 512])
            assert _ours(tok, text, n) == ref.nbest_encode_as_ids(text, n), (k, text, n)
            compared += 1
    assert compared == 640


def test_xlm_roberta_equals_sentencepiece() -> None:
    tok, ref = get_tokenizer("xlm-roberta-sentencepiece"), sentencepiece_reference("xlm-roberta-sentencepiece")
    assert isinstance(tok, Pipeline)
    rng = random.Random(2)
    docs = real_documents()
    for _ in range(150):
        doc = rng.choice(docs)
        start = rng.randrange(len(doc))
        text = doc[start:start + rng.randint(1, 80)]
        if any(s in text for s in SPECIAL_STRINGS):
            continue
        n = rng.choice([2, 8, 50])
        assert _ours(tok, text, n) == ref.nbest_encode_as_ids(text, n), (text, n)


def test_search_bounds_as_sentencepiece(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long inputs: the agenda is cut and, past the hypothesis bound, only the Viterbi path comes back, both
    exactly where SentencePiece does it (the lists are equal, including their lengths)."""
    data, tok = trained()
    ref = spm.SentencePieceProcessor(model_proto=data)
    agendas = 0
    original = unigram_nbest._Agenda.__init__

    def counting(self: unigram_nbest._Agenda) -> None:  # one agenda per search, one more per cut
        nonlocal agendas
        agendas += 1
        original(self)

    monkeypatch.setattr(unigram_nbest._Agenda, "__init__", counting)
    text = " ".join(_corpus()[:400])
    seen: list[tuple[int, int, int]] = []
    for start, length, n in [(0, 1000, 512), (5000, 2000, 64), (10000, 6000, 512), (20000, 8000, 40)]:
        piece = text[start:start + length]
        before = agendas
        expected = ref.nbest_encode_as_ids(piece, n)
        assert _ours(tok, piece, n) == expected, (length, n)
        seen.append((n, len(expected), agendas - before - 1))
    assert any(got == n for n, got, _ in seen), seen  # a full list after cuts
    assert any(got == 1 for _, got, _ in seen)  # the fall-back to the Viterbi path
    assert sum(cuts for _, _, cuts in seen) >= 5


def test_nbest_one_and_empty() -> None:
    _, tok = trained()
    text = "Tokenization is unbelievably interesting"
    assert _ours(tok, text, 1) == [tok.encode(text)]
    assert _ours(tok, "", 5) == [[]]


def test_sampling_among_the_nbest() -> None:
    """Draws come from the n-best list only, in proportion to exp(alpha * score): alpha 0 is uniform over it,
    a large alpha gives the best one."""
    _, tok = trained()
    text = "interesting tokenization"
    best = nbest_encodings(tok, text, 4)
    assert len(best) == 4 and best[0][1] >= best[1][1] >= best[2][1] >= best[3][1]
    lists = [tuple(ids) for ids, _ in best]
    flat = Counter(tuple(tok.encode(text, sample=Sample(seed=s, alpha=0.0, nbest=4))) for s in range(800))
    assert set(flat) == set(lists) and all(150 <= c <= 250 for c in flat.values())
    alpha = 1.0
    weights = [math.exp(alpha * score) for _, score in best]
    drawn = Counter(tuple(tok.encode(text, sample=Sample(seed=s, alpha=alpha, nbest=4))) for s in range(2000))
    for ids, w in zip(lists, weights, strict=True):
        assert abs(drawn[ids] / 2000 - w / sum(weights)) < 0.04
    sharp = Counter(tuple(tok.encode(text, sample=Sample(seed=s, alpha=100.0, nbest=4))) for s in range(50))
    assert sharp == Counter({lists[0]: 50})


def test_pre_tokens_and_added_tokens_form_one_lattice() -> None:
    """A tokenizer.json Unigram (pre-tokenized by Metaspace): the n best of the whole text combine the words'
    segmentations, all distinct, each spelling the same pre-tokens, best first; the first is the deterministic
    encoding."""
    vocab = [("<unk>", 0.0), ("▁", -2.0), ("a", -1.0), ("b", -1.5), ("ab", -1.2), ("▁a", -1.1), ("▁ab", -2.5),
             ("ba", -2.0)]
    model = Unigram(vocab, unk_id=0)
    tok = Pipeline(name="tiny", model=model, pre_tokenizer=Metaspace(replacement="▁", prepend_scheme="always",
                                                                     split=True),
                   added_tokens=[AddedToken("[Q]", 8, special=False)])
    text = "ab ba[Q]ab"
    best = nbest_encodings(tok, text, 50)
    assert best[0][0] == tok.encode(text)
    assert len({tuple(ids) for ids, _ in best}) == len(best) > 10
    spelled = {"".join("[Q]" if i == 8 else model.vocab[i][0] for i in ids) for ids, _ in best}
    assert spelled == {"▁ab▁ba[Q]▁ab"}
    scores = [score for _, score in best]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("text", ["tokenization", "a naïve ode"])
def test_lattice_sampling_draws_exp_alpha_score(text: str) -> None:
    """``nbest=-1``: over every segmentation of a short text (all of them: the n-best list is shorter than n),
    the sample frequencies follow exp(alpha * score) / Z (a user-defined piece scored by characters, as
    SentencePiece's sampling lattice scores it)."""
    _, tok = trained()
    every = nbest_encodings(tok, text, 512)
    assert 10 < len(every) < 512
    alpha, n = 0.4, 4000
    weights = {tuple(ids): math.exp(alpha * score) for ids, score in every}
    z = sum(weights.values())
    drawn = Counter(tuple(tok.encode(text, sample=Sample(seed=s, alpha=alpha))) for s in range(n))
    assert set(drawn) <= set(weights)
    tv = sum(abs(drawn[k] / n - w / z) for k, w in weights.items()) / 2
    assert tv < 0.05
