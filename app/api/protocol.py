"""uvicorn's httptools protocol with a deadline and a size bound for request headers.

uvicorn closes idle keep-alive connections, but a client that opens a connection (or starts a request) and then
sends its headers a byte at a time, or never finishes them, holds the connection for as long as it likes. This
protocol sets a deadline when a connection opens and when a request begins (one timer per connection carries it,
re-armed only when it fires early); if the headers are not complete by then, the client gets ``408`` in the API's
error shape and the connection is closed. The limit is ``TOKENIZER_HEADER_TIMEOUT`` seconds (0 disables it). The
body has its own deadline, enforced by the gateway middleware (``TOKENIZER_BODY_TIMEOUT``).

Size: the request line and headers together may take ``TOKENIZER_MAX_HEADER_BYTES`` bytes and hold
``TOKENIZER_MAX_HEADERS`` headers; above either, the client gets ``431`` in the error shape and the connection is
closed, before the app sees anything. Bytes are counted as they arrive, so a header that never ends is cut off at
the limit instead of growing in memory.

``serve`` passes this class to uvicorn as its ``http`` implementation when httptools is installed (without it,
uvicorn's h11 protocol applies its own 16 KiB bound on an incomplete header section, with a plain-text 400, and
there is no header deadline).
"""

from __future__ import annotations

import asyncio
import functools
from itertools import chain
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.core.config import Settings

from .errors import error_body


def _response(status: bytes, type_: str, message: str) -> bytes:
    body = error_body(type_, message)
    head = (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n")
    return head + body


def _timeout_response() -> bytes:
    return _response(b"408 Request Timeout", "request_timeout",
                     "the request headers did not arrive in time (TOKENIZER_HEADER_TIMEOUT)")


@functools.cache
def _limits() -> tuple[float, int, int]:
    """(header timeout, max header bytes, max headers) of this worker's :class:`Settings`, read once. uvicorn builds
    the protocol with no way to hand it arguments, so it reads the settings ``serve`` exported to its workers'
    environment, as the worker's app does (``create_app`` -> :meth:`Settings.from_env`)."""
    settings = Settings.from_env()
    return settings.header_timeout, settings.max_header_bytes, settings.max_headers


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` plus a header deadline and header limits (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout, self.max_header_bytes, self.max_headers = _limits()
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_deadline = 0.0  # loop time by which the current request's headers must be complete
        self._in_headers = True  # between a request's first byte (or the connection's) and its last header
        self._raw_header_bytes = 0  # bytes received while in the header section (a bound on what is buffered)
        self._refused = False

    def _arm_header_timer(self) -> None:
        """Start this request's header deadline. One timer per connection: it is created only when none is pending;
        when it fires early (the deadline moved on with a later request) it re-arms itself for the remaining time,
        and once the headers are complete it lapses, so a keep-alive connection does not create and cancel a timer
        for every request."""
        if self.header_timeout <= 0:
            return
        self._header_deadline = self.loop.time() + self.header_timeout
        if self._header_timer is None:
            self._header_timer = self.loop.call_at(self._header_deadline, self._header_timer_fired)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timer_fired(self) -> None:
        self._header_timer = None
        if not self._in_headers or self._refused:
            return  # the headers arrived; the next request arms it again
        if self.loop.time() < self._header_deadline:  # a later request's deadline
            self._header_timer = self.loop.call_at(self._header_deadline, self._header_timer_fired)
            return
        self._headers_too_slow()

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.write(_timeout_response())
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._in_headers:
            self._raw_header_bytes += len(data)
        super().data_received(data)
        if self._refused or (self._in_headers and self._raw_header_bytes > self.max_header_bytes):
            self._refuse_headers()  # everything received since the request began is header bytes: over the limit

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_timer()
        self._in_headers = True
        self._raw_header_bytes = 0

    def on_headers_complete(self) -> None:
        """Refuse (431) a request whose request line and headers, as parsed, exceed the limits; they are measured once
        here from what uvicorn collected (``self.url``, ``self.headers``: no callback of ours per header), while
        :meth:`data_received` bounds the raw bytes as they arrive."""
        self._in_headers = False  # the header timer, if pending, lapses when it fires
        self._raw_header_bytes = 0
        headers = self.headers
        # 16: the method and version; 4: ": " and CRLF of each header
        size = len(self.url) + 16 + 4 * len(headers) + sum(map(len, chain.from_iterable(headers)))
        if self._refused or len(headers) > self.max_headers or size > self.max_header_bytes:
            self._refused = True
            return  # never reaches the app
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._refused:
            super().on_message_complete()

    def _refuse_headers(self) -> None:
        self._refused = True
        self._cancel_header_timer()
        if not self.transport.is_closing():
            self.transport.write(_response(
                b"431 Request Header Fields Too Large", "request_header_fields_too_large",
                f"request headers are limited to {self.max_header_bytes} bytes and {self.max_headers} fields "
                "(TOKENIZER_MAX_HEADER_BYTES, TOKENIZER_MAX_HEADERS)"))
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)
