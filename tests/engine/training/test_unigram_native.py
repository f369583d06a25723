"""The compiled Unigram learner (``UnigramWords`` in ``app.engine._native._trainer``) against the Python reference
of :mod:`app.engine.training.unigram`: the same seeds, E-step counts and pruning decisions bit for bit, the same
artifacts byte for byte, whatever the number of threads."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from app.engine.training import compiled
from app.engine.training.sentencepiece import SentencePieceTrainer
from app.engine.training.trainer import train_on
from app.engine.training.unigram import (
    SPACE,
    PieceRules,
    UnigramTrainer,
    _em_step,
    _prune,
    _seed_candidates,
    char_counts,
    learn_unigram,
    split_unknown,
)

from .family_corpus import corpus_text

pytestmark = pytest.mark.skipif(not compiled.available(), reason=f"no compiled trainer: {compiled.IMPORT_ERROR}")


def _random_words(rng: random.Random, alphabet: str, n: int) -> dict[str, int]:
    words: Counter[str] = Counter()
    for _ in range(n):
        w = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        words[w] += rng.choice((1, 1, 2, 5))
    return dict(words)


@pytest.mark.parametrize("seed", range(6))
def test_seeds_e_step_and_pruning_equal_the_python_reference(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = rng.choice(["ab", "abc", f"ab{SPACE}1", "xyé日本"])
    words = _random_words(rng, alphabet, 400)
    items = list(words.items())
    max_len = rng.choice([3, 5, 16])
    rules = PieceRules(split_digits=seed % 2 == 0)
    uw = compiled.trainer_module.UnigramWords([w for w, _ in items], [f for _, f in items], max_len)
    python_seeds = _seed_candidates(items, rules, max_len, 10_000)
    assert uw.seed(*rules.native(), 2, 10_000) == python_seeds
    assert uw.seed(*rules.native(), 2, 7) == python_seeds[:7]
    chars = sorted({c for w in words for c in w})
    pieces = chars + [s for _, s in python_seeds[:60]]
    rng.shuffle(pieces)
    # random scores with deliberate ties
    scores = {p: -float(rng.choice([1, 2, 2, 3])) - rng.choice([0.0, 0.5]) for p in pieces}
    expected_py, ll_py = _em_step(items, pieces, scores, max_len)
    for threads in (1, 2, 3):
        expected_c, ll_c = _em_step(items, pieces, scores, max_len, uw, threads)
        assert ll_c == ll_py  # the same bits, not approximately
        assert expected_c == expected_py
    req = set(chars)
    keep = len(chars) + 20
    for hf_loss in (False, True):
        kept_py = _prune(items, pieces, scores, req, max_len, keep, hf_loss=hf_loss)
        assert len(kept_py) < len(pieces)
        for threads in (1, 2):
            assert _prune(items, pieces, scores, req, max_len, keep, uw, threads, hf_loss) == kept_py


def test_learned_pieces_equal_for_both_backends_and_any_thread_count() -> None:
    rng = random.Random(5)
    words = _random_words(rng, f"abcd{SPACE}", 1500)
    runs = [learn_unigram(words, vocab_size=60, required=list(f"abcd{SPACE}"), valid=PieceRules(),
                          seed_size=3000, backend=b, threads=t)[0]
            for b, t in (("python", 1), ("native", 1), ("native", 2))]
    assert runs[0] == runs[1] == runs[2]
    assert any(len(p) > 2 for p, _ in runs[0])


def test_unigram_artifact_is_byte_identical_across_backends_and_threads() -> None:
    text = corpus_text(60_000)
    arts = [train_on(UnigramTrainer(vocab_size=900, special_tokens=["<s>"], backend=b, threads=t), [text])
            for b, t in (("python", 1), ("native", 1), ("native", 2))]
    assert arts[0].summary["backend"] == "python" and arts[1].summary["backend"] == "native"
    assert arts[0].data == arts[1].data == arts[2].data


def test_sentencepiece_unigram_artifact_is_byte_identical_across_backends() -> None:
    text = corpus_text(40_000)
    opts = dict(model_type="unigram", vocab_size=1200, byte_fallback=True, split_digits=True)
    python = train_on(SentencePieceTrainer(backend="python", **opts), [text]).data  # type: ignore[arg-type]
    native = train_on(SentencePieceTrainer(backend="native", threads=2, **opts), [text]).data  # type: ignore[arg-type]
    assert python == native


def test_arguments_are_checked() -> None:
    uw = compiled.trainer_module.UnigramWords(["ab"], [1], 4)
    with pytest.raises(RuntimeError):
        uw.e_step([0.0], 1)  # no pieces yet
    uw.set_pieces(["a", "b"])
    with pytest.raises(ValueError):
        uw.e_step([0.0], 1)  # one score per piece
    with pytest.raises(ValueError):
        uw.e_step([0.0, 0.0], 0)
    counts, ll = uw.e_step([math.log(0.5), math.log(0.5)], 1)
    assert counts == [1.0, 1.0] and ll == pytest.approx(2 * math.log(0.5))
    with pytest.raises(ValueError):
        compiled.trainer_module.UnigramWords(["ab"], [1, 2], 4)
    with pytest.raises(ValueError):
        learn_unigram({"ab": 1}, vocab_size=4, required=["a", "b"], threads=0)
    with pytest.raises(ValueError, match="prune loss"):
        learn_unigram({"ab": 1}, vocab_size=4, required=["a", "b"], prune_loss="spm")


@pytest.mark.parametrize(("vocab", "shrink", "em", "seed_size", "loss"),
                         [(40, 0.5, 1, 400, "sentencepiece"), (25, 0.9, 3, 5000, "huggingface"),
                          (300, 0.75, 2, 200, "sentencepiece"), (60, 0.75, 2, 3000, "huggingface")])
def test_learner_options_and_progress_equal_across_backends(vocab: int, shrink: float, em: int,
                                                            seed_size: int, loss: str) -> None:
    rng = random.Random(vocab)
    words = _random_words(rng, f"abcdé{SPACE}1", 800)
    required = sorted({c for w in words for c in w})
    results = []
    for backend, threads in (("python", 1), ("native", 1), ("native", 2)):
        calls: list[tuple[int, int | None]] = []
        pieces, info = learn_unigram(words, vocab_size=vocab, required=required, valid=PieceRules(split_digits=True),
                                     seed_size=seed_size, shrinking_factor=shrink, em_iterations=em, prune_loss=loss,
                                     progress=lambda d, t: calls.append((d, t)), backend=backend,  # noqa: B023
                                     threads=threads)
        info.pop("backend")
        results.append((pieces, info, calls))
    assert results[0] == results[1] == results[2]
    assert len(results[0][0]) <= vocab and results[0][2]


@pytest.mark.parametrize("seed", range(8))
def test_character_counts_and_unknown_splitting_equal_the_plain_loops(seed: int) -> None:
    rng = random.Random(seed)
    words = _random_words(rng, "ab]^-\\é日x", 300)
    chars: Counter[str] = Counter()
    for w, f in words.items():
        for ch in w:
            chars[ch] += f
    assert char_counts(words) == chars
    required = set(rng.sample(sorted(chars), rng.randint(1, len(chars))))
    want: dict[str, int] = {}
    for w, f in words.items():  # the plain loop: cut around every character outside `required`
        start = 0
        for i, ch in enumerate(w):
            if ch not in required:
                if i > start:
                    want[w[start:i]] = want.get(w[start:i], 0) + f
                start = i + 1
        if start < len(w):
            want[w[start:]] = want.get(w[start:], 0) + f
    assert list(split_unknown(words, required).items()) == list(want.items())
