"""uvicorn's httptools protocol with a deadline for request headers (slow-loris defence).

uvicorn closes idle keep-alive connections, but a client that opens a connection (or starts a request) and then
sends its headers a byte at a time, or never finishes them, holds the connection for as long as it likes. This
protocol starts a timer when a connection opens and when a request begins; if the headers are not complete when it
fires, the client gets ``408`` in the API's error shape and the connection is closed. The limit is
``TOKENIZER_HEADER_TIMEOUT`` seconds (0 disables it). The body has its own deadline, enforced by the gateway
middleware (``TOKENIZER_BODY_TIMEOUT``).

``serve`` passes this class to uvicorn as its ``http`` implementation when httptools is installed.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .errors import error_body

HEADER_TIMEOUT_ENV = "TOKENIZER_HEADER_TIMEOUT"
DEFAULT_HEADER_TIMEOUT = 10.0


def _timeout_response() -> bytes:
    body = error_body("request_timeout", "the request headers did not arrive in time (TOKENIZER_HEADER_TIMEOUT)")
    head = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n")
    return head + body


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` plus a header deadline (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        raw = os.environ.get(HEADER_TIMEOUT_ENV, "").strip()
        self.header_timeout = float(raw) if raw else DEFAULT_HEADER_TIMEOUT
        self._header_timer: asyncio.TimerHandle | None = None

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        if self.header_timeout > 0:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.write(_timeout_response())
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._cancel_header_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)
