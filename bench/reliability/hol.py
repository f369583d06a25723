"""Head-of-line: small /count requests while 1 MB requests are being served, against the same small requests on
an idle server. Reports p50/p99/max of the small requests in both phases and how many big requests completed.

    python -m bench.reliability.hol --workers 2 --big-streams 2 --small-concurrency 4 --duration 30 \\
        --out bench/reliability/results/hol.json

The stated bound (docs/reliability.md): with 1 MB requests continuously in flight, small-request p99 stays under
BOUND_MS. Exit status 1 if it does not, or if any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import random
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import httpx

from harness.load import Item, make_text, run_load
from harness.server import start

BOUND_MS = 250.0


def _small_pool() -> list[tuple[Item, float]]:
    from app.engine import get_tokenizer

    tokenizer = get_tokenizer("cl100k_base")
    rng = random.Random(5)
    out = []
    for _ in range(32):
        text = make_text(rng, 200)
        body = json.dumps({"tokenizer": "cl100k_base", "text": text}).encode()
        out.append((Item("200B", "/count", body, tokenizer.count(text), None), 1.0))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--big-streams", type=int, default=2, help="clients each sending 1 MB /count requests back to back")
    p.add_argument("--small-concurrency", type=int, default=4)
    p.add_argument("--duration", type=float, default=30.0, help="seconds per phase")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    from app.engine import get_tokenizer

    rng = random.Random(9)
    big_texts = [make_text(rng, 2**20) for _ in range(args.big_streams)]
    big_counts = [get_tokenizer("o200k_base").count(t) for t in big_texts]
    pool = _small_pool()
    with tempfile.TemporaryDirectory() as tmp:
        server = start(Path(tmp) / "server.log", "--workers", str(args.workers))
        try:
            asyncio.run(run_load(server.url, pool, concurrency=args.small_concurrency, duration=5))
            idle = asyncio.run(run_load(server.url, pool, concurrency=args.small_concurrency,
                                        duration=args.duration))
            stop = threading.Event()
            big: list[tuple[bool, float]] = []

            def stream(k: int) -> None:
                body = json.dumps({"tokenizer": "o200k_base", "text": big_texts[k]}).encode()
                with httpx.Client(base_url=server.url, timeout=600,
                                  headers={"content-type": "application/json"}) as c:
                    while not stop.is_set():
                        r = c.post("/count", content=body)
                        big.append((r.status_code == 200 and r.json()["count"] == big_counts[k],
                                    r.elapsed.total_seconds()))

            threads = [threading.Thread(target=stream, args=(k,)) for k in range(args.big_streams)]
            for t in threads:
                t.start()
            busy = asyncio.run(run_load(server.url, pool, concurrency=args.small_concurrency,
                                        duration=args.duration, seed=7))
            stop.set()
            for t in threads:
                t.join(600)
        finally:
            server.stop()
    big_lat = sorted(s for _, s in big)
    result = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m bench.reliability.hol " + " ".join(sys.argv[1:] if argv is None else argv),
        "workers": args.workers, "big_streams": args.big_streams, "small_concurrency": args.small_concurrency,
        "bound_ms": BOUND_MS,
        "small_idle": {k: idle.summary()[k] for k in ("requests", "errors", "p50_ms", "p99_ms", "max_ms")},
        "small_with_1MB_in_flight": {k: busy.summary()[k] for k in ("requests", "errors", "p50_ms", "p99_ms",
                                                                    "max_ms")},
        "big_requests": len(big), "big_errors": sum(1 for ok, _ in big if not ok),
        "big_median_s": round(big_lat[len(big_lat) // 2], 3) if big_lat else None,
    }
    result["within_bound"] = busy.p99_ms <= BOUND_MS
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    failed = idle.errors or busy.errors or result["big_errors"] or not result["within_bound"]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
