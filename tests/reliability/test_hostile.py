"""Hostile input: schemathesis against the OpenAPI document (no 5xx, responses conform), hypothesis over both engine
backends (arbitrary text, arbitrary id lists), lone surrogates, 10^6-character single pieces, huge and deeply nested
JSON, wrong content types, and slow clients (a trickled body, unfinished headers) against a real server."""

from __future__ import annotations

import itertools
import json
import socket
import time
from collections.abc import Iterator

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.api.main import create_app
from app.core.config import Settings
from app.engine import InvalidTokenIdError, get_tokenizer, list_tokenizers
from app.engine.native import available
from app.engine.pipeline import Pipeline
from harness.references import reference_encoding
from tests.engine.references import family_reference

from .conftest import Serve

TOKENIZERS = list_tokenizers()
BACKENDS = ["python", "native"] if available() else ["python"]
#: Limits small enough that schemathesis reaches them, large enough for its ordinary cases.
LIMITS = dict(max_body_bytes=200_000, max_batch_size=16, max_decode_ids=5000, max_text_chars=50_000)


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings()), raise_server_exceptions=False) as c:
        yield c


# ---------------------------------------------------------------------------- schemathesis


def test_openapi_no_5xx_and_responses_conform() -> None:
    """schemathesis generates requests for every operation of /openapi.json (in-process, lifespan run, small
    limits); every response must be a non-5xx with a documented status, content type, headers and body schema."""
    app = create_app(Settings(**LIMITS))  # type: ignore[arg-type]
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
              response_schema_conformance]
    with TestClient(app):  # runs the lifespan: artifacts loaded, service ready
        api = schemathesis.openapi.from_asgi("/openapi.json", app)
        operations = [result.ok() for result in api.get_all_operations()]
        assert {op.label for op in operations} >= {"POST /encode", "POST /count", "POST /decode", "GET /tokenizers"}
        for op, mode in itertools.product(operations, (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)):

            @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                      database=None)
            @given(case=op.as_strategy(generation_mode=mode))
            def run(case: schemathesis.Case) -> None:
                case.call_and_validate(checks=checks)

            try:
                run()
            except Unsatisfiable:  # no invalid input exists for an operation without parameters or body
                assert mode == GenerationMode.NEGATIVE and op.method.upper() == "GET", op.label


# ---------------------------------------------------------------------------- engine, both backends


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(TOKENIZERS), text=st.text(st.characters(codec=None), max_size=200))
def test_engine_round_trips_any_text(backend: str, name: str, text: str) -> None:
    tokenizer = get_tokenizer(name, backend=backend)
    ids = tokenizer.encode(text)
    # No special token from text; the model's own unknown token ([UNK] of WordPiece) is its output, not a parse.
    unk = getattr(getattr(tokenizer, "model", None), "unk_id", None)
    assert all(0 <= i < tokenizer.n_vocab and (not tokenizer.is_special(i) or i == unk) for i in ids)
    clean = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)  # lone surrogates -> U+FFFD
    # a pipeline's normalizer may rewrite text (NFC, ▁, lowercase): the reference's round trip
    if isinstance(tokenizer, Pipeline):
        ref_encode, ref_decode = family_reference(name)
        assert ids == ref_encode(clean), (text, ids)
        clean = ref_decode(ref_encode(clean))
    assert tokenizer.decode(ids) == clean, (text, ids)
    assert tokenizer.count(text) == len(ids)
    if backend == "native":
        assert ids == get_tokenizer(name, backend="python").encode(text)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(TOKENIZERS), ids=st.lists(st.integers(-(2**70), 2**70) | st.integers(0, 210_000),
                                                     max_size=50))
def test_engine_decodes_arbitrary_id_lists_or_names_the_bad_id(backend: str, name: str, ids: list[int]) -> None:
    tokenizer = get_tokenizer(name, backend=backend)
    bad = [k for k, i in enumerate(ids) if not (0 <= i < tokenizer.n_vocab) or _unassigned(tokenizer, i)]
    if bad:
        with pytest.raises(InvalidTokenIdError) as info:
            tokenizer.decode(ids)
        assert info.value.index == bad[0] and info.value.token_id == ids[bad[0]]
    else:
        text = tokenizer.decode(ids)
        assert isinstance(text, str)
        assert tokenizer.decode_bytes(ids) == b"".join(tokenizer.decode_tokens_bytes(ids))


def _unassigned(tokenizer: object, i: int) -> bool:
    try:
        tokenizer.token_bytes(i)  # type: ignore[attr-defined]
    except InvalidTokenIdError:
        return True
    return False


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(TOKENIZERS), ids=st.lists(st.integers(-(2**70), 2**70) | st.integers(0, 210_000),
                                                     max_size=30))
def test_http_decode_of_arbitrary_ids_is_200_or_422(client: TestClient, name: str, ids: list[int]) -> None:
    r = client.post("/decode", json={"tokenizer": name, "ids": ids})
    assert r.status_code in (200, 422), r.text
    if r.status_code == 422:
        assert r.json()["error"]["type"] in ("invalid_token_id", "validation_error")


# ---------------------------------------------------------------------------- specific hostile inputs


LONG = {
    "letters": "a" * 10**6,
    "caret": "^" * 10**6,
    "digits": "7" * 10**6,
    "spaces": " " * 10**6,
    "newlines": "\n" * 10**6,
    "cjk": "語" * 10**6,
    "apostrophes": "'s" * 500_000,
    "emoji": "🙂" * 10**6,
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", sorted(LONG))
def test_million_character_single_pieces_native(kind: str) -> None:
    """The compiled core on 10^6-character single pieces: ids identical to tiktoken's, exact round trip."""
    if "native" not in BACKENDS:
        pytest.skip("compiled core not built")
    text = LONG[kind]
    for name in ("cl100k_base", "o200k_base"):
        ids = get_tokenizer(name, backend="native").encode(text)
        assert ids == _reference(name, text)
        assert get_tokenizer(name, backend="native").decode(ids) == text


def _reference(name: str, text: str) -> list[int]:
    """tiktoken's ids; where tiktoken itself fails (its regex overflows the stack on 10^6 spaces with o200k's
    pattern: a Rust panic), our pure-Python reference engine's."""
    try:
        return reference_encoding(name).encode_ordinary(text)
    except BaseException as exc:  # pyo3_runtime.PanicException derives from BaseException
        if type(exc).__name__ != "PanicException":
            raise
        return get_tokenizer(name, backend="python").encode(text)


#: The pure-Python reference is slow on these (seconds per 10^6 characters): full length for two kinds, a tenth
#: for the others; the cost stays O(n log n) (bench/engine measures it).
PYTHON_LENGTH = {"letters": 10**6, "spaces": 10**6}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", sorted(LONG))
def test_long_single_pieces_python(kind: str) -> None:
    text = LONG[kind][: PYTHON_LENGTH.get(kind, 10**5)]
    tokenizer = get_tokenizer("cl100k_base", backend="python")
    ids = tokenizer.encode(text)
    assert ids == _reference("cl100k_base", text)
    assert tokenizer.decode(ids) == text


def test_million_character_piece_over_http(client: TestClient) -> None:
    for text in (LONG["letters"], LONG["caret"]):
        r = client.post("/count", json={"tokenizer": "o200k_base", "text": text})
        assert r.status_code == 200 and r.json()["count"] == get_tokenizer("o200k_base").count(text)


def test_lone_surrogates(client: TestClient) -> None:
    for raw in ('"\\ud800"', '"a\\udfffb"', '"\\ud83d"', '"x\\udc00\\ud800y"'):
        body = f'{{"tokenizer": "cl100k_base", "text": {raw}}}'.encode()
        for path in ("/encode", "/count"):
            r = client.post(path, content=body, headers={"content-type": "application/json"})
            assert r.status_code == 422 and r.json()["error"]["type"] == "invalid_text", r.text
        body = f'{{"tokenizer": "cl100k_base", "parts": [{{"text": "ok"}}, {{"text": {raw}}}]}}'.encode()
        assert client.post("/encode", content=body).status_code == 422
    # A valid pair is fine; raw (unescaped) invalid UTF-8 in the body is a 400.
    r = client.post("/count", content=b'{"tokenizer": "cl100k_base", "text": "\\ud83d\\ude42"}')
    assert r.status_code == 200
    r = client.post("/count", content=b'{"tokenizer": "cl100k_base", "text": "\xed\xa0\x80"}')
    assert r.status_code == 422 and r.json()["error"]["type"] == "invalid_text"  # json reads bytes surrogatepass


@pytest.mark.parametrize("depth", [100, 10_000, 1_000_000])
@pytest.mark.parametrize("bracket", ["[]", "{}"])
def test_deeply_nested_json_is_a_4xx(client: TestClient, depth: int, bracket: str) -> None:
    open_, close = bracket
    inner = (open_ + '"a":') * depth if open_ == "{" else open_ * depth
    nested = inner + "1" + close * depth
    for body in (nested.encode(), f'{{"tokenizer": "cl100k_base", "text": {nested}}}'.encode(),
                 f'{{"tokenizer": "cl100k_base", "ids": {nested}}}'.encode()):
        r = client.post("/decode" if b'"ids"' in body else "/count", content=body)
        assert 400 <= r.status_code < 500, (depth, r.status_code, r.text[:200])
        assert "error" in r.json()


def test_huge_json_bodies(client: TestClient) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    ids = [i % 100_000 for i in range(1_000_000)]
    r = client.post("/decode", json={"tokenizer": "cl100k_base", "ids": ids})
    assert r.status_code == 200 and r.json()["text"] == tokenizer.decode(ids)
    many_keys = "{" + ",".join(f'"k{i}": {i}' for i in range(200_000)) + "}"
    assert client.post("/count", content=many_keys.encode()).status_code == 422
    huge_number = '{"tokenizer": "cl100k_base", "ids": [' + "9" * 100_000 + "]}"
    assert client.post("/decode", content=huge_number.encode()).status_code in (400, 422)
    over = b'{"tokenizer": "cl100k_base", "text": "' + b"a" * (17 * 2**20) + b'"}'
    r = client.post("/count", content=over)
    assert r.status_code == 413 and r.json()["error"]["type"] == "payload_too_large"
    texts = ["x"] * 5000
    assert client.post("/count", json={"tokenizer": "cl100k_base", "texts": texts}).status_code == 413


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                          "application/xml", "application/jsonp", "text/json", "image/png",
                                          "application/octet-stream", "application/json-patch", "\u00e9/\u00e8"])
def test_wrong_content_types_are_415(client: TestClient, content_type: str) -> None:
    body = json.dumps({"tokenizer": "cl100k_base", "text": "hi"}).encode()
    for path in ("/encode", "/count", "/decode"):
        r = client.post(path, content=body, headers={"content-type": content_type.encode()})  # type: ignore[dict-item]
        assert r.status_code == 415 and r.json()["error"]["type"] == "unsupported_media_type", (path, r.text)
    for ok in ("application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "application/foo+json"):
        assert client.post("/count", content=body, headers={"content-type": ok}).status_code == 200


@pytest.mark.parametrize("body", [b"", b"null", b"[]", b'"text"', b"1e999", b"{", b'{"tokenizer": NaN}',
                                  b"\xff\xfe{}", b"\x00" * 100, b'{"tokenizer": "cl100k_base", "text": "a"}' * 2])
def test_malformed_bodies_are_4xx(client: TestClient, body: bytes) -> None:
    for path in ("/encode", "/count", "/decode"):
        r = client.post(path, content=body, headers={"content-type": "application/json"})
        assert 400 <= r.status_code < 500 and "error" in r.json(), (path, body[:40], r.status_code)


# ---------------------------------------------------------------------------- slow clients (real server)


def _open_slow(port: int, head: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(head)
    return s


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_slow_clients_do_not_hold_the_worker(serve: Serve) -> None:
    """One worker; 50 clients that sent headers and trickle their bodies, 50 that never finish their headers: the
    worker keeps answering everybody else (the work is async; a slow client holds a connection, not the worker)."""
    server = serve("--workers", "1")
    trickling = [_open_slow(server.port, b"POST /count HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Content-Length: 100000\r\n\r\n{") for _ in range(50)]
    unfinished = [_open_slow(server.port, b"POST /count HTTP/1.1\r\nHost: x\r\n") for _ in range(50)]
    tokenizer = get_tokenizer("cl100k_base")
    try:
        with server.client() as c:
            for i in range(40):
                for s in trickling[i % 5:: 5]:
                    s.sendall(b" ")
                r = c.post("/count", json={"tokenizer": "cl100k_base", "text": f"still answering {i}"})
                assert r.status_code == 200 and r.json()["count"] == tokenizer.count(f"still answering {i}")
    finally:
        for s in trickling + unfinished:
            s.close()


def _closed_by_server(s: socket.socket, within: float, trickle: bool) -> tuple[float, bytes] | None:
    """``(seconds until the server closed s, everything it sent first)``, trickling a byte every 0.5 s; None if
    it was still open after ``within`` seconds. Reading comes before each write, so an answer sent just before the
    close is not lost to a reset."""
    start = time.monotonic()
    s.settimeout(0.5)
    data = b""
    while time.monotonic() - start < within:
        try:
            chunk = s.recv(65536)
            if not chunk:
                return time.monotonic() - start, data
            data += chunk
        except TimeoutError:
            pass
        except OSError:  # reset after the server closed
            return time.monotonic() - start, data
        try:
            if trickle:
                s.sendall(b" ")
        except OSError:
            continue  # the server closed its side; the next recv sees the end (and anything sent before it)
    return None


def _assert_timed_out(result: tuple[float, bytes] | None, timeout: float, what: str) -> None:
    """The server, not anything else, ended the connection: after its deadline, with a 408 in the error shape."""
    assert result is not None, f"{what} held its connection (no timeout)"
    elapsed, data = result
    assert data.startswith(b"HTTP/1.1 408 "), data[:200]
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"connection: close" in head.lower()
    assert json.loads(body)["error"]["type"] == "request_timeout"
    assert elapsed >= timeout - 0.5, f"closed after {elapsed:.1f} s, before the {timeout:g} s deadline"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_trickled_body_is_timed_out(serve: Serve) -> None:
    """A body trickled one byte every 0.5 s must not hold a connection for ever: the server answers 408 (or closes)
    once the body has taken longer than ``TOKENIZER_BODY_TIMEOUT`` seconds (5 here; the test waits up to 20): a 408
    in the error shape, then the connection is closed, not before the deadline."""
    server = serve("--workers", "1", env={"TOKENIZER_BODY_TIMEOUT": "5"})
    slow = _open_slow(server.port, b"POST /count HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100000\r\n\r\n{")
    try:
        closed = _closed_by_server(slow, 20, trickle=True)
    finally:
        slow.close()
    _assert_timed_out(closed, 5, "a client trickling its body for 20 s")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_unfinished_headers_are_timed_out(serve: Serve) -> None:
    """Headers that never finish must not hold a connection for ever (uvicorn has no such timeout of its own):
    after ``TOKENIZER_HEADER_TIMEOUT`` seconds (5 here; the test waits up to 15), a 408 in the error shape, then
    the connection is closed."""
    server = serve("--workers", "1", env={"TOKENIZER_HEADER_TIMEOUT": "5"})
    slow = _open_slow(server.port, b"POST /count HTTP/1.1\r\nHost: x\r\n")
    try:
        closed = _closed_by_server(slow, 15, trickle=False)
    finally:
        slow.close()
    _assert_timed_out(closed, 5, "a client that never finished its headers, for 15 s,")
