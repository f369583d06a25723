"""Units of app.api.metrics and app.api.middleware: cache-counter syncing, the billing queue, JSON media types
(route labels: test_route_labels.py)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from app.api import metrics
from app.api.main import create_app
from app.api.middleware import is_json_media_type
from app.core.config import Settings
from app.engine import CacheStats


class FakeEncoding:
    def __init__(self, name: str) -> None:
        self.name = name
        self.stats = CacheStats(0, 0, 0, 10)

    def cache_stats(self) -> CacheStats:
        return self.stats


def _value(name: str, tokenizer: str) -> float:
    return REGISTRY.get_sample_value(name, {"tokenizer": tokenizer}) or 0.0


def _unflushed(attempt: Callable[[], bool]) -> None:
    """Run ``attempt`` until once no other flush interfered while it ran (it returns False when one did).

    The session's apps (``tests/api/conftest.py``) keep running their lifespans' flushers (:func:`metrics.flusher`,
    every :data:`metrics.FLUSH_SECONDS`), which may write the shared billing queue or copy a used cache's counters
    between two lines of a test."""
    for _ in range(5):
        if attempt():
            return
    pytest.fail("another flush wrote the queue during each of 5 attempts")


def test_cache_counters_follow_cache_stats_as_deltas() -> None:
    tokenizer = FakeEncoding("fake-cache-test")
    for stats, hits, misses in [(CacheStats(5, 3, 4, 10), 5, 3), (CacheStats(7, 3, 5, 10), 7, 3),
                                (CacheStats(7, 3, 5, 10), 7, 3),
                                (CacheStats(1, 2, 1, 10), 8, 5)]:  # the cache was cleared: counting restarts
        tokenizer.stats = stats
        metrics.sync_cache([tokenizer])  # type: ignore[list-item]
        assert _value("tokenizer_cache_hits_total", tokenizer.name) == hits
        assert _value("tokenizer_cache_misses_total", tokenizer.name) == misses
        assert _value("tokenizer_cache_entries", tokenizer.name) == stats.size
        assert _value("tokenizer_cache_max_entries", tokenizer.name) == 10


def test_used_caches_are_copied_at_the_next_flush() -> None:
    names = (f"fake-cache-used-test-{k}" for k in itertools.count())

    def attempt() -> bool:
        tokenizer = FakeEncoding(next(names))
        metrics.sync_cache([tokenizer])  # type: ignore[list-item]
        tokenizer.stats = CacheStats(9, 4, 5, 10)
        metrics.cache_used(tokenizer)  # type: ignore[arg-type]
        metrics.cache_used(tokenizer)  # type: ignore[arg-type]
        if _value("tokenizer_cache_hits_total", tokenizer.name) != 0:  # copied by another flush already
            return False
        metrics.flush()
        assert _value("tokenizer_cache_hits_total", tokenizer.name) == 9
        assert _value("tokenizer_cache_misses_total", tokenizer.name) == 4
        tokenizer.stats = CacheStats(12, 4, 5, 10)
        metrics.flush()  # not used since: nothing copied
        assert _value("tokenizer_cache_hits_total", tokenizer.name) == 9
        return True

    _unflushed(attempt)


def test_json_media_types() -> None:
    assert is_json_media_type("application/json")
    assert is_json_media_type("Application/JSON; charset=utf-8")
    assert is_json_media_type("application/problem+json")
    assert not is_json_media_type("text/json+plain")
    assert not is_json_media_type("application/jsonp")


def test_lookalike_counters_agree() -> None:
    from app.api.deps import _lookalike_counter

    names = ["<|endoftext|>", "<|eot_id|>", "<|reserved_1|>"]
    fast = _lookalike_counter(names)
    generic = _lookalike_counter([*names, "[CLS]"])  # a name of another shape forces the alternation path
    for text, n in [("", 0), ("<|endoftext|>", 1), ("<|<|endoftext|>|>", 1), ("<|nope|><|eot_id|>x<|eot_id|>", 2),
                    ("<|a<|reserved_1|>", 1), ("<|endoftext|" * 3, 0), ("<|eot_id|><|eot_id|>", 2)]:
        assert fast(text) == n, text
        assert generic(text) == n, text
    assert generic("[CLS] x [CLS]") == 2 and fast("[CLS]") == 0
    assert _lookalike_counter([])("<|endoftext|>") == 0


def _billed(model: str, kind: str) -> float:
    return REGISTRY.get_sample_value("tokenizer_billed_tokens_total", {"model": model, "kind": kind}) or 0.0


def test_billing_updates_are_queued_then_written_together() -> None:
    model = "billing-queue-test"
    updates = metrics.billing_updates(model, [("input", 7, 0.5), ("output", 3, 0.0)])
    assert len(updates) == 3  # the output's zero cost is not an update

    def cost() -> float:
        value = REGISTRY.get_sample_value("tokenizer_estimated_cost_usd_total", {"model": model, "kind": "input"})
        return value or 0.0

    def attempt() -> bool:
        metrics.flush_billing()
        before, before_out, before_cost = _billed(model, "input"), _billed(model, "output"), cost()
        metrics.observe_billing(updates)
        metrics.observe_billing(updates)
        if _billed(model, "input") != before:  # written by another flush, not by this test's
            return False
        metrics.flush_billing()
        assert _billed(model, "input") == before + 14 and _billed(model, "output") == before_out + 6
        assert cost() == before_cost + 1.0
        metrics.flush_billing()  # an empty queue writes nothing
        assert _billed(model, "input") == before + 14
        return True

    _unflushed(attempt)


def test_a_full_billing_queue_writes_itself() -> None:
    model = "billing-full-queue-test"
    updates = metrics.billing_updates(model, [("input", 1, 0.0)])

    def attempt() -> bool:
        metrics.flush_billing()
        before = _billed(model, "input")
        for _ in range(metrics.BILLING_QUEUE - 1):
            metrics.observe_billing(updates)
        if _billed(model, "input") != before:  # written by another flush
            metrics.flush_billing()
            return False
        metrics.observe_billing(updates)  # the queue is full: this call writes it
        written = _billed(model, "input") - before
        if written == metrics.BILLING_QUEUE - 1:  # another flush came just before that call (or it did not write)
            metrics.flush_billing()
            return False
        assert written == metrics.BILLING_QUEUE
        return True

    _unflushed(attempt)


def _priced_count(client: Any) -> None:
    assert client.post("/count", json={"model": "gpt-4o", "text": "hello world"}).status_code == 200  # 2 tokens


def test_the_app_flusher_writes_the_queue_without_a_scrape() -> None:
    with TestClient(create_app(Settings(tokenizers="o200k_base"))) as client:
        metrics.flush()
        before = _billed("gpt-4o", "input")
        _priced_count(client)
        deadline = time.monotonic() + 10 * metrics.FLUSH_SECONDS
        while _billed("gpt-4o", "input") == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _billed("gpt-4o", "input") == before + 2


SHUTDOWN_SCRIPT = r"""
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from app.api import metrics
from app.api.main import create_app
from app.core.config import Settings

def billed():
    return REGISTRY.get_sample_value("tokenizer_billed_tokens_total", {"model": "gpt-4o", "kind": "input"}) or 0.0

metrics.FLUSH_SECONDS = 3600.0  # the app's flusher never wakes
metrics.BILLING_QUEUE = 10**9  # nor does the queue fill up
with TestClient(create_app(Settings(tokenizers="o200k_base"))) as client:
    for _ in range(2):
        assert client.post("/count", json={"model": "gpt-4o", "text": "hello world"}).status_code == 200
    queued = billed()
print(queued, billed())
"""


def test_the_app_shutdown_writes_the_queue() -> None:
    # in a fresh interpreter: in this one, other modules' apps may still be running a flusher of their own
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}  # this process's registry
    out = subprocess.run([sys.executable, "-c", SHUTDOWN_SCRIPT], cwd=repo, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert [float(v) for v in out] == [0.0, 4.0]  # 2 tokens x 2 requests: queued until the app's shutdown
