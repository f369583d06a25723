"""The gateway: one pure-ASGI middleware in front of every request.

In order, for each HTTP request it

1. counts the request in flight and times it (``tokenizer_http_request_duration_seconds``, labelled with the
   template of the route that serves the path, or ``other``);
2. refuses a request that repeats an ambiguous header (``Authorization``, ``Content-Type``, ``Content-Length``,
   ``Host``, ``Transfer-Encoding``: 400), then checks the bearer token, when one is configured (401 for every
   path, unknown ones and the docs included, except /healthz, /readyz, the playground page ``/`` and its static
   files under ``/static/`` (code, no data: the page asks for the token and sends it) and, unless
   ``TOKENIZER_METRICS_AUTH``, /metrics);
3. for requests with a body: rejects a non-JSON ``Content-Type`` (415; a missing one is read as JSON), a declared
   ``Content-Length`` above ``TOKENIZER_MAX_BODY_BYTES`` (413, before reading anything), and then reads the body
   itself, counting bytes on the raw stream, so a chunked body without ``Content-Length`` is cut off at the limit
   too (413, ``Connection: close``), and a body that takes longer than ``TOKENIZER_BODY_TIMEOUT`` gets 408;
   ``POST /encode``, ``/count`` and ``/decode`` are then answered here (:mod:`app.api.dispatch`), other routes see
   the buffered body through the app;
4. turns any exception that escapes the app into a JSON 500 without internals (and logs it).

Every response it sends itself has the API's one error shape.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.config import Settings

from . import dispatch, metrics
from .errors import internal_error, send_error
from .route_labels import RouteLabels

log = logging.getLogger("app.api")

#: Scope key of the per-request label dict ({"tokenizer": ...}) that handlers fill in.
LABELS_KEY = "tokenizer_service.labels"

#: Paths served without the bearer token (probes must work without secrets; the playground page holds no data and
#: asks for the token itself); everything else, docs included, needs it.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/"})
#: Prefix of the pages' static files (playground, vendored Swagger UI and ReDoc): open, like the page itself.
STATIC_PREFIX = "/static/"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def is_json_media_type(value: str) -> bool:
    """``application/json`` or any ``+json`` type, parameters (``; charset=utf-8``) ignored."""
    media = value.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class GatewayMiddleware:
    """See the module docstring. ``settings`` fixes the token and the body limit; ``labels`` gives each path its
    metric label (the template of the app's route that serves it, :mod:`app.api.route_labels`)."""

    def __init__(self, app: ASGIApp, settings: Settings, labels: RouteLabels) -> None:
        self.app = app
        self.route_labels = labels
        self.max_body = settings.max_body_bytes
        self.body_timeout = settings.body_timeout
        self.token = settings.auth_token.encode() if settings.auth_token else None
        self.open_paths = OPEN_PATHS if settings.metrics_auth else OPEN_PATHS | {"/metrics"}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        labels = {"tokenizer": ""}
        scope[LABELS_KEY] = labels
        state: dict[str, Any] = {"status": 0, "recorded": False}

        def record() -> None:
            if not state["recorded"]:
                state["recorded"] = True
                status = state["status"] or 499  # 499: the client went away before a response started
                metrics.request_done(self.route_labels.label(scope.get("path", "")), labels["tokenizer"], status,
                                     time.perf_counter() - start)

        async def send_tracking(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                record()  # before the last byte leaves: a client that has its response sees it counted
            await send(message)

        metrics.request_started()
        try:
            await self._handle(scope, receive, send_tracking)
        except Exception as exc:  # the last line of defence: one bounded log line, a 500 without internals
            err = internal_error(exc, f"{scope.get('method')} {scope.get('path')}")
            if not state["status"]:
                await send_error(send_tracking, err.status, err.type, err.message)
        finally:
            record()

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw_headers = scope.get("headers", ())
        headers = {k.lower(): v for k, v in raw_headers}
        if len(headers) != len(raw_headers):
            duplicate = _ambiguous_duplicate(raw_headers)
            if duplicate is not None:
                await send_error(send, 400, "bad_request", f"more than one {duplicate} header: ambiguous, refused",
                                 {"header": duplicate}, headers={"Connection": "close"})
                return
        path = scope.get("path", "")
        if self.token is not None and path not in self.open_paths and not path.startswith(STATIC_PREFIX):
            auth = headers.get(b"authorization", b"")
            scheme, _, credentials = auth.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(credentials.strip(), self.token):
                await send_error(send, 401, "unauthorized", "missing or wrong bearer token",
                                 headers={"WWW-Authenticate": "Bearer"})
                return
        if scope.get("method") not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        content_type = headers.get(b"content-type")
        if content_type and content_type != b"application/json" and content_type.strip() and not is_json_media_type(
                content_type.decode("latin-1")):
            await send_error(send, 415, "unsupported_media_type",
                             f"Content-Type must be application/json, not {content_type.decode('latin-1')[:100]!r}")
            return
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                await send_error(send, 400, "bad_request", "invalid Content-Length header")
                return
            if length > self.max_body:
                await self._too_large(send, length)
                return
        body = await self._read_body(receive)
        if body is None:  # the client went away
            return
        if body is _TOO_LARGE:
            await self._too_large(send, None)
            return
        if body is _TIMED_OUT:
            await send_error(send, 408, "request_timeout", f"the request body did not arrive within "
                             f"{self.body_timeout:g} s (TOKENIZER_BODY_TIMEOUT)", headers={"Connection": "close"})
            return
        op = dispatch.OPS.get(scope["path"]) if scope["method"] == "POST" else None
        if op is not None:  # the tokenization endpoints: no framework machinery needed (see app.api.dispatch)
            app = scope.get("app")
            answer = await dispatch.run(getattr(getattr(app, "state", None), "service", None), op, scope["path"],
                                        body, scope[LABELS_KEY])
            await send({"type": "http.response.start", "status": answer.status, "headers": answer.asgi_headers()})
            await send({"type": "http.response.body", "body": answer.body})
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The whole body, or :data:`_TOO_LARGE` once more than the limit arrived, :data:`_TIMED_OUT` if it did not
        arrive within ``TOKENIZER_BODY_TIMEOUT`` seconds, None if the client disconnected.

        The deadline is one event-loop timer (``loop.call_at``) that cancels this task with :data:`_BODY_DEADLINE`
        as the message; the cancellation is taken back (``Task.uncancel``) only when nothing else cancelled the task
        too, so an outside cancellation (shutdown, a dropped connection) still propagates. A body that is already
        complete when it is asked for never waits, so the timer is cancelled before it can fire."""
        timer: asyncio.TimerHandle | None = None
        task: asyncio.Task[Any] | None = None
        if self.body_timeout:
            task = asyncio.current_task()
            if task is not None:
                loop = task.get_loop()
                timer = loop.call_at(loop.time() + self.body_timeout, task.cancel, _BODY_DEADLINE)
        chunks: list[bytes] = []
        total = 0
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunk = message.get("body", b"")
                total += len(chunk)
                if total > self.max_body:
                    return _TOO_LARGE
                if chunk:
                    chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        except asyncio.CancelledError as exc:
            if task is not None and exc.args[:1] == (_BODY_DEADLINE,) and task.uncancel() == 0:
                return _TIMED_OUT
            raise
        finally:
            if timer is not None:
                timer.cancel()
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _too_large(self, send: Send, declared: int | None) -> None:
        what = f"the body has {declared} bytes" if declared is not None else "the body is larger than that"
        await send_error(send, 413, "payload_too_large",
                         f"request bodies are limited to {self.max_body} bytes (TOKENIZER_MAX_BODY_BYTES); {what}",
                         {"limit": self.max_body, "actual": declared}, headers={"Connection": "close"})


#: Sentinels of :meth:`GatewayMiddleware._read_body` (compared by identity), and its deadline's cancel message.
_TOO_LARGE = b"<too large>"
_TIMED_OUT = b"<timed out>"
_BODY_DEADLINE = "tokenizer-service: request body deadline"

#: Headers whose repetition would let two parties read one request differently (the last one silently won before:
#: a wrong token followed by the right one passed). Other repeated headers are allowed.
AMBIGUOUS = {b"authorization": "Authorization", b"content-type": "Content-Type", b"content-length": "Content-Length",
             b"host": "Host", b"transfer-encoding": "Transfer-Encoding"}


def _ambiguous_duplicate(raw_headers: Any) -> str | None:
    """The name of the first header of :data:`AMBIGUOUS` that occurs more than once, or None."""
    seen: set[bytes] = set()
    for key, _ in raw_headers:
        name = key.lower()
        if name in AMBIGUOUS:
            if name in seen:
                return AMBIGUOUS[name]
            seen.add(name)
    return None
