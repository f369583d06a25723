"""Soak: a real ``serve --workers N`` under the mixed load of :mod:`bench.reliability.load` for several minutes,
sampling every worker's resident memory; reports throughput, p50/p99, errors and the RSS growth after warm-up.

    python -m bench.reliability.soak --minutes 5 --concurrency 8 --workers 2 \\
        --out bench/reliability/results/soak.json

Exit status 1 if any request failed or a worker was replaced. Growth is reported, not judged: compare it with the
cache bound (``TOKENIZER_CACHE_SIZE`` entries per tokenizer and worker).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from harness.load import build_pool, rss_kib, run_load, summarize
from harness.server import start


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=30.0, help="seconds of load before the RSS baseline")
    p.add_argument("--interval", type=float, default=30.0, help="seconds between RSS samples")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    pool = build_pool(per_class=48)
    with tempfile.TemporaryDirectory() as tmp:
        server = start(Path(tmp) / "server.log", "--workers", str(args.workers))
        try:
            workers = server.workers()
            warm = asyncio.run(run_load(server.url, pool, concurrency=args.concurrency, duration=args.warmup))
            baseline = {pid: rss_kib(pid) for pid in workers}
            rows = []
            samples = []
            rounds = max(1, int(args.minutes * 60 / args.interval))
            for i in range(rounds):
                rep = asyncio.run(run_load(server.url, pool, concurrency=args.concurrency, duration=args.interval,
                                           seed=100 + i))
                samples += rep.samples
                rss = {pid: rss_kib(pid) for pid in workers}
                rows.append({"t_s": round((i + 1) * args.interval), "requests": rep.requests, "errors": rep.errors,
                             "p99_ms": rep.p99_ms, "rss_mib": {str(k): round(v / 1024, 1) for k, v in rss.items()}})
                print(json.dumps(rows[-1]), flush=True)
            total = summarize(samples, rounds * args.interval, args.concurrency)
            final = {pid: rss_kib(pid) for pid in workers}
            replaced = server.workers() != workers
        finally:
            server.stop()
    result = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m bench.reliability.soak " + " ".join(sys.argv[1:] if argv is None else argv),
        "workers": args.workers, "concurrency": args.concurrency, "minutes": args.minutes,
        "warmup_errors": warm.errors, "load": total.summary(),
        "rss_mib_after_warmup": {str(k): round(v / 1024, 1) for k, v in baseline.items()},
        "rss_mib_final": {str(k): round(v / 1024, 1) for k, v in final.items()},
        "rss_growth_mib": {str(k): round((final[k] - baseline[k]) / 1024, 1) for k in workers},
        "worker_replaced": replaced, "intervals": rows,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 1 if total.errors or warm.errors or replaced else 0


if __name__ == "__main__":
    raise SystemExit(main())
