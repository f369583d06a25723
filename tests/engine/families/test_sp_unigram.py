"""SentencePiece Unigram against ``sentencepiece`` where its float32 arithmetic decides: documents long enough for
the path scores to be re-based (past ±100,000), and user-defined pieces (scored by length) competing with normal
pieces in random vocabularies."""

from __future__ import annotations

import random

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

from app.engine import get_tokenizer
from app.engine.pipeline.sentencepiece import build_pipeline, parse_model
from harness.texts import SPECIAL_STRINGS, real_documents

from .references import sentencepiece_reference


def test_long_documents_equal_sentencepiece() -> None:
    """Whole real documents of 50-130k characters: their best-path scores pass -100,000 several times."""
    tok, ref = get_tokenizer("xlm-roberta-sentencepiece"), sentencepiece_reference("xlm-roberta-sentencepiece")
    docs = [d for d in real_documents() if 50_000 <= len(d) <= 130_000 and not any(s in d for s in SPECIAL_STRINGS)]
    assert len(docs) >= 4
    rebased = 0
    for doc in docs[:6]:
        ids = ref.encode(doc)
        assert tok.encode(doc) == ids, f"a document of {len(doc)} characters differs"
        rebased += sum(ref.get_score(i) for i in ids) < -100_000
    assert rebased >= 3  # the re-basing was exercised


def _model(rng: random.Random) -> bytes:
    """A small Unigram ``.model``: characters, random pieces, and user-defined pieces (some overlapping them)."""
    proto = pb.ModelProto()
    proto.pieces.add(piece="<unk>", score=0.0, type=2)
    proto.pieces.add(piece="<s>", score=0.0, type=3)
    proto.pieces.add(piece="</s>", score=0.0, type=3)
    alphabet = "ab▁cé"
    pieces = set(alphabet)
    while len(pieces) < 40:
        pieces.add("".join(rng.choice(alphabet) for _ in range(rng.randint(2, 5))))
    user = {"".join(rng.choice(alphabet) for _ in range(rng.randint(2, 6))) for _ in range(4)} | {"[X]"}
    for piece in sorted(pieces - user):
        proto.pieces.add(piece=piece, score=-rng.uniform(0.05, 6.0), type=1)
    for piece in sorted(user):
        proto.pieces.add(piece=piece, score=0.0, type=4)
    proto.trainer_spec.model_type = pb.TrainerSpec.UNIGRAM
    proto.trainer_spec.vocab_size = len(proto.pieces)
    proto.trainer_spec.unk_id, proto.trainer_spec.bos_id, proto.trainer_spec.eos_id = 0, 1, 2
    proto.trainer_spec.pad_id = -1
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = True
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.escape_whitespaces = True
    return proto.SerializeToString()


def test_user_defined_pieces_scored_as_sentencepiece() -> None:
    rng = random.Random(7)
    compared = 0
    for k in range(20):
        data = _model(rng)
        ref = spm.SentencePieceProcessor(model_proto=data)
        ours = build_pipeline(f"ud{k}", parse_model(data, "ud.model"), source="ud.model")
        for _ in range(100):
            text = "".join(rng.choice("ab cé[X]xy") for _ in range(rng.randint(0, 30)))
            assert ours.encode(text) == ref.encode(text), text
            compared += 1
    assert compared == 2000
