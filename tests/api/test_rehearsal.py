"""The start-up rehearsal (app.api.rehearsal): the app's requests to itself, through the gateway and through the
server's HTTP protocol, are answered 200 and counted by no metric."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from uvicorn.server import ServerState

from app.api import rehearsal
from app.api.main import create_app
from app.api.protocol import HeaderTimeoutProtocol
from app.api.rehearsal import PER_TOKENIZER, SHARED, rehearse, rehearse_protocol
from app.core.config import Settings

NAMES = ("p50k_edit", "gemma3")
TOKEN = "rehearsal-secret"


def _samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the request, work and in-flight metrics, by name and labels."""
    wanted = ("tokenizer_http_request", "tokenizer_tokenize", "tokenizer_tokens", "tokenizer_input_bytes")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for metric in REGISTRY.collect()
            for s in metric.samples if s.name.startswith(wanted)}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(tokenizers=",".join(NAMES), auth_token=TOKEN))) as c:
        yield c


def test_the_gateway_rehearsal_is_answered_and_not_counted(client: TestClient) -> None:
    app, svc = client.app, client.app.state.service  # type: ignore[attr-defined]
    before = _samples()
    sent, failed = client.portal.call(rehearse, app, svc.tokenizers.loaded(), TOKEN)  # type: ignore[union-attr]
    assert (sent, failed) == (len(NAMES) * 2 * PER_TOKENIZER + SHARED, 0)
    assert _samples() == before
    # the answers are checked: without the bearer token every request is refused
    assert client.portal.call(rehearse, app, svc.tokenizers.loaded(), None) == (sent, sent)  # type: ignore[union-attr]
    # and a real request after it is counted
    r = client.post("/count", json={"tokenizer": "gemma3", "text": "counted"},
                    headers={"authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200
    counted = ("tokenizer_http_request_duration_seconds_count",
               (("endpoint", "/count"), ("status", "200"), ("tokenizer", "gemma3")))
    assert _samples()[counted] == before[counted] + 1


def test_the_protocol_rehearsal_goes_through_uvicorn_and_is_not_counted(client: TestClient) -> None:
    app, svc = client.app, client.app.state.service  # type: ignore[attr-defined]
    config = uvicorn.Config(app, http=HeaderTimeoutProtocol, lifespan="off", log_level="warning")
    config.load()
    built = []

    def protocol() -> HeaderTimeoutProtocol:
        built.append(config.http_protocol_class(config=config, server_state=ServerState(), app_state={}))  # type: ignore[call-arg]
        return built[-1]  # type: ignore[return-value]

    before = _samples()
    assert client.portal.call(rehearse_protocol, protocol, svc.tokenizers.loaded(), TOKEN) == (SHARED, 0)  # type: ignore[union-attr]
    assert len(built) == 1 and isinstance(built[0], HeaderTimeoutProtocol)  # one keep-alive connection
    assert _samples() == before
    assert client.portal.call(rehearse_protocol, protocol, svc.tokenizers.loaded(), "wrong") == (SHARED, SHARED)  # type: ignore[union-attr]


def test_a_rehearsal_that_hangs_or_fails_never_holds_up_the_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rehearsal, "REQUEST_TIMEOUT", 0.05)

    class One:
        name = "gpt2"

    async def hangs(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.Event().wait()

    async def fails(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("broken")

    planned = 2 * PER_TOKENIZER + SHARED
    for app in (hangs, fails):
        started = time.monotonic()
        assert asyncio.run(rehearse(app, [One()], None)) == (planned, planned)  # type: ignore[list-item]
        assert time.monotonic() - started < 5
