"""The compiled Unigram core (``app/engine/_native/unigram.c``) against the pure-Python reference
(``models/unigram.py`` + ``sp_normalizer.py``) and ``sentencepiece``: the bundled xlm-roberta on hostile strings,
long runs and multilingual text (``bench.corpora``), the normalizer alone, random SentencePiece models (user-defined
pieces, byte fallback, every normalizer flag) and random tie-heavy Hugging Face vocabularies (double arithmetic,
whole-run lookups, no unknown token), threads, and the ``$TOKENIZER_ENGINE=python`` switch."""

from __future__ import annotations

import math
import random
from functools import cache

import pytest
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

from app.engine.pipeline import Pipeline
from app.engine.pipeline.models import unigram as unigram_module
from app.engine.pipeline.models.unigram import Unigram
from app.engine.pipeline.sentencepiece import build_pipeline, parse_model
from app.engine.registry import get_store
from harness.references import sentencepiece_reference
from harness.texts import HOSTILE, SPECIAL_STRINGS, pieces, sample

from .corpus import hostile, long_strings
from .test_unigram import _text as tie_text
from .test_unigram import _vocab as tie_vocab

pytestmark = pytest.mark.skipif(unigram_module._EXT.module is None,
                                reason=f"compiled Unigram not built: {unigram_module._EXT.error}")


def _load(name: str, engine: str) -> Pipeline:
    """A fresh pipeline of a bundled tokenizer on one backend (the registry's copy is shared and native)."""
    import os

    from app.engine.loaders import load_tokenizer

    old = os.environ.get("TOKENIZER_ENGINE")
    os.environ["TOKENIZER_ENGINE"] = engine
    try:
        tok = load_tokenizer(get_store().spec(name))
    finally:
        if old is None:
            del os.environ["TOKENIZER_ENGINE"]
        else:
            os.environ["TOKENIZER_ENGINE"] = old
    assert isinstance(tok, Pipeline)
    return tok


@cache
def xlmr() -> tuple[Pipeline, Pipeline]:
    native, python = _load("xlm-roberta-sentencepiece", "native"), _load("xlm-roberta-sentencepiece", "python")
    assert native.model.native is not None  # type: ignore[attr-defined]
    assert native.text_path == "whole-text"  # no matchable added tokens: encode() makes one compiled call
    assert python.model.native is None and python.text_path == "python"  # type: ignore[attr-defined]
    return native, python


def _multilingual(total: int) -> list[str]:
    return pieces(total)


def _texts() -> list[str]:
    rng = random.Random(5)
    texts = [*HOSTILE, *sample(4, 300, seed=11), *hostile([], seed=3, count=600, token_limit=0)]
    docs = _multilingual(60_000)
    for _ in range(300):  # slices of multilingual documents, cut anywhere (half characters of scripts included)
        d = rng.choice(docs)
        i = rng.randrange(len(d))
        texts.append(d[i:i + rng.randrange(1, 400)])
    texts += ["\ud800", "a\udc00b", "\ud83d\ude42 x", " \udfff ", "\U0010ffff\ud800\udc00"]  # surrogates
    return texts


def test_compiled_equals_python_reference_on_xlm_roberta() -> None:
    native, python = xlmr()
    texts = _texts()
    for text in texts:
        assert native.encode(text) == python.encode(text), repr(text[:80])
    assert native.normalizer is not None and python.normalizer is not None
    compiled = native.normalizer.compiled()  # type: ignore[attr-defined]
    for text in texts:
        clean = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        assert compiled.normalize(text) == python.normalizer.normalize_str(clean), repr(text[:80])


def test_whole_text_call_equals_the_item_list_call() -> None:
    """``encode_text`` (one text, the GIL kept for short ones) gives what ``encode([text], normalizer, True)``
    gives, short and long, and refuses what is not a Normalizer and a str."""
    native, _ = xlmr()
    model = native.model.native  # type: ignore[attr-defined]
    compiled = native.normalizer.compiled()  # type: ignore[union-attr]
    for text in [*_texts()[:400], "x" * 511, "x " * 256, "\ud800" * 600, "日本語" * 300, ""]:
        for nz in (compiled, None):
            assert model.encode_text(nz, text) == model.encode([text], nz, True), repr(text[:40])
    with pytest.raises(TypeError):
        model.encode_text(None, b"x")
    with pytest.raises(TypeError):
        model.encode_text("nz", "x")
    with pytest.raises(TypeError):
        model.encode_text(None)


def test_long_runs_and_documents_equal_the_reference() -> None:
    """Whole multilingual documents, and runs without spaces, of one character, unknown characters and byte
    fallback scripts: one Viterbi each (no cutting), so the arithmetic over long paths is compared too."""
    native, python = xlmr()
    texts = [*long_strings(6000), *_multilingual(40_000)]
    texts += ["\U0001f642" * 3000, "\u0fff" * 2000, "a\u0301" * 2000, "\u2581" * 3000, " " * 5000 + "x"]
    for text in texts:
        assert native.encode(text) == python.encode(text), repr(text[:60])


def test_compiled_equals_sentencepiece_on_xlm_roberta() -> None:
    native, _ = xlmr()
    ref = sentencepiece_reference("xlm-roberta-sentencepiece")
    texts = [t for t in [*_texts(), *_multilingual(100_000)] if not any(s in t for s in SPECIAL_STRINGS)]
    for text in texts:
        if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            continue  # sentencepiece takes UTF-8 only
        assert native.encode(text) == ref.encode(text), repr(text[:80])
    # one document long enough for sentencepiece's float32 re-basing (path scores past -100,000)
    doc = "".join(_multilingual(400_000))[:60_000]
    ids = ref.encode(doc)
    assert sum(ref.get_score(i) for i in ids) < -100_000
    assert native.encode(doc) == ids


def test_normalizer_copy_loop_edges() -> None:
    """The compiled normalizer's copy loop (spaces and newlines, ASCII characters checked against the first byte of
    the next character, characters that start no key or start keys without being one) against the Python
    reference, for every flag combination on xlm-roberta's charsmap and with user-defined pieces: spaces before
    and after non-ASCII characters, characters before combining marks and other key continuations, keys of one
    non-ASCII character, Latin-1, BMP and astral strings."""
    from app.engine.pipeline.sp_normalizer import SentencePieceNormalizer

    charsmap = xlmr()[0].normalizer.charsmap  # type: ignore[union-attr]
    pool = ["a", "e", "Z", "1", " ", "  ", "   ", "\t", "\n", "\r", "\x00", "\x01", "\x7f", "\u0301", "\u0308",
            "\u0327", "\u0338", "\u00a0", "\u00ad", "\u00e9", "\u00c5", "\u00bd", "\u017f", "\u0436", "\u05b8",
            "\u0915\u093c", "\u1100\u1161", "\u3000", "\uff41", "\ufb01", "\u2460", "\u2581", "\u65e5",
            "\uac00", "\U0001f642", "\U0001d400", "\u200b", "\ufeff", "=", "<", ">",
            # letters that start keys without being one (their combining sequences are keys), and their marks
            "\u0435", "\u0438", "\u0306", "\u0627", "\u0653", "\u03b1", "\u0342", "\u0345", "\n\n", " \n "]
    rng = random.Random(17)
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 24))) for _ in range(2500)]
    latin1 = [c for c in pool if all(ord(x) < 256 for x in c)]
    texts += ["".join(rng.choice(latin1) for _ in range(rng.randint(1, 24))) for _ in range(500)]
    texts += [" " + c + " " for c in pool] + [c + "\u0301" for c in pool] + [c + d for c in pool for d in pool]
    compared = 0
    for flags in range(16):
        dummy, remove, escape, suffix = (bool(flags & b) for b in (1, 2, 4, 8))
        for user in ((), ("e\u0301x", " a", "\u65e5\u65e5")):
            ref = SentencePieceNormalizer(charsmap, add_dummy_prefix=dummy, remove_extra_whitespaces=remove,
                                          escape_whitespaces=escape, treat_whitespace_as_suffix=suffix,
                                          user_defined=user)
            compiled = ref.compiled()
            assert compiled is not None
            for text in texts:
                assert compiled.normalize(text) == ref.normalize_str(text), (flags, user, text)
                compared += 1
    assert compared == 32 * len(texts)


def _sp_model(rng: random.Random) -> bytes:
    """A small random SentencePiece Unigram model: characters, pieces, user-defined pieces, maybe byte pieces,
    random normalizer flags, with or without xlm-roberta's charsmap."""
    proto = pb.ModelProto()
    proto.pieces.add(piece="<unk>", score=0.0, type=2)
    proto.pieces.add(piece="<s>", score=0.0, type=3)
    proto.pieces.add(piece="</s>", score=0.0, type=3)
    alphabet = "ab▁cé日"
    pieces = set(rng.sample(alphabet, rng.randint(3, len(alphabet))))
    while len(pieces) < 40:
        pieces.add("".join(rng.choice(alphabet) for _ in range(rng.randint(2, 5))))
    user = {"".join(rng.choice(alphabet) for _ in range(rng.randint(2, 6))) for _ in range(rng.randint(0, 4))}
    levels = [-rng.uniform(0.05, 6.0) for _ in range(5)]  # few distinct scores: ties
    for piece in sorted(pieces - user):
        proto.pieces.add(piece=piece, score=rng.choice(levels), type=1)
    for piece in sorted(user):
        proto.pieces.add(piece=piece, score=0.0, type=4)
    byte_fallback = rng.random() < 0.5
    if byte_fallback:
        for b in range(256):
            proto.pieces.add(piece=f"<0x{b:02X}>", score=0.0, type=6)
    ts = proto.trainer_spec
    ts.model_type = pb.TrainerSpec.UNIGRAM
    ts.vocab_size = len(proto.pieces)
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = 0, 1, 2, -1
    ts.byte_fallback = byte_fallback
    ts.treat_whitespace_as_suffix = rng.random() < 0.2
    ns = proto.normalizer_spec
    ns.name = "random"
    ns.add_dummy_prefix = rng.random() < 0.7
    ns.remove_extra_whitespaces = rng.random() < 0.6
    ns.escape_whitespaces = rng.random() < 0.8
    if rng.random() < 0.5:
        ns.precompiled_charsmap = xlmr()[0].normalizer.charsmap.blob  # type: ignore[union-attr]
    return proto.SerializeToString()


def _sp_text(rng: random.Random) -> str:
    pool = ["a", "b", "c", "é", "e\u0301", "日", "▁", " ", "  ", "\t", "x", "ｂ", "①", "\x01", "🙂", "\u3000"]
    return "".join(rng.choice(pool) for _ in range(rng.randint(0, 30)))


def test_random_sentencepiece_models(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(20261201)
    compared = 0
    for k in range(16):  # few models, many texts each
        data = _sp_model(rng)
        ref = spm.SentencePieceProcessor(model_proto=data)
        vocab = parse_model(data, "r.model")
        native = build_pipeline(f"r{k}", vocab, source="r.model")
        monkeypatch.setenv("TOKENIZER_ENGINE", "python")
        python = build_pipeline(f"r{k}", vocab, source="r.model")
        monkeypatch.delenv("TOKENIZER_ENGINE")
        assert native.text_path == "whole-text" and python.text_path == "python"
        for _ in range(120):
            text = _sp_text(rng)
            expected = ref.encode(text)
            assert native.encode(text) == expected, (k, text)
            assert python.encode(text) == expected, (k, text)
            compared += 1
    assert compared == 1920


def test_sentencepiece_models_with_huge_or_infinite_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Models with a score of 1e30 or more in magnitude, or -inf, take the search's general form (a record's first
    candidate is found by its unset start, not by beating -inf, which a -inf candidate would not): the same ids as
    ``sentencepiece`` (which refuses infinite scores) and as the Python reference (which takes them), re-basing at
    nearly every character included."""
    rng = random.Random(31)
    compared = 0
    for k in range(16):
        proto = pb.ModelProto()
        proto.ParseFromString(_sp_model(rng))
        infinite = k % 2 == 1
        for p in rng.sample([p for p in proto.pieces if p.type == 1], 4):
            p.score = rng.choice([-math.inf, -1e31] if infinite else [-1e31, -3e35, 2e30])
        data = proto.SerializeToString()
        vocab = parse_model(data, "h.model")
        native = build_pipeline(f"h{k}", vocab, source="h.model")
        monkeypatch.setenv("TOKENIZER_ENGINE", "python")
        python = build_pipeline(f"h{k}", vocab, source="h.model")
        monkeypatch.delenv("TOKENIZER_ENGINE")
        assert native.model.native is not None and python.model.native is None  # type: ignore[attr-defined]
        ref = None if infinite else spm.SentencePieceProcessor(model_proto=data)
        for _ in range(60):
            text = _sp_text(rng)
            expected = python.encode(text)
            assert native.encode(text) == expected, (k, text)
            if ref is not None:
                assert ref.encode(text) == expected, (k, text)
            compared += 1
    assert compared == 960


def test_random_hugging_face_vocabularies() -> None:
    """Double arithmetic, unknown runs that spell a piece, partial byte fallback; and a model without an unknown
    token, where an uncovered character is the reference's error."""
    rng = random.Random(4)
    compared = 0
    for _ in range(40):
        vocab, byte_fallback = tie_vocab(rng)
        config = {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": byte_fallback}
        native, python = Unigram.from_hf(config), Unigram.from_hf(config)
        python.use_reference()
        assert native.native is not None and python.native is None
        texts = [tie_text(rng) for _ in range(60)]
        for text in texts:
            assert native.tokenize(text) == python.tokenize(text), (vocab, text)
            compared += 1
        assert native.encode_pieces([*texts[:5], 7, *texts[5:9]], 16) == python.encode_pieces(
            [*texts[:5], 7, *texts[5:9]], 16)
    assert compared == 2400
    no_unk = Unigram([("a", -1.0), ("b", -2.0)], unk_id=None)
    assert no_unk.native is not None
    assert no_unk.tokenize("abba") == [0, 1, 1, 0]
    with pytest.raises(ValueError, match="no piece"):
        no_unk.tokenize("abxa")
    with_unk = Unigram([("a", -1.0), ("<unk>", 0.0)], unk_id=1, byte_fallback=True)
    reference = Unigram([("a", -1.0), ("<unk>", 0.0)], unk_id=1, byte_fallback=True, backend="python")
    for text in ("a\ud800a", "\udc00", "a\ud83d\ude42"):  # surrogates: the compiled model hands over
        assert with_unk.tokenize(text) == reference.tokenize(text)


def test_threads_give_the_same_ids() -> None:
    native, python = xlmr()
    texts = [t for t in _multilingual(60_000) for _ in range(2)]
    expected = [python.encode(t) for t in texts]
    assert native.encode_batch(texts, num_threads=4) == expected


def test_python_engine_switch_and_backend_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    native, python = xlmr()
    assert native.backend == "native" and python.backend == "python"
    monkeypatch.setenv("TOKENIZER_ENGINE", "python")
    model = Unigram([("a", -1.0), ("<unk>", 0.0)], unk_id=1)
    assert model.native is None and model.backend == "python"
    monkeypatch.setenv("TOKENIZER_ENGINE", "native")
    model = Unigram([("a", -1.0), ("<unk>", 0.0)], unk_id=1)
    assert model.native is not None and model.backend == "native"
    assert model.tokenize("aza") == [0, 1, 0]


def test_fused_pipeline_with_added_tokens_and_sentencepiece_normalizer() -> None:
    """Raw stretches between matched (non-special) added tokens go to the fused call as the reference splits
    them; special ones never match."""
    from app.engine.pipeline.added import AddedToken
    from app.engine.pipeline.sp_normalizer import SentencePieceNormalizer

    rng = random.Random(9)
    vocab = [("<unk>", 0.0), *[(p, -rng.uniform(1, 5)) for p in ["▁", "a", "b", "ab", "▁a", "é", "ba", "▁ab"]]]
    added = [AddedToken("[X]", len(vocab)), AddedToken("<s>", len(vocab) + 1, special=True),
             AddedToken("ab", 4, lstrip=True)]

    def pipeline(backend: str, normalizer: SentencePieceNormalizer | None, tokens: list[AddedToken]) -> Pipeline:
        model = Unigram(vocab, unk_id=0, float32=True, backend=backend)
        return Pipeline(name=f"p-{backend}", model=model, normalizer=normalizer, added_tokens=tokens)

    pool = ["a", "b", "ab", " ", "  ", "[X]", "<s>", "é", "x", "\ud800", "\udc00", "▁", "\U0001f642"]
    for normalizer in (SentencePieceNormalizer(), None):
        for tokens in (added, []):
            native, python = pipeline("native", normalizer, tokens), pipeline("python", normalizer, tokens)
            assert native.text_path == ("fused" if tokens else "whole-text") and python.text_path == "python"
            for _ in range(300):
                text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 12)))
                assert native.encode(text) == python.encode(text), (text, normalizer, tokens)


def test_tokenizer_json_unigram_honours_the_backend() -> None:
    """A ``tokenizer.json`` Unigram model is compiled unless the python backend is asked for, with the same ids."""
    from tokenizers import Tokenizer, models

    from app.engine.pipeline.hf_json import from_hf_json

    rng = random.Random(12)
    vocab, byte_fallback = tie_vocab(rng)
    document = Tokenizer(models.Unigram(vocab, 0, byte_fallback)).to_str()
    native, python = from_hf_json(document, "n", backend="native"), from_hf_json(document, "p", backend="python")
    assert isinstance(native, Pipeline) and isinstance(python, Pipeline)
    assert native.model.native is not None and python.model.native is None  # type: ignore[attr-defined]
    for _ in range(300):
        text = tie_text(rng)
        assert native.encode(text) == python.encode(text), text


# -- the compiled model's dump (the artifact cache's unigram-model part) ---------------------------------------------


@pytest.mark.parametrize("float32", [False, True])
def test_dump_load_round_trip(float32: bool) -> None:
    from app.engine.pipeline.compiled import UNIGRAM

    assert UNIGRAM.module is not None
    vocab = [("<unk>", 0.0), ("▁a", -1.0), ("b", -2.0), ("▁ab", -1.5), ("東京", -3.0), ("🙂", -4.0), ("a", -2.5),
             *((f"<0x{b:02X}>", -9.0) for b in range(256))]
    model = Unigram(vocab, unk_id=0, byte_fallback=True, float32=float32, backend="native", cache_size=64)
    assert model.native is not None
    dump = model.native.dump()
    loaded = UNIGRAM.module.Model.load(dump, 64)
    assert loaded.dump() == dump
    for text in ["▁ab▁a東京🙂xyz", "bbbb▁a▁a", "", "\U0001f600▁é"]:
        assert loaded.tokenize(text) == model.native.tokenize(text)
    for cut in (0, 8, 71, len(dump) - 1):
        with pytest.raises(ValueError):
            UNIGRAM.module.Model.load(dump[:cut])
    damaged = bytearray(dump)
    damaged[72 + 1024:72 + 1028] = (1 << 30).to_bytes(4, "little")  # the root's children beyond the array
    with pytest.raises(ValueError):
        UNIGRAM.module.Model.load(bytes(damaged))
