"""The compiled word-table helpers (``train_words.c``, ``PretokenCounter.words``, the learner's ``alphabet`` words)
against the Python reference: the same counts, pieces, order, and the same SentencePiece artifacts."""

from __future__ import annotations

import random

import pytest

from app.engine.training import compiled
from app.engine.training.merges import text_order_key
from app.engine.training.sentencepiece import SentencePieceTrainer
from app.engine.training.trainer import train_on
from app.engine.training.unigram import char_counts, required_characters, split_unknown

from .family_corpus import corpus_text

pytestmark = pytest.mark.skipif(not compiled.available(), reason=f"no compiled trainer: {compiled.IMPORT_ERROR}")

# BMP and astral characters, the marker, a combining mark, digits
ALPHABET = ["a", "b", "é", "日", "\u2581", "\u0301", "1", "😀", "𝕏", "z"]


def _words(rng: random.Random) -> dict[str, int]:
    out: dict[str, int] = {}
    for _ in range(rng.randint(0, 60)):
        w = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 12)))
        out[w] = out.get(w, 0) + rng.choice([1, 1, 2, 3, 7, 10**12])
    return out


@pytest.mark.parametrize("seed", range(60))
def test_char_counts_and_split_unknown_equal_the_python_reference(seed: int) -> None:
    rng = random.Random(seed)
    words = _words(rng)
    native, python = char_counts(words, backend="native"), char_counts(words, backend="python")
    assert dict(native) == dict(python)
    assert sorted(native) == sorted(python)
    required = set(rng.sample(ALPHABET, rng.randint(0, len(ALPHABET))))
    got, want = split_unknown(words, required, backend="native"), split_unknown(words, required, backend="python")
    assert list(got.items()) == list(want.items())
    if words:
        for coverage in (0.5, 0.9995, 1.0):
            assert (required_characters(words, coverage, backend="native")
                    == required_characters(words, coverage, backend="python"))


def test_split_unknown_sums_equal_pieces_in_first_appearance_order() -> None:
    words = {"ab?cd": 2, "cd": 3, "x?ab": 1, "??": 5}
    assert list(split_unknown(words, {"a", "b", "c", "d", "x"}, backend="native").items()) == [
        ("ab", 3), ("cd", 5), ("x", 1)]
    with pytest.raises(TypeError):
        split_unknown(words, {"ab"}, backend="native")


def test_learner_alphabet_words_equal_id_lists() -> None:
    rng = random.Random(5)
    alphabet = "abcdé日"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(300)]
    words = list(dict.fromkeys(words))
    counts = [rng.randint(1, 9) for _ in words]
    opts = dict(base_symbols=list(alphabet), concat=lambda x, y: x + y, order_key=text_order_key, unit_length=len,
                max_symbols=60, min_frequency=2, tie_break="first-seen", keep_words=False)
    by_str = compiled.learn_merges_native(words, counts, alphabet=alphabet, **opts)  # type: ignore[arg-type]
    ids = [[alphabet.index(c) for c in w] for w in words]
    by_ids = compiled.learn_merges_native(ids, counts, **opts)  # type: ignore[arg-type]
    assert by_str.merges == by_ids.merges and by_str.symbols == by_ids.symbols
    assert len(by_str.merges) > 10
    with pytest.raises(ValueError, match="not in the alphabet"):
        compiled.learn_merges_native(["az"], [3], alphabet=alphabet, **opts)  # type: ignore[arg-type]


@pytest.mark.parametrize("options", [{}, {"split_digits": True, "byte_fallback": True},
                                     {"add_dummy_prefix": False, "character_coverage": 0.98}])
def test_sentencepiece_bpe_artifact_is_byte_identical_across_backends(options: dict[str, object]) -> None:
    text = corpus_text(120_000, seed=4)
    arts = [train_on(SentencePieceTrainer(model_type="bpe", vocab_size=1500, backend=b, **options),  # type: ignore[arg-type]
                     [text]) for b in ("python", "native")]
    assert arts[0].data == arts[1].data
    assert arts[0].summary == arts[1].summary


@pytest.mark.parametrize("seed", range(16))
def test_counter_char_counts_and_counter_words_learner_equal_the_python_path(seed: int) -> None:
    rng = random.Random(seed)
    symbols = [*"abcé日 \t\r1", "😀", "\x00", "  ", "\n", "ab", " a"]
    text = "".join(rng.choice(symbols) for _ in range(rng.randint(200, 3000)))
    dummy = seed % 2 == 0
    vocab, coverage = 80 + rng.randint(0, 60), rng.choice([1.0, 0.98, 0.9])
    trainers = [SentencePieceTrainer(model_type="bpe", vocab_size=vocab, add_dummy_prefix=dummy,
                                     character_coverage=coverage, backend=b) for b in ("python", "native")]
    for tr in trainers:
        tr.feed(text)
    wc = trainers[1]._words
    assert wc.counter is not None  # the compiled path below is the one under test
    counts, distinct = wc.counter.char_counts(*wc.word_rules)
    words = wc.words()
    assert counts == dict(char_counts(words, backend="python")) and distinct == len(words)
    arts = [tr.finish() for tr in trainers]
    assert arts[0].data == arts[1].data
    assert arts[0].summary == arts[1].summary
