"""Exceptions of :mod:`app.client`: the service's error JSON as typed exceptions.

Every error response of the service has the shape ``{"error": {"type", "message", "details"}}``. The client raises
it as a :class:`ServiceError` subclass chosen by the error ``type`` first (``unknown_tokenizer`` ->
:class:`UnknownTokenizerError`, ...) and by the HTTP status otherwise (422 -> :class:`RequestValidationError`,
...), so callers can catch as narrowly or as broadly as they like. Failures that never produced a response
(connection refused, timeouts) raise :class:`ConnectionFailedError` / :class:`TimeoutError` after the retries.
"""

from __future__ import annotations

import json
from typing import Any


class ClientError(Exception):
    """Base class of everything :mod:`app.client` raises on purpose."""


class ConnectionFailedError(ClientError):
    """No response: the connection failed (or broke) on every attempt."""


class RequestTimeoutError(ClientError):
    """No response in time (the client's own timeout; the server's 408 is :class:`ServerTimeoutError`)."""


class ServiceError(ClientError):
    """An error response of the service: HTTP ``status``, machine-readable ``type``, ``message``, ``details``."""

    #: The HTTP status a subclass stands for (None: any).
    status_code: int | None = None

    def __init__(self, status: int, type_: str, message: str, details: Any = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status} {type_}: {message}")
        self.status = status
        self.type = type_
        self.message = message
        self.details = details
        self.headers = headers or {}

    def __str__(self) -> str:  # a KeyError subclass would repr() the message
        return str(self.args[0])


class BadRequestError(ServiceError):
    """400: malformed JSON."""

    status_code = 400


class AuthenticationError(ServiceError):
    """401: missing or wrong bearer token."""

    status_code = 401


class NotFoundError(ServiceError):
    """404: unknown path, or an unknown tokenizer named in the URL."""

    status_code = 404


class MethodNotAllowedError(ServiceError):
    """405."""

    status_code = 405


class ServerTimeoutError(ServiceError):
    """408: the request's headers or body arrived too slowly."""

    status_code = 408


class PayloadTooLargeError(ServiceError):
    """413: a size limit (body bytes, batch size, ids, characters)."""

    status_code = 413


class UnsupportedMediaTypeError(ServiceError):
    """415: the body was not sent as JSON."""

    status_code = 415


class RequestValidationError(ServiceError):
    """422: a well-formed request the service cannot serve."""

    status_code = 422


class UnknownTokenizerError(RequestValidationError, NotFoundError):
    """``unknown_tokenizer`` (422 in a body, 404 in a URL); ``details["known"]`` lists the names."""


class UnknownModelError(RequestValidationError):
    """``unknown_model``."""


class UnknownSpecialTokenError(RequestValidationError):
    """``unknown_special_token``; ``details`` names the allowed ones."""


class InvalidTokenIdError(RequestValidationError, KeyError):
    """``invalid_token_id``: an id outside the vocabulary (``details`` has the id and its position). Also a
    ``KeyError``, the type tiktoken raises for it."""


class InvalidTextError(RequestValidationError):
    """``invalid_text``: text the service cannot encode (a lone surrogate)."""


class InternalServerError(ServiceError):
    """500: the service failed (it logs the cause; the response carries none)."""

    status_code = 500


class NotReadyError(ServiceError):
    """503: the service is starting or stopping (retried by the client before it is raised)."""

    status_code = 503


_BY_TYPE: dict[str, type[ServiceError]] = {
    "unknown_tokenizer": UnknownTokenizerError,
    "unknown_model": UnknownModelError,
    "unknown_special_token": UnknownSpecialTokenError,
    "invalid_token_id": InvalidTokenIdError,
    "invalid_text": InvalidTextError,
}
_BY_STATUS: dict[int, type[ServiceError]] = {
    cls.status_code: cls
    for cls in (BadRequestError, AuthenticationError, NotFoundError, MethodNotAllowedError, ServerTimeoutError,
                PayloadTooLargeError, UnsupportedMediaTypeError, RequestValidationError, InternalServerError,
                NotReadyError)
    if cls.status_code is not None
}


def error_from_response(status: int, body: bytes, headers: dict[str, str] | None = None) -> ServiceError:
    """The typed exception for an error response (a body that is not the service's error JSON still gives a
    :class:`ServiceError` of the status, with the start of the body as its message)."""
    try:
        error = json.loads(body)["error"]
        type_, message, details = str(error["type"]), str(error["message"]), error.get("details")
    except (ValueError, KeyError, TypeError):
        type_ = f"http_{status}"
        message = body[:200].decode("utf-8", "replace") or f"HTTP {status}"
        details = None
    cls = _BY_TYPE.get(type_) or _BY_STATUS.get(status) or ServiceError
    return cls(status, type_, message, details, headers)
