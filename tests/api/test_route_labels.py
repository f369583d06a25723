"""app.api.route_labels: every route's latency metric carries that route's own template; other paths one label."""

from __future__ import annotations

import re

from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from starlette.routing import Mount, WebSocketRoute
from starlette.staticfiles import StaticFiles

from app.api.route_labels import OTHER, RouteLabels, route_patterns

REQUESTS = "tokenizer_http_request_duration_seconds"

#: A value for each path parameter of the app's routes (any value reaches the route; the status does not matter).
PARAMS = {"name": "cl100k_base", "model": "llama-3.1-8b-instruct", "path": "playground/playground.js"}


def _counts(client: TestClient) -> dict[str, float]:
    """Requests observed so far, per ``endpoint`` label (from the service's own /metrics; only the request
    histogram's lines are parsed, the whole exposition takes a third of a second)."""
    lines = [line for line in client.get("/metrics").text.splitlines()
             if line.startswith((REQUESTS, f"# HELP {REQUESTS} ", f"# TYPE {REQUESTS} "))]
    out: dict[str, float] = {}
    for family in text_string_to_metric_families("\n".join(lines) + "\n"):
        if family.name == REQUESTS:
            for sample in family.samples:
                if sample.name == REQUESTS + "_count":
                    out[sample.labels["endpoint"]] = out.get(sample.labels["endpoint"], 0) + sample.value
    return out


def _concrete(template: str) -> str:
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: PARAMS[m.group(1)], template)


def test_every_route_of_the_app_is_labelled_with_its_own_template(client: TestClient) -> None:
    app = client.app
    templates = [template for template, _ in route_patterns(app.routes)]  # type: ignore[attr-defined]
    schema_paths = app.openapi()["paths"]  # type: ignore[attr-defined]
    assert set(schema_paths) <= set(templates)  # every documented route is in the table
    for path in ("/models", "/tokenize", "/detokenize", "/tei/{model}/tokenize", "/tei/{model}/decode", "/encode",
                 "/tokenizers/{name}", "/static/{path}", "/metrics", "/openapi.json", "/docs", "/"):
        assert path in templates, path  # the routes the old hand-kept list lacked are there, and labelled below
    for template in templates:
        method = "POST" if "post" in schema_paths.get(template, {}) else "GET"
        before = _counts(client).get(template, 0)
        kwargs = {"json": {}} if method == "POST" else {}
        response = client.request(method, _concrete(template), **kwargs)
        assert response.status_code < 500, (template, response.status_code)
        reads = 1 if template == "/metrics" else 0  # the read that gave ``before`` counts as a /metrics request too
        assert _counts(client).get(template, 0) == before + 1 + reads, (template, method, response.status_code)


def test_unknown_paths_share_one_label(client: TestClient) -> None:
    before = _counts(client)
    for path in ("/nope", "/encode/", "/tokenizers/a/b", "/" + "x" * 1000, "/tei/x", "/static"):
        assert client.get(path).status_code == 404
    after = _counts(client)
    assert after[OTHER] == before.get(OTHER, 0) + 6
    assert set(after) - set(before) <= {OTHER}  # no label of its own for any of them


def test_the_apps_labels(client: TestClient) -> None:
    labels = RouteLabels(client.app.routes)  # type: ignore[attr-defined]
    assert labels.label("/encode") == "/encode"
    assert labels.label("/tokenizers/cl100k_base") == "/tokenizers/{name}"
    assert labels.label("/tei/llama-3.1-8b-instruct/decode") == "/tei/{model}/decode"
    assert labels.label("/static/playground/playground.js") == "/static/{path}"
    assert labels.label("/tokenizers/a/b") == OTHER
    assert labels.label("/" + "x" * 1000) == OTHER


def test_labels_follow_the_routes_and_stay_bounded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = FastAPI()
    app.add_api_route("/a", lambda: None)
    app.add_api_route("/items/{item_id}", lambda item_id: None)
    app.router.routes.append(Mount("/files", StaticFiles(directory=tmp_path)))
    labels = RouteLabels(app.routes)
    assert labels.label("/a") == "/a"
    assert labels.label("/items/7") == "/items/{item_id}"
    assert labels.label("/files/x/y.txt") == "/files/{path}"
    for path in ("/a/", "/items/7/8", "/b", "", "/" + "a" * 10_000):
        assert labels.label(path) == OTHER
    app.add_api_route("/b", lambda: None)  # added after the table was built: labelled too
    assert labels.label("/b") == "/b"
    app.router.routes.append(WebSocketRoute("/ws/{room}", lambda ws: None))
    assert labels.label("/ws/lobby") == "/ws/{room}"
    router = APIRouter()
    router.add_api_route("/things/{thing}", lambda thing: None)
    app.include_router(router, prefix="/v1")  # an included router's routes, with its prefix
    assert labels.label("/v1/things/x") == "/v1/things/{thing}" and labels.label("/things/x") == OTHER
    assert labels.templates()[-1] == "/v1/things/{thing}" and OTHER not in labels.templates()
