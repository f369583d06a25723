"""The compiled whitespace word counter against the Python splitters: the same words, counts and order."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from app.engine.training import compiled
from app.engine.training.sentencepiece import SentencePieceTrainer, sp_words
from app.engine.training.trainer import train_on
from app.engine.training.unigram import UnigramTrainer, metaspace_words
from app.engine.training.word_counter import WordCounter

from .family_corpus import corpus_text

pytestmark = pytest.mark.skipif(not compiled.available(), reason=f"no compiled trainer: {compiled.IMPORT_ERROR}")

ALPHABET = ["a", "b", "é", "日", " ", " ", " ", "\r", "\t", "\n", "1"]


def _chunks(rng: random.Random, with_marker: bool) -> list[str]:
    alphabet = ALPHABET + (["\u2581"] if with_marker else [])
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
    lines = text.split("\n")
    chunks, cur = [], ""
    for k, line in enumerate(lines):
        cur += line + ("\n" if k < len(lines) - 1 else "")
        if rng.random() < 0.3 and cur.endswith("\n"):
            chunks.append(cur)
            cur = ""
    if cur:
        chunks.append(cur + rng.choice(["", "\r", " \r", "\r\r"]))
    return chunks


def _splitters(dummy: bool) -> list[tuple[str, object, bool]]:
    return [("sentencepiece", lambda ln: sp_words(ln, add_dummy_prefix=dummy), dummy),
            ("metaspace", metaspace_words, True)]


@pytest.mark.parametrize("seed", range(40))
def test_native_words_equal_the_python_splitters(seed: int) -> None:
    rng = random.Random(seed)
    chunks = _chunks(rng, with_marker=seed % 5 == 4)
    for splitting, split, dummy in _splitters(seed % 2 == 0):
        native = WordCounter(splitting, split, dummy_prefix=dummy, backend="native")  # type: ignore[arg-type]
        python = WordCounter(splitting, split, dummy_prefix=dummy, backend="python")  # type: ignore[arg-type]
        assert native.native and not python.native
        for c in chunks:
            native.feed(c)
            python.feed(c)
        got, want = native.words(), python.words()
        assert list(got.items()) == list(want.items()), (splitting, chunks)


def test_marker_in_text_moves_counting_to_python_without_changing_the_result() -> None:
    chunks = ["a b\n", "b \u2581c a\n", "a\n"]
    for splitting, split, dummy in _splitters(True):
        native = WordCounter(splitting, split, dummy_prefix=dummy, backend="native")  # type: ignore[arg-type]
        python = WordCounter(splitting, split, dummy_prefix=dummy, backend="python")  # type: ignore[arg-type]
        for c in chunks:
            native.feed(c)
            python.feed(c)
        assert not native.native
        assert list(native.words().items()) == list(python.words().items())


def test_trainers_give_the_same_artifact_with_either_counter() -> None:
    text = corpus_text(30_000)
    for make in (lambda b: UnigramTrainer(vocab_size=500, backend=b),
                 lambda b: SentencePieceTrainer(model_type="bpe", vocab_size=500, backend=b)):
        arts = [train_on(make(b), [text]).data for b in ("python", "native")]  # type: ignore[no-untyped-call]
        assert arts[0] == arts[1]


RAW = [b"a", b"b", b"\xc3\xa9", b"\xe6\x97\xa5", b"\xf0\x9f\x99\x82", b" ", b" ", b"\r", b"\t", b"\n", b"1", b"\xff",
       b"\xc3", b"\xe6\x97", b"\xed\xa0\x80", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xc1\xbf", b"\x80", b"\x00"]


@pytest.mark.parametrize("seed", range(60))
def test_feed_utf8_equals_feeding_the_decoded_text(seed: int) -> None:
    """Raw chunks (valid or not, with or without U+2581, ending in "\r" or not) count as their decoded text does;
    the compiled counter takes a chunk as it is exactly when the strict decoder accepts it and it has no U+2581."""
    rng = random.Random(seed)
    alphabet = RAW + ([b"\xe2\x96\x81"] if seed % 4 == 3 else [])
    chunks = []
    for _ in range(rng.randint(1, 5)):
        chunk = b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        chunks.append(chunk + rng.choice([b"\n", b"", b"\r", b" \r"]) if seed % 2 else chunk)
    for splitting, split, dummy in _splitters(seed % 3 != 0):
        raw = WordCounter(splitting, split, dummy_prefix=dummy, backend="native")  # type: ignore[arg-type]
        python = WordCounter(splitting, split, dummy_prefix=dummy, backend="python")  # type: ignore[arg-type]
        for c in chunks:
            raw.feed_utf8(c)
            python.feed(c.decode("utf-8", errors="replace"))
        assert list(raw.words().items()) == list(python.words().items()), (splitting, chunks)
    for c in chunks:
        counter = compiled.trainer_module.PretokenCounter(compiled.trainer_module.SCAN_SP_WORDS)
        try:
            plain = "\u2581" not in c.decode("utf-8")
        except UnicodeDecodeError:
            plain = False
        assert counter.feed_utf8(c) is plain
        assert len(counter) == 0 or plain


def test_feed_utf8_validates_every_kind_of_sequence() -> None:
    """Every 1- to 4-byte sequence shape at the edges of the valid ranges, alone and at every offset of a longer
    text (the four-byte fast path and the tail loop), against Python's strict decoder."""
    edges = [0x00, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3,
             0xF4, 0xF5, 0xFF, 0x9F, 0xA0, 0x8F, 0x90]
    seqs = [bytes([a]) for a in edges] + [bytes([a, b]) for a in edges for b in edges]
    seqs += [bytes([a, b, c]) for a in edges[8:] for b in edges for c in (0x80, 0xBF, 0x41)]
    seqs += [bytes([a, b, c, d]) for a in edges[14:] for b in edges for c in (0x80, 0xBF) for d in (0x80, 0x41)]
    seqs += ["\u2581".encode(), "a\u2581".encode(), "\u2580\u2582".encode()]
    for seq in seqs:
        for pad in range(4):
            data = b"x" * pad + seq + b"yz"[: pad % 3]
            counter = compiled.trainer_module.PretokenCounter(compiled.trainer_module.SCAN_SP_WORDS)
            try:
                plain = "\u2581" not in data.decode("utf-8")
            except UnicodeDecodeError:
                plain = False
            assert counter.feed_utf8(data) is plain, data


def test_raw_training_gives_the_artifact_of_text_training(tmp_path: Path) -> None:
    """The CLI path (raw chunks to feed_utf8) and text chunks give the same artifacts, invalid bytes included."""
    from app.engine.training.families import train_family_to_store

    data = corpus_text(20_000).encode() + b"bad \xff\xfe bytes\r\nsplit \xe6\x97\n" + "日本語 テキスト\n".encode() * 50
    path = tmp_path / "c.txt"
    path.write_bytes(data)
    for kind, make in (("unigram", lambda: UnigramTrainer(vocab_size=400)),
                       ("sentencepiece-bpe", lambda: SentencePieceTrainer(model_type="bpe", vocab_size=400))):
        report = train_family_to_store([path], name="t", store_dir=tmp_path / kind, kind=kind, vocab_size=400,
                                       quiet=True, options={})
        text = train_on(make(), [data.decode("utf-8", errors="replace")])  # type: ignore[no-untyped-call]
        assert report.spec.artifact_path.read_bytes() == text.data, kind
