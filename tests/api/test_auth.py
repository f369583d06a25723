"""Optional bearer-token authentication."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.core.config import Settings

from .test_errors import assert_error

TOKEN = "t0ken-with-enough-entropy"


@pytest.fixture(scope="module", params=[False, True], ids=["metrics-open", "metrics-auth"])
def auth_client(request: pytest.FixtureRequest) -> Iterator[tuple[TestClient, bool]]:
    settings = Settings(auth_token=TOKEN, metrics_auth=request.param)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c, request.param


def test_protected_routes_need_the_token(auth_client: tuple[TestClient, bool]) -> None:
    c, _ = auth_client
    body = {"tokenizer": "gpt2", "text": "a"}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                    {"Authorization": f"Basic {TOKEN}"}, {"Authorization": f"Bearer {TOKEN}x"}):
        r = c.post("/count", json=body, headers=headers)
        assert_error(r, 401, "unauthorized")
        assert r.headers["www-authenticate"] == "Bearer"
    assert_error(c.get("/tokenizers"), 401)
    assert c.post("/count", json=body, headers={"Authorization": f"Bearer {TOKEN}"}).json()["count"] == 1
    assert c.post("/count", json=body, headers={"authorization": f"bearer {TOKEN}"}).status_code == 200


def test_open_routes(auth_client: tuple[TestClient, bool]) -> None:
    c, metrics_auth = auth_client
    assert c.get("/healthz").status_code == 200
    assert c.get("/readyz").status_code == 200
    for docs in ("/openapi.json", "/docs", "/redoc"):  # they list routes, limits and tokenizers: protected too
        assert_error(c.get(docs), 401)
        assert c.get(docs, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert_error(c.get("/no-such-route"), 401)
    assert c.get("/metrics").status_code == (401 if metrics_auth else 200)
    assert c.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_auth_is_checked_before_the_body_is_read(auth_client: tuple[TestClient, bool]) -> None:
    c, _ = auth_client
    assert_error(c.post("/count", content=b"x" * 100, headers={"content-type": "text/plain"}), 401)
