"""The tokenization endpoints answered straight from the gateway (:mod:`app.api.dispatch`), on a real server with
two workers and a token: every promise of the slower framework path still holds there (auth, limits and the error
shape, ``Server-Timing``, metrics merged over the workers, exact answers)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import pytest

from app.engine import get_tokenizer

from .conftest import LiveServer
from .test_info import _sample

pytestmark = pytest.mark.timeout(300)

TOKEN = "dispatch-test-token"


def test_fast_path_keeps_auth_limits_timing_and_metrics(live_server: Callable[..., LiveServer]) -> None:
    server = live_server("--workers", "2", env={"TOKENIZER_AUTH_TOKEN": TOKEN, "TOKENIZER_MAX_BODY_BYTES": "4000"})
    auth = {"Authorization": f"Bearer {TOKEN}"}
    tokenizer = get_tokenizer("o200k_base")
    with server.client() as c:
        for path in ("/encode", "/count", "/decode"):
            r = c.post(path, json={"tokenizer": "o200k_base", "text": "x"})
            assert r.status_code == 401 and r.json()["error"]["type"] == "unauthorized"
            assert r.headers["www-authenticate"] == "Bearer"
        r = c.post("/count", json={"tokenizer": "o200k_base", "text": "x" * 5000}, headers=auth)
        assert r.status_code == 413 and r.json()["error"]["details"]["limit"] == 4000
        r = c.post("/count", json={"tokenizer": "nope", "text": "x"}, headers=auth)
        assert r.status_code == 422 and r.json()["error"]["type"] == "unknown_tokenizer"
        r = c.post("/count", content=b"{", headers={**auth, "content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_json"
        r = c.get("/count", headers=auth)  # other methods still go through the framework: 405
        assert r.status_code == 405 and r.json()["error"]["type"] == "method_not_allowed"

    texts = [f"message {i}: how many tokens is this? ü" for i in range(60)]
    failures: list[str] = []

    def one(text: str) -> None:
        with server.client() as c:  # fresh connections, so the kernel spreads them over both workers
            r = c.post("/encode", json={"tokenizer": "o200k_base", "text": text}, headers=auth)
            if r.status_code != 200 or r.json()["ids"] != tokenizer.encode(text):
                failures.append(f"/encode {r.status_code}")
            elif 'pool;desc="inline"' not in r.headers.get("server-timing", "") or \
                    "tokenize;dur=" not in r.headers["server-timing"]:
                failures.append(f"server-timing {r.headers.get('server-timing')!r}")
            r = c.post("/count", json={"tokenizer": "o200k_base", "text": text}, headers=auth)
            if r.status_code != 200 or r.json()["count"] != len(tokenizer.encode(text)):
                failures.append(f"/count {r.status_code}")

    threads = [threading.Thread(target=one, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures[:5]
    tokens = sum(len(tokenizer.encode(t)) for t in texts)
    for _ in range(4):  # whichever worker answers the scrape reports both
        with httpx.Client(base_url=server.url or "", timeout=30) as c:
            text = c.get("/metrics").text
        for endpoint in ("/encode", "/count"):
            assert _sample(text, "tokenizer_http_request_duration_seconds_count", endpoint=endpoint,
                           tokenizer="o200k_base", status="200") == len(texts)
            assert _sample(text, "tokenizer_tokens_total", endpoint=endpoint, tokenizer="o200k_base") == tokens
            assert _sample(text, "tokenizer_tokenize_duration_seconds_count", endpoint=endpoint,
                           tokenizer="o200k_base") == len(texts)
        assert _sample(text, "tokenizer_http_request_duration_seconds_count", endpoint="/count",
                       tokenizer="", status="401") == 1
        assert _sample(text, "tokenizer_http_requests_in_flight") == 1
