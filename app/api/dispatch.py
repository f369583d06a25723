"""Running a tokenization operation (``/encode``, ``/count``, ``/decode``) on a buffered body, straight from the
gateway.

These three endpoints are bytes in, bytes out (:mod:`app.api.ops.encode` parses, validates, tokenizes and serializes in
one call), so they need none of the framework's per-request machinery (routing, ``Request``/``Response`` objects,
exception middleware). The gateway calls :func:`run` for ``POST`` on their paths; the FastAPI routes in
:mod:`app.api.routes.tokenize` call the same function, so both give the same answer, and the routes document the
endpoints in the OpenAPI schema.

Where the work runs: bodies up to ``TOKENIZER_INLINE_BYTES`` on the event loop (tens of microseconds of work, less
than a thread hop), bigger ones on the worker's thread pool, and bodies from ``TOKENIZER_BULK_BYTES`` on a separate,
smaller pool, so a 10 MB request never makes small ones wait for a thread. A small body whose tokenizer runs an
artifact's unvetted regex (:mod:`app.engine.artifact_regex`: an imported ``tokenizer.json`` or tekken pattern that
is not one of the bundled, swept ones) never runs inline: the regex raises ``OffloadRequired`` before matching and
the request is run again on the thread pool, where that regex runs with the GIL released and a time bound; the
event loop keeps answering ``/healthz`` and the other tokenizers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio

from app.engine.artifact_regex import OffloadRequired, on_event_loop
from app.engine.errors import EngineError

from . import metrics
from .deps import ServiceState
from .errors import ApiError, error_body, from_engine_error, internal_error
from .ops import encode
from .ops.common import OpResult

Op = Callable[[ServiceState, bytes, MutableMapping[str, str]], OpResult]

#: Path -> operation, for ``POST``.
OPS: dict[str, Op] = {"/encode": encode.encode, "/count": encode.count, "/decode": encode.decode}

_JSON = (b"content-type", b"application/json")


@dataclass
class Answer:
    """A finished response: status, body and extra headers (raw ASGI pairs, content type and length excluded)."""

    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]]

    def asgi_headers(self) -> list[tuple[bytes, bytes]]:
        return [_JSON, (b"content-length", str(len(self.body)).encode()), *self.headers]


def _error(err: ApiError) -> Answer:
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (err.headers or {}).items()]
    return Answer(err.status, error_body(err.type, err.message, err.details), headers)


async def run(svc: ServiceState | None, op: Op, endpoint: str, body: bytes,
              labels: MutableMapping[str, str]) -> Answer:
    """Run ``op`` on ``body`` where it belongs (see the module docstring) and record its metrics. Every client error
    becomes its JSON error answer (503 while the service is not ready); any other exception is a bug, logged as one
    bounded line and answered with a 500 without internals (:func:`app.api.errors.internal_error`).

    ``Server-Timing`` of a success lists the operation's phases (``parse``, ``tokenize``, ``serialize``), the wait
    for a thread (``queue``; 0 inline) and where it ran (``pool;desc=inline|threads|bulk``)."""
    if svc is None or not svc.ready:
        return _error(ApiError(503, "not_ready", "the service is not ready"))
    settings = svc.settings
    try:
        result: OpResult | None = None
        pool = "inline"
        if len(body) <= settings.inline_bytes:
            try:
                with on_event_loop():
                    result = op(svc, body, labels)
                result.timings["queue"] = 0.0
            except OffloadRequired:  # an unvetted artifact regex: never on the event loop
                pool = "threads"
        else:
            pool = "bulk" if len(body) >= settings.bulk_bytes else "threads"
        if result is None:
            limiter: Any = svc.bulk_limiter if pool == "bulk" else svc.limiter
            submitted = time.perf_counter()

            def work() -> OpResult:
                waited = time.perf_counter() - submitted
                out = op(svc, body, labels)
                out.timings["queue"] = waited
                return out

            result = await anyio.to_thread.run_sync(work, limiter=limiter)
    except ApiError as exc:
        return _error(exc)
    except EngineError as exc:
        return _error(from_engine_error(exc))
    except Exception as exc:  # noqa: BLE001 -- the last line of defence (limits are checked before the work)
        return _error(internal_error(exc, f"POST {endpoint}"))
    metrics.observe_work(endpoint, result.tokenizer, result.timings.get("tokenize", 0.0), result.tokens,
                         result.input_bytes)
    timing = f'{result.server_timing()}, pool;desc="{pool}"'
    return Answer(200, result.body, [(b"server-timing", timing.encode("ascii"))])
