"""Two checkouts of this repository (each with its compiled extensions built), timed against each other in
alternating fresh processes: the A/B for any family's compiled code (``bench.engine.ab_builds`` compiles only the
rank core and times it in one process).

``python -m bench.engine.ab_checkouts --a /tmp/base --b . --tokenizers llama2,phi-3 --pairs 3 --rounds 3``

Make the other checkout with ``git worktree add /tmp/base REV`` and build it (``python setup.py build_ext
--inplace``). For each of ``--pairs`` pairs, a fresh process per checkout (``a`` then ``b``) runs, for every
tokenizer, ``--rounds`` rounds of: a fresh instance (``load_encoding``), the peer benchmark's documents once
(**cold**, its first pass) and again (**warm**), then its chat-sized lines once (**lines**, µs per call), this
thread's CPU time, pinned to one CPU (:mod:`bench.peers.workloads`; the same texts as ``bench.peers.run``, or only
the named ``--corpora``, e.g. ``--corpora english``: a change that moves one corpus is seen there first). Each
process prints its medians; the summary gives, per tokenizer and measure, the median over pairs of b / a (cold and
warm in MB/s, so above 1 means b is faster; lines in µs, so below 1 means b is faster). The VM drifts by 10-30 %
from minute to minute (docs/performance.md): alternate, and read the ratios, not single numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def measure(names: list[str], rounds: int, docs_per_corpus: int, lines: int, data_dir: Path | None,
            max_corpora: int | None, corpora: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Medians of cold/warm MB/s and lines µs per call for each tokenizer, in this process (its checkout's code),
    with the documents' UTF-8 bytes (``docs_bytes``). ``corpora``: only these corpora (ValueError for a name the
    data directory does not hold)."""
    from app.engine.registry import get_store, load_encoding
    from bench.peers import workloads

    texts = workloads.corpora_texts(data_dir, max_corpora)
    if corpora:
        unknown = sorted(set(corpora) - set(texts))
        if unknown:
            raise ValueError(f"unknown corpora {unknown}; known: {', '.join(texts)}")
        texts = {name: texts[name] for name in corpora}
    docs, short = workloads.documents(texts, docs_per_corpus), workloads.lines(texts, lines)
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    mb = nbytes / 1e6
    out: dict[str, dict[str, float]] = {}
    for name in names:
        runs: dict[str, list[float]] = {"cold": [], "warm": [], "lines": []}
        for _ in range(rounds):
            encode = load_encoding(get_store().spec(name)).encode
            for kind, batch in (("cold", docs), ("warm", docs), ("lines", short)):
                start = time.thread_time()
                for text in batch:
                    encode(text)
                runs[kind].append(time.thread_time() - start)
        out[name] = {"cold": mb / statistics.median(runs["cold"]), "warm": mb / statistics.median(runs["warm"]),
                     "lines": statistics.median(runs["lines"]) / max(1, len(short)) * 1e6, "docs_bytes": nbytes}
    return out


def _child(args: argparse.Namespace) -> int:
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0)) if args.cpu is None else args.cpu})
    result = measure(args.tokenizers.split(","), args.rounds, args.docs_per_corpus, args.lines, args.data_dir,
                     args.max_corpora, args.corpora.split(",") if args.corpora else None)
    print(json.dumps(result))
    return 0


def _run_checkout(path: Path, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    # this file, run as a script, with the checkout first on the path: its app and bench.peers, this code
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--tokenizers", args.tokenizers,
           "--rounds", str(args.rounds), "--docs-per-corpus", str(args.docs_per_corpus), "--lines", str(args.lines)]
    for flag, value in (("--cpu", args.cpu), ("--data-dir", args.data_dir), ("--max-corpora", args.max_corpora),
                        ("--corpora", args.corpora)):
        if value is not None:
            cmd += [flag, str(value)]
    env = {**os.environ, "PYTHONPATH": str(path)}
    done = subprocess.run(cmd, cwd=path, env=env, capture_output=True, text=True, check=True)
    result: dict[str, dict[str, float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", type=Path, help="the baseline checkout")
    p.add_argument("--b", type=Path, help="the checkout compared with it")
    p.add_argument("--tokenizers", default="gpt2")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--docs-per-corpus", type=int, default=8)
    p.add_argument("--lines", type=int, default=400)
    p.add_argument("--max-corpora", type=int, default=None)
    p.add_argument("--corpora", default=None, help="only these corpora, comma-separated (e.g. english,ml-de)")
    p.add_argument("--cpu", type=int, default=None, help="the CPU to pin to (default: the last one allowed)")
    p.add_argument("--data-dir", type=Path, default=None, help="bench.corpora data directory")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return _child(args)
    if args.a is None or args.b is None:
        p.error("--a and --b are required")
    ratios: dict[tuple[str, str], list[float]] = {}
    for k in range(args.pairs):
        got: dict[str, Any] = {}
        for label, path in (("a", args.a), ("b", args.b)):
            got[label] = _run_checkout(path.resolve(), args)
            for name, m in got[label].items():
                print(f"pair {k + 1} {label} {name:14s} cold {m['cold']:6.2f} MB/s  warm {m['warm']:6.2f} MB/s  "
                      f"lines {m['lines']:6.2f} us", flush=True)
        for name in got["a"]:
            for kind in ("cold", "warm", "lines"):
                ratios.setdefault((name, kind), []).append(got["b"][name][kind] / got["a"][name][kind])
    print(f"b / a, median over {args.pairs} pairs (cold, warm: MB/s, above 1 = b faster; "
          "lines: µs, below 1 = b faster)")
    for name in args.tokenizers.split(","):
        cells = "  ".join(f"{kind} {statistics.median(ratios[(name, kind)]):.3f}" for kind in ("cold", "warm", "lines"))
        print(f"  {name:14s} {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
