"""The incremental trainer (Python reference and compiled) equals a naive trainer that recounts every pair after
every merge."""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence

import pytest

from app.engine.training import train_byte_bpe, train_char_bpe
from app.engine.training.merges import learn_merges

Key = Hashable


def naive_bpe(
    words: Sequence[list[Key]],
    counts: Sequence[int],
    *,
    concat,  # type: ignore[no-untyped-def]
    display,  # type: ignore[no-untyped-def]
    unit,  # type: ignore[no-untyped-def]
    n_base: int,
    max_symbols: int | None,
    min_frequency: int,
    tie_break: str,
) -> tuple[list[tuple[Key, Key]], list[list[Key]]]:
    """Textbook BPE by brute force: count all pairs, pick the best by the documented tie rule, merge, repeat."""
    words = [list(w) for w in words]
    vocab_size = n_base
    known: set[Key] = set()
    for w in words:
        known.update(w)
    merges: list[tuple[Key, Key]] = []
    while max_symbols is None or vocab_size < max_symbols:
        stats: dict[tuple[Key, Key], int] = {}
        first: dict[tuple[Key, Key], tuple[int, int]] = {}
        for wi, (w, c) in enumerate(zip(words, counts, strict=True)):
            off = 0
            for x, y in zip(w, w[1:], strict=False):
                stats[(x, y)] = stats.get((x, y), 0) + c
                first.setdefault((x, y), (wi, off))
                off += unit(x)
        if not stats:
            break
        top = max(stats.values())
        if top < min_frequency:
            break
        tied = [p for p, c in stats.items() if c == top]
        if tie_break == "first-seen":
            best = min(tied, key=lambda p: first[p])
        else:
            best = max(tied, key=lambda p: (display(p[0]), display(p[1])))
        new = concat(*best)
        merges.append(best)
        if new not in known:
            known.add(new)
            vocab_size += 1
        for wi, w in enumerate(words):
            out: list[Key] = []
            i = 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            words[wi] = out
    return merges, words


def random_corpus(rng: random.Random, alphabet: str, n_words: int, max_len: int) -> dict[str, int]:
    corpus: dict[str, int] = {}
    for _ in range(n_words * 4):  # small alphabets have few distinct short words
        if len(corpus) >= n_words:
            break
        w = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_len)))
        corpus.setdefault(w, rng.randint(1, 6))
    return corpus


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("tie_break", ["first-seen", "lexicographic"])
@pytest.mark.parametrize("seed", range(25))
def test_byte_level_matches_naive(seed: int, tie_break: str, backend: str) -> None:
    rng = random.Random(seed)
    alphabet = ["ab", "abc", "aab ", "xyzé", "ab\u4e00"][seed % 5]
    corpus = random_corpus(rng, alphabet, n_words=rng.randint(5, 150), max_len=rng.randint(2, 12))
    min_frequency = rng.choice([1, 2, 3])
    vocab_size = 256 + rng.randint(1, 60)
    got = train_byte_bpe(
        corpus, vocab_size=vocab_size, min_frequency=min_frequency, tie_break=tie_break, keep_segmentation=True,
        backend=backend,
    )
    keys = [w.encode() for w in corpus]
    exp_merges, exp_words = naive_bpe(
        [[bytes([b]) for b in k] for k in keys],
        list(corpus.values()),
        concat=lambda x, y: x + y,
        display=lambda x: x,
        unit=len,
        n_base=256,
        max_symbols=vocab_size,
        min_frequency=min_frequency,
        tie_break=tie_break,
    )
    assert got.merges == exp_merges
    assert [got.segmentation[k] for k in keys] == exp_words


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("tie_break", ["first-seen", "lexicographic"])
@pytest.mark.parametrize("seed", range(25))
def test_char_level_matches_naive(seed: int, tie_break: str, backend: str) -> None:
    rng = random.Random(1000 + seed)
    alphabet = ["ab", "abc", "aabb", "lowerstn"][seed % 4]
    corpus = random_corpus(rng, alphabet, n_words=rng.randint(5, 150), max_len=rng.randint(2, 10))
    min_frequency = rng.choice([1, 2])
    num_merges = rng.randint(1, 80)
    model = train_char_bpe(
        corpus, num_merges=num_merges, min_frequency=min_frequency, tie_break=tie_break, keep_segmentation=True,
        backend=backend,
    )
    eow = ("", True)

    def display(s: tuple[str, bool]) -> str:
        return s[0] + ("</w>" if s[1] else "")

    exp_merges, exp_words = naive_bpe(
        [[(ch, False) for ch in w] + [eow] for w in corpus],
        list(corpus.values()),
        concat=lambda x, y: (x[0] + y[0], y[1]),
        display=display,
        unit=lambda s: len(s[0]) + s[1],
        n_base=0,
        max_symbols=None,
        min_frequency=min_frequency,
        tie_break=tie_break,
    )
    exp_merges = exp_merges[:num_merges]
    assert model.merge_strings == [(display(a), display(b)) for a, b in exp_merges]
    if len(exp_merges) < num_merges:  # trained to exhaustion: the final segmentations agree too
        seg = {w: [model.vocab[i] for i in ids] for w, ids in model.segmentation.items()}
        assert [seg[w] for w in corpus] == [[display(s) for s in w] for w in exp_words]
    for w in corpus:
        assert model.segment(w) == model.segment_in_order(w)


def test_first_seen_position_moves_when_the_earliest_occurrence_is_merged_away() -> None:
    # "xab": pair (a,b) first at word 0; after (x,a) is merged there, (a,b)'s earliest occurrence is in word 1,
    # after (c,d)'s; with equal counts (c,d) must win. The naive trainer decides the same way.
    corpus = {"xa": 9, "xab": 1, "cdab": 2, "cd": 1}
    words = [list(w.encode()) for w in corpus]
    res = learn_merges(
        words,
        list(corpus.values()),
        base_symbols=[bytes([b]) for b in range(256)],
        concat=lambda x, y: x + y,  # type: ignore[operator]
        order_key=lambda k: tuple(k),  # type: ignore[arg-type]
        unit_length=len,  # type: ignore[arg-type]
        max_merges=3,
        min_frequency=1,
    )
    got = [(res.symbols[a], res.symbols[b]) for a, b, _ in res.merges]
    exp, _ = naive_bpe(
        [[bytes([b]) for b in w.encode()] for w in corpus],
        list(corpus.values()),
        concat=lambda x, y: x + y,
        display=lambda x: x,
        unit=len,
        n_base=256,
        max_symbols=None,
        min_frequency=1,
        tie_break="first-seen",
    )
    assert got == exp[:3]
    assert got[0] == (b"x", b"a")
    assert got[1] == (b"c", b"d")


def test_bad_options() -> None:
    with pytest.raises(ValueError):
        train_byte_bpe({"ab": 2}, vocab_size=100)
    with pytest.raises(ValueError):
        train_byte_bpe({"ab": 2}, vocab_size=300, tie_break="random")
    with pytest.raises(ValueError):
        train_byte_bpe({"ab": 2}, vocab_size=300, min_frequency=0)
    with pytest.raises(ValueError):
        train_char_bpe({"a b": 2}, num_merges=3)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_limit_is_the_stop_reason_only_while_a_pair_could_still_be_merged(backend: str) -> None:
    """"bcb": merging (b, c) then (bc, b) uses up every pair exactly when max_merges=2 is reached: the reason is
    that no pair is left (the outdated heap entry of (c, b) does not count); one merge earlier it is the limit."""
    from app.engine.training.compiled import learn
    from app.engine.training.merges import byte_order_key

    if backend == "native":
        pytest.importorskip("app.engine._native._trainer")
    opts = dict(base_symbols=[bytes([b]) for b in range(256)], concat=lambda x, y: x + y, order_key=byte_order_key,
                unit_length=len, min_frequency=2)
    for max_merges, merges, reason in ((2, [(98, 99, 256), (256, 98, 257)], "no pairs left"),
                                       (1, [(98, 99, 256)], "max merges reached")):
        res = learn([list(b"bcb")], [3], backend=backend, keep_words=False, max_merges=max_merges,
                    **opts)  # type: ignore[arg-type]
        assert res.merges == merges and res.stop_reason == reason
