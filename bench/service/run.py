"""Service benchmark: requests/s and p50/p99 latency on loopback, this service vs a plain FastAPI + tiktoken one.

Both services run at the same time with the same number of uvicorn workers (access logs off); cells
(endpoint x text size) are measured in interleaved rounds, alternating which service goes first, at a fixed
concurrency, with the same request bytes sent to both. Before any timing, ``/encode`` ids of every text size are
checked to be identical between the two services. Texts are slices of a mixed corpus (English prose, source code,
ten languages; ``bench.corpora``), each request a different slice so no response is a repeat of the last.

    python -m bench.service.run [--workers 2] [--concurrency 8] [--seconds 3] [--rounds 3] [--out FILE.md]

Requests/s is the median over rounds; p50/p99 are over all requests of all rounds. The load generator runs in
this process on the same machine (``bench/service/loadgen.py``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from bench.corpora import bench_texts
from harness.server import free_port

from .loadgen import LoadResult, http_post, run_load

REPO = Path(__file__).resolve().parents[2]
SIZES = {"200 B": 200, "4 KB": 4 * 1024, "64 KB": 64 * 1024, "1 MB": 1024 * 1024}
ENDPOINTS = ("/count", "/encode")
SERVICES = ("ours", "baseline")


def mixed_corpus(min_bytes: int, data_dir: Path | None = None) -> str:
    """Paragraphs of every bench corpus, interleaved round-robin, repeated until at least ``min_bytes``."""
    texts = bench_texts(data_dir)
    paragraphs = [[p for p in t.split("\n\n") if p.strip()] for t in texts.values()]
    out: list[str] = []
    size = 0
    i = 0
    while size < min_bytes:
        for paras in paragraphs:
            p = paras[i % len(paras)]
            out.append(p)
            size += len(p.encode())
        i += 1
    return "\n\n".join(out)


def slices(corpus: str, size: int, count: int) -> list[str]:
    """``count`` different texts of about ``size`` UTF-8 bytes, cut at character boundaries."""
    data = corpus.encode()
    step = max(1, (len(data) - size) // max(1, count))
    return [data[i * step: i * step + size].decode("utf-8", "ignore") for i in range(count)]


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as f:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 300, poll: float = 0.3) -> None:
    """Return once ``url``'s ``/healthz`` answers 200, polled every ``poll`` s; raises RuntimeError if ``proc`` exits
    or ``timeout`` s pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(poll)
    raise RuntimeError(f"{url}: not ready after {timeout}s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per cell and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default=",".join(SIZES), help="comma-separated subset of: " + ", ".join(SIZES))
    ap.add_argument("--out", type=Path, help="write the Markdown table here")
    ap.add_argument("--raw", type=Path, default=REPO / "bench" / "results" / "raw" / "service.json")
    args = ap.parse_args(argv)
    sizes = {k: SIZES[k] for k in args.sizes.split(",")}

    corpus = mixed_corpus(4 * 2**20)
    texts = {label: slices(corpus, n, 16 if n < 2**20 else 4) for label, n in sizes.items()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENIZER_") and k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = str(REPO)
    ports = {"ours": free_port(), "baseline": free_port()}
    logdir = args.raw.parent
    logdir.mkdir(parents=True, exist_ok=True)
    w = str(args.workers)
    cmds = {
        "ours": [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(ports["ours"]),
                 "--workers", w, "--no-access-log", "--log-level", "warning"],
        "baseline": [sys.executable, "-m", "uvicorn", "bench.service.baseline_app:app", "--host", "127.0.0.1",
                     "--port", str(ports["baseline"]), "--workers", w, "--no-access-log", "--log-level", "warning"],
    }
    results: dict[tuple[str, str, str], list[LoadResult]] = {}
    with ExitStack() as stack:
        procs = {}
        for name, cmd in cmds.items():
            procs[name] = start(cmd, env, logdir / f"service-{name}.log")
            stack.callback(stop, procs[name])
        for name in SERVICES:
            wait_ready(f"http://127.0.0.1:{ports[name]}", procs[name])

        # Exactness first: identical ids from both services for one text of every size.
        for label, group in texts.items():
            got = [httpx.post(f"http://127.0.0.1:{ports[s]}/encode", timeout=120,
                              json={"tokenizer": "cl100k_base", "text": group[0]}).json()["ids"] for s in SERVICES]
            if got[0] != got[1]:
                raise SystemExit(f"ids differ between services for the {label} text")
        print("ids identical between services for every size", flush=True)

        requests = {(ep, label): [http_post(ep, json.dumps({"tokenizer": "cl100k_base", "text": t}).encode())
                                  for t in group] for ep in ENDPOINTS for label, group in texts.items()}
        for r in range(args.rounds):
            for (ep, label), reqs in requests.items():
                order = SERVICES if r % 2 == 0 else SERVICES[::-1]
                for name in order:
                    run_load("127.0.0.1", ports[name], reqs, args.concurrency, min(0.5, args.seconds / 4))  # warm-up
                    res = run_load("127.0.0.1", ports[name], reqs, args.concurrency, args.seconds)
                    results.setdefault((ep, label, name), []).append(res)
                    print(f"round {r + 1} {ep:8s} {label:6s} {name:8s} {res.rps:9.1f} req/s "
                          f"p50 {res.percentile(0.5) * 1e3:8.2f} ms p99 {res.percentile(0.99) * 1e3:8.2f} ms"
                          f" errors {res.errors}", flush=True)

    table = render(results, args, sizes) + "\n\n" + engine_speed(texts)
    print(table)
    raw = {f"{ep} {label} {name}": [{"rps": x.rps, "n": len(x.latencies), "errors": x.errors,
                                     "p50": x.percentile(0.5), "p99": x.percentile(0.99)} for x in runs]
           for (ep, label, name), runs in results.items()}
    args.raw.write_text(json.dumps(raw, indent=1))
    if args.out:
        args.out.write_text(table + "\n")
    return 0


def render(results: dict[tuple[str, str, str], list[LoadResult]], args: argparse.Namespace,
           sizes: dict[str, int]) -> str:
    def pooled(runs: list[LoadResult]) -> LoadResult:
        out = LoadResult()
        for x in runs:
            out.latencies += x.latencies
            out.errors += x.errors
        return out

    lines = [
        f"Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {platform.python_implementation()} "
        f"{platform.python_version()}; {os.cpu_count()} CPUs (shared); workers {args.workers} each; "
        f"concurrency {args.concurrency}; {args.rounds} interleaved rounds x {args.seconds:g} s per cell.",
        "",
        "| endpoint | text | ours req/s (min-max) | baseline req/s (min-max) | ratio | ours p50 ms | base p50 ms "
        "| ours p99 ms | base p99 ms | requests (ours/base) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for ep in ENDPOINTS:
        for label in sizes:
            ours, base = results[(ep, label, "ours")], results[(ep, label, "baseline")]
            o_rps = statistics.median(x.rps for x in ours)
            b_rps = statistics.median(x.rps for x in base)
            po, pb = pooled(ours), pooled(base)
            errs = f" ({po.errors}/{pb.errors} errors)" if po.errors or pb.errors else ""
            lines.append(
                f"| {ep} | {label} | {o_rps:.1f} ({_range(ours)}) | {b_rps:.1f} ({_range(base)}) "
                f"| {o_rps / b_rps if b_rps else float('nan'):.2f}x "
                f"| {po.percentile(0.5) * 1e3:.2f} | {pb.percentile(0.5) * 1e3:.2f} "
                f"| {po.percentile(0.99) * 1e3:.2f} | {pb.percentile(0.99) * 1e3:.2f} "
                f"| {len(po.latencies)}/{len(pb.latencies)}{errs} |")
    lines.append("")
    lines.append("ratio = median ours req/s / median baseline req/s (above 1: this service is faster).")
    return "\n".join(lines)


def _range(runs: list[LoadResult]) -> str:
    return f"{min(x.rps for x in runs):.0f}-{max(x.rps for x in runs):.0f}"


def engine_speed(texts: dict[str, list[str]]) -> str:
    """One-thread, in-process throughput of both engines on the benchmark texts (context for the table)."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from app.engine import get_tokenizer

    ours = get_tokenizer("cl100k_base")
    spec = ours.spec
    assert spec is not None
    tk = tiktoken.Encoding(name="cl100k_base", pat_str=spec.pattern,
                           mergeable_ranks=load_tiktoken_bpe(str(spec.artifact_path)),
                           special_tokens=dict(spec.special_tokens))
    rows = [f"Engines alone (this process, one thread, same texts, median of 3; ours = `{ours.backend}` backend):", "",
            "| text | ours MB/s | tiktoken MB/s |", "|---|---:|---:|"]
    for label, group in texts.items():
        speeds = []
        for fn in (ours.encode, tk.encode_ordinary):
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                for t in group:
                    fn(t)
                runs.append(sum(len(t.encode()) for t in group) / (time.perf_counter() - t0) / 1e6)
            speeds.append(statistics.median(runs))
        rows.append(f"| {label} | {speeds[0]:.1f} | {speeds[1]:.1f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())
