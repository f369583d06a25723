"""Load and head-of-line, short versions (the long soak and the head-of-line figures: ``bench/reliability``).

A real ``serve --workers 2`` on loopback. No latency assertions here: the figures live in docs/reliability.md."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time

import httpx
import pytest

from app.engine import get_tokenizer
from harness.load import build_pool, make_text, rss_kib, run_load

from .conftest import Serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

#: Generous bound on a worker's resident-memory growth during the short run (MiB). Growth beyond this means the
#: pre-token cache bound or a buffer is leaking; the soak in bench/reliability/soak.py measures the real figure.
RSS_GROWTH_BOUND_MIB = 200


def test_mixed_load_has_zero_errors_and_bounded_memory(serve: Serve) -> None:
    server = serve("--workers", "2")
    pool = build_pool(per_class=12)
    workers = server.workers()
    assert len(workers) == 2, workers
    warm = asyncio.run(run_load(server.url, pool, concurrency=6, duration=4))
    assert warm.errors == 0, warm.error_examples
    before = {pid: rss_kib(pid) for pid in workers}
    report = asyncio.run(run_load(server.url, pool, concurrency=8, duration=20, seed=3))
    after = {pid: rss_kib(pid) for pid in workers}
    print(json.dumps({"load": report.summary(), "rss_kib_before": before, "rss_kib_after": after}))
    assert report.errors == 0, report.error_examples
    assert report.requests >= 20
    assert set(report.by_class) == {"200B", "4KB", "64KB"}
    assert server.workers() == workers, "a worker died or was replaced under load"
    for pid in workers:
        assert after[pid] > 0
        assert after[pid] - before[pid] < RSS_GROWTH_BOUND_MIB * 1024, (pid, before[pid], after[pid])


def test_small_requests_complete_while_megabyte_requests_are_in_flight(serve: Serve) -> None:
    server = serve("--workers", "2")
    rng = random.Random(11)
    big_texts = [make_text(rng, 2**20) for _ in range(2)]
    big_counts = [get_tokenizer("o200k_base").count(t) for t in big_texts]
    stop = threading.Event()
    in_flight = [0]
    lock = threading.Lock()
    big_results: list[tuple[int, bool]] = []

    def big_loop(k: int) -> None:
        body = json.dumps({"tokenizer": "o200k_base", "text": big_texts[k]}).encode()
        with httpx.Client(base_url=server.url, timeout=300, headers={"content-type": "application/json"}) as c:
            while not stop.is_set():
                with lock:
                    in_flight[0] += 1
                try:
                    r = c.post("/count", content=body)
                finally:
                    with lock:
                        in_flight[0] -= 1
                big_results.append((r.status_code, r.status_code == 200 and r.json()["count"] == big_counts[k]))

    threads = [threading.Thread(target=big_loop, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    overlapped = 0
    small = 0
    tokenizer = get_tokenizer("cl100k_base")
    try:
        with server.client() as c:
            deadline = time.monotonic() + 60
            while (overlapped < 20 or len(big_results) < 2) and time.monotonic() < deadline:
                with lock:
                    busy_before = in_flight[0]
                text = f"small request {small}"
                r = c.post("/count", json={"tokenizer": "cl100k_base", "text": text})
                assert r.status_code == 200 and r.json()["count"] == tokenizer.count(text)
                small += 1
                with lock:
                    if busy_before and in_flight[0]:
                        overlapped += 1
    finally:
        stop.set()
        for t in threads:
            t.join(300)
    assert big_results and all(ok for _, ok in big_results), big_results
    # Small requests were answered while 1 MB requests were being served (sent and answered with one in flight).
    assert overlapped >= 20, (overlapped, small, len(big_results))
