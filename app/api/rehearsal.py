"""The start-up rehearsal: requests a process sends itself before it serves, so the first real one is not slower.

A fresh process ran its first ``/count`` of 50 bytes 3-5x slower than its tenth (in-process, 2026-12-04: about 0.5 ms
against 0.1 ms): the interpreter had not yet specialised the request path's code, and none of it was in the CPU
caches. Two passes, each inside :func:`app.api.metrics.rehearsal` so that no metric counts them:

* :func:`rehearse`, in the app's lifespan (however the app is served): a few ``POST /count`` and ``POST /encode``
  per loaded tokenizer through the app's own ASGI entry (gateway, dispatch, operation, serialization), after the
  service is marked ready; uvicorn accepts no connection before the lifespan's start-up is over.
* :func:`rehearse_protocol`, by ``serve``'s uvicorn server (:mod:`app.cli.prefork`) between the app's start-up and
  its first accepted connection: keep-alive ``POST /count`` through the server's own HTTP protocol class over a
  local socket pair (parser, request cycle, response writing).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import orjson
from starlette.types import ASGIApp, Message

from app.engine import Tokenizer

from . import metrics

#: The text of every rehearsal request (plain text: letters, digits, punctuation, a non-ASCII word).
REHEARSAL_TEXT = "Rehearsal: the first request of 12 words, déjà vu!"
#: Requests per endpoint and tokenizer, and extra /count requests of the first tokenizer (the shared path).
PER_TOKENIZER = 2
SHARED = 16
#: Seconds one rehearsal request may take. Past it, or on any error, the rehearsal stops and counts the requests
#: left as failed: it never holds up or stops a start-up.
REQUEST_TIMEOUT = 10.0


async def _post(app: ASGIApp, path: str, body: bytes, headers: list[tuple[bytes, bytes]]) -> int:
    """One POST through ``app``'s ASGI interface; returns the response status."""
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"rehearsal"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()), *headers],
        "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0),
    }
    delivered = False
    status = 0

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never: the gateway reads the body once
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


def _plan(tokenizers: Iterable[Tokenizer]) -> list[tuple[str, bytes]]:
    """(path, JSON body) of each rehearsal request: :data:`PER_TOKENIZER` ``/count`` and ``/encode`` per tokenizer,
    then :data:`SHARED` more ``/count`` of the first."""
    bodies = [orjson.dumps({"tokenizer": t.name, "text": REHEARSAL_TEXT}) for t in tokenizers]
    plan = [(path, body) for body in bodies for path in ("/count", "/encode") for _ in range(PER_TOKENIZER)]
    return plan + ([("/count", bodies[0])] * SHARED if bodies else [])


def _auth(auth_token: str | None) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", b"Bearer " + auth_token.encode())] if auth_token else []


async def _run(plan: list[tuple[str, bytes]], post: Callable[[str, bytes], Awaitable[int]]) -> tuple[int, int]:
    """``post`` each of ``plan`` in turn with metrics dropped; returns (requests planned, requests not answered
    200, those left after a timeout or an error included)."""
    failed = 0
    with metrics.rehearsal():
        for k, (path, body) in enumerate(plan):
            try:
                failed += await asyncio.wait_for(post(path, body), REQUEST_TIMEOUT) != 200
            except Exception:  # noqa: BLE001 -- a rehearsal never stops a start-up: the rest counts as failed
                return len(plan), failed + len(plan) - k
    return len(plan), failed


async def rehearse(app: ASGIApp, tokenizers: Iterable[Tokenizer], auth_token: str | None) -> tuple[int, int]:
    """Send the rehearsal's requests to ``app`` (with ``auth_token`` as a bearer token when the service has one);
    returns (requests sent, answers other than 200). Metrics are left untouched (see the module docstring)."""
    headers = _auth(auth_token)
    return await _run(_plan(tokenizers), lambda path, body: _post(app, path, body, headers))


async def _read_answer(reader: asyncio.StreamReader) -> int:
    """Read one HTTP/1.1 answer (``content-length`` or chunked body); returns its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    fields = dict(line.lower().split(b": ", 1) for line in lines[1:] if b": " in line)
    if b"content-length" in fields:
        await reader.readexactly(int(fields[b"content-length"]))
    elif fields.get(b"transfer-encoding") == b"chunked":
        await reader.readuntil(b"0\r\n\r\n")
    return status


async def rehearse_protocol(protocol_factory: Callable[[], asyncio.Protocol], tokenizers: Iterable[Tokenizer],
                            auth_token: str | None, requests: int = SHARED) -> tuple[int, int]:
    """Send ``requests`` keep-alive ``POST /count`` of the first tokenizer through one connection of the server's
    own HTTP protocol (``protocol_factory``: what the server builds per connection), over a local socket pair, so
    its parser and request cycle are warm as well; returns (requests sent, answers other than 200). For the
    server, after the app's start-up and before it accepts connections."""
    first = next(iter(tokenizers), None)
    if first is None or requests <= 0:
        return 0, 0
    plan = [("/count", orjson.dumps({"tokenizer": first.name, "text": REHEARSAL_TEXT}))] * requests
    loop = asyncio.get_running_loop()
    server_side, client_side = socket.socketpair()
    try:
        transport, _ = await loop.connect_accepted_socket(protocol_factory, sock=server_side)
        reader, writer = await asyncio.open_connection(sock=client_side)
    except Exception:  # noqa: BLE001 -- a rehearsal never stops a start-up
        server_side.close()
        client_side.close()
        return len(plan), len(plan)
    extra = b"".join(k + b": " + v + b"\r\n" for k, v in _auth(auth_token))

    async def post(path: str, body: bytes) -> int:
        writer.write(b"POST %s HTTP/1.1\r\nhost: rehearsal\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n%s\r\n%s" % (path.encode(), len(body), extra, body))
        return await _read_answer(reader)

    try:
        return await _run(plan, post)
    finally:
        writer.close()
        transport.close()
