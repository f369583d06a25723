"""SentencePiece tokenizers against ``sentencepiece`` in a steady state: each corpus once per round, never repeated.

``python -m bench.families.stream [--tokenizers a,b] [--rounds R] [--kib N] [--json PATH] [--data-dir DIR]``

:mod:`bench.families.run` times one 100 KB sample of every corpus, and its "cold" pass follows a Hugging Face
pass over the same text. This one times what a sidecar sees: a long run of text that it meets once. For every
corpus of :func:`bench.corpora.bench_texts` (English, then each language), the first ``--kib`` KiB are cut into
10 KB documents and into 50-byte lines, and each round encodes all of them with ours, then all of them with
``sentencepiece`` (the order alternates between rounds); nothing else runs in between, so each library's tables
stay in the CPU caches as far as its own work leaves them there, while no text comes again before the next round
(more text than the branch predictor and the caches can learn). The word caches are cleared before every round
of ours. Ids are checked equal to ``sentencepiece`` on every text first. Clock: this thread's CPU time; medians
over rounds of MB/s of UTF-8 input. Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path
from typing import Any

from bench.families.word_cache import cpu_pass
from bench.pipeline.run import DOC_BYTES

os.environ.setdefault("BENCH_CORPORA_OFFLINE", "1")

#: The bundled tokenizers whose reference is ``sentencepiece``.
SENTENCEPIECE_NAMES = ("mistral-v1", "mistral-v3", "mistral-v7", "llama2", "phi-3", "xlm-roberta-sentencepiece")
LINE_BYTES = 50


def workloads(text: str, kib: int) -> dict[str, list[str]]:
    """The first ``kib`` KiB of ``text`` as 10 KB documents and as 50-byte lines (cut on character boundaries)."""
    raw = text.encode("utf-8")[: kib * 1024]
    docs = [d for d in (raw[a:a + DOC_BYTES].decode("utf-8", "ignore") for a in range(0, len(raw), DOC_BYTES)) if d]
    lines = [d for d in (raw[a:a + LINE_BYTES].decode("utf-8", "ignore") for a in range(0, len(raw), LINE_BYTES))
             if d]
    return {"10 KB docs": docs, "50 B lines": lines}


def measure(ours: Any, reference: Any, texts: list[str], rounds: int) -> tuple[float, float]:
    """Median MB/s of ours and of the reference over ``rounds`` alternating rounds."""
    mb = sum(len(x.encode("utf-8")) for x in texts) / 1e6
    times: dict[str, list[float]] = {"ours": [], "reference": []}
    for r in range(rounds):
        for who in ("ours", "reference") if r % 2 == 0 else ("reference", "ours"):
            if who == "ours":
                ours.clear_cache()
                times[who].append(cpu_pass(ours.encode, texts))
            else:
                times[who].append(cpu_pass(reference.encode, texts))
    return mb / statistics.median(times["ours"]), mb / statistics.median(times["reference"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", default=",".join(SENTENCEPIECE_NAMES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kib", type=int, default=200, help="KiB of each corpus (default 200)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--data-dir", type=Path, default=None, help="the corpora (default: bench.corpora's)")
    args = parser.parse_args(argv)

    from app.engine.registry import get_store, load_encoding
    from bench.corpora import bench_texts
    from harness.references import sentencepiece_reference

    corpora = bench_texts(args.data_dir)
    names = ["english", *sorted(k for k in corpora if k.startswith("ml-"))]
    rows: list[dict[str, Any]] = []
    print(f"load average at start {os.getloadavg()[0]:.2f}; {args.rounds} rounds, {args.kib} KiB per corpus; "
          "MB/s, this thread's CPU time")
    print("| tokenizer | corpus | workload | ours MB/s | sentencepiece MB/s | ours / sentencepiece |")
    print("|---|---|---|---|---|---|")
    for tok in args.tokenizers.split(","):
        if tok not in SENTENCEPIECE_NAMES:
            raise SystemExit(f"{tok}: not one of {', '.join(SENTENCEPIECE_NAMES)}")
        ours = load_encoding(get_store().spec(tok))
        reference = sentencepiece_reference(tok)
        totals: dict[str, list[float]] = {}
        for corpus in names:
            for wname, texts in workloads(corpora[corpus], args.kib).items():
                for x in texts:
                    if ours.encode(x) != reference.encode(x):
                        raise SystemExit(f"{tok} {corpus}: ids differ from sentencepiece on {x[:60]!r}")
                o, s = measure(ours, reference, texts, args.rounds)
                totals.setdefault(wname, []).append(o / s)
                rows.append({"tokenizer": tok, "corpus": corpus, "workload": wname, "ours_mb_s": o,
                             "sentencepiece_mb_s": s})
                print(f"| {tok} | {corpus} | {wname} | {o:.1f} | {s:.1f} | {o / s:.2f}x |", flush=True)
        for wname, ratios in totals.items():
            print(f"{tok} {wname}: ours / sentencepiece {min(ratios):.2f}x-{max(ratios):.2f}x over the corpora, "
                  f"geometric mean {statistics.geometric_mean(ratios):.2f}x")
    if args.json is not None:
        args.json.write_text(json.dumps({"load_average": os.getloadavg()[0], "rounds": args.rounds,
                                         "kib": args.kib, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
