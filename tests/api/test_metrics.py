"""Units of app.api.metrics and app.api.middleware: cache-counter syncing, JSON media types (route labels:
test_route_labels.py)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from app.api import metrics
from app.api.middleware import is_json_media_type
from app.engine import CacheStats


class FakeEncoding:
    def __init__(self, name: str) -> None:
        self.name = name
        self.stats = CacheStats(0, 0, 0, 10)

    def cache_stats(self) -> CacheStats:
        return self.stats


def _value(name: str, tokenizer: str) -> float:
    return REGISTRY.get_sample_value(name, {"tokenizer": tokenizer}) or 0.0


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
