"""The compiled Unigram word cache (``unigram.c``, "words"; ``$TOKENIZER_UNIGRAM_WORD_CACHE``): a word's best path
is reused only where it is provably what the float32 search finds at that point of the text, so the ids equal
``sentencepiece`` and the cache-off model everywhere: long texts whose path scores go through SentencePiece's
re-basing several times (repeated words at many different base scores), xlm-roberta's own near-tie words,
synthetic models whose float32 rounding flips a decision from one base score to another (exact ties included),
random tie-heavy models, threads with the cache cleared under them; and where the cache is switched off."""

from __future__ import annotations

import random
import threading
from functools import cache

import pytest
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

from app.engine.loaders import load_tokenizer
from app.engine.pipeline import Pipeline
from app.engine.pipeline.models import unigram as unigram_module
from app.engine.pipeline.models.unigram import WORD_CACHE_ENV, Unigram, word_cache_size
from app.engine.pipeline.sampling import nbest_encodings
from app.engine.pipeline.sentencepiece import build_pipeline, parse_model
from app.engine.registry import get_store
from harness.references import sentencepiece_reference
from harness.texts import pieces

pytestmark = pytest.mark.skipif(unigram_module._EXT.module is None,
                                reason=f"compiled Unigram not built: {unigram_module._EXT.error}")

SLOTS = 4096

#: xlm-roberta words whose two best segmentations are closest (found by searching the corpora's words, pieces and
#: pairs of pieces with ``nbest_encodings``; the test checks the margins again).
NEAR_TIES = ["ఫ్లالبي", "நூற்றாண்டВис", "pastarajir", "jamiтопл", "ukidomácí", "પ્રવેશboly", "המבוקשת",
             "Legitimation", "Legitimierung", "fustaпреми", "birimlerielf", "pieredzēČlovek", "Crontabs",
             "Απαιτείται", "למסך", "optional", "Ετικέτα", "πακέτα", "Content-Range", "XPM", "Kernel"]


def _xlmr(slots: int) -> Pipeline:
    import os

    old = os.environ.get(WORD_CACHE_ENV)
    os.environ[WORD_CACHE_ENV] = str(slots)
    try:
        tok = load_tokenizer(get_store().spec("xlm-roberta-sentencepiece"))
    finally:
        if old is None:
            del os.environ[WORD_CACHE_ENV]
        else:
            os.environ[WORD_CACHE_ENV] = old
    assert isinstance(tok, Pipeline)
    return tok


@cache
def xlmr() -> tuple[Pipeline, Pipeline, spm.SentencePieceProcessor]:
    on, off = _xlmr(SLOTS), _xlmr(0)
    assert on.cache_stats().max_size == SLOTS and off.cache_stats().max_size == 0
    assert on.text_path == "whole-text"  # the compiled whole-text call
    return on, off, sentencepiece_reference("xlm-roberta-sentencepiece")


@cache
def _words() -> list[str]:
    return [w for d in pieces(200_000) for w in d.split()]


def _long_text(rng: random.Random, words: list[str], count: int, extra: list[str] = (), every: int = 0) -> str:
    out = []
    for k in range(count):
        out.append(rng.choice(extra) if every and k % every == 0 else rng.choice(words))
    return " ".join(out)


def _check(on: Pipeline, off: Pipeline, sp: spm.SentencePieceProcessor, text: str) -> list[int]:
    expected = sp.encode(text)
    assert off.encode(text) == expected
    assert on.encode(text) == expected
    return expected


def test_long_texts_through_many_rebasings_equal_sentencepiece() -> None:
    on, off, sp = xlmr()
    rng = random.Random(11)
    words = _words()
    on.clear_cache()
    for _ in range(3):  # ~100k characters each, words repeated at every base score the search goes through
        text = _long_text(rng, words, 16_000)
        ids = _check(on, off, sp, text)
        assert sum(sp.get_score(i) for i in ids) < -250_000  # SentencePiece re-based several times
    stats = on.cache_stats()
    assert stats.hits > 10_000 and stats.size > 1000


def test_near_tie_words_at_many_base_scores() -> None:
    on, off, sp = xlmr()
    for word in NEAR_TIES:
        best = nbest_encodings(off, word, 2)
        assert len(best) == 2 and 0 < best[0][1] - best[1][1] < 0.02, word
    rng = random.Random(12)
    on.clear_cache()
    for k in range(2):
        _check(on, off, sp, _long_text(rng, _words(), 30_000, NEAR_TIES, every=2 + k))
    # and each near tie alone after every possible short prefix (small base scores, where reuse is allowed)
    for word in NEAR_TIES:
        for prefix in ("", "a ", "the ", "x y z ", "Straße ", "日本 "):
            _check(on, off, sp, f"{prefix}{word} {word} {prefix}{word}")


def _flip_model(delta: float) -> bytes:
    """``▁ab`` scores exactly ``▁a`` + ``b`` minus ``delta``: in exact arithmetic one of them wins by ``delta``
    (or they tie), while float32 sums at a large base score round either way."""
    proto = pb.ModelProto()
    proto.pieces.add(piece="<unk>", score=0.0, type=2)
    proto.pieces.add(piece="<s>", score=0.0, type=3)
    proto.pieces.add(piece="</s>", score=0.0, type=3)
    for piece, score in [("▁", -8.0), ("a", -6.0), ("c", -6.0), ("b", -1.25 + delta), ("▁a", -1.75),
                         ("▁ab", -3.0), ("ab", -4.0), ("▁c", -15.0), ("▁cc", -14.0), ("ca", -7.5)]:
        proto.pieces.add(piece=piece, score=score, type=1)
    ts = proto.trainer_spec
    ts.model_type = pb.TrainerSpec.UNIGRAM
    ts.vocab_size = len(proto.pieces)
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = 0, 1, 2, -1
    ns = proto.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = True
    ns.remove_extra_whitespaces = True
    ns.escape_whitespaces = True
    return proto.SerializeToString()


def _pipelines(data: bytes, monkeypatch: pytest.MonkeyPatch, slots: int = 1024) -> tuple[Pipeline, Pipeline]:
    vocab = parse_model(data, "m.model")
    monkeypatch.setenv(WORD_CACHE_ENV, str(slots))
    on = build_pipeline("on", vocab, source="m.model")
    monkeypatch.delenv(WORD_CACHE_ENV)
    off = build_pipeline("off", vocab, source="m.model")
    return on, off


@pytest.mark.parametrize("delta", [0.0, 2.0 ** -22, 2.0 ** -14, 2.0 ** -9, 2.0 ** -5, 0.25])
def test_float32_rounding_flips_and_exact_ties(delta: float, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _flip_model(delta)
    sp = spm.SentencePieceProcessor(model_proto=data)
    on, off = _pipelines(data, monkeypatch)
    assert on.cache_stats().max_size == 1024
    rng = random.Random(int(delta * 1e9) + 7)
    whole, split = sp.piece_to_id("▁ab"), sp.piece_to_id("▁a")
    seen = set()
    for _ in range(2):  # each past the re-basing threshold
        text = _long_text(rng, ["ab", "ab", "ab", "c", "cc", "a", "abab", "ca", "cab"], 12_000)
        ids = _check(on, off, sp, text)
        seen |= {i for i in ids if i in (whole, split)}
        assert sum(sp.get_score(i) for i in ids) < -100_000
    if delta < 2.0 ** -14:
        assert seen == {whole, split}  # the reference's own choice for "ab" changes along the text
    assert on.cache_stats().hits > 1000


def _tie_model(rng: random.Random) -> bytes:
    """A small random SentencePiece Unigram model with ``▁`` only at the start of pieces and few distinct scores
    (exact ties everywhere, float32 near ties between sums), maybe byte fallback and user-defined pieces."""
    proto = pb.ModelProto()
    proto.pieces.add(piece="<unk>", score=0.0, type=2)
    proto.pieces.add(piece="<s>", score=0.0, type=3)
    proto.pieces.add(piece="</s>", score=0.0, type=3)
    alphabet = "abcé日"
    pieces = {"▁", *rng.sample(alphabet, rng.randint(2, len(alphabet)))}
    while len(pieces) < 60:
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5)))
        pieces.add("▁" + body if rng.random() < 0.4 else body)
    user = {"▁" + rng.choice(alphabet) * 3} if rng.random() < 0.3 else set()
    levels = [-rng.choice([0.5, 1.0, 1.5, 2.0, 3.0, 0.1, 0.7]) - rng.randrange(4) * 2.0 ** -rng.randint(10, 23)
              for _ in range(6)]
    for piece in sorted(pieces - user):
        proto.pieces.add(piece=piece, score=rng.choice(levels), type=1)
    for piece in sorted(user):
        proto.pieces.add(piece=piece, score=0.0, type=4)
    byte_fallback = rng.random() < 0.4
    if byte_fallback:
        for b in range(256):
            proto.pieces.add(piece=f"<0x{b:02X}>", score=0.0, type=6)
    ts = proto.trainer_spec
    ts.model_type = pb.TrainerSpec.UNIGRAM
    ts.vocab_size = len(proto.pieces)
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = 0, 1, 2, -1
    ts.byte_fallback = byte_fallback
    ns = proto.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = rng.random() < 0.8
    ns.remove_extra_whitespaces = rng.random() < 0.6
    ns.escape_whitespaces = True
    return proto.SerializeToString()


def test_random_tie_heavy_models_on_long_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(20261202)
    pool = ["a", "b", "c", "é", "日", "ab", "ba", "cab", "aé", "x", "bb", "ccc", "🙂"]
    for _ in range(16):
        data = _tie_model(rng)
        on, off = _pipelines(data, monkeypatch)
        assert on.cache_stats().max_size == 1024
        sp = spm.SentencePieceProcessor(model_proto=data)
        words = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 5))) for _ in range(30)]
        for count in (40, 4000, 40_000):  # the longest past the re-basing threshold
            text = _long_text(rng, words, count)
            assert on.encode(text) == off.encode(text) == sp.encode(text)
        assert on.cache_stats().hits > 0


def test_threads_and_clears_under_them() -> None:
    on, off, _ = xlmr()
    rng = random.Random(13)
    words = _words()
    texts = [_long_text(rng, words[:3000], 300) for _ in range(24)]  # >= 512 characters: the GIL is released
    expected = [off.encode(t) for t in texts]
    stop = threading.Event()

    def clear() -> None:
        while not stop.is_set():
            on.clear_cache()

    clearer = threading.Thread(target=clear)
    clearer.start()
    try:
        for _ in range(3):
            assert on.encode_batch(texts, num_threads=4) == expected
    finally:
        stop.set()
        clearer.join()
    on.clear_cache()
    assert on.encode_batch(texts * 2, num_threads=4) == expected * 2


def test_when_there_is_no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    # a piece with ▁ after its first character could cross a word's start: no cache, same ids
    proto = pb.ModelProto.FromString(_flip_model(0.5))
    proto.pieces.add(piece="b▁c", score=-2.0, type=1)
    proto.trainer_spec.vocab_size = len(proto.pieces)
    data = proto.SerializeToString()
    on, off = _pipelines(data, monkeypatch)
    assert on.cache_stats().max_size == 0
    sp = spm.SentencePieceProcessor(model_proto=data)
    text = "ab c ab cab " * 500
    assert on.encode(text) == off.encode(text) == sp.encode(text)
    # double arithmetic (Hugging Face), the default, an explicit 0, a bad setting
    hf = Unigram([("<unk>", 0.0), ("▁a", -1.0), ("b", -2.0)], unk_id=0, cache_size=SLOTS)
    assert hf.cache_stats().max_size == 0
    assert word_cache_size() == 0 and word_cache_size(16384) == 0
    monkeypatch.setenv(WORD_CACHE_ENV, "64")
    assert word_cache_size() == 64 and word_cache_size(0) == 0
    monkeypatch.setenv(WORD_CACHE_ENV, "-1")
    with pytest.raises(ValueError):
        word_cache_size()


def test_stats_and_clear() -> None:
    on, off, sp = xlmr()
    on.clear_cache()
    assert on.cache_stats().hits == 0 and on.cache_stats().size == 0
    text = "hello world hello world hello world"
    assert on.encode(text) == sp.encode(text)
    stats = on.cache_stats()
    # first occurrences are searched as usual, second ones enter the cache, later ones are hits
    assert (stats.hits, stats.misses, stats.size) == (2, 2, 2)
    on.clear_cache()
    assert on.cache_stats().size == 0
    assert on.encode(text) == off.encode(text)
