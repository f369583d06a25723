"""Linearity of the Unigram tokenizer (xlm-roberta) on its own hostile runs, at two sizes, one thread.

``python -m bench.families.linear_unigram [--tokenizers a,b] [--chars N] [--runs R]``

(``bench.families.linear`` does the same for the SentencePiece BPE tokenizers, ``bench.families.run --hostile`` on
the shared adversarial generators.)

``xlm-roberta+bytes`` is xlm-roberta's vocabulary with the 256 ``<0xNN>`` pieces and byte fallback added (the
bundled file has none), so uncovered characters take the byte-fallback path.

Runs (each ``N`` and ``4N`` characters, one text, no spaces unless the run is about spaces): one letter repeated,
one CJK character repeated, a long word without spaces (random letters), random CJK, characters no piece covers
(``<unk>`` runs), emoji (byte fallback where the vocabulary has it), combining marks (NFKC rewrites), ``▁``
itself, spaces, and real multilingual text glued without spaces. Prints per run the median seconds at each size
and their ratio (the issue's bound: at most 5x for 4x the input). CPU seconds of this process
(``time.process_time``, so other jobs on a shared machine disturb it less than wall time), medians of ``R`` runs,
interleaved, after one untimed call per size.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.pipeline.run import _commit, _docs


def runs(n: int) -> dict[str, str]:
    rng = random.Random(1)
    letters = "abcdefghijklmnopqrstuvwxyz"
    text = "".join(_docs(200_000)).replace(" ", "").replace("\n", "")
    return {
        "one letter": "a" * n,
        "one CJK character": "\u4e2d" * n,
        "word without spaces": "".join(rng.choice(letters) for _ in range(n)),
        "random CJK": "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(n)),
        "uncovered characters": "".join(chr(rng.randrange(0xA000, 0xA48C)) for _ in range(n)),  # Yi syllables
        "emoji": "".join(rng.choice("\U0001f642\U0001f9d1\U0001f4bb\U0001faa8\u2764") for _ in range(n)),
        "combining marks": ("e\u0301a\u0308" * n)[:n],
        "\u2581 itself": "\u2581" * n,
        "spaces": (" " * (n - 1)) + "x",
        "multilingual, no spaces": (text * (1 + n // max(1, len(text))))[:n],
    }


def _tokenizer(name: str) -> Any:
    from app.engine import get_tokenizer

    if name != "xlm-roberta+bytes":
        return get_tokenizer(name)
    from app.engine.pipeline.gguf import _sentencepiece_vocab
    from app.engine.pipeline.sentencepiece import build_pipeline
    from harness.references import gguf_kv

    vocab = _sentencepiece_vocab(gguf_kv("xlm-roberta"), "t5", "xlm-roberta")
    for b in range(256):
        vocab.pieces.append(f"<0x{b:02X}>")
        vocab.scores.append(0.0)
        vocab.types.append(6)
    vocab.byte_fallback = True
    return build_pipeline(name, vocab, source=name)


def _time(fn: Callable[[str], object], text: str) -> float:
    t = time.process_time()
    fn(text)
    return time.process_time() - t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizers", default="xlm-roberta,xlm-roberta+bytes")
    parser.add_argument("--chars", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"commit {_commit()}, load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"| tokenizer | run | {args.chars} chars, CPU s | {4 * args.chars} chars, CPU s | ratio |\n"
          "|---|---|---:|---:|---:|")
    small, large = runs(args.chars), runs(4 * args.chars)
    for name in args.tokenizers.split(","):
        tok = _tokenizer(name)
        for run in small:
            t1: list[float] = []
            t4: list[float] = []
            tok.encode(small[run])
            tok.encode(large[run])
            for _ in range(args.runs):
                tok.clear_cache()
                t1.append(_time(tok.encode, small[run]))
                tok.clear_cache()
                t4.append(_time(tok.encode, large[run]))
            a, b = statistics.median(t1), statistics.median(t4)
            print(f"| {name} ({tok.backend}) | {run} | {a:.4f} | {b:.4f} | {b / a:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
