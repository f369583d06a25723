"""Start-up warms what a first request would otherwise build (app.api.main's lifespan): each tokenizer has run once,
its cache memory is committed by this process (a lazily loaded one's when it is loaded), and the metric series of a
successful /count and /encode exist (at zero) for every loaded tokenizer before any request."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from app.api.deps import WARM_TEXT, ServiceState, TokenizerTable
from app.api.main import WARM_ENDPOINTS, create_app
from app.core.config import Settings
from app.engine.encoding import RankBPETokenizer


def _count(name: str, endpoint: str, tokenizer: str, **extra: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"endpoint": endpoint, "tokenizer": tokenizer, **extra})


def test_series_exist_before_the_first_request_and_count_it_once() -> None:
    with TestClient(create_app(Settings(tokenizers="p50k_edit"))) as c:
        # The series exist before this app's first request (at zero in a fresh process; under pytest-xdist another
        # module in this worker may have counted p50k_edit already, so the counts below are deltas).
        before = {}
        for endpoint in WARM_ENDPOINTS:
            for name, extra in (("tokenizer_http_request_duration_seconds_count", {"status": "200"}),
                                ("tokenizer_tokenize_duration_seconds_count", {}), ("tokenizer_tokens_total", {})):
                value = _count(name, endpoint, "p50k_edit", **extra)
                assert value is not None, (name, endpoint)
                before[(name, endpoint)] = value
        r = c.post("/count", json={"tokenizer": "p50k_edit", "text": "hello world"})
        assert r.status_code == 200 and r.json()["count"] == 2
        requests = "tokenizer_http_request_duration_seconds_count"
        assert _count(requests, "/count", "p50k_edit", status="200") == before[(requests, "/count")] + 1
        tokens = "tokenizer_tokens_total"
        assert _count(tokens, "/count", "p50k_edit") == before[(tokens, "/count")] + 2
        assert _count(requests, "/encode", "p50k_edit", status="200") == before[(requests, "/encode")]


def test_warm_counts_once_with_every_tokenizer() -> None:
    calls: list[str] = []

    class Recording:
        def __init__(self, name: str) -> None:
            self.name = name

        def count(self, text: str) -> int:
            calls.append(f"{self.name}:{text}")
            return 1

    state = ServiceState.__new__(ServiceState)
    state.tokenizers = TokenizerTable.of({"a": Recording("a"), "b": Recording("b")})  # type: ignore[dict-item]
    state.warm()
    assert calls == [f"a:{WARM_TEXT}", f"b:{WARM_TEXT}"]
    # TOKENIZER_LOAD=lazy: only what is loaded is warmed (warming must not load everything)
    calls.clear()
    state.tokenizers = TokenizerTable(["a", "b"], Recording)  # type: ignore[arg-type]
    state.warm()
    assert calls == []
    state.tokenizers["b"]  # noqa: B018 -- loads b
    state.warm()
    assert calls == [f"b:{WARM_TEXT}"]


def test_each_process_commits_its_caches_at_start_up_and_lazy_ones_when_loaded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    committed: list[str] = []
    real = RankBPETokenizer.commit_cache

    def recording(self: RankBPETokenizer) -> int:
        committed.append(self.name)
        return real(self)

    monkeypatch.setattr(RankBPETokenizer, "commit_cache", recording)
    with TestClient(create_app(Settings(tokenizers="gpt2,cl100k_base"))):
        assert sorted(committed) == ["cl100k_base", "gpt2"]  # the lifespan's, once each
    committed.clear()
    with TestClient(create_app(Settings(tokenizers="gpt2,cl100k_base", load="lazy"))) as c:
        assert committed == []  # nothing loaded yet
        assert c.post("/count", json={"tokenizer": "gpt2", "text": "hello"}).status_code == 200
        assert committed == ["gpt2"]  # on its first use
        assert c.post("/count", json={"tokenizer": "gpt2", "text": "again"}).status_code == 200
        assert committed == ["gpt2"]
