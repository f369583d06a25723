"""Auth: with ``TOKENIZER_AUTH_TOKEN`` set, every route but /healthz, /readyz and the playground page (/ and its
/static/ files) needs the bearer token (/metrics as ``TOKENIZER_METRICS_AUTH`` says); the comparison is
constant-time; logs carry neither secrets nor request texts."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.routing import Route

from app.api import middleware
from app.api.main import create_app
from app.core.config import Settings

from .conftest import Serve

SECRET = "s3cr3t-Bearer-Token-7f1c9a"
#: The playground page is open too: it holds no data (it asks for the token and sends it with its API calls).
OPEN = {"/healthz", "/readyz", "/"}
DOCS = {"/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"}
WRONG = [None, "", "Bearer", "Bearer ", f"Basic {SECRET}", "Bearer wrong", f"Bearer {SECRET[:-1]}",
         f"Bearer {SECRET}x", f"Bearer x{SECRET}", f"Token {SECRET}", SECRET, f"Bearer {SECRET.upper()}",
         "Bearer \u00e9\u00e8", f"Bearer  {SECRET} extra"]


def _routes(client: TestClient) -> list[tuple[str, str]]:
    """(method, path) of every route: the OpenAPI paths, the docs routes, and an unknown path."""
    app = client.app
    out = {(method.upper(), path.replace("{name}", "cl100k_base"))
           for path, ops in app.openapi()["paths"].items() for method in ops}  # type: ignore[attr-defined]
    for route in app.routes:  # type: ignore[attr-defined]
        if isinstance(route, Route):
            out |= {(m, route.path.replace("{name}", "cl100k_base")) for m in route.methods or () if m != "HEAD"}
    return sorted(out | {("GET", "/no-such-route"), ("POST", "/no-such-route")})


def _call(client: TestClient, method: str, path: str, auth: str | None) -> httpx.Response:
    headers = {"authorization": auth.encode()} if auth is not None else {}
    body = {"tokenizer": "cl100k_base", "text": "hi"} if path in ("/encode", "/count") else (
        {"tokenizer": "cl100k_base", "ids": [1]} if path == "/decode" else None)
    return client.request(method, path, headers=headers, json=body)


@pytest.fixture(scope="module", params=[False, True], ids=["metrics-open", "metrics-auth"])
def auth_client(request: pytest.FixtureRequest) -> Iterator[tuple[TestClient, bool]]:
    settings = Settings(auth_token=SECRET, metrics_auth=request.param)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c, request.param


def test_every_api_route_but_health_needs_the_token(auth_client: tuple[TestClient, bool]) -> None:
    """Every route (the docs: next test) and unknown paths: 401 for each wrong or missing token, not for the
    right one; /healthz and /readyz open; /metrics as configured."""
    client, metrics_auth = auth_client
    routes = _routes(client)
    assert {p for _, p in routes} >= {"/encode", "/count", "/decode", "/tokenizers", "/tokenizers/cl100k_base",
                                      "/healthz", "/readyz", "/metrics", "/openapi.json", "/docs"}
    unprotected = []
    for method, path in routes:
        if path in DOCS:
            continue
        needs = path not in OPEN and (path != "/metrics" or metrics_auth)
        for auth in WRONG:
            r = _call(client, method, path, auth)
            if needs and r.status_code != 401:
                unprotected.append((method, path, auth, r.status_code))
            if needs and r.status_code == 401:
                assert r.json()["error"]["type"] == "unauthorized"
                assert r.headers["www-authenticate"] == "Bearer"
                assert SECRET not in r.text
            if not needs:
                assert r.status_code != 401, (method, path, auth)
        good = _call(client, method, path, f"Bearer {SECRET}")
        assert good.status_code != 401 and good.status_code < 500, (method, path, good.status_code)
    assert not unprotected, f"answered without the token: {sorted({(m, p) for m, p, _, _ in unprotected})}"


def test_docs_and_openapi_need_the_token(auth_client: tuple[TestClient, bool]) -> None:
    """The issue's promise is "every route except /healthz and /readyz": the docs and the OpenAPI document (which
    list the routes, limits and tokenizers) too."""
    client, _ = auth_client
    open_docs = [(p, auth) for p in sorted(DOCS) for auth in (None, "Bearer wrong")
                 if _call(client, "GET", p, auth).status_code != 401]
    assert not open_docs, f"served without the token: {sorted({p for p, _ in open_docs})}"
    for path in sorted(DOCS):
        assert _call(client, "GET", path, f"Bearer {SECRET}").status_code == 200


def test_token_scheme_is_case_insensitive(auth_client: tuple[TestClient, bool]) -> None:
    client, _ = auth_client
    for auth in (f"bearer {SECRET}", f"BEARER {SECRET}"):
        assert _call(client, "POST", "/count", auth).status_code == 200


def test_token_comparison_is_constant_time() -> None:
    """The gateway compares with ``hmac.compare_digest`` and never with ``==``/``!=``/``in`` on the token."""
    tree = ast.parse(inspect.getsource(middleware))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) in
             ("hmac.compare_digest", "secrets.compare_digest", "compare_digest")]
    assert calls and any("self.token" in ast.unparse(c) for c in calls)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and "token" in ast.unparse(node):
            ops = {type(op) for op in node.ops}
            assert ops <= {ast.Is, ast.IsNot}, f"non-constant-time comparison: {ast.unparse(node)}"


CANARY_TEXT = "canary-request-text-9d2e"
CANARY_WRONG = "canary-wrong-token-41bb"


def test_logs_hold_no_secret_and_no_request_text(serve: Serve) -> None:
    """A real server with default logging (info level, access log on); the log after a run with the secret, wrong
    tokens and request texts (good and bad requests) contains none of them."""
    server = serve("--workers", "2", env={"TOKENIZER_AUTH_TOKEN": SECRET}, access_log=True)
    good = {"authorization": f"Bearer {SECRET}"}
    with server.client() as c:
        for i in range(10):
            assert c.post("/encode", headers=good, json={"tokenizer": "cl100k_base",
                                                         "text": f"{CANARY_TEXT} {i}"}).status_code == 200
        r = c.post("/count", headers=good, json={"tokenizer": "o200k_base", "texts": [CANARY_TEXT]})
        assert r.status_code == 200
        assert c.post("/encode", headers=good, json={"tokenizer": "llama3", "parts": [{"text": CANARY_TEXT}]}
                      ).status_code == 200
        assert c.post("/count", headers={**good, "content-type": "application/json"},
                      content=f'{{"text": "{CANARY_TEXT}"'.encode()).status_code == 400
        assert c.post("/count", headers=good, json={"tokenizer": "cl100k_base", "text": CANARY_TEXT,
                                                    CANARY_TEXT: 1}).status_code == 422
        assert c.post("/count", headers=good, json={"tokenizer": "cl100k_base", "text": 5,
                                                    "texts": [CANARY_TEXT]}).status_code == 422
        lone = f'{{"tokenizer": "cl100k_base", "text": "{CANARY_TEXT}\\ud800"}}'.encode()
        assert c.post("/count", headers=good, content=lone).status_code == 422
        assert c.post("/count", headers={**good, "content-type": "text/plain"}, content=CANARY_TEXT).status_code == 415
        for auth in (f"Bearer {CANARY_WRONG}", CANARY_WRONG, f"Bearer {SECRET}{CANARY_WRONG}"):
            r = c.post("/encode", headers={"authorization": auth}, json={"tokenizer": "gpt2", "text": CANARY_TEXT})
            assert r.status_code == 401
        assert c.get("/metrics").status_code == 200
    assert server.stop() == 0
    log = server.log()
    assert '"POST /encode HTTP/1.1" 200' in log, log[-2000:]  # the access log was on and captured
    for needle in (SECRET, CANARY_TEXT, CANARY_WRONG, "canary"):
        assert needle not in log, f"{needle!r} appears in the server log"
