"""Pipeline tokenizers (bundled ``tokenizer.json`` files) vs Hugging Face ``tokenizers`` on the same files.

``python -m bench.pipeline.run [--tokenizers qwen3,deepseek-v3,gemma3] [--bytes N] [--runs R] [--json PATH]``

Per tokenizer, one thread: the text (english prose plus every multilingual corpus of :mod:`bench.corpora`, cut
into 10 KB documents, ``--bytes`` in total) is first encoded by both sides and the ids checked identical (the run
stops otherwise); then ``R`` interleaved rounds time ours with a cold cache (cleared before the pass), ours warm
(the same pass again), and Hugging Face (whose BPE cache is cleared before its cold pass when the binding
allows it). Reported: medians in MB/s of UTF-8 input, and load time. ``RAYON_NUM_THREADS=1`` keeps HF on one
thread.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("BENCH_CORPORA_OFFLINE", "1")

DOC_BYTES = 10_000


def _docs(total: int, data_dir: Path | None = None) -> list[str]:
    from bench.corpora import bench_texts

    texts = bench_texts(data_dir)
    order = ["english", *sorted(k for k in texts if k.startswith("ml-"))]
    share = total // len(order)
    docs: list[str] = []
    for name in order:
        data = texts[name].encode("utf-8")[:share].decode("utf-8", "ignore")
        raw = data.encode("utf-8")
        at = 0
        while at < len(raw):
            piece = raw[at:at + DOC_BYTES].decode("utf-8", "ignore")
            if piece:
                docs.append(piece)
            at += DOC_BYTES
    return docs


def _time(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_one(name: str, docs: list[str], runs: int) -> dict[str, Any]:
    import tokenizers

    from app.engine import get_tokenizer
    from app.engine.store import Store

    t = time.perf_counter()
    ours = get_tokenizer(name)
    load_ours = time.perf_counter() - t
    spec = Store.load().spec(name)
    t = time.perf_counter()
    hf = tokenizers.Tokenizer.from_str(lzma.decompress(spec.artifact_path.read_bytes()).decode("utf-8"))
    hf.encode_special_tokens = True
    load_hf = time.perf_counter() - t
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    for i, d in enumerate(docs):
        if ours.encode(d) != hf.encode(d, add_special_tokens=False).ids:
            raise SystemExit(f"{name}: ids differ from Hugging Face on document {i}; not timing")
    clear_hf = getattr(hf.model, "_clear_cache", None)

    def ours_pass() -> None:
        for d in docs:
            ours.encode(d)

    def hf_pass() -> None:
        for d in docs:
            hf.encode(d, add_special_tokens=False)

    cold: list[float] = []
    warm: list[float] = []
    hf_cold: list[float] = []
    hf_warm: list[float] = []
    for r in range(runs):
        steps: list[Callable[[], None]] = []

        def o() -> None:
            ours.clear_cache()
            cold.append(_time(ours_pass))
            warm.append(_time(ours_pass))

        def h() -> None:
            if clear_hf is not None:
                clear_hf()
            hf_cold.append(_time(hf_pass))
            hf_warm.append(_time(hf_pass))

        steps = [o, h] if r % 2 == 0 else [h, o]
        for step in steps:
            step()
    mb = nbytes / 1e6
    return {
        "tokenizer": name, "type": type(ours).__name__, "backend": ours.backend, "bytes": nbytes,
        "docs": len(docs), "runs": runs, "load_s": {"ours": load_ours, "hf": load_hf},
        "mb_s": {"ours_cold": mb / statistics.median(cold), "ours_warm": mb / statistics.median(warm),
                 "hf_cold": mb / statistics.median(hf_cold), "hf_warm": mb / statistics.median(hf_warm)},
        "hf_cache_cleared": clear_hf is not None,
    }


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def load_only(name: str) -> dict[str, Any]:
    """In this (fresh) process: import the engine, then load ``name``; seconds and resident-memory growth."""
    import app.engine as engine

    base = _rss_kib()
    t = time.perf_counter()
    tok = engine.get_tokenizer(name)
    load_s = time.perf_counter() - t
    return {"tokenizer": name, "load_s": load_s, "rss_mib": (_rss_kib() - base) / 1024, "type": type(tok).__name__}


def load_memory(names: list[str]) -> list[dict[str, Any]]:
    """:func:`load_only` of each tokenizer in its own process."""
    out = []
    for name in names:
        proc = subprocess.run([sys.executable, "-m", "bench.pipeline.run", "--load-only", name], capture_output=True,
                              text=True, check=True)
        out.append(json.loads(proc.stdout))
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def render(results: list[dict[str, Any]], meta: dict[str, Any], loads: list[dict[str, Any]] | None = None) -> str:
    lines = [f"commit {meta['commit']}, {meta['machine']}, load average at start {meta['loadavg']}",
             "", "| tokenizer | ours (type, backend) | ours cold MB/s | ours warm MB/s | HF cold MB/s | HF warm MB/s "
             "| cold vs HF | load ours / HF s |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        m = r["mb_s"]
        lines.append(f"| {r['tokenizer']} | {r['type']}, {r['backend']} | {m['ours_cold']:.2f} | {m['ours_warm']:.2f} "
                     f"| {m['hf_cold']:.2f} | {m['hf_warm']:.2f} | {m['ours_cold'] / m['hf_cold']:.2f}x "
                     f"| {r['load_s']['ours']:.2f} / {r['load_s']['hf']:.2f} |")
    if loads:
        lines += ["", "| tokenizer | load in a fresh process s | resident memory MiB |", "|---|---|---|"]
        lines += [f"| {x['tokenizer']} | {x['load_s']:.2f} | {x['rss_mib']:.0f} |" for x in loads]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizers", default="qwen3,deepseek-v3,gemma3")
    parser.add_argument("--bytes", type=int, default=400_000, help="input size per tokenizer (UTF-8 bytes)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--load-only", metavar="NAME", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.load_only:
        print(json.dumps(load_only(args.load_only)))
        return 0
    meta = {"commit": _commit(), "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}", "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    names = args.tokenizers.split(",")
    loads = load_memory(names)
    docs = _docs(args.bytes)
    results = []
    for name in names:
        results.append(bench_one(name, docs, args.runs))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(render(results, meta, loads))
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": results, "loads": loads}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
