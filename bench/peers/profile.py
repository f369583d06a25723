"""Where our compiled core's time goes on 10 KB documents: the layers, by subtraction, and a loop for ``perf``.

``python -m bench.peers.profile --tokenizers o200k_base,deepseek-v3 [--rounds R]`` prints, per tokenizer, the
median CPU time per MB (this thread, pinned to one CPU) of each layer on the peer benchmark's documents
(:mod:`bench.peers.workloads`), cache cleared before every pass (cold) or not (warm):

* ``tokenizer.encode``: the public call (Python wrapper: plain-text checks, special-token handling, dispatch);
* ``core.encode``: the compiled core's entry point alone (scan + BPE + the Python list of ids);
* ``core.count``: the same scan and BPE without building the list;

so wrapper = public - core.encode and list building = core.encode - core.count. What the core itself does
(scanning, merging, lookups) comes from ``perf``: ``--loop SECONDS`` encodes the documents cold in a loop for that
long, to run under ``perf record -k CLOCK_MONOTONIC -- python -m bench.peers.profile --tokenizers o200k_base
--loop 20`` (it prints when the loop starts: ``perf report --time START,`` leaves the loading out).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.families.word_cache import cpu_pass


def _core(tok: Any) -> Any:
    """The :class:`app.engine.native.NativeCore` behind a tokenizer (a ``RankBPETokenizer``, or a ``Pipeline``
    whose model runs on the rank core: the byte-level fast path)."""
    from app.engine.pipeline.pipeline import Pipeline

    return tok.model.native if isinstance(tok, Pipeline) else tok.native_core


def layers(name: str, docs: list[str], rounds: int) -> dict[str, float]:
    """Median CPU seconds per MB of each layer (see the module docstring), cold and warm."""
    from app.engine.registry import get_store, load_encoding

    tok = load_encoding(get_store().spec(name))
    core = _core(tok)
    mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
    calls: dict[str, Callable[[str], object]] = {"tokenizer.encode": tok.encode, "core.encode": core.encode,
                                                 "core.count": core.count}
    samples: dict[str, list[float]] = {f"{k} {m}": [] for k in calls for m in ("cold", "warm")}
    for _ in range(rounds):
        for key, fn in calls.items():
            core.clear_cache()
            samples[f"{key} cold"].append(cpu_pass(fn, docs) / mb)
            samples[f"{key} warm"].append(cpu_pass(fn, docs) / mb)
    return {k: statistics.median(v) for k, v in samples.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokenizers", default="o200k_base,deepseek-v3")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--docs-per-corpus", type=int, default=8)
    p.add_argument("--loop", type=float, default=0.0, help="instead: encode cold for this many CPU seconds")
    p.add_argument("--cpu", type=int, default=None)
    args = p.parse_args(argv)
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0)) if args.cpu is None else args.cpu})
    from bench.peers import workloads

    docs = workloads.documents(workloads.corpora_texts(), args.docs_per_corpus)
    for name in args.tokenizers.split(","):
        if args.loop:
            from app.engine.registry import get_store, load_encoding

            tok = load_encoding(get_store().spec(name))
            core, end = _core(tok), time.thread_time() + args.loop
            # for ``perf record -k CLOCK_MONOTONIC`` then ``perf report --time START,``: the loading left out
            print(f"{name}: loop starts at CLOCK_MONOTONIC {time.monotonic():.6f}", file=sys.stderr, flush=True)
            while time.thread_time() < end:
                core.clear_cache()
                cpu_pass(tok.encode, docs)
            continue
        r = layers(name, docs, args.rounds)
        print(f"{name}: {len(docs)} documents, CPU ms per MB (median of {args.rounds})")
        for mode in ("cold", "warm"):
            pub, tokenizer, cnt = (r[f"{k} {mode}"] * 1e3 for k in ("tokenizer.encode", "core.encode", "core.count"))
            print(f"  {mode}: public {pub:.1f} = wrapper {pub - tokenizer:.1f} + list of ids {tokenizer - cnt:.1f} + "
                  f"core scan+BPE {cnt:.1f}  ({1e3 / pub:.1f} MB/s public, {1e3 / cnt:.1f} MB/s core count)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
