"""Ours against peer libraries corpus by corpus: where the peer table's one cold figure is won and lost.

``python -m bench.peers.per_corpus --tokenizers o200k_base,phi-3 --peers gigatoken --rounds 5``

The peer table (:mod:`bench.peers.run`) times the 96 documents of all twelve corpora in one pass; a library much
faster on one script and slower on another shows only as the sum. Here every corpus's documents
(:func:`bench.peers.workloads.documents`, ``--docs-per-corpus`` of them) are one cold pass of their own: per round,
each engine (ours first in odd rounds, last in even ones) builds a **fresh instance per corpus** (untimed), makes one
untimed call on :data:`FIRST_CALL_TEXT` (a few words of every script, so that what a library builds lazily on its
first call, or on its first non-ASCII character, is not charged to whichever corpus comes first: the peer table's
single 960 KB pass amortises it), then encodes that corpus's documents once (``bench.peers.run.timed_pass``: this
thread's CPU time, the garbage collector paused), pinned to one CPU. Before timing, each peer's ids are compared
with ours on every document (ours equal the references; ``bench.peers.run`` checks that): a peer
that differs is reported and not timed. Prints one table per tokenizer: median MB/s per corpus and ours / peer.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

#: The untimed first call on every fresh instance: a few words of each script of the corpora.
FIRST_CALL_TEXT = ("Hello, world. def f(x): return x  \u4e16\u754c \u3053\u3093\u306b\u3061\u306f "
                   "\uc548\ub155 \u043f\u0440\u0438\u0432\u0435\u0442 \u0645\u0631\u062d\u0628\u0627 "
                   "\u0928\u092e\u0938\u094d\u0924\u0947 \u03b3\u03b5\u03b9\u03b1 \u05e9\u05dc\u05d5\u05dd "
                   "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 Gr\u00fc\u00dfe")


def measure(name: str, peer_names: list[str], rounds: int, docs_per_corpus: int, data_dir: Path | None,
            max_corpora: int | None, work_dir: Path) -> dict[str, Any]:
    """``{"corpora": {corpus: bytes}, "mb_s": {engine: {corpus: median MB/s}}, "skipped": {library: reason}}``."""
    from bench.peers import libraries, workloads
    from bench.peers.artifacts import Artifacts
    from bench.peers.run import timed_pass

    texts = workloads.corpora_texts(data_dir, max_corpora)
    docs = {corpus: workloads.documents({corpus: raw}, docs_per_corpus) for corpus, raw in texts.items()}
    docs = {corpus: d for corpus, d in docs.items() if d}
    sizes = {corpus: sum(len(t.encode("utf-8")) for t in d) for corpus, d in docs.items()}
    ours = libraries.ours(name)
    reference = ours.load()
    want = {corpus: [reference(t) for t in d] for corpus, d in docs.items()}
    engines: dict[str, Any] = {"ours": ours.load}
    skipped: dict[str, str] = {}
    for peer in libraries.candidates(name, Artifacts(work_dir), peer_names):
        if isinstance(peer, libraries.Missing):
            skipped[peer.library] = peer.reason
            continue
        encode = peer.load()
        bad = next((c for c, d in docs.items() for t, w in zip(d, want[c], strict=True)
                    if libraries.as_ids(encode(t)) != w), None)
        if bad is not None:
            skipped[peer.library] = f"ids differ from ours on a {bad} document"
            continue
        engines[peer.library] = peer.load
    samples: dict[str, dict[str, list[float]]] = {e: {c: [] for c in docs} for e in engines}
    for r in range(rounds):
        order = list(engines) if r % 2 == 0 else list(reversed(engines))
        for engine in order:
            for corpus, batch in docs.items():
                encode = engines[engine]()
                encode(FIRST_CALL_TEXT)
                cpu = timed_pass(encode, batch)["cpu"]
                samples[engine][corpus].append(sizes[corpus] / 1e6 / cpu)
    return {"corpora": sizes, "skipped": skipped,
            "mb_s": {e: {c: statistics.median(v) for c, v in by.items()} for e, by in samples.items()}}


def table(name: str, result: dict[str, Any]) -> list[str]:
    """One Markdown table: corpus, bytes, MB/s of each engine, ours / each peer."""
    engines = list(result["mb_s"])
    peers = [e for e in engines if e != "ours"]
    head = ["corpus", "bytes", *(f"{e} MB/s" for e in engines), *(f"ours / {p}" for p in peers)]
    lines = [f"{name}:", "", "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for corpus, size in result["corpora"].items():
        mb = {e: result["mb_s"][e][corpus] for e in engines}
        cells = [corpus, f"{size:,}", *(f"{mb[e]:.1f}" for e in engines),
                 *(f"{mb['ours'] / mb[p]:.2f}x" for p in peers)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [f"- {lib}: not timed ({why})" for lib, why in result["skipped"].items()]
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokenizers", default="o200k_base", help="comma-separated bundled tokenizers")
    p.add_argument("--peers", default="gigatoken", help="comma-separated libraries of bench.peers.libraries")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--docs-per-corpus", type=int, default=8)
    p.add_argument("--max-corpora", type=int, default=None)
    p.add_argument("--cpu", type=int, default=None, help="the CPU to pin to (default: the last one allowed)")
    p.add_argument("--data-dir", type=Path, default=None, help="bench.corpora data directory")
    args = p.parse_args(argv)
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0)) if args.cpu is None else args.cpu})
    with tempfile.TemporaryDirectory(prefix="per-corpus-") as work:
        for name in args.tokenizers.split(","):
            result = measure(name, args.peers.split(","), args.rounds, args.docs_per_corpus, args.data_dir,
                             args.max_corpora, Path(work))
            print("\n".join(table(name, result)) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
