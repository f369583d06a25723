"""The compiled whitespace word counter against the Python splitters: the same words, counts and order."""

from __future__ import annotations

import random

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
