"""Batches on N threads: ours against fastokens' Rayon path, wall-clock MB/s with 1 and 2 threads (issue 28, item 4).

``python -m bench.peers.batch`` (default: the bundled tokenizers fastokens loads and serves exactly, ~4 minutes)
``python -m bench.peers.batch --tokenizers cl100k_base --runs 3 --out-dir /tmp/x``

Per tokenizer and thread count ``n`` (1, then 2), a FRESH child process (Rayon's global pool is sized once, at its
first use) with ``RAYON_NUM_THREADS=n`` and ``FASTOKENS_BPE_THREADS=n`` in its environment, not pinned (it may use
every CPU the parent may). In the child, on the peer bench's workloads (:mod:`bench.peers.workloads`: the 10 KB
held-out documents and chat-sized 50–200 B lines, each workload one batch):

1. **exactness first** (as ``bench.peers.run``): the reference library's ids per text; every engine's batch output
   is compared with them text by text (:func:`bench.peers.run.first_mismatch`); an engine that differs is reported
   and never timed. This first call also warms each instance (caches, lazy builds): the timings are warm.
2. **timing**: ``--runs`` rounds, each visiting every engine in an order rotated per round, one batch call per
   workload; the wall-clock time (``time.perf_counter``) and the process CPU time of each call. Medians over rounds.

Engines: ours ``tokenizer.encode_batch(texts, num_threads=n)`` and ``count_batch``; fastokens
``[e.ids for e in tok.encode_batch(texts, add_special_tokens=False, split_special_tokens=True)]`` (the ids as
Python lists, like ours) and ``tok.encode_batch_flat(...)`` (two byte buffers, no per-token Python object: not
the same output, reported as a row of its own). "Cores" is process CPU time over wall time during the call.

Writes ``BATCH.md`` and ``batch.json`` into ``--out-dir`` (default ``bench/peers``). On a shared machine the wall
clock includes other processes' load: the load averages before and after are recorded.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.peers.run import CHILD_ENV, REPO, first_mismatch

DEFAULT_OUT = REPO / "bench" / "peers"
#: Bundled tokenizers fastokens serves exactly (bench/peers/RESULTS.md) and loads from a rank file or a
#: tokenizer.json, measured by default: the byte-level rank BPE families, a merge-list BPE and a SentencePiece BPE.
TOKENIZERS = ("o200k_base", "cl100k_base", "qwen3", "deepseek-v3", "gemma3", "mistral-v1")
THREADS = (1, 2)
ENGINES = ("ours encode_batch", "ours count_batch", "fastokens encode_batch", "fastokens encode_batch_flat")

Batch = Callable[[list[str]], Any]


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _flat_ids(out: tuple[bytes, bytes]) -> list[list[int]]:
    ids, offsets = array("I", out[0]), array("Q", out[1])
    return [list(ids[offsets[i]:offsets[i + 1]]) for i in range(len(offsets) - 1)]


def engines(name: str, threads: int, work_dir: Path) -> tuple[dict[str, Batch], dict[str, Callable[[Any], list[Any]]],
                                                              dict[str, str]]:
    """The batch calls to time (each on an instance loaded here, untimed), how to turn each one's output into
    what the exactness check compares (ids per text, or counts), and each one's call as text."""
    from app.engine.registry import get_store, load_encoding
    from bench.peers.artifacts import Artifacts
    from bench.peers.libraries import Missing, fastokens_tokenizer

    ours = load_encoding(get_store().spec(name))
    calls: dict[str, Batch] = {
        "ours encode_batch": lambda texts: ours.encode_batch(texts, num_threads=threads),
        "ours count_batch": lambda texts: ours.count_batch(texts, num_threads=threads),
    }
    convert: dict[str, Callable[[Any], list[Any]]] = {"ours encode_batch": list, "ours count_batch": list}
    text = {"ours encode_batch": f"load_encoding(get_store().spec({name!r})).encode_batch(texts, num_threads=n)",
            "ours count_batch": "... .count_batch(texts, num_threads=n)"}
    found = fastokens_tokenizer(name, Artifacts(work_dir))
    if not isinstance(found, Missing):
        call, load = found
        fast = load()
        calls["fastokens encode_batch"] = lambda texts: [
            e.ids for e in fast.encode_batch(texts, add_special_tokens=False, split_special_tokens=True)]
        calls["fastokens encode_batch_flat"] = lambda texts: fast.encode_batch_flat(
            texts, add_special_tokens=False, split_special_tokens=True)
        convert["fastokens encode_batch"] = list
        convert["fastokens encode_batch_flat"] = _flat_ids
        text["fastokens encode_batch"] = (f"{call}.encode_batch(texts, add_special_tokens=False, "
                                          "split_special_tokens=True), .ids of each")
        text["fastokens encode_batch_flat"] = f"{call}.encode_batch_flat(texts, same options)"
    return calls, convert, text


def timed_call(batch: Batch, texts: list[str]) -> dict[str, float]:
    """One batch call, garbage collector paused: wall seconds and the process's CPU seconds."""
    gc.collect()
    gc.disable()
    try:
        p0, w0 = time.process_time(), time.perf_counter()
        batch(texts)
        return {"wall": time.perf_counter() - w0, "process": time.process_time() - p0}
    finally:
        gc.enable()


def run_child(args: argparse.Namespace) -> dict[str, Any]:
    """Measure ``args.child`` with ``args.threads`` threads in this process."""
    from bench.peers import libraries, workloads
    from bench.peers.artifacts import Artifacts

    name, threads = args.child, args.threads
    texts = workloads.corpora_texts(args.data_dir, args.max_corpora)
    wl = {"docs": workloads.documents(texts, args.docs_per_corpus), "lines": workloads.lines(texts, args.lines)}
    ref_lib = libraries.REFERENCE[name]
    ref_peer = libraries.candidates(name, Artifacts(args.work_dir), [ref_lib])[0]
    if isinstance(ref_peer, libraries.Missing):
        raise SystemExit(f"{name}: reference {ref_lib} unavailable: {ref_peer.reason}")
    ref = ref_peer.load()
    want = {k: [libraries.as_ids(ref(t)) for t in v] for k, v in wl.items()}
    calls, convert, text = engines(name, threads, args.work_dir)
    result: dict[str, Any] = {"tokenizer": name, "threads": threads, "reference": ref_lib, "engines": {},
                              "workloads": {k: {"texts": len(v), "bytes": sum(len(t.encode()) for t in v)}
                                            for k, v in wl.items()}}
    exact: dict[str, Batch] = {}
    for engine, batch in calls.items():
        row: dict[str, Any] = {"call": text[engine], "exact": True}
        for wname, batch_texts in wl.items():
            got = convert[engine](batch(batch_texts))  # also the warm-up
            refs = want[wname] if engine != "ours count_batch" else [len(w) for w in want[wname]]
            for i, (g, w) in enumerate(zip(got, refs, strict=True)):
                at = (None if g == w else 0) if isinstance(w, int) else first_mismatch(g, w)
                if at is not None:
                    row.update(exact=False, mismatch={"workload": wname, "text": i, "token": at})
                    break
            if not row["exact"]:
                break
        result["engines"][engine] = row
        if row["exact"]:
            exact[engine] = batch
    names = list(exact)
    samples: dict[str, dict[str, list[dict[str, float]]]] = {e: {k: [] for k in wl} for e in names}
    for r in range(args.runs):
        k = r % max(1, len(names))
        for engine in names[k:] + names[:k]:
            for wname, batch_texts in wl.items():
                samples[engine][wname].append(timed_call(exact[engine], batch_texts))
    for engine, per in samples.items():
        result["engines"][engine]["timing"] = {
            wname: {"mb_s": result["workloads"][wname]["bytes"] / statistics.median(p["wall"] for p in passes) / 1e6,
                    "cores": statistics.median(p["process"] / p["wall"] for p in passes),
                    "wall_s": [p["wall"] for p in passes]}
            for wname, passes in per.items()}
    return result


# --------------------------------------------------------------------------- parent


def _child(args: argparse.Namespace, name: str, threads: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "bench.peers.batch", "--child", name, "--threads", str(threads),
               "--child-out", str(out), "--runs", str(args.runs), "--docs-per-corpus", str(args.docs_per_corpus),
               "--lines", str(args.lines), "--work-dir", str(args.work_dir)]
        if args.max_corpora:
            cmd += ["--max-corpora", str(args.max_corpora)]
        if args.data_dir:
            cmd += ["--data-dir", str(args.data_dir)]
        env = {**os.environ, **CHILD_ENV, "RAYON_NUM_THREADS": str(threads), "FASTOKENS_BPE_THREADS": str(threads)}
        proc = subprocess.run(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True, check=False)
        if proc.returncode != 0 or not out.exists():
            raise SystemExit(f"{name} ({threads} threads): child failed (exit {proc.returncode}): "
                             f"{proc.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or "unknown"


def _uptime() -> str:
    return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def table(results: dict[str, dict[int, dict[str, Any]]], workload: str) -> list[str]:
    """One Markdown row per tokenizer and engine: MB/s with 1 and 2 threads, scaling, cores, ours/fastokens."""
    out = ["| tokenizer | engine | 1 thread MB/s | 2 threads MB/s | scaling 2/1 | cores (1 / 2) | "
           "per core obtained 2/1 | ours encode_batch / this, 2 threads |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    def timing(by_n: dict[int, dict[str, Any]], engine: str, n: int) -> dict[str, Any] | None:
        row = by_n.get(n, {}).get("engines", {}).get(engine)
        return None if row is None or "timing" not in row else row["timing"][workload]  # type: ignore[no-any-return]

    for name, by_n in results.items():
        ours2 = timing(by_n, "ours encode_batch", 2)
        for engine in ENGINES:
            rows = {n: by_n.get(n, {}).get("engines", {}).get(engine) for n in THREADS}
            if all(r is None for r in rows.values()):
                continue
            if any(r is not None and not r["exact"] for r in rows.values()):
                bad = next(r for r in rows.values() if r is not None and not r["exact"])
                out.append(f"| {name} | {engine} | not exact: {bad['mismatch']} | | | | | |")
                continue
            t1, t2 = timing(by_n, engine, 1), timing(by_n, engine, 2)
            if t1 is None or t2 is None:
                continue
            vs = "" if engine.startswith("ours") or ours2 is None else f"{ours2['mb_s'] / t2['mb_s']:.2f}x"
            per_core = (t2["mb_s"] / t2["cores"]) / (t1["mb_s"] / t1["cores"]) if t1["cores"] and t2["cores"] else 0.0
            out.append(f"| {name} | {engine} | {t1['mb_s']:.1f} | {t2['mb_s']:.1f} | {t2['mb_s'] / t1['mb_s']:.2f}x "
                       f"| {t1['cores']:.2f} / {t2['cores']:.2f} | {per_core:.2f} | {vs} |")
    return out


def render(results: dict[str, dict[int, dict[str, Any]]], meta: dict[str, Any]) -> str:
    first = next(iter(next(iter(results.values())).values()))
    wl = first["workloads"]
    calls = sorted({(e, r["call"]) for by_n in results.values() for res in by_n.values()
                    for e, r in res["engines"].items()})
    return "\n".join([
        "# Batches on threads: ours vs fastokens' Rayon path (issue 28, item 4)", "",
        "```", meta["command"], "```", "",
        f"Commit {meta['commit']}, {meta['machine']}, CPUs allowed: {meta['cpus']}, {meta['started']} – "
        f"{meta['finished']} UTC. A fresh child process per tokenizer and thread count (`RAYON_NUM_THREADS` = "
        f"`FASTOKENS_BPE_THREADS` = n), {meta['runs']} interleaved rounds (medians), warm instances (the exactness "
        f"check's call came first). Each workload is one batch: {wl['docs']['texts']} documents of 10 KB "
        f"({wl['docs']['bytes']:,} B), {wl['lines']['texts']} lines of 50–200 B ({wl['lines']['bytes']:,} B). "
        "MB/s are 10^6 UTF-8 bytes per wall-clock second; cores = process CPU time / wall time during the call; "
        "per core obtained 2/1 = (MB/s / cores with 2 threads) / (the same with 1): how much of the CPU time "
        "obtained turned into throughput (1.00: none lost to threading), which the machine's load affects less "
        "than the wall-clock scaling.", "",
        f"Load before: `{meta['uptime_before']}`  ", f"Load after: `{meta['uptime_after']}`", "",
        *([meta["note"], ""] if meta.get("note") else []),
        "## 10 KB documents, one batch", "", *table(results, "docs"), "",
        "## Chat-sized lines (50–200 B), one batch", "", *table(results, "lines"), "",
        "## Calls", "", *[f"- {e}: `{c}`" for e, c in calls], ""])


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokenizers", default=",".join(TOKENIZERS))
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--docs-per-corpus", type=int, default=8, help="10 KB documents per corpus (12 corpora)")
    p.add_argument("--lines", type=int, default=4000, help="chat-sized lines in the lines batch")
    p.add_argument("--max-corpora", type=int, default=None, help="use only the first N corpora")
    p.add_argument("--out-dir", type=Path, default=None, help=f"where BATCH.md/batch.json go ({DEFAULT_OUT})")
    p.add_argument("--work-dir", type=Path, default=None, help="artifact files for the peers (default: a temp dir)")
    p.add_argument("--data-dir", type=Path, default=None, help="bench.corpora data directory")
    p.add_argument("--note", default="", help="a paragraph for the report (e.g. the machine's state)")
    p.add_argument("--render", type=Path, default=None, help="print the report of an existing batch.json")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.child:
        args.child_out.write_text(json.dumps(run_child(args)))
        return 0
    if args.render:  # a report again from a batch.json (e.g. after a change to the tables)
        data = json.loads(args.render.read_text())
        results = {name: {int(n): r for n, r in by_n.items()} for name, by_n in data["results"].items()}
        print(render(results, data["meta"]))
        return 0
    out_dir = args.out_dir or DEFAULT_OUT
    out_dir.mkdir(parents=True, exist_ok=True)
    own_work = args.work_dir is None
    args.work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-batch-files-"))
    shown = sys.argv[1:] if argv is None else argv
    meta: dict[str, Any] = {
        "command": "python -m bench.peers.batch " + " ".join(shown), "commit": _commit(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "cpus": len(os.sched_getaffinity(0)), "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"),
        "uptime_before": _uptime(), "runs": args.runs, "note": args.note}
    results: dict[str, dict[int, dict[str, Any]]] = {}
    for name in args.tokenizers.split(","):
        for n in THREADS:
            _log(f"{name}, {n} thread(s) ...")
            results.setdefault(name, {})[n] = _child(args, name, n)
    meta.update(uptime_after=_uptime(), finished=dt.datetime.now(dt.UTC).strftime("%H:%M"))
    report = render(results, meta)
    (out_dir / "BATCH.md").write_text(report)
    (out_dir / "batch.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    if own_work:
        import shutil

        shutil.rmtree(args.work_dir, ignore_errors=True)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
