"""Why the seed's WordPiece score compresses held-out text poorly on the families corpus: evidence, not a speed bench.

On the corpus of :mod:`bench.train.families` (same words: the trainer's own normalization and pre-tokenization)
this prints

1. the first merges of our learner with the seed's score ``count(ab) / (count(a) * count(b))``, each with its
   counts, and whether an independent learner written from that definition alone (every count recomputed from
   the segmented words before each merge; nothing shared with ours but the words) picks the same ``--check``
   merges;
2. held-out bytes/token (encoded by Hugging Face ``tokenizers``) and ``[UNK]`` share for the seed's score at
   several minimum frequencies, for ``score="count"`` and, as a prototype that is not a trainer option, for the
   frequency-weighted ratio ``count(ab) * log(count(ab) * N / (count(a) * count(b)))`` (``N``: the symbol
   occurrences before the first merge; run by the Python loop);
3. how often the learned pieces are used when the training words are encoded, and how a few common words split.

Usage::

    python -m bench.train.wordpiece_score [--check 100] [--vocab-size 8000] [--no-prototype]
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping

from bench.train.families import build_corpus
from harness.references import recount_merges

COMMON = ("the", "and", "of", "to", "is", "für", "и", "что", "для", "किया")


def _independent(words: Mapping[str, int], n: int, min_frequency: int) -> list[tuple[str, int, int, int]]:
    """The first ``n`` merges that add a piece (:func:`recount_merges` with the seed's score), words of at most
    100 characters as the trainer keeps them."""
    kept = {w: f for w, f in words.items() if w and len(w) <= 100}
    known = {s for w in kept for s in (w[0], *("##" + c for c in w[1:]))}
    out: list[tuple[str, int, int, int]] = []
    for merge in recount_merges(kept, min_frequency):
        if len(out) == n:
            break
        if merge[0] not in known:
            known.add(merge[0])
            out.append(merge)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description="the seed's WordPiece score on the families corpus")
    parser.add_argument("--check", type=int, default=100, help="merges compared with the independent learner")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--no-prototype", action="store_true", help="skip the frequency-weighted prototype")
    args = parser.parse_args()

    from tokenizers import Tokenizer

    from app.engine.training import wordpiece as wp
    from app.engine.training.corpus import iter_chunks

    train_file, held_file = build_corpus()
    trainer = wp.WordPieceTrainer(vocab_size=args.vocab_size)
    for chunk in iter_chunks([train_file], exact_cuts=False):
        trainer.feed(chunk)
    words = trainer.words()
    held = held_file.read_text("utf-8")
    lines, n_bytes = held.splitlines(), len(held.encode("utf-8"))
    n_base = len(wp.BERT_SPECIALS) + len({w[0] for w in words if len(w) <= 100} |
                                        {"##" + c for w in words if len(w) <= 100 for c in w[1:]})

    def tokenizer(vocab: list[str]) -> Tokenizer:
        data = wp.tokenizer_json(vocab, wp.BERT_SPECIALS, "[UNK]", trainer.normalizer, trainer.max_chars)
        return Tokenizer.from_str(data.decode("utf-8"))

    def heldout(vocab: list[str]) -> str:
        enc = tokenizer(vocab).encode_batch(lines, add_special_tokens=False)
        tokens = sum(len(e.ids) for e in enc)
        unk = sum(e.ids.count(1) for e in enc)
        return f"{n_bytes / tokens:.4f} bytes/token, [UNK] {100 * unk / tokens:.2f} %"

    print(f"{len(words)} distinct words, {n_base} base ids (specials + alphabet), vocabulary {args.vocab_size}")
    print(f"\n1. first merges, seed's score (min frequency 2); independent learner on the first {args.check}")
    t = time.perf_counter()
    ref = _independent(words, args.check, 2)
    vocab, _, _ = wp.learn_wordpiece(words, vocab_size=n_base + args.check, min_frequency=2)
    ours = vocab[n_base:]
    for k, (new, c, ca, cb) in enumerate(ref[:25]):
        print(f"  {k + 1:3d} {new!r:14} count(ab)={c:<4d} count(a)={ca:<5d} count(b)={cb:<5d} "
              f"score={c / (ca * cb):.4g}")
    rare = sum(1 for _, c, _, _ in ref if c <= 5)
    print(f"  of the first {len(ref)}: {rare} merged a pair seen <= 5 times; ours == independent: "
          f"{ours == [r[0] for r in ref]} ({time.perf_counter() - t:.0f} s)")

    print("\n2. held-out compression (Hugging Face tokenizers encodes each vocabulary)")
    for mf in (2, 5, 10, 20, 50, 100):
        vocab, _, stop = wp.learn_wordpiece(words, vocab_size=args.vocab_size, min_frequency=mf)
        print(f"  seed's score, min frequency {mf:3d}: {len(vocab)} ids ({stop}), {heldout(vocab)}")
    count_vocab, _, _ = wp.learn_wordpiece(words, vocab_size=args.vocab_size, score="count")
    print(f"  score=count, min frequency 2: {len(count_vocab)} ids, {heldout(count_vocab)}")
    if not args.no_prototype:
        n0 = sum(f * len(w) for w, f in words.items() if len(w) <= 100)
        weighted: Callable[[int, int, int], float] = lambda c, a, b: c * math.log(c * n0 / (a * b))  # noqa: E731
        saved, wp.pair_score = wp.pair_score, weighted  # the Python loop ranks by pair_score
        try:
            t = time.perf_counter()
            vocab, _, _ = wp.learn_wordpiece(words, vocab_size=args.vocab_size, backend="python")
        finally:
            wp.pair_score = saved
        print(f"  prototype count(ab)*log(count(ab)*N/(count(a)*count(b))): {len(vocab)} ids, {heldout(vocab)} "
              f"(Python loop, {time.perf_counter() - t:.0f} s); first pieces {vocab[n_base:n_base + 8]}")

    print("\n3. use of the learned pieces when the training words are encoded")
    seed_vocab, _, _ = wp.learn_wordpiece(words, vocab_size=args.vocab_size)
    listed = list(words)
    for label, vocab in (("seed's score", seed_vocab), ("score=count", count_vocab)):
        tok = tokenizer(vocab)
        use: Counter[int] = Counter()
        for w, e in zip(listed, tok.encode_batch(listed, add_special_tokens=False), strict=True):
            for i in e.ids:
                use[i] += words[w]
        learned = range(n_base, len(vocab))
        few = sum(1 for i in learned if use[i] <= 5)
        print(f"  {label}: {few} of {len(learned)} learned pieces ({few / len(learned):.0%}) are used <= 5 times; "
              f"{sum(use.values())} training tokens")
        print("    " + "; ".join(f"{w} -> {' '.join(tok.encode(w, add_special_tokens=False).tokens)}" for w in COMMON))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
