"""What :mod:`app.client` adds per call over a raw ``httpx`` request to the same server.

    python -m bench.client.run [--calls 400] [--rounds 15] [--out bench/client/RESULTS.md]
    python -m bench.client.run --quick          # smoke run: a few calls, report to a temporary file

Two settings, each as medians over interleaved rounds (every round runs every variant once, in a fresh random
order, so drift in machine load hits all variants alike):

* **loopback**: a real ``python -m app serve`` (one worker) on 127.0.0.1; per call, ``Client.count(text)`` /
  ``Client.encode(text)`` versus ``httpx.Client.post(path, json=body).json()`` on a kept-alive connection, and
  the same for the async clients. The difference is the client's overhead plus noise.
* **in-process**: the same two call paths over an ``httpx.MockTransport`` that answers with a fixed body, so no
  server or socket is involved and the difference is exactly the client's own work (building the body, the retry
  loop, parsing into dataclasses).
* **work only**: no httpx at all: the client's request building and response parsing
  (``calls.count(...)`` + ``calls.result_of``) versus what the raw call does in their place (``json.dumps`` of
  the body, ``json.loads`` of the answer). Microseconds of pure CPU, so the least noisy of the three on a busy
  machine.

The target (issue 17): the client adds < 50 µs per call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from app.client import AsyncClient, Client
from harness.server import start

TEXT = "The quick brown fox jumps over the lazy dog. " * 4  # ~180 B, the service's small-request case
TOKENIZER = "cl100k_base"
TARGET_US = 50.0
RESULTS = Path(__file__).with_name("RESULTS.md")

Sync = Callable[[], Any]
Async = Callable[[], Awaitable[Any]]


def per_call_us(fn: Sync, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


async def per_call_us_async(fn: Async, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await fn()
    return (time.perf_counter() - start) / calls * 1e6


def sync_variants(raw: httpx.Client, client: Client) -> dict[str, Sync]:
    count_body = {"tokenizer": TOKENIZER, "text": TEXT}
    return {
        "count raw": lambda: raw.post("/count", json=count_body).json()["count"],
        "count client": lambda: client.count(TEXT).count,
        "encode raw": lambda: raw.post("/encode", json=count_body).json()["ids"],
        "encode client": lambda: client.encode(TEXT).ids,
    }


def async_variants(raw: httpx.AsyncClient, client: AsyncClient) -> dict[str, Async]:
    body = {"tokenizer": TOKENIZER, "text": TEXT}

    async def count_raw() -> Any:
        return (await raw.post("/count", json=body)).json()["count"]

    async def count_client() -> Any:
        return (await client.count(TEXT)).count

    return {"async count raw": count_raw, "async count client": count_client}


def measure(sync: dict[str, Sync], aio: dict[str, Async], calls: int, rounds: int, seed: int,
            close: tuple[httpx.AsyncClient | AsyncClient, ...] = ()) -> dict[str, list[float]]:
    """µs per call of every variant in each of ``rounds`` interleaved rounds (after one warm-up round); the
    async clients in ``close`` are closed on the loop they ran on."""
    rng = random.Random(seed)
    samples: dict[str, list[float]] = {name: [] for name in [*sync, *aio]}
    loop = asyncio.new_event_loop()
    try:
        for r in range(rounds + 1):
            order = list(samples)
            rng.shuffle(order)
            for name in order:
                if name in sync:
                    value = per_call_us(sync[name], calls)
                else:
                    value = loop.run_until_complete(per_call_us_async(aio[name], calls))
                if r > 0:
                    samples[name].append(value)
    finally:
        for c in close:
            loop.run_until_complete(c.aclose())
        loop.close()
    return samples


def canned_transport(asynchronous: bool) -> httpx.MockTransport:
    """Answers every request as the service would for :data:`TEXT` (same JSON shape and size)."""
    from app.engine import get_tokenizer

    ids = get_tokenizer(TOKENIZER).encode(TEXT)
    bodies = {
        "/count": json.dumps({"tokenizer": TOKENIZER, "count": len(ids)}).encode(),
        "/encode": json.dumps({"tokenizer": TOKENIZER, "ids": ids, "count": len(ids)}).encode(),
    }

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=bodies[request.url.path], headers={"content-type": "application/json"})

    if asynchronous:
        async def answer_async(request: httpx.Request) -> httpx.Response:
            return answer(request)

        return httpx.MockTransport(answer_async)
    return httpx.MockTransport(answer)


def work_variants() -> dict[str, Sync]:
    """Request building + response parsing: the client's versus a raw call's (no transport)."""
    from app.client import calls as client_calls

    body = {"tokenizer": TOKENIZER, "text": TEXT}
    answers = {
        "count": json.dumps({"tokenizer": TOKENIZER, "count": 45}).encode(),
        "encode": json.dumps({"tokenizer": TOKENIZER, "ids": list(range(1000, 1045)), "count": 45}).encode(),
    }
    responses = {k: httpx.Response(200, content=v, headers={"content-type": "application/json"})
                 for k, v in answers.items()}
    target = {"tokenizer": TOKENIZER}

    def raw(kind: str) -> Sync:
        return lambda: (json.dumps(body).encode(), json.loads(answers[kind]))

    def count_client() -> Any:
        call = client_calls.count("text", TEXT, client_calls.target(None, None, TOKENIZER), (), (), False, False)
        return client_calls.result_of(call, responses["count"]).count

    def encode_client() -> Any:
        call = client_calls.encode("text", TEXT, target, (), (), False, False, False, False)
        return client_calls.result_of(call, responses["encode"]).ids

    return {"count raw": raw("count"), "count client": count_client,
            "encode raw": raw("encode"), "encode client": encode_client}


def run(calls: int, rounds: int, out: Path) -> dict[str, dict[str, list[float]]]:
    results: dict[str, dict[str, list[float]]] = {"work only": measure(work_variants(), {}, calls * 20, rounds, seed=0)}
    # In-process: no server, no socket.
    with httpx.Client(transport=canned_transport(False), base_url="http://bench") as raw, \
            Client("http://bench", transport=canned_transport(False), tokenizer=TOKENIZER) as client:
        aio_raw = httpx.AsyncClient(transport=canned_transport(True), base_url="http://bench")
        aio_client = AsyncClient("http://bench", transport=canned_transport(True), tokenizer=TOKENIZER)
        results["in-process"] = measure(sync_variants(raw, client), async_variants(aio_raw, aio_client),
                                        calls * 5, rounds, seed=1, close=(aio_raw, aio_client))
    # Loopback: a real server.
    with tempfile.TemporaryDirectory() as tmp:
        server = start(Path(tmp) / "server.log")
        try:
            assert server.url is not None
            with httpx.Client(base_url=server.url) as raw, Client(server.url, tokenizer=TOKENIZER) as client:
                assert client.count(TEXT).count == raw.post("/count", json={"tokenizer": TOKENIZER,
                                                                            "text": TEXT}).json()["count"]
                aio_raw = httpx.AsyncClient(base_url=server.url)
                aio_client = AsyncClient(server.url, tokenizer=TOKENIZER)
                results["loopback"] = measure(sync_variants(raw, client), async_variants(aio_raw, aio_client),
                                              calls, rounds, seed=2, close=(aio_raw, aio_client))
        finally:
            server.stop()
    write_report(results, calls, rounds, out)
    return results


def write_report(results: dict[str, dict[str, list[float]]], calls: int, rounds: int, out: Path) -> None:
    lines = [
        "# Client overhead (`app.client`) vs a raw httpx request",
        "",
        "Generated by `python -m bench.client.run` (see its docstring). Median µs per call over "
        f"{rounds} interleaved rounds; calls per variant per round: loopback {calls}, in-process {calls * 5}, "
        f"work only {calls * 20}. "
        f"Text: {len(TEXT)} B, tokenizer {TOKENIZER}. Target: the client adds < {TARGET_US:.0f} µs per call.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"httpx {httpx.__version__}; load average at the end {os.getloadavg()[0]:.2f} (shared machine).",
        "",
        "Overhead is the median of the per-round differences (client minus raw, measured in the same round), "
        "which cancels most of the drift in machine load; the quartiles of those differences show the noise.",
        "",
        "| setting | call | raw httpx µs | client µs | overhead µs (median) | overhead quartiles µs | target |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for setting, samples in results.items():
        for call in ("count", "encode", "async count"):
            raw, ours = samples.get(f"{call} raw"), samples.get(f"{call} client")
            if raw is None or ours is None:
                continue
            diffs = [b - a for a, b in zip(raw, ours, strict=True)]
            over = statistics.median(diffs)
            q1, _, q3 = statistics.quantiles(diffs, n=4) if len(diffs) > 1 else (over, over, over)
            lines.append(f"| {setting} | {call} | {statistics.median(raw):.1f} | {statistics.median(ours):.1f} | "
                         f"{over:+.1f} | {q1:+.1f} … {q3:+.1f} | {'met' if over < TARGET_US else 'missed'} |")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per variant per round (loopback)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path, default=None, help=f"report file (default {RESULTS.name} here; "
                        "with --quick, a temporary file)")
    parser.add_argument("--quick", action="store_true", help="smoke run (few calls; report to a temp file)")
    args = parser.parse_args()
    if args.quick:
        run(calls=5, rounds=2, out=args.out or Path(tempfile.gettempdir()) / "bench-client-quick.md")
    else:
        run(args.calls, args.rounds, args.out or RESULTS)


if __name__ == "__main__":
    main()
