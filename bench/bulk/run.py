"""Bulk tokenization benchmark: ``python -m app bulk`` on Ray Data (1 and 2 CPUs) against a single-process loop
over the same engine, and against Hugging Face ``datasets.map`` with ``tokenizers`` on the same rows.

    python -m bench.bulk.run                          # 1 GB of rows; datasets.map on the first 100 MB
    python -m bench.bulk.run --mb 16 --hf-mb 8 --quick  # a smoke run

Data: the ``train`` corpus (real prose, translated UI text, Python and C source; bench/corpora.py) cut into rows
of 200 B – 8 KiB (log-uniform, fixed seed) at line boundaries, written once as JSONL and as Parquet (row groups of
4096 rows) into ``bench/.data/bulk/``. Every method counts tokens of every row with cl100k_base; the totals are
checked equal before anything is reported.

Methods (MB = UTF-8 bytes of the text column, 10^6):

* ``loop``: one process, the same :class:`app.bulk.runner.ChunkWorker` over every chunk in turn (read, count,
  write Parquet) — the job without Ray;
* ``engine``: one process, ``count_batch`` over rows already in memory (no reading or writing: the ceiling);
* ``ray N``: ``run_bulk`` on a local Ray with N CPUs (N actors), timed from the job's start (actor start-up,
  loading and verifying the encoding, reading, counting, writing) with Ray itself already up (``ray.init`` is
  reported separately);
* ``ray fixed cost``: the same job on a one-row input: what a job costs before any row (actor processes, imports,
  loading and verifying the encoding, Ray Data's planning); the per-CPU rate excludes it;
* ``hf-datasets``: ``datasets.load_dataset("parquet")`` then ``Dataset.map(batched=True)`` calling a
  ``tokenizers.Tokenizer`` (built from our cl100k ranks, bench/engine/peers.py) ``encode_batch``, with
  ``num_proc`` 1 and 2; map time only (loading reported separately), its Arrow cache written as ``datasets`` does.
  It runs on the first ``--hf-mb`` MB of the rows only (it is an order of magnitude slower); compare MB/s.

Writes ``bench/results/bulk.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / ".data" / "bulk"
RESULTS = ROOT / "bench" / "results" / "bulk.json"
TOKENIZER = "cl100k_base"
ROW_GROUP_ROWS = 4096


def make_rows(mb: float, seed: int = 1234) -> list[str]:
    """Rows of 200 B – 8 KiB cut from the train corpus at line boundaries, cycling until ``mb`` MB."""
    from bench.corpora import ensure

    lines = ensure("train").read_text("utf-8").splitlines(keepends=True)
    rng = random.Random(seed)
    target = int(mb * 1e6)
    rows: list[str] = []
    total = 0
    i = 0
    while total < target:
        want = int(math.exp(rng.uniform(math.log(200), math.log(8192))))
        parts, size = [], 0
        while size < want:
            line = lines[i % len(lines)]
            i += 1
            parts.append(line)
            size += len(line.encode("utf-8"))
        row = "".join(parts)
        rows.append(row)
        total += size
    return rows


def write_inputs(rows: list[str], stem: str = "rows") -> tuple[Path, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    DATA.mkdir(parents=True, exist_ok=True)
    jsonl, parquet = DATA / f"{stem}.jsonl", DATA / f"{stem}.parquet"
    with jsonl.open("w", encoding="utf-8") as f:
        for n, row in enumerate(rows):
            f.write(json.dumps({"id": n, "text": row}, ensure_ascii=False) + "\n")
    pq.write_table(pa.table({"id": list(range(len(rows))), "text": rows}), parquet, row_group_size=ROW_GROUP_ROWS)
    return jsonl, parquet


def rate(rows: int, n_bytes: int, seconds: float) -> dict[str, float]:
    """Throughput, and the machine's 1-minute load average when the measurement ended (the machine is shared)."""
    return {"seconds": round(seconds, 3), "rows_per_s": round(rows / seconds, 1),
            "mb_per_s": round(n_bytes / 1e6 / seconds, 2), "load_1min": round(os.getloadavg()[0], 1)}


def bench_engine(rows: list[str]) -> tuple[int, float]:
    from app.engine import get_tokenizer

    tokenizer = get_tokenizer(TOKENIZER)
    tokenizer.count_batch(rows[:100])
    t0 = time.perf_counter()
    tokens = sum(tokenizer.count_batch(rows))
    return tokens, time.perf_counter() - t0


def bench_loop(jsonl: Path) -> tuple[int, float, float]:
    from app.bulk.job import chunk_plan
    from app.bulk.runner import ChunkWorker
    from app.bulk.sources import input_files

    out = DATA / "out-loop"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    t0, c0 = time.perf_counter(), time.process_time()
    worker = ChunkWorker(tokenizer=TOKENIZER, store=None, mode="count", column="text", keep=[], output=str(out))
    tokens = sum(worker.process(c).tokens for c in chunk_plan(input_files([jsonl]), 1))  # the job's own plan
    return tokens, time.perf_counter() - t0, time.process_time() - c0


def stage_breakdown(path: Path, mb: float) -> dict[str, float]:
    """Seconds per stage of the single-process loop over the first ``mb`` MB of chunks of ``path``: reading and
    parsing rows, tokenizing (``count_batch``), building and writing the Parquet part file (in-process timers)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from app.bulk.sources import input_files, plan_chunks, read_chunk
    from app.engine import get_tokenizer

    tokenizer = get_tokenizer(TOKENIZER)
    out = DATA / "out-stages"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    stages = {"read": 0.0, "tokenize": 0.0, "write": 0.0, "mb": 0.0}
    for chunk in plan_chunks(input_files([path]), 8 << 20):
        if stages["mb"] >= mb:
            break
        t0 = time.perf_counter()
        rows = read_chunk(chunk, "text", [])
        texts = [t for t in rows.texts if t is not None]
        t1 = time.perf_counter()
        counts = tokenizer.count_batch(texts)
        t2 = time.perf_counter()
        table = pa.table({"row_key": rows.keys, "tokens": pa.array(counts, pa.int64()), "error": rows.errors})
        pq.write_table(table, out / f"part-{chunk.index:06d}.parquet")
        t3 = time.perf_counter()
        stages["read"] += t1 - t0
        stages["tokenize"] += t2 - t1
        stages["write"] += t3 - t2
        stages["mb"] += sum(len(t.encode("utf-8")) for t in texts) / 1e6
    return {k: round(v, 3) for k, v in stages.items()}


def bench_ray(path: Path, cpus: int) -> tuple[int, float, float, float]:
    """(tokens, job seconds, ray.init seconds, worker CPU seconds) in a fresh process, so each CPU count gets its
    own Ray."""
    code = f"""
import json, time, ray
from app.bulk.job import BulkOptions, run_bulk
t0 = time.perf_counter(); ray.init(address="local", num_cpus={cpus}, include_dashboard=False, logging_level="ERROR")
init = time.perf_counter() - t0
s = run_bulk(BulkOptions(inputs=[{str(path)!r}], output={str(DATA / f"out-ray{cpus}-{path.suffix[1:]}")!r},
    mode="count", tokenizer={TOKENIZER!r}, keep=[], overwrite=True, progress=False))
print(json.dumps({{"tokens": s["tokens"], "seconds": s["seconds"], "init": init, "cpu": s["worker_cpu_seconds"]}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["tokens"], out["seconds"], out["init"], out["cpu"]


def bench_hf(parquet: Path, num_proc: int) -> tuple[int, float, float]:
    """(tokens, map seconds, load seconds) with Hugging Face datasets + tokenizers, in a fresh process."""
    code = f"""
import json, os, shutil, time
os.environ["HF_DATASETS_OFFLINE"] = "1"
from pathlib import Path
import datasets
from tokenizers import Tokenizer
from bench.engine.peers import hf_tokenizer_json
cache = Path({str(DATA / "hf-cache")!r}); shutil.rmtree(cache, ignore_errors=True)
tok = Tokenizer.from_file(str(hf_tokenizer_json({TOKENIZER!r}, Path({str(DATA)!r}))))
t0 = time.perf_counter()
ds = datasets.load_dataset("parquet", data_files={str(parquet)!r}, split="train", cache_dir=str(cache))
load = time.perf_counter() - t0
def count(batch):
    return {{"tokens": [len(e.ids) for e in tok.encode_batch(batch["text"], add_special_tokens=False)]}}
t0 = time.perf_counter()
out = ds.map(count, batched=True, batch_size=1000, num_proc={num_proc if num_proc > 1 else None},
             remove_columns=["text"])
seconds = time.perf_counter() - t0
print(json.dumps({{"tokens": sum(out["tokens"]), "seconds": seconds, "load": load}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["tokens"], out["seconds"], out["load"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=1000.0, help="MB of text to tokenize (default 1000)")
    ap.add_argument("--hf-mb", type=float, default=100.0, help="MB of those rows given to datasets.map (default 100)")
    ap.add_argument("--quick", action="store_true", help="skip the 2-process datasets.map")
    ap.add_argument("--out", type=Path, default=RESULTS, help=f"results JSON (default {RESULTS.relative_to(ROOT)})")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved Ray 1/2-CPU rounds, best kept (default 1)")
    ap.add_argument("--skip-hf", action="store_true", help="no datasets.map at all (Ray and the loop only)")
    ap.add_argument("--stages", type=float, metavar="MB",
                    help="only time the loop's stages (read, tokenize, write) over the first MB of rows.jsonl")
    args = ap.parse_args(argv)
    if args.stages:
        stages = stage_breakdown(DATA / "rows.jsonl", args.stages)
        print(json.dumps(stages))
        if args.out.exists():
            results = json.loads(args.out.read_text(encoding="utf-8"))
            results["loop_stages_s"] = stages
            args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        return 0

    rows = make_rows(args.mb)
    n_bytes = sum(len(r.encode("utf-8")) for r in rows)
    jsonl, parquet = write_inputs(rows)
    load = os.getloadavg()
    results: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load average at start {load[0]:.1f}",
        "tokenizer": TOKENIZER, "rows": len(rows), "text_bytes": n_bytes,
        "jsonl_bytes": jsonl.stat().st_size, "parquet_bytes": parquet.stat().st_size, "methods": {},
    }
    methods = results["methods"]
    tokens, s = bench_engine(rows)
    results["tokens"] = tokens
    methods["engine count_batch (in memory, 1 thread)"] = rate(len(rows), n_bytes, s)
    print("engine", methods, flush=True)
    t, s, cpu = bench_loop(jsonl)
    assert t == tokens, (t, tokens)
    methods["single-process loop (JSONL -> Parquet)"] = {**rate(len(rows), n_bytes, s),
                                                         "mb_per_cpu_s": round(n_bytes / 1e6 / cpu, 2)}
    print("loop done", flush=True)
    best: dict[int, tuple[float, float, float]] = {}
    for _ in range(args.rounds):  # interleaved rounds, best of each: the machine is shared
        for cpus in (1, 2):
            t, s, init, cpu = bench_ray(jsonl, cpus)
            assert t == tokens, (t, tokens)
            if cpus not in best or s < best[cpus][0]:
                best[cpus] = (s, init, cpu)
            print(cpus, "ray done", round(s, 2), flush=True)
    for cpus, (s, init, cpu) in best.items():
        methods[f"bulk on Ray, {cpus} CPU (JSONL -> Parquet)"] = {
            **rate(len(rows), n_bytes, s), "ray_init_s": round(init, 2), "mb_per_cpu_s": round(n_bytes / 1e6 / cpu, 2)}
    t, s, init, cpu = bench_ray(parquet, 2)
    assert t == tokens, (t, tokens)
    methods["bulk on Ray, 2 CPU (Parquet -> Parquet)"] = {**rate(len(rows), n_bytes, s), "ray_init_s": round(init, 2),
                                                          "mb_per_cpu_s": round(n_bytes / 1e6 / cpu, 2)}
    tiny_jsonl, _ = write_inputs(rows[:1], "one-row")
    _, s, _, _ = bench_ray(tiny_jsonl, 2)
    results["ray_fixed_cost_s"] = round(s, 2)
    hf_rows: list[str] = []
    hf_bytes = 0
    for row in rows:
        if hf_bytes >= args.hf_mb * 1e6:
            break
        hf_rows.append(row)
        hf_bytes += len(row.encode("utf-8"))
    _, hf_parquet = write_inputs(hf_rows, "hf-rows")
    results["hf_rows"], results["hf_text_bytes"] = len(hf_rows), hf_bytes
    from app.engine import get_tokenizer

    hf_expected = sum(get_tokenizer(TOKENIZER).count_batch(hf_rows))
    for num_proc in () if args.skip_hf else (1,) if args.quick else (1, 2):
        t, s, load_s = bench_hf(hf_parquet, num_proc)
        results.setdefault("hf_tokens_equal", []).append(t == hf_expected)
        methods[f"HF datasets.map + tokenizers, num_proc={num_proc} (first {hf_bytes / 1e6:.0f} MB)"] = {
            **rate(len(hf_rows), hf_bytes, s), "load_s": round(load_s, 2)}
        print("hf", num_proc, "done", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\n{results['rows']} rows, {n_bytes / 1e6:.1f} MB of text, {tokens} tokens ({TOKENIZER}); "
          f"{results['machine']}\n")
    print("| method | seconds | rows/s | MB/s | MB per CPU-second | load |\n|---|---:|---:|---:|---:|---:|")
    for name, r in methods.items():
        per_cpu = r.get("mb_per_cpu_s", "")
        print(f"| {name} | {r['seconds']:.2f} | {r['rows_per_s']:.0f} | {r['mb_per_s']:.2f} | {per_cpu} "
              f"| {r['load_1min']} |")
    print(f"\nRay fixed cost per job (one-row input, 2 CPUs): {results['ray_fixed_cost_s']:.2f} s; "
          f"datasets.map token totals equal ours: {results.get('hf_tokens_equal')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
