"""Hostile chat requests (issue 30, request side): deep tool-call arguments, deep tool schemas and ``enum``/
``default`` values, Mistral ``pattern`` regexes, per-token details past ``TOKENIZER_MAX_DETAIL_TOKENS``, megabyte
fields in refusals, integers past 64 bits, and the last-resort 500. Every answer is a short 4xx naming its limit
(or a 200), never a 500 or a traceback in the log; the CLI and HTTP count the same conversation alike."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import dispatch
from app.api.main import create_app
from app.core.config import Settings
from app.engine.chat.limits import MAX_JSON_DEPTH, MAX_PATTERN_CHARS
from harness.server import REPO_ROOT, serve_env

TOKENIZERS = "qwen3,llama3,gemma3,o200k_harmony,mistral-v3,mistral-v7,o200k_base"
JINJA = ["qwen3-8b", "llama-3.1-8b-instruct", "gemma-3-4b-it"]
IDS_MODELS = [*JINJA, "gpt-oss-20b", "mistral-7b-instruct-v0.3", "mistral-large-2411"]
ROUTES = ["/count", "/encode", "/tokenize"]
USER = {"role": "user", "content": "hi"}
#: Largest error body: the message (cut at 500 characters) and its details.
MAX_ERROR_BYTES = 2048


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(tokenizers=TOKENIZERS)), raise_server_exceptions=False) as c:
        yield c


def nest_list(n: int) -> Any:
    value: Any = 1
    for _ in range(n):
        value = [value]
    return value


def props(n: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(n):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def items(n: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(n):
        schema = {"type": "array", "items": schema}
    return schema


def tool(params: Any, name: str = "f") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": "d", "parameters": params}}


def call_messages(arguments: Any, call_id: str = "abcdefghi", name: str = "f") -> list[dict[str, Any]]:
    return [USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "abcdefghi", "content": "ok"}, USER]


def _property(value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": value}}


#: The findings' shapes: name -> body (without model).
HOSTILE: dict[str, dict[str, Any]] = {
    "arguments 1,000 brackets": {"messages": call_messages("[" * 1000 + "]" * 1000)},
    "arguments 1,000 open brackets": {"messages": call_messages("[" * 1000)},
    "arguments object 300 deep": {"messages": call_messages(nest_list(300))},
    "schema properties 300 deep": {"messages": [USER], "tools": [tool(props(300))]},
    "schema items 490 deep": {"messages": [USER], "tools": [tool(items(490))]},
    "enum value 500 deep": {"messages": [USER], "tools": [tool(_property({"type": "string",
                                                                          "enum": [nest_list(500)]}))]},
    "default value 500 deep": {"messages": [USER], "tools": [tool(_property({"type": "string",
                                                                             "default": nest_list(500)}))]},
    "content part 100 deep": {"messages": [{"role": "user", "content": [{"type": "text", "text": nest_list(100)}]}]},
    "message value 100 deep": {"messages": [{"role": "user", "content": "x", "name": nest_list(100)}]},
    "default past a double": {"messages": [USER], "tools": [tool(_property({"type": "integer",
                                                                           "default": 10**400}))]},
    "pattern of 10^11 repeats": {"messages": [USER], "tools": [tool(_property({"type": "string",
                                                                              "pattern": "a{99999999999}"}))]},
    "pattern past the size limit": {"messages": [USER], "tools": [tool(_property(
        {"type": "string", "pattern": "a" * (MAX_PATTERN_CHARS + 1)}))]},
    "patternProperties key of 10^11 repeats": {"messages": [USER], "tools": [tool(
        {"type": "object", "patternProperties": {"a{99999999999}": {}}})]},
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_chat_json_is_a_short_4xx(client: TestClient, caplog: pytest.LogCaptureFixture, name: str,
                                          route: str) -> None:
    caplog.set_level(logging.INFO, logger="app")
    for model in IDS_MODELS + (["gpt-4o"] if route == "/count" else []):
        r = client.post(route, content=json.dumps({"model": model, **HOSTILE[name]}))
        assert r.status_code < 500, (model, r.text[:300])
        assert r.status_code == 200 or len(r.content) <= MAX_ERROR_BYTES, (model, len(r.content))
        if "deep" in name and "past" not in name:
            assert r.status_code == 422, (model, r.text[:300])
            details = r.json()["error"]["details"]
            assert details["limit_name"] == "MAX_JSON_DEPTH" and details["limit"] == MAX_JSON_DEPTH, model
        if "1,000" in name:  # arguments text: refused for every framing, before it is parsed
            assert r.status_code == 422 and "MAX_JSON_DEPTH" in r.json()["error"]["message"], model
    assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text


def _at_depth(depth: int) -> dict[str, Any]:
    """A tool whose object nests exactly ``depth`` deep (the tool object at depth 1), through properties."""
    levels = (depth - 3) // 2  # tool(1) > function(2) > parameters(3) > properties(4) > schema(5) …
    schema = props(levels)
    body = tool(schema)

    def measure(v: Any, d: int = 1) -> int:
        children = list(v.values()) if isinstance(v, dict) else v if isinstance(v, list) else []
        return max([d, *(measure(c, d + 1) for c in children if isinstance(c, dict | list))])

    if measure(body) < depth:  # one more level: a list leaf
        schema_leaf = schema
        while "properties" in schema_leaf:
            schema_leaf = schema_leaf["properties"]["a"]
        schema_leaf["enum"] = ["x"]
    assert measure(body) == depth
    return body


@pytest.mark.parametrize("route", ROUTES)
def test_at_the_depth_limit_every_framing_answers(client: TestClient, route: str) -> None:
    """Tools and arguments exactly MAX_JSON_DEPTH deep are counted (one more level is refused)."""
    deepest = _at_depth(MAX_JSON_DEPTH)
    arguments = json.dumps(nest_list(MAX_JSON_DEPTH - 4))  # its brackets: depth 5 .. MAX_JSON_DEPTH
    for model in IDS_MODELS:
        for body in ({"messages": [USER], "tools": [deepest]}, {"messages": call_messages(arguments)}):
            r = client.post(route, content=json.dumps({"model": model, **body}))
            if model.startswith("gemma") and "tool_calls" in json.dumps(body):  # Gemma 3 has no tool role
                assert r.status_code == 422 and "alternate" in r.text, r.text[:300]
                continue
            assert r.status_code == 200, (model, r.text[:300])
    over = json.dumps(nest_list(MAX_JSON_DEPTH - 3))
    r = client.post(route, content=json.dumps({"model": "qwen3-8b", "messages": call_messages(over)}))
    assert r.status_code == 422 and r.json()["error"]["details"]["limit_name"] == "MAX_JSON_DEPTH"


def test_mistral_patterns_stay_out_of_the_re_cache(client: TestClient) -> None:
    """Valid patterns are accepted and invalid ones refused as mistral-common does, but none is compiled into
    Python's process-wide ``re`` cache; a pattern past MAX_PATTERN_CHARS is refused before it is compiled."""
    cached_before = set(re._cache)  # type: ignore[attr-defined]
    valid = "^[a-z]{2,8}-unique-to-this-test$"
    for pattern, status in [(valid, 200), ("[unterminated-unique", 422), ("b{99999999999}", 422),
                            ("c" * (MAX_PATTERN_CHARS + 1), 422)]:
        body = {"model": "mistral-7b-instruct-v0.3", "messages": [USER],
                "tools": [tool(_property({"type": "string", "pattern": pattern}))]}
        r = client.post("/count", content=json.dumps(body))
        assert r.status_code == status, (pattern[:40], r.text[:300])
        if len(pattern) > MAX_PATTERN_CHARS:
            assert r.json()["error"]["details"]["limit_name"] == "MAX_PATTERN_CHARS"
    new = {key[1] for key in set(re._cache) - cached_before if len(key) > 1}  # type: ignore[attr-defined]
    assert not any(isinstance(p, str) and ("unique" in p or "99999999999" in p or p.startswith("ccc"))
                   for p in new)


def test_a_10_mb_pattern_is_refused_without_compiling_it() -> None:
    """The finding: a 10 MB pattern took 15 s of CPU and kept ~157 MiB. Now it is refused on its length."""
    from app.engine.chat import parse_conversation
    from app.engine.chat.mistral import frame

    conv = parse_conversation([USER], [tool(_property({"type": "string", "pattern": "(a)" * 3_500_000}))])
    start = time.process_time()
    with pytest.raises(Exception, match="MAX_PATTERN_CHARS"):
        frame("v3", conv)
    assert time.process_time() - start < 1.0


@pytest.mark.parametrize("field", ["call_id", "name", "tool_name"])
def test_mistral_refusals_echo_a_short_prefix(client: TestClient, field: str) -> None:
    big = "Z" * 1_000_000
    if field == "tool_name":
        body = {"messages": [USER], "tools": [tool({"type": "object"}, name=big)]}
    else:
        body = {"messages": call_messages("{}", **{field: big})}
    r = client.post("/count", content=json.dumps({"model": "mistral-7b-instruct-v0.3", **body}))
    assert r.status_code == 422
    assert len(r.content) <= MAX_ERROR_BYTES and "ZZZZ" in r.text and "1000000 characters" in r.text


@pytest.fixture(scope="module")
def small_detail() -> Iterator[TestClient]:
    settings = Settings(tokenizers="qwen3,o200k_harmony", max_detail_tokens=1000)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


def test_every_detail_route_has_the_detail_limit(small_detail: TestClient) -> None:
    """vLLM ``return_token_strs``, TEI tokenize and ``messages`` with ``return_tokens`` are limited like /encode's
    pieces (413 naming TOKENIZER_MAX_DETAIL_TOKENS); ids alone are not."""
    text = "word " * 5000  # 5,000 tokens
    cases = [
        ("/tokenize", {"model": "qwen3-8b", "prompt": text, "return_token_strs": True}),
        ("/tokenize", {"model": "qwen3-8b", "messages": [{"role": "user", "content": text}],
                       "return_token_strs": True}),
        ("/tei/qwen3-8b/tokenize", {"inputs": text}),
        ("/tei/qwen3-8b/tokenize", {"inputs": ["word " * 400] * 3}),
        ("/encode", {"model": "qwen3-8b", "messages": [{"role": "user", "content": text}], "return_tokens": True}),
        ("/encode", {"tokenizer": "qwen3", "text": text, "return_tokens": True}),
    ]
    for route, body in cases:
        r = small_detail.post(route, content=json.dumps(body))
        assert r.status_code == 413, (route, r.text[:200])
        assert "TOKENIZER_MAX_DETAIL_TOKENS" in r.json()["error"]["message"]
    r = small_detail.post("/tokenize", content=json.dumps({"model": "qwen3-8b", "prompt": text}))
    assert r.status_code == 200 and r.json()["count"] > 1000
    r = small_detail.post("/tei/qwen3-8b/tokenize", content=json.dumps({"inputs": "word " * 900}))
    assert r.status_code == 200 and 900 <= len(r.json()[0]) <= 1000


def test_detail_limit_decided_before_the_work(small_detail: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the limit, TEI's offsets and vLLM's prompt encoding never run."""
    tokenizer = small_detail.app.state.service.tokenizers["qwen3"]  # type: ignore[attr-defined]
    calls: list[str] = []
    for method in ("encode", "encode_with_offsets"):
        original = getattr(tokenizer, method)

        def spy(*args: Any, _original: Any = original, _name: str = method, **kwargs: Any) -> Any:
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(tokenizer, method, spy)
    text = "word " * 5000
    r = small_detail.post("/tei/qwen3-8b/tokenize", content=json.dumps({"inputs": text}))
    assert r.status_code == 413
    r = small_detail.post("/tokenize", content=json.dumps({"model": "qwen3-8b", "prompt": text,
                                                           "return_token_strs": True}))
    assert r.status_code == 413
    assert calls == []


def test_an_unexpected_error_is_a_short_500_and_one_log_line(client: TestClient, caplog: pytest.LogCaptureFixture,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The last line of defence: an exception no handler expects (here a RecursionError a thousand frames deep)
    is a 500 without internals and one bounded log line, on the gateway path and on a framework route."""

    def recurse(n: int) -> int:
        return recurse(n + 1) + 1

    def broken(*_: Any) -> Any:
        return recurse(0)

    monkeypatch.setitem(dispatch.OPS, "/count", broken)
    monkeypatch.setattr("app.api.ops.compat.tokenize", broken)
    caplog.set_level(logging.INFO, logger="app")
    for route in ("/count", "/tokenize"):
        caplog.clear()
        r = client.post(route, content=json.dumps({"model": "qwen3-8b", "prompt": "x"}))
        assert r.status_code == 500 and r.json()["error"] == {"type": "internal_error", "message": "internal error",
                                                              "details": None}
        records = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
        assert len(records) == 1, route
        line = records[0].getMessage()
        assert "RecursionError" in line and len(line) <= 900 and records[0].exc_info is None
        assert "Traceback" not in caplog.text


# ---------------------------------------------------------------------------- CLI and HTTP agree


def _cli_count(model: str, path: Path) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "app", "count", "--model", model, "--messages", str(path),
                           "--json"], cwd=REPO_ROOT, env=serve_env(), capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return -proc.returncode, proc.stderr
    return json.loads(proc.stdout)["count"], proc.stderr


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 10**30, 2**64 - 1])
def test_cli_and_http_count_big_integers_alike(client: TestClient, tmp_path: Path, value: int) -> None:
    """An integer past 64 bits in a tool default: the same count from ``count --messages`` and POST /count (the
    finding: 114 in the CLI, 117 over HTTP), for the Harmony, Jinja and Mistral framings."""
    conversation = {"messages": [USER], "tools": [tool(_property({"type": "integer", "default": value,
                                                                  "enum": [value, 1]}))]}
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(conversation), encoding="utf-8")
    for model in ("gpt-oss-20b", "qwen3-8b", "mistral-7b-instruct-v0.3"):
        r = client.post("/count", content=json.dumps({"model": model, **conversation}))
        assert r.status_code == 200, r.text[:300]
        cli, stderr = _cli_count(model, path)
        assert cli == r.json()["count"], (model, stderr[-500:])


def test_cli_refuses_hostile_conversations_in_one_line(tmp_path: Path) -> None:
    for name, body in [("deep", {"messages": call_messages("[" * 1000)}),
                       ("deeper than json", "[" * 100_000 + "]" * 100_000),
                       ("past a double", {"messages": [USER], "tools": [tool(_property({"default": 10**400}))]})]:
        path = tmp_path / "conv.json"
        path.write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "app", "count", "--model", "gpt-oss-20b", "--messages",
                               str(path)], cwd=REPO_ROOT, env=serve_env(), capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 2, (name, proc.stderr[-500:])
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and "Traceback" not in proc.stderr and len(lines[0]) <= 700, (name, proc.stderr[-500:])
