"""The SentencePiece decoder (app/engine/pipeline/sp_decoder.py) against ``sentencepiece``'s ``decode``: random
models with every normalizer flag and random id sequences (byte pieces, controls, the unknown piece, lone ``▁``),
plus the start-of-text cases spelled out."""

from __future__ import annotations

import random

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

from app.engine.pipeline import Pipeline
from app.engine.pipeline.sentencepiece import build_pipeline, parse_model

from .test_unigram_native import _sp_model


def test_random_id_sequences_decode_as_sentencepiece() -> None:
    rng = random.Random(20261201)
    compared = 0
    for k in range(40):
        data = _sp_model(rng)
        ref = spm.SentencePieceProcessor(model_proto=data)
        tok = build_pipeline(f"d{k}", parse_model(data, "d.model"), source="d.model")
        n = ref.get_piece_size()
        for _ in range(250):
            ids = [rng.randrange(n) for _ in range(rng.randint(0, 7))]
            assert tok.decode(ids, skip_special=True) == ref.decode(ids), [ref.id_to_piece(i) for i in ids]
            compared += 1
    assert compared == 10_000


def _model(*, add_dummy_prefix: bool, remove_extra_whitespaces: bool, suffix: bool = False) -> bytes:
    proto = pb.ModelProto()
    for piece, kind in (("<unk>", 2), ("<s>", 3), ("</s>", 3), *((f"<0x{b:02X}>", 6) for b in range(256)),
                        ("▁", 1), ("▁a", 1), ("▁▁", 1), ("a", 1), ("b▁", 1)):
        proto.pieces.add(piece=piece, score=-1.0, type=kind)
    proto.trainer_spec.model_type = pb.TrainerSpec.UNIGRAM
    proto.trainer_spec.vocab_size = len(proto.pieces)
    proto.trainer_spec.byte_fallback = True
    proto.trainer_spec.treat_whitespace_as_suffix = suffix
    ns = proto.normalizer_spec
    ns.name, ns.add_dummy_prefix, ns.remove_extra_whitespaces = "identity", add_dummy_prefix, remove_extra_whitespaces
    return proto.SerializeToString()


def _decoders(**flags: bool) -> tuple[spm.SentencePieceProcessor, Pipeline]:
    data = _model(**flags)
    return spm.SentencePieceProcessor(model_proto=data), build_pipeline("d", parse_model(data, "d.model"),
                                                                        source="d.model")


def test_leading_spaces_at_the_start() -> None:
    cases = {
        # every leading ▁ piece loses its ▁ while nothing is written (remove_extra_whitespaces)
        (True, True): {"▁ ▁a": "a", "▁ ▁ ▁a": "a", "▁▁ ▁a": "  a", "<s> ▁ ▁a": "a", "<0xC3> <0xA9> ▁a": "é a",
                       "<unk> ▁a": " ⁇  a"},
        # only the first piece's ▁ (the dummy prefix)
        (True, False): {"▁ ▁a": " a", "▁ ▁ ▁a": "  a", "▁▁ ▁a": "  a", "<s> ▁ ▁a": " a", "a ▁a": "a a"},
        # removing extra whitespace alone strips too
        (False, True): {"▁ ▁a": "a", "▁a": "a"},
        (False, False): {"▁ ▁a": "  a", "▁a": " a"},
    }
    for (adp, rew), expected in cases.items():
        for suffix in (False, True):  # sentencepiece decodes suffix models the same way (no trailing strip)
            ref, tok = _decoders(add_dummy_prefix=adp, remove_extra_whitespaces=rew, suffix=suffix)
            for pieces, text in [*expected.items(), ("▁a b▁", None)]:
                ids = [ref.piece_to_id(p) for p in pieces.split(" ")]
                if text is not None:
                    assert ref.decode(ids) == text, (adp, rew, suffix, pieces)
                assert tok.decode(ids, skip_special=True) == ref.decode(ids), (adp, rew, suffix, pieces)


def test_a_dropped_control_piece_ends_a_run_of_byte_pieces() -> None:
    ref, tok = _decoders(add_dummy_prefix=True, remove_extra_whitespaces=True)
    c3, a9, eos, bos = (ref.piece_to_id(p) for p in ("<0xC3>", "<0xA9>", "</s>", "<s>"))
    assert ref.decode([c3, eos, a9]) == tok.decode([c3, eos, a9], skip_special=True) == "\ufffd\ufffd"
    assert tok.decode([c3, a9]) == "é"
    # kept specials are their names and, like sentencepiece's invisible controls, do not end the start
    assert tok.decode([bos, ref.piece_to_id("▁"), ref.piece_to_id("▁a")]) == "<s>a"
