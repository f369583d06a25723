"""SentencePiece-style training on raw text: the ``.model`` loads in the ``sentencepiece`` package and in this
engine, and both encode and decode every sample identically; options shape the vocabulary as documented."""

from __future__ import annotations

import pytest
import sentencepiece as spm

from app.engine.pipeline.sentencepiece import BYTE, CONTROL, UNKNOWN, _model_proto_class, build_pipeline, parse_model
from app.engine.training.sentencepiece import SentencePieceTrainer, sp_words, split_digit_runs
from app.engine.training.trainer import train_on

from .family_corpus import corpus_text, hostile_samples

SPACE = "\u2581"
CASES = [("unigram", False, False), ("unigram", True, True), ("bpe", False, False), ("bpe", True, True)]


def test_sp_words() -> None:
    assert sp_words("Hello world") == [SPACE + "Hello", SPACE + "world"]
    assert sp_words("  a   b  ") == [SPACE + "a", SPACE + "b"]
    assert sp_words("a  b", remove_extra_whitespaces=False) == [SPACE + "a", SPACE, SPACE + "b"]
    assert sp_words("a b", add_dummy_prefix=False) == ["a", SPACE + "b"]
    assert sp_words("日本語の文章") == [SPACE + "日本語の文章"]
    assert split_digit_runs({"▁ab12c": 2}) == {"▁ab": 2, "1": 2, "2": 2, "c": 2}


@pytest.fixture(scope="module")
def text() -> str:
    return corpus_text(120_000)


@pytest.mark.parametrize(("model_type", "byte_fallback", "split_digits"), CASES)
def test_sentencepiece_and_this_engine_agree(text: str, model_type: str, byte_fallback: bool,
                                             split_digits: bool) -> None:
    size = 1200 + (256 if byte_fallback else 0)
    art = train_on(SentencePieceTrainer(model_type=model_type, vocab_size=size, byte_fallback=byte_fallback,
                                        split_digits=split_digits, control_tokens=["<sep>"]), [text])
    assert art.format == "sentencepiece" and art.vocab_size == size
    sp = spm.SentencePieceProcessor(model_proto=art.data)
    ours = build_pipeline("t", parse_model(art.data, "t.model"), source="t.model")
    assert sp.get_piece_size() == ours.n_vocab == size
    for s in hostile_samples(text, 250):
        ids = sp.encode(s)
        assert list(ours.encode(s)) == ids, s
        assert ours.decode(ids) == sp.decode(ids), s
    sample = "Whitespace is a symbol and decoding restores it: 東京大学で研究しています"
    assert sp.decode(sp.encode(sample)) == ours.decode(ours.encode(sample)) == sample
    proto = _model_proto_class()()
    proto.ParseFromString(art.data)
    types = [p.type for p in proto.pieces]
    assert types[:4] == [UNKNOWN, CONTROL, CONTROL, CONTROL] and proto.pieces[3].piece == "<sep>"
    assert types.count(BYTE) == (256 if byte_fallback else 0)
    learned = [p.piece for p in proto.pieces if p.type == 1]
    assert all(SPACE not in p[1:] for p in learned)
    if split_digits:
        assert all(len(p) == 1 for p in learned if any("0" <= c <= "9" for c in p))
        assert sp.encode("2024", out_type=str) == [SPACE, "2", "0", "2", "4"]
    if byte_fallback:
        assert sp.encode("\u2603", out_type=str)[-3:] == ["<0xE2>", "<0x98>", "<0x83>"]
    scores = [p.score for p in proto.pieces if p.type == 1]
    assert scores == sorted(scores, reverse=True)


def test_scripts_without_spaces_learn_multi_character_pieces() -> None:
    lines = ["日本語の文章には単語の間に空白がありません", "東京大学で日本語の研究をしています",
             "日本語の文章を読みます"] * 30
    art = train_on(SentencePieceTrainer(model_type="unigram", vocab_size=60, character_coverage=1.0),
                   ["\n".join(lines) + "\n"])
    sp = spm.SentencePieceProcessor(model_proto=art.data)
    pieces = sp.encode("日本語の文章", out_type=str)
    assert len(pieces) < len("日本語の文章") and "".join(pieces).lstrip(SPACE) == "日本語の文章"


def test_training_is_deterministic(text: str) -> None:
    cut = text.index("\n", 5000) + 1
    for model_type in ("unigram", "bpe"):
        a = train_on(SentencePieceTrainer(model_type=model_type, vocab_size=500), [text[:60_000]]).data
        b = train_on(SentencePieceTrainer(model_type=model_type, vocab_size=500),
                     [text[:cut], text[cut:60_000]]).data
        assert a == b


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="model type"):
        SentencePieceTrainer(model_type="word", vocab_size=100)
    with pytest.raises(ValueError, match="leaves"):
        train_on(SentencePieceTrainer(model_type="bpe", vocab_size=200, byte_fallback=True), ["abc\n"])
    with pytest.raises(ValueError, match="no text"):
        train_on(SentencePieceTrainer(model_type="unigram", vocab_size=200), ["   \n\n"])


@pytest.mark.parametrize("options", [{}, {"byte_fallback": True, "split_digits": True},
                                     {"add_dummy_prefix": False, "remove_extra_whitespaces": False},
                                     {"split_by_unicode_script": False, "split_by_number": False,
                                      "split_by_whitespace": False, "max_piece_length": 8},
                                     {"control_tokens": ["<pad>", "<mask>"]}])
@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_model_file_bytes_equal_the_protobuf_serialization(model_type: str, options: dict[str, object]) -> None:
    trainer = SentencePieceTrainer(model_type=model_type, vocab_size=600, **options)  # type: ignore[arg-type]
    learned = [("▁the", -1.5), ("é", -3.25e-7), ("日本", -1e30), ("x", -0.0), ("▁", 2.5), ("長" * 39, -2.0),
               ("長" * 40, -7.0), ("a" * 300, -9.5)]
    proto = _model_proto_class()()
    for i, name in enumerate(trainer.meta):
        proto.pieces.add(piece=name, score=0.0, type=UNKNOWN if i == 0 else CONTROL)
    if trainer.byte_fallback:
        for b in range(256):
            proto.pieces.add(piece=f"<0x{b:02X}>", score=0.0, type=BYTE)
    for piece, score in learned:
        proto.pieces.add(piece=piece, score=score, type=1)
    ts = proto.trainer_spec
    ts.model_type = 1 if model_type == "unigram" else 2
    ts.vocab_size = len(proto.pieces)
    ts.max_sentencepiece_length = trainer.max_piece_length
    ts.split_by_unicode_script = trainer.split_by_unicode_script
    ts.split_by_whitespace = trainer.split_by_whitespace
    ts.split_by_number = trainer.split_by_number
    ts.split_digits = trainer.split_digits
    ts.byte_fallback = trainer.byte_fallback
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = 0, 1, 2, -1
    ns = proto.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = trainer.add_dummy_prefix
    ns.remove_extra_whitespaces = trainer.remove_extra_whitespaces
    ns.escape_whitespaces = True
    assert trainer._model_proto(learned) == proto.SerializeToString(deterministic=True)


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_nul_is_never_a_piece_and_encodes_as_in_sentencepiece(model_type: str) -> None:
    text = "abc def\x00ghi jkl\n" * 200 + "hello world \x00\x00\n" * 100
    art = train_on(SentencePieceTrainer(model_type=model_type, vocab_size=60), [text])
    proto = _model_proto_class()()
    proto.ParseFromString(art.data)
    assert all("\x00" not in p.piece for p in proto.pieces)
    sp = spm.SentencePieceProcessor(model_proto=art.data)  # it refuses a model with a NUL piece
    ours = build_pipeline("t", parse_model(art.data, "t.model"), source="t.model")
    for s in ["def\x00ghi", "\x00", "hello world \x00\x00", text[:300]]:
        assert list(ours.encode(s)) == sp.encode(s), s
    assert 0 in sp.encode("def\x00ghi")
