"""Every bad input is a 4xx with the one error shape; nothing (not even hostile bytes) produces a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.api.main import create_app
from app.core.config import Settings

ENDPOINTS = ["/encode", "/count", "/decode"]


def assert_error(r: Any, status: int, type_: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message", "details"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert "Traceback" not in r.text
    if type_ is not None:
        assert body["error"]["type"] == type_, body
    return body["error"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("raw", [b"", b"   ", b"{", b'{"text": "a",}', b"\xff\xfe\x00", b"nul\x00l", b"[" * 100_000,
                                 b'{"ids": [' + b"9" * 5000 + b"]}"])
def test_malformed_json_is_400(client: TestClient, endpoint: str, raw: bytes) -> None:
    assert_error(client.post(endpoint, content=raw, headers={"content-type": "application/json"}), 400, "invalid_json")


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("payload", [
    [], "text", 1, True,
    {}, {"tokenizer": "cl100k_base"},
    {"tokenizer": 5, "text": "a"}, {"tokenizer": "cl100k_base", "text": 5},
    {"tokenizer": "cl100k_base", "model": "gpt-4o", "text": "a"},
    {"tokenizer": "cl100k_base", "text": "a", "texts": ["b"]},
    {"tokenizer": "cl100k_base", "texts": []}, {"tokenizer": "cl100k_base", "texts": ["a", 1]},
    {"tokenizer": "cl100k_base", "text": "a", "unknown_field": 1},
    {"tokenizer": "cl100k_base", "ids": ["1"]}, {"tokenizer": "cl100k_base", "ids": [1.5]},
    {"tokenizer": "cl100k_base", "ids": [True]}, {"tokenizer": "cl100k_base", "batch": []},
    {"tokenizer": "cl100k_base", "ids": [1], "batch": [[1]]},
    {"tokenizer": "cl100k_base", "parts": [{"text": "a", "special": "<|endoftext|>"}]},
    {"tokenizer": "cl100k_base", "parts": [{}]}, {"tokenizer": "cl100k_base", "parts": []},
    {"tokenizer": "cl100k_base", "text": "a", "special_tokens": {"prefix": "<|endoftext|>"}},
    {"tokenizer": "cl100k_base", "text": "a", "return_tokens": "yes"},
    {"tokenizer": "x" * 10_000, "text": "a"}, {"model": "", "text": "a"},
    {"tokenizer": "cl100k_base", "text": "a", "special_tokens": {"suffix": ["<" * 1000]}},
])
def test_wrong_shapes_are_422(client: TestClient, endpoint: str, payload: Any) -> None:
    err = assert_error(client.post(endpoint, json=payload), 422, "validation_error")
    if isinstance(payload, dict) and payload:
        assert isinstance(err["details"], list) and err["details"]
        assert all(set(d) == {"loc", "msg", "type"} for d in err["details"])  # never the (possibly huge) input


def test_validation_errors_do_not_echo_text(client: TestClient) -> None:
    secret = "s3cr3t-" * 100
    r = client.post("/encode", json={"tokenizer": "cl100k_base", "text": secret, "bogus": 1})
    assert_error(r, 422)
    assert "s3cr3t" not in r.text


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_unknown_tokenizer_and_model(client: TestClient, endpoint: str) -> None:
    body = {"ids": [1]} if endpoint == "/decode" else {"text": "a"}
    err = assert_error(client.post(endpoint, json={"tokenizer": "nope", **body}), 422, "unknown_tokenizer")
    assert "cl100k_base" in err["details"]["known"] and "cl100k_base" in err["message"]
    err = assert_error(client.post(endpoint, json={"model": "gpt-99", **body}), 422, "unknown_model")
    assert "gpt-4o" in err["details"]["known"]


@pytest.mark.parametrize("where", ["prefix", "suffix", "parts"])
def test_unknown_special_token_lists_allowed(client: TestClient, where: str) -> None:
    payload: dict[str, Any] = {"tokenizer": "cl100k_base"}
    if where == "parts":
        payload["parts"] = [{"text": "a"}, {"special": "<|eot_id|>"}]
    else:
        payload.update(text="a", special_tokens={where: ["<|eot_id|>"]})
    for endpoint in ("/encode", "/count"):
        err = assert_error(client.post(endpoint, json=payload), 422, "unknown_special_token")
        assert err["details"]["allowed"] == sorted(["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>",
                                                     "<|fim_suffix|>", "<|endofprompt|>"])
        assert "<|endoftext|>" in err["message"]


@pytest.mark.parametrize("raw", [b'"\\ud800"', b'"ok \\udfff"', b'"\\ud83d"', b'"x\\ude00\\ud83d"'])
def test_lone_surrogates_are_422(client: TestClient, raw: bytes) -> None:
    for field, wrap in (("text", raw), ("texts", b"[" + raw + b"]"), ("parts", b'[{"text":' + raw + b"}]")):
        body = b'{"tokenizer": "cl100k_base", "' + field.encode() + b'": ' + wrap + b"}"
        for endpoint in ("/encode", "/count"):
            err = assert_error(client.post(endpoint, content=body, headers={"content-type": "application/json"}),
                               422, "invalid_text")
            assert err["details"]["field"].startswith(field)


def test_surrogate_pair_escapes_are_fine(client: TestClient) -> None:
    body = b'{"tokenizer": "cl100k_base", "text": "\\ud83d\\ude00"}'
    r = client.post("/encode", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert r.json()["ids"] == client.post("/encode", json={"tokenizer": "cl100k_base", "text": "😀"}).json()["ids"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                          "application/xml", "application/jsonx"])
def test_wrong_content_type_is_415(client: TestClient, content_type: str) -> None:
    r = client.post("/count", content=b'{"tokenizer":"gpt2","text":"a"}', headers={"content-type": content_type})
    assert_error(r, 415, "unsupported_media_type")


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "application/vnd.api+json", "APPLICATION/JSON"])
def test_json_content_types_accepted(client: TestClient, content_type: str) -> None:
    r = client.post("/count", content=b'{"tokenizer":"gpt2","text":"a"}', headers={"content-type": content_type})
    assert r.status_code == 200 and r.json()["count"] == 1


def test_missing_content_type_is_read_as_json(client: TestClient) -> None:
    r = client.post("/count", content=b'{"tokenizer":"gpt2","text":"a"}', headers={"content-type": ""})
    assert r.status_code == 200
    r = client.post("/count", content=b'{"tokenizer":"gpt2","text":"a"}')
    assert "content-type" not in r.request.headers and r.status_code == 200


def test_body_over_limit_is_413(small_client: TestClient) -> None:
    big = json.dumps({"tokenizer": "gpt2", "text": "a" * 3000}).encode()
    err = assert_error(small_client.post("/count", content=big, headers={"content-type": "application/json"}),
                       413, "payload_too_large")
    assert err["details"]["limit"] == 2000

    def chunks():  # no Content-Length: chunked transfer
        for _ in range(10):
            yield b" " * 500
    r = small_client.post("/count", content=chunks(), headers={"content-type": "application/json"})
    assert_error(r, 413, "payload_too_large")


def test_lying_content_length_is_rejected_before_reading(small_client: TestClient) -> None:
    r = small_client.post("/count", content=b"{}", headers={"content-type": "application/json",
                                                              "content-length": "999999999"})
    assert r.status_code in (400, 413)  # the test client may refuse the mismatch itself; never 2xx/5xx
    r = small_client.post("/count", content=b"{}", headers={"content-length": "-5"})
    assert r.status_code == 400


@pytest.mark.parametrize("payload,field", [
    ({"tokenizer": "gpt2", "texts": ["a"] * 5}, "texts"),
    ({"tokenizer": "gpt2", "parts": [{"text": "a"}] * 5}, "parts"),
    ({"tokenizer": "gpt2", "batch": [[1]] * 5}, "batch"),
])
def test_batch_over_limit_is_413(small_client: TestClient, payload: dict[str, Any], field: str) -> None:
    endpoint = "/decode" if "batch" in payload else "/encode"
    err = assert_error(small_client.post(endpoint, json=payload), 413, "payload_too_large")
    assert err["details"] == {"limit": 4, "actual": 5, "field": field}


def test_ids_and_chars_over_limit_are_413(small_client: TestClient) -> None:
    assert_error(small_client.post("/decode", json={"tokenizer": "gpt2", "ids": [1] * 11}), 413, "payload_too_large")
    assert_error(small_client.post("/decode", json={"tokenizer": "gpt2", "batch": [[1] * 6, [1] * 5]}), 413)
    assert small_client.post("/decode", json={"tokenizer": "gpt2", "ids": [1] * 10}).status_code == 200
    assert_error(small_client.post("/count", json={"tokenizer": "gpt2", "texts": ["a" * 200, "b" * 101]}), 413)


def test_unknown_path_and_method(client: TestClient) -> None:
    assert_error(client.get("/nope"), 404, "not_found")
    assert_error(client.get("/encode"), 405, "method_not_allowed")
    assert_error(client.delete("/tokenizers"), 405)


def test_internal_errors_are_json_without_internals(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.api.ops import encode as ops

    def boom(*_: Any) -> Any:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(ops, "parse", boom)
    with TestClient(create_app(Settings()), raise_server_exceptions=False) as c:
        for body in (b'{"tokenizer":"gpt2","text":"a"}', b'{"tokenizer":"gpt2","text":"' + b"a" * 5000 + b'"}'):
            r = c.post("/encode", content=body, headers={"content-type": "application/json"})
            assert_error(r, 500, "internal_error")
            assert "secret" not in r.text and "RuntimeError" not in r.text


# --------------------------------------------------------------------------- hostile inputs, generated

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=30) | st.sampled_from(["cl100k_base", "gpt2", "gpt-4o", "<|endoftext|>", "\ud800"]),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(
        st.sampled_from(["tokenizer", "model", "text", "texts", "parts", "ids", "batch", "special_tokens", "prefix",
                         "suffix", "special", "return_tokens", "return_offsets", "skip_special_tokens",
                         "report_special_lookalikes", "x"]), children, max_size=6),
    max_leaves=20,
)
bodies = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"tokenizer": st.sampled_from(["cl100k_base", "llama3", "o200k_harmony", "nope"])},
                          optional={"text": st.text(max_size=40), "texts": st.lists(st.text(max_size=10), max_size=3),
                                    "ids": st.lists(st.integers(min_value=-5, max_value=300_000), max_size=8),
                                    "batch": st.lists(st.lists(st.integers(-2, 201_100), max_size=4), max_size=3),
                                    "parts": st.lists(st.one_of(st.fixed_dictionaries({"text": st.text(max_size=8)}),
                                                                st.fixed_dictionaries({"special": st.sampled_from(
                                                                    ["<|endoftext|>", "<|eot_id|>", "x"])})),
                                                      max_size=4),
                                    "special_tokens": st.fixed_dictionaries({}, optional={
                                        "prefix": st.lists(st.sampled_from(["<|endoftext|>", "<|eot_id|>", "?"]))}),
                                    "return_tokens": st.booleans(), "return_offsets": st.booleans(),
                                    "report_special_lookalikes": st.booleans(), "skip_special_tokens": st.booleans()},
                          ).map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=60),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(endpoint=st.sampled_from(ENDPOINTS), body=bodies)
def test_no_input_yields_a_5xx(client: TestClient, endpoint: str, body: bytes) -> None:
    r = client.post(endpoint, content=body, headers={"content-type": "application/json"})
    assert r.status_code in (200, 400, 413, 422), (r.status_code, r.text)
    if r.status_code != 200:
        assert_error(r, r.status_code)
