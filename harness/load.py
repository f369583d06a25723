"""An httpx-based async load generator for the service: fixed concurrency, bounded time, mixed text sizes.

Every response is checked, not just its status: a /count answer must equal the count the local engine gives for
the same text, and an /encode answer must hold exactly the local engine's ids. Anything else (a transport error, a
non-200 status, a wrong count) is an error of that request, recorded with its time so callers can tell *when*
errors happened (for example around a worker being killed).

Library use: :func:`build_pool` once, then ``asyncio.run(run_load(url, pool, concurrency=8, duration=30))`` ->
:class:`LoadReport`. Command line (prints a JSON report)::

    python -m bench.reliability.load --url http://127.0.0.1:8000 --concurrency 8 --duration 30  # or harness.load

Also here: :func:`worker_pids` and :func:`rss_kib`, which read ``/proc`` to find the uvicorn worker processes
under a ``serve`` process and their resident memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

#: (size class name, UTF-8 bytes, weight) of the default mix: mostly small, some medium, a few large.
DEFAULT_MIX: tuple[tuple[str, int, float], ...] = (("200B", 200, 0.70), ("4KB", 4096, 0.25), ("64KB", 65536, 0.05))
TOKENIZERS = ("cl100k_base", "o200k_base", "llama3", "gpt2")
_WORDS = ("the", "token", "service", "Straße", "naïve", "日本語の", "テキスト", "Привет", "мир", "code();",
          "x = [1, 2, 3]", "1234567", "über", "\n", "  ", "emoji🙂", "'s", "don't", "<div>", "\t", "مرحبا", "世界")


@dataclass(frozen=True)
class Item:
    """One prepared request: endpoint, JSON body, and the expected answer (count, and ids for /encode)."""

    size_class: str
    endpoint: str
    body: bytes
    count: int
    ids: tuple[int, ...] | None


def make_text(rng: random.Random, nbytes: int, unique_every: int = 7) -> str:
    """Mixed-script text of about ``nbytes`` UTF-8 bytes (never more). Every ``unique_every``-th word is a fresh
    random alphanumeric string, so the pre-token cache keeps seeing new pieces and its bound is exercised."""
    out: list[str] = []
    size = 0
    i = 0
    while True:
        i += 1
        if unique_every and i % unique_every == 0:
            word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
                           for _ in range(rng.randint(4, 12)))
        else:
            word = rng.choice(_WORDS)
        piece = " " + word
        n = len(piece.encode())
        if size + n > nbytes:
            break
        out.append(piece)
        size += n
    return "".join(out)


def build_pool(mix: Sequence[tuple[str, int, float]] = DEFAULT_MIX, per_class: int = 24, seed: int = 1,
               tokenizers: Sequence[str] = TOKENIZERS) -> list[tuple[Item, float]]:
    """Prepared requests with their weights: ``per_class`` texts per size class, alternating /count and /encode
    and the tokenizers. Expected answers come from the local engine (same store as the server's default)."""
    from app.engine import get_tokenizer

    rng = random.Random(seed)
    pool: list[tuple[Item, float]] = []
    for name, nbytes, weight in mix:
        for k in range(per_class):
            text = make_text(rng, nbytes)
            tokenizer = tokenizers[k % len(tokenizers)]
            ids = get_tokenizer(tokenizer).encode(text)
            endpoint = "/encode" if k % 2 else "/count"
            body = json.dumps({"tokenizer": tokenizer, "text": text}, ensure_ascii=False).encode()
            pool.append((Item(name, endpoint, body, len(ids), tuple(ids) if endpoint == "/encode" else None),
                         weight / per_class))
    return pool


@dataclass
class Sample:
    """One finished request: start time (monotonic seconds), latency (s), and the error text or None."""

    size_class: str
    start: float
    latency: float
    error: str | None


@dataclass
class LoadReport:
    """Result of :func:`run_load`. Latencies in milliseconds."""

    duration_s: float
    concurrency: int
    requests: int
    errors: int
    rps: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    by_class: dict[str, dict[str, float]] = field(default_factory=dict)
    error_examples: list[str] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list, repr=False)

    def summary(self) -> dict[str, object]:
        """The report without the per-request samples (JSON-ready)."""
        out = asdict(self)
        out.pop("samples")
        return out


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100, nearest rank) of ``values``; 0.0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def _check(item: Item, response: httpx.Response) -> str | None:
    if response.status_code != 200:
        return f"{item.endpoint} {item.size_class}: HTTP {response.status_code} {response.text[:200]}"
    data = response.json()
    if item.ids is not None:
        if data.get("ids") != list(item.ids):
            return f"{item.endpoint} {item.size_class}: ids differ from the local engine's"
    elif data.get("count") != item.count:
        return f"{item.endpoint} {item.size_class}: count {data.get('count')} != {item.count}"
    return None


async def run_load(base_url: str, pool: Sequence[tuple[Item, float]], *, concurrency: int = 8,
                   duration: float = 30.0, seed: int = 2, headers: dict[str, str] | None = None,
                   timeout: float = 60.0) -> LoadReport:
    """Keep ``concurrency`` requests in flight for ``duration`` seconds (each client loops: pick, send, check).

    Requests are drawn from ``pool`` by weight. A request that fails counts as an error and the loop goes on."""
    rng = random.Random(seed)
    items = [p[0] for p in pool]
    weights = [p[1] for p in pool]
    samples: list[Sample] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    hdrs = {"content-type": "application/json", **(headers or {})}
    begin = time.monotonic()
    deadline = begin + duration

    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout, headers=hdrs) as client:

        async def one_client(idx: int) -> None:
            local = random.Random(rng.random() + idx)
            while time.monotonic() < deadline:
                item = local.choices(items, weights)[0]
                start = time.monotonic()
                try:
                    response = await client.post(item.endpoint, content=item.body)
                    error = _check(item, response)
                except httpx.HTTPError as exc:
                    error = f"{item.endpoint} {item.size_class}: {type(exc).__name__}: {exc}"
                samples.append(Sample(item.size_class, start, time.monotonic() - start, error))

        await asyncio.gather(*(one_client(i) for i in range(concurrency)))
    elapsed = time.monotonic() - begin
    return summarize(samples, elapsed, concurrency)


def summarize(samples: list[Sample], elapsed: float, concurrency: int) -> LoadReport:
    """Aggregate samples into a :class:`LoadReport` (latency figures over successful requests)."""
    ok = [s.latency * 1000 for s in samples if s.error is None]
    by_class: dict[str, dict[str, float]] = {}
    for name in sorted({s.size_class for s in samples}):
        lat = [s.latency * 1000 for s in samples if s.size_class == name and s.error is None]
        by_class[name] = {"requests": float(sum(1 for s in samples if s.size_class == name)),
                          "p50_ms": round(percentile(lat, 50), 2), "p99_ms": round(percentile(lat, 99), 2)}
    errors = [s.error for s in samples if s.error is not None]
    return LoadReport(
        duration_s=round(elapsed, 2), concurrency=concurrency, requests=len(samples), errors=len(errors),
        rps=round(len(samples) / elapsed, 1) if elapsed else 0.0, p50_ms=round(percentile(ok, 50), 2),
        p99_ms=round(percentile(ok, 99), 2), max_ms=round(max(ok, default=0.0), 2), by_class=by_class,
        error_examples=sorted(set(errors))[:5], samples=samples)


# ---------------------------------------------------------------------------- /proc helpers


def children(pid: int) -> list[int]:
    """Direct child process ids of ``pid`` (from ``/proc/<pid>/task/*/children``)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return sorted(set(out))


def worker_pids(server_pid: int) -> list[int]:
    """The worker processes of a ``serve`` process: its children forked from it (same command line).

    With one worker the ``serve`` process serves itself: then ``[server_pid]``."""
    try:
        own = Path(f"/proc/{server_pid}/cmdline").read_bytes()
    except OSError:
        return [server_pid]
    workers = []
    for pid in children(server_pid):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == own:
                workers.append(pid)
        except OSError:
            continue
    return workers or [server_pid]


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (``VmRSS`` of ``/proc/<pid>/status``); 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="base URL of a running service")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--duration", type=float, default=30.0, help="seconds")
    p.add_argument("--token", help="bearer token, if the service has auth on")
    args = p.parse_args(argv)
    headers = {"authorization": f"Bearer {args.token}"} if args.token else None
    report = asyncio.run(run_load(args.url, build_pool(), concurrency=args.concurrency, duration=args.duration,
                                  headers=headers))
    json.dump(report.summary(), sys.stdout, indent=2)
    print()
    return 1 if report.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
