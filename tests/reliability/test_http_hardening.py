"""HTTP-level findings of an outside probe, each against a real server: no redirect built from the Host header,
bounded request headers (431), ambiguous duplicate headers refused (400), a complete ``Allow`` on 405, new
connections refused once SIGTERM arrives, and the one answer that is not in the error shape (uvicorn's own 400
for bytes that are not HTTP)."""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest

from .conftest import Serve

pytestmark = pytest.mark.timeout(300)


def _raw(port: int, request: bytes, timeout: float = 30) -> bytes:
    """Send ``request`` on a fresh connection; everything the server sends until it closes or a response is whole."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep and _content_length(head) is not None and len(body) >= (_content_length(head) or 0):
                break
    return data


def _content_length(head: bytes) -> int | None:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return None


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def _error_type(response: bytes) -> str:
    return str(json.loads(response.partition(b"\r\n\r\n")[2])["error"]["type"])


def _post(path: str, body: bytes, *extra: str, host: str = "127.0.0.1") -> bytes:
    headers = "".join(f"{h}\r\n" for h in extra)
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n{headers}\r\n").encode() + body


BODY = json.dumps({"tokenizer": "cl100k_base", "text": "hello"}).encode()


def test_no_redirect_is_built_from_the_host_header(serve: Serve) -> None:
    server = serve()
    assert server.port is not None
    for path in ("/encode/", "/count/", "/tokenizers/", "/healthz/"):
        method = "POST" if path in ("/encode/", "/count/") else "GET"
        raw = _raw(server.port, f"{method} {path} HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(BODY)}\r\n\r\n".encode() + BODY)
        head = raw.partition(b"\r\n\r\n")[0].lower()
        assert _status(raw) == 404, raw[:300]
        assert b"location:" not in head and b"evil.example" not in raw
        assert _error_type(raw) == "not_found"


def test_request_headers_are_bounded_431(serve: Serve) -> None:
    server = serve(env={"TOKENIZER_MAX_HEADER_BYTES": "8192", "TOKENIZER_MAX_HEADERS": "20"})
    assert server.port is not None
    ok = _raw(server.port, _post("/count", BODY, "Content-Type: application/json", "X-Pad: " + "a" * 6000))
    assert _status(ok) == 200
    for extra in (["X-Big: " + "a" * 9000],                          # one header over the total
                  [f"X-H{i}: {'b' * 500}" for i in range(17)],          # many medium ones adding up
                  [f"X-N{i}: 1" for i in range(21)]):                   # too many headers
        raw = _raw(server.port, _post("/count", BODY, *extra))
        assert _status(raw) == 431, raw[:200]
        assert _error_type(raw) == "request_header_fields_too_large"
        assert b"connection: close" in raw.partition(b"\r\n\r\n")[0].lower()
    # a huge header is cut off at the limit while it streams in: the server answers long before 64 MiB arrive
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Huge: ")
        sent, answered = 0, b""
        s.settimeout(0.05)
        while sent < 64 * 2**20 and not answered:
            try:
                s.sendall(b"a" * 65536)
                sent += 65536
                answered = s.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
        s.settimeout(30)
        try:
            answered += s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            pass
        assert sent < 2 * 2**20, sent
    assert answered == b"" or _status(answered) == 431
    with server.client() as c:  # and the worker is fine
        assert c.get("/healthz").status_code == 200


@pytest.mark.parametrize("name,values", [
    ("Authorization", ("Bearer wrong", "Bearer right-token")),
    ("Authorization", ("Bearer right-token", "Bearer right-token")),
    ("Content-Type", ("text/plain", "application/json")),
    ("Content-Type", ("application/json", "application/json")),
])
def test_duplicate_ambiguous_headers_are_400(serve: Serve, name: str, values: tuple[str, str]) -> None:
    server = serve(env={"TOKENIZER_AUTH_TOKEN": "right-token"})
    assert server.port is not None
    others = [h for h in ("Authorization: Bearer right-token", "Content-Type: application/json")
              if not h.startswith(name)]
    raw = _raw(server.port, _post("/count", BODY, *others, *(f"{name}: {v}" for v in values)))
    assert _status(raw) == 400, raw[:300]
    err = json.loads(raw.partition(b"\r\n\r\n")[2])["error"]
    assert err["type"] == "bad_request" and name.lower() in err["message"].lower()
    single = _raw(server.port, _post("/count", BODY, *others, f"{name}: {values[1]}"))
    assert _status(single) == 200


#: Every path of the API and the probes, and the methods it answers (the probes answer HEAD too).
ALLOWED = {"/encode": {"POST"}, "/count": {"POST"}, "/decode": {"POST"}, "/tokenizers": {"GET"},
           "/tokenizers/cl100k_base": {"GET"}, "/healthz": {"GET", "HEAD"}, "/readyz": {"GET", "HEAD"},
           "/metrics": {"GET"}}


def test_405_lists_every_allowed_method(serve: Serve) -> None:
    server = serve()
    with server.client() as c:
        paths = c.get("/openapi.json").json()["paths"]
        expected = dict(ALLOWED)
        for path, operations in paths.items():  # every other documented path without parameters, as documented
            if "{" not in path and path not in expected:
                expected[path] = {m.upper() for m in operations}
        assert set(ALLOWED) <= {p.replace("{name}", "cl100k_base") for p in paths}
        for path, allowed in expected.items():
            for method in ("OPTIONS", "DELETE", "PUT"):
                r = c.request(method, path)
                assert r.status_code == 405, (path, method, r.status_code)
                got = {m.strip() for m in r.headers["allow"].split(",")}
                assert got == allowed, (path, got, allowed)
                assert r.json()["error"]["type"] == "method_not_allowed"
            for method in (allowed - {"POST"}) if path in ALLOWED else ():
                assert c.request(method, path).status_code == 200, (path, method)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_new_connections_are_refused_after_sigterm(serve: Serve, workers: str) -> None:
    """While in-flight requests drain, a new connection is refused at once (a load balancer retries elsewhere)
    instead of being accepted by the kernel and left hanging."""
    server = serve("--workers", workers, "--graceful-timeout", "60")
    assert server.port is not None
    body = json.dumps({"tokenizer": "o200k_base", "text": "drain me " * 500}).encode()
    inflight = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    head = _post("/count", b"", "Content-Type: application/json").replace(b"Content-Length: 0",
                                                                          f"Content-Length: {len(body)}".encode())
    inflight.sendall(head + body[:100])
    time.sleep(1.0)
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(2.0)
    assert server.proc.poll() is None, "the server quit with a request in flight"
    with pytest.raises(ConnectionRefusedError):
        probe = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        try:  # accepted by the kernel: does anyone answer?
            probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            got = probe.recv(100)
        except (TimeoutError, ConnectionResetError) as exc:
            raise AssertionError(f"connection accepted after SIGTERM, then {exc!r}") from None
        finally:
            probe.close()
        raise AssertionError(f"connection accepted after SIGTERM and answered {got[:40]!r}")
    inflight.sendall(body[100:])
    raw = b""
    while not raw.endswith(b"}"):
        chunk = inflight.recv(65536)
        if not chunk:
            break
        raw += chunk
    inflight.close()
    assert raw.startswith(b"HTTP/1.1 200"), raw[:200]
    assert server.proc.wait(60) == 0


def test_malformed_http_gets_uvicorns_plain_text_400(serve: Serve) -> None:
    """Documented exception to the error shape: bytes that are not HTTP never reach the app; uvicorn answers a
    plain-text 400 and closes the connection."""
    server = serve()
    assert server.port is not None
    raw = _raw(server.port, b"THIS IS NOT HTTP\r\n\r\n")
    assert _status(raw) == 400
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"content-type: text/plain" in head.lower() and body == b"Invalid HTTP request received."
