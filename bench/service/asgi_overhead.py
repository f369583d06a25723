"""Per-request cost of the HTTP layer without sockets: both ASGI apps called directly, one request at a time.

This isolates framework and handler overhead (routing, middleware, JSON, validation, metrics) from the load
generator and the network, which dominate — and add noise to — the small-text rows of ``run.py``.

    python -m bench.service.asgi_overhead [--requests 3000] [--rounds 5]

Prints microseconds per request (median over interleaved rounds) for /count and /encode on a ~200 B text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

BODY = json.dumps({"tokenizer": "cl100k_base", "text": "The quick brown fox jumps over the lazy dog. " * 4}).encode()


async def call(app: Any, path: str, body: bytes = BODY, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """One POST through the ASGI interface (``headers`` added to the request's); raises if the status is not 200."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                         *(headers or [])],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    status = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    if status != [200]:
        raise RuntimeError(f"{path}: status {status}")


async def measure(requests: int, rounds: int) -> dict[tuple[str, str], float]:
    import bench.service.baseline_app as baseline
    from app.api.main import create_app
    from app.core.config import Settings

    ours = create_app(Settings(log_level="warning"))
    timings: dict[tuple[str, str], list[float]] = {}
    async with ours.router.lifespan_context(ours):
        apps = {"ours": ours, "baseline": baseline.app}
        for r in range(rounds):
            for name in (("ours", "baseline") if r % 2 == 0 else ("baseline", "ours")):
                for path in ("/count", "/encode"):
                    for _ in range(200):
                        await call(apps[name], path)
                    t0 = time.perf_counter()
                    for _ in range(requests):
                        await call(apps[name], path)
                    timings.setdefault((name, path), []).append((time.perf_counter() - t0) / requests * 1e6)
    return {k: statistics.median(v) for k, v in timings.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    result = asyncio.run(measure(args.requests, args.rounds))
    print("| endpoint | ours us/request | baseline us/request | ratio (baseline/ours) |")
    print("|---|---:|---:|---:|")
    for path in ("/count", "/encode"):
        o, b = result[("ours", path)], result[("baseline", path)]
        print(f"| {path} | {o:.0f} | {b:.0f} | {b / o:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
