"""Subword regularisation cost: ``encode(sample=...)`` next to the deterministic encode and next to the reference
library's own sampling, one thread, on the same chat-sized lines.

``python -m bench.sampling.run [--lines N] [--runs R]``

Rows: xlm-roberta Unigram (whole-lattice sampling; n-best 8), mistral-v1 SentencePiece BPE-dropout (reference:
``sentencepiece``'s ``enable_sampling``), qwen3 merge-list BPE-dropout (reference: Hugging Face ``tokenizers`` with
its model's ``dropout`` set), cl100k_base BPE-dropout over ranks (no reference library samples it). ``R``
interleaved rounds; medians in microseconds per line. Sampling always runs the pure-Python model, so the ratio to a
compiled reference is large; this bench records it rather than targets it. Run from the repository root.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("RAYON_NUM_THREADS", "1")


def _lines(n: int) -> list[str]:
    from harness.texts import SPECIAL_STRINGS, real_documents

    rng = random.Random(1)
    docs = real_documents()
    out: list[str] = []
    while len(out) < n:
        doc = rng.choice(docs)
        start = rng.randrange(max(1, len(doc) - 120))
        line = doc[start:start + rng.randint(40, 120)]
        if not any(s in line for s in SPECIAL_STRINGS):
            out.append(line)
    return out


def _rows() -> list[tuple[str, dict[str, Any], Callable[[str, int], Any] | None, str]]:
    """(tokenizer, Sample options, reference sampler(text, seed) or None, reference name)."""
    from harness.references import hf_with_dropout, sentencepiece_reference

    xlmr, mistral = sentencepiece_reference("xlm-roberta-sentencepiece"), sentencepiece_reference("mistral-v1")
    qwen = hf_with_dropout("qwen3", 0.1)
    return [
        ("xlm-roberta-sentencepiece", {"alpha": 0.1, "nbest": -1},
         lambda t, _s: xlmr.encode(t, enable_sampling=True, alpha=0.1, nbest_size=-1), "sentencepiece"),
        ("xlm-roberta-sentencepiece", {"alpha": 0.1, "nbest": 8},
         lambda t, _s: xlmr.encode(t, enable_sampling=True, alpha=0.1, nbest_size=8), "sentencepiece"),
        ("mistral-v1", {"dropout": 0.1},
         lambda t, _s: mistral.encode(t, enable_sampling=True, alpha=0.1, nbest_size=-1), "sentencepiece"),
        ("qwen3", {"dropout": 0.1}, lambda t, _s: qwen.encode(t, add_special_tokens=False).ids, "tokenizers"),
        ("cl100k_base", {"dropout": 0.1}, None, "-"),
    ]


def _time(fn: Callable[[str, int], Any], lines: list[str]) -> float:
    start = time.perf_counter()
    for i, line in enumerate(lines):
        fn(line, i)
    return (time.perf_counter() - start) / len(lines) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from app.engine import Sample, get_tokenizer

    lines = _lines(args.lines)
    print(f"load average {os.getloadavg()[0]:.2f}; {len(lines)} lines, "
          f"{sum(len(x.encode()) for x in lines) / len(lines):.0f} bytes each on average; medians of {args.runs}")
    print("| tokenizer | sampling | deterministic µs/line | sampled µs/line | reference | reference µs/line | "
          "sampled / reference |")
    print("|---|---|---:|---:|---|---:|---:|")
    for name, options, reference, ref_name in _rows():
        tok = get_tokenizer(name)

        def deterministic(t: str, _s: int, tok: Any = tok) -> Any:
            return tok.encode(t)

        def sampled(t: str, s: int, tok: Any = tok, options: dict[str, Any] = options) -> Any:
            return tok.encode(t, sample=Sample(seed=s, **options))

        timings: dict[str, list[float]] = {"det": [], "ours": [], "ref": []}
        for _ in range(args.runs):
            timings["det"].append(_time(deterministic, lines))
            timings["ours"].append(_time(sampled, lines))
            if reference is not None:
                timings["ref"].append(_time(reference, lines))
        med = {k: statistics.median(v) for k, v in timings.items() if v}
        how = ", ".join(f"{k}={v}" for k, v in options.items())
        ref = f"{med['ref']:.1f}" if "ref" in med else "-"
        ratio = f"{med['ours'] / med['ref']:.1f}x" if "ref" in med else "-"
        print(f"| {name} | {how} | {med['det']:.1f} | {med['ours']:.1f} | {ref_name} | {ref} | {ratio} |")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
