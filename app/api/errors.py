"""One error shape for every failure: ``{"error": {"type": str, "message": str, "details": any}}``.

Status codes: 400 malformed JSON or body, or an ambiguous repeated header (``Authorization``, ``Content-Type``…);
401 missing/wrong bearer token; 404 unknown path (``/encode/`` included: no slash redirects) or tokenizer in a URL;
405 wrong method (``Allow`` lists every method of the path); 408 headers or body too slow; 413 any size limit
(body bytes, batch size, ids, characters, detailed tokens, sampled text); 415 a non-JSON content type; 422 a
well-formed request that cannot be served (wrong types, unknown tokenizer/model/special token, empty batch, lone
surrogates, ids out of range, ``sample`` options the tokenizer cannot take: ``invalid_sample``); 431 request headers
over their size or count limit; 500 an internal error (logged; the response carries no internals); 503 not ready.
Error bodies never echo request text beyond the offending names and ids.

One answer is not in this shape: bytes that are not HTTP at all never reach the app, and uvicorn itself answers
``400`` with the plain-text body ``Invalid HTTP request received.`` and closes the connection.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import Send

from app.core.failures import describe
from app.engine.errors import (
    ArtifactError,
    EngineError,
    InvalidTokenIdError,
    UnknownSpecialTokenError,
    UnknownTokenizerError,
)
from app.engine.sampling import SamplingError

log = logging.getLogger("app.api")

_STATUS_TYPES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    431: "request_header_fields_too_large",
    500: "internal_error",
    503: "not_ready",
}


class ApiError(Exception):
    """An error the API reports to the client as-is: status code, machine-readable type, message, details."""

    def __init__(self, status: int, type_: str, message: str, details: Any = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message
        self.details = details
        self.headers = headers


def error_body(type_: str, message: str, details: Any = None) -> bytes:
    """The JSON bytes of an error (ASCII-escaped, so any echoed name is safe to encode)."""
    return json.dumps({"error": {"type": type_, "message": message, "details": details}}).encode("ascii")


def error_response(err: ApiError) -> Response:
    return Response(error_body(err.type, err.message, err.details), status_code=err.status,
                    media_type="application/json", headers=err.headers)


async def send_error(send: Send, status: int, type_: str, message: str, details: Any = None,
                     headers: dict[str, str] | None = None) -> None:
    """Send a complete error response on a raw ASGI ``send`` (for middleware, outside FastAPI's handlers)."""
    body = error_body(type_, message, details)
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw_headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


def from_engine_error(exc: EngineError) -> ApiError:
    """Map an engine error raised by request data to the API error the client sees."""
    if isinstance(exc, UnknownTokenizerError):
        return ApiError(422, "unknown_tokenizer", str(exc), {"name": exc.name, "known": exc.known})
    if isinstance(exc, UnknownSpecialTokenError):
        return ApiError(422, "unknown_special_token", str(exc),
                        {"name": exc.name, "tokenizer": exc.tokenizer, "allowed": exc.allowed})
    if isinstance(exc, InvalidTokenIdError):
        return ApiError(422, "invalid_token_id", str(exc),
                        {"id": exc.token_id, "position": exc.index, "tokenizer": exc.tokenizer})
    if isinstance(exc, SamplingError):
        return ApiError(422, "invalid_sample", str(exc), {"tokenizer": exc.tokenizer, "model": exc.model})
    if isinstance(exc, ArtifactError):  # not the client's fault; readiness should have caught it
        log.error("artifact error while serving: %s", exc)
        return ApiError(500, "internal_error", "internal error")
    return ApiError(422, "engine_error", str(exc))


def internal_error(exc: BaseException, where: str) -> ApiError:
    """Log ``exc`` (an error no handler expected) as one bounded line (:func:`app.core.failures.describe`: no
    traceback of a thousand frames) and return the 500 the client gets (no internals)."""
    log.error("unhandled error serving %s: %s", where[:200], describe(exc))
    return ApiError(500, "internal_error", "internal error")


def validation_details(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pydantic errors without their ``input`` (which may be megabytes of user text) and URLs."""
    out = []
    for e in errors[:20]:
        out.append({"loc": [p if isinstance(p, int) else str(p) for p in e.get("loc", ())],
                    "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))})
    return out


Handler = Callable[[Request, Any], Awaitable[Response]]


def install_handlers(app: FastAPI) -> None:
    """Route every exception FastAPI/Starlette can raise to the one error shape."""

    async def api_error(_: Request, exc: ApiError) -> Response:
        return error_response(exc)

    async def engine_error(_: Request, exc: EngineError) -> Response:
        return error_response(from_engine_error(exc))

    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        type_ = _STATUS_TYPES.get(exc.status_code, "http_error")
        message = exc.detail if isinstance(exc.detail, str) else type_.replace("_", " ")
        return error_response(ApiError(exc.status_code, type_, message, headers=dict(exc.headers or {})))

    async def request_validation(_: Request, exc: RequestValidationError) -> Response:
        errors = list(exc.errors())
        return error_response(ApiError(422, "validation_error", "request does not match the schema",
                                       validation_details(errors)))

    async def unexpected(request: Request, exc: Exception) -> Response:
        return error_response(internal_error(exc, f"{request.method} {request.url.path}"))

    app.add_exception_handler(ApiError, api_error)  # type: ignore[arg-type]
    app.add_exception_handler(EngineError, engine_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, request_validation)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, unexpected)
