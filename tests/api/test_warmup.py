"""Start-up warms what a first request would otherwise build (app.api.main's lifespan): each tokenizer has run once,
and the metric series of a successful /count and /encode exist (at zero) for every loaded tokenizer before any
request."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from app.api.deps import WARM_TEXT, ServiceState
from app.api.main import WARM_ENDPOINTS, create_app
from app.core.config import Settings


def _count(name: str, endpoint: str, tokenizer: str, **extra: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"endpoint": endpoint, "tokenizer": tokenizer, **extra})


def test_series_exist_before_the_first_request_and_count_it_once() -> None:
    with TestClient(create_app(Settings(tokenizers="p50k_edit"))) as c:
        # before any /count or /encode with p50k_edit in this process (no other test uses it)
        for endpoint in WARM_ENDPOINTS:
            assert _count("tokenizer_http_request_duration_seconds_count", endpoint, "p50k_edit", status="200") == 0
            assert _count("tokenizer_tokenize_duration_seconds_count", endpoint, "p50k_edit") == 0
            assert _count("tokenizer_tokens_total", endpoint, "p50k_edit") == 0
        r = c.post("/count", json={"tokenizer": "p50k_edit", "text": "hello world"})
        assert r.status_code == 200 and r.json()["count"] == 2
        assert _count("tokenizer_http_request_duration_seconds_count", "/count", "p50k_edit", status="200") == 1
        assert _count("tokenizer_tokens_total", "/count", "p50k_edit") == 2
        assert _count("tokenizer_http_request_duration_seconds_count", "/encode", "p50k_edit", status="200") == 0


def test_warm_counts_once_with_every_tokenizer() -> None:
    calls: list[str] = []

    class Recording:
        def __init__(self, name: str) -> None:
            self.name = name

        def count(self, text: str) -> int:
            calls.append(f"{self.name}:{text}")
            return 1

    state = ServiceState.__new__(ServiceState)
    state.tokenizers = {"a": Recording("a"), "b": Recording("b")}  # type: ignore[dict-item]
    state.warm()
    assert calls == [f"a:{WARM_TEXT}", f"b:{WARM_TEXT}"]
