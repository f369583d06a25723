"""Pipeline batches on 2 threads: a thread pool over chunks against the compiled batch call's own threads.

``python -m bench.peers.batch_paths --tokenizers mistral-v1,llama2,phi-3,gemma3 --rounds 15``

One instance per tokenizer, in one process, on the peer benchmark's workloads (:mod:`bench.peers.workloads`: the
10 KB documents and 4,000 chat-sized lines), each workload one batch. Round after round (interleaved, so the
machine's drift hits every path alike), the wall-clock time of ``encode_batch`` with:

* **1 thread**;
* **2t pool**: the batch cut into chunks, 4 per thread, each chunk one single-threaded compiled batch call on a
  thread pool (``app.engine._batch.map_chunks_in_threads``: how SentencePiece BPE, the merge-list text-plan path and
  the SentencePiece Unigram files ran batches before 2026-12-05);
* **2t compiled**: one compiled batch call whose own threads take the next text as they finish one (the
  pipeline's path now).

Every path's ids are checked against the 1-thread batch first. Prints MB/s and the speed-up over 1 thread (median
over rounds). Instances are warm (the check ran first): this is the word cache's steady state.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def measure(name: str, workloads: dict[str, list[str]], rounds: int) -> dict[str, dict[str, list[float]]]:
    """``{workload: {path: [seconds per round]}}`` for tokenizer ``name`` (a pipeline with a compiled batch call)."""
    from app.engine._batch import map_chunks_in_threads
    from app.engine.registry import get_store, load_encoding

    tok: Any = load_encoding(get_store().spec(name))
    compiled = getattr(tok, "_batch_text", None)
    if compiled is None:
        raise SystemExit(f"{name}: not a pipeline with a compiled batch call")

    def pool(texts: list[str], counts: bool, threads: int) -> Any:
        return map_chunks_in_threads(lambda chunk: compiled(chunk, counts, 1), texts, threads)

    paths: dict[str, tuple[int, Callable[..., Any]]] = {"1 thread": (1, compiled), "2t pool": (2, pool),
                                                        "2t compiled": (2, compiled)}
    out: dict[str, dict[str, list[float]]] = {}
    for workload, texts in workloads.items():
        want = compiled(texts, False, 1)
        for path, (threads, fn) in paths.items():
            if fn(texts, False, threads) != want:
                raise SystemExit(f"{name} {workload}: {path} gives other ids than one thread")
        times: dict[str, list[float]] = {p: [] for p in paths}
        for _ in range(rounds):
            for path, (threads, fn) in paths.items():
                t0 = time.perf_counter()
                fn(texts, False, threads)
                times[path].append(time.perf_counter() - t0)
        out[workload] = times
    return out


def report(name: str, times: dict[str, dict[str, list[float]]], sizes: dict[str, int]) -> str:
    """One line per workload: each path's MB/s and its speed-up over 1 thread (medians over rounds)."""
    lines = []
    for workload, paths in times.items():
        one = statistics.median(paths["1 thread"])
        cells = [f"{p}: {sizes[workload] / 1e6 / statistics.median(t):.1f} MB/s ({one / statistics.median(t):.2f}x)"
                 for p, t in paths.items()]
        lines.append(f"{name:11s} {workload:5s} " + "  ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokenizers", default="mistral-v1,llama2,phi-3,gemma3")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--docs-per-corpus", type=int, default=8)
    p.add_argument("--lines", type=int, default=4000)
    p.add_argument("--data-dir", type=Path, default=None, help="bench.corpora data directory")
    args = p.parse_args(argv)
    from bench.peers import workloads

    texts = workloads.corpora_texts(args.data_dir)
    loads = {"docs": workloads.documents(texts, args.docs_per_corpus), "lines": workloads.lines(texts, args.lines)}
    sizes = {k: sum(len(t.encode("utf-8")) for t in v) for k, v in loads.items()}
    for name in args.tokenizers.split(","):
        print(report(name, measure(name, loads, args.rounds), sizes), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
