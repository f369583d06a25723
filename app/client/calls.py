"""What :class:`~app.client.Client` and :class:`~app.client.AsyncClient` share: one :class:`Call` per route
(method, path, JSON body, response parser), the retry policy, and the error mapping.

Keeping the requests here means the two clients differ only in how they wait (``httpx.Client`` or
``httpx.AsyncClient``, ``time.sleep`` or ``asyncio.sleep``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import quote

import httpx

from .errors import ConnectionFailedError, RequestTimeoutError, ServiceError, error_from_response
from .results import (
    CountBatchResult,
    CountResult,
    DecodeBatchResult,
    DecodeResult,
    EncodeBatchResult,
    EncodeResult,
    Health,
    ModelEntry,
    PriceResult,
    Ready,
    TokenizerDetail,
    TokenizerInfo,
)

T = TypeVar("T")

JSON_HEADERS = {"content-type": "application/json"}

#: Transport failures worth another attempt: the request never reached the service or the connection broke.
#: (Every route is a pure function of its body, so repeating a request is safe.) Read timeouts are not retried:
#: a slow answer repeated is a slower one.
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)


class Named(Protocol):
    """A special token by name, e.g. :class:`app.engine.Special` (any object with a ``name``)."""

    @property
    def name(self) -> str: ...


Part = str | Named


@dataclass(frozen=True)
class Retry:
    """Retry policy: up to ``attempts`` tries in all, on :data:`RETRYABLE_ERRORS` and on the HTTP ``statuses``
    (503: starting or stopping). The wait before try ``n`` (from 1) is ``backoff * 2**(n-1)`` with up to 10 %
    jitter, at most ``max_backoff``; a ``Retry-After`` header in seconds replaces it (capped the same way)."""

    attempts: int = 4
    backoff: float = 0.05
    max_backoff: float = 2.0
    statuses: frozenset[int] = frozenset({503})

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait after failed try number ``attempt`` (from 0)."""
        if retry_after is not None:
            try:
                return min(max(float(retry_after), 0.0), self.max_backoff)
            except ValueError:
                pass
        base = min(self.backoff * 2**attempt, self.max_backoff)
        return base * (1 + 0.1 * random.random())


NO_RETRY = Retry(attempts=1)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: ``method`` ``path`` with a JSON ``body`` (None: no body); ``parse`` turns the decoded JSON
    (or, with ``raw``, the text) of a 2xx response into the result. ``retry`` False: never repeat it."""

    method: str
    path: str
    body: bytes | None
    parse: Callable[[Any], T]
    retry: bool = True
    raw: bool = False


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON. Text with a lone surrogate is sent escaped, so that the service (not the client)
    reports it, with its usual ``invalid_text`` error."""
    try:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":")).encode("ascii")


def result_of(call: Call[T], response: httpx.Response) -> T:
    """The parsed result of a 2xx ``response``; raises the typed :class:`ServiceError` of an error response."""
    if response.status_code >= 400:
        raise error_from_response(response.status_code, response.content, dict(response.headers))
    if call.raw:
        return call.parse(response.text)
    try:
        data = json.loads(response.content)
    except ValueError:
        raise ServiceError(response.status_code, "invalid_response", "the response is not JSON") from None
    return call.parse(data)


def should_retry(call: Call[Any], policy: Retry, attempt: int, response: httpx.Response) -> bool:
    """True if ``response`` (to try number ``attempt``, from 0) is worth another try."""
    return call.retry and response.status_code in policy.statuses and attempt + 1 < policy.attempts


def transport_failure(exc: Exception, call: Call[Any], attempts: int) -> Exception:
    """The client's exception for a failed transport after ``attempts`` tries."""
    if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
        return RequestTimeoutError(f"{call.method} {call.path}: no response in time ({exc!r})")
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return ConnectionFailedError(f"{call.method} {call.path}: {type(exc).__name__}: {exc}{tries}")


# ------------------------------------------------------------------------------------ requests


def target(tokenizer: str | None, model: str | None, default: str | None) -> dict[str, str]:
    """The ``tokenizer`` / ``model`` fields: the given one, else the client's default tokenizer."""
    if tokenizer is not None and model is not None:
        raise ValueError("give tokenizer or model, not both")
    if model is not None:
        return {"model": model}
    name = tokenizer if tokenizer is not None else default
    if name is None:
        raise ValueError("no tokenizer: pass tokenizer= or model=, or create the client with tokenizer=")
    return {"tokenizer": name}


def _parts(parts: Sequence[Part]) -> list[dict[str, str]]:
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append({"text": part})
        else:
            name = getattr(part, "name", None)
            if not isinstance(name, str):
                raise TypeError(f"a part must be str or a special token with a name, not {type(part).__name__}")
            out.append({"special": name})
    return out


def truncation(max_tokens: int | None, side: str) -> dict[str, Any] | None:
    """The ``truncate`` field: keep at most ``max_tokens`` tokens, cutting the ``right`` or ``left`` end."""
    return None if max_tokens is None else {"max_tokens": max_tokens, "side": side}


def messages_body(messages: Sequence[dict[str, Any]], model: str, tools: Sequence[dict[str, Any]] | None,
                  add_generation_prompt: bool, max_output_tokens: int | None,
                  truncate: dict[str, Any] | None) -> dict[str, Any]:
    """A ``messages`` request (OpenAI Chat Completions shape; the model decides the framing)."""
    body: dict[str, Any] = {"model": model, "messages": list(messages)}
    if tools is not None:
        body["tools"] = list(tools)
    if not add_generation_prompt:
        body["add_generation_prompt"] = False
    if max_output_tokens is not None:
        body["max_output_tokens"] = max_output_tokens
    if truncate is not None:
        body["truncate"] = truncate
    return body


def count_messages(body: dict[str, Any]) -> Call[CountResult]:
    """``POST /count`` of a conversation."""
    return Call("POST", "/count", dumps(body), CountResult.from_json)


def encode_messages(body: dict[str, Any], return_tokens: bool) -> Call[EncodeResult]:
    """``POST /encode`` of a conversation (models whose framing ids are public)."""
    if return_tokens:
        body = {**body, "return_tokens": True}
    return Call("POST", "/encode", dumps(body), EncodeResult.from_json)


def models() -> Call[list[ModelEntry]]:
    """``GET /models``."""
    return Call("GET", "/models", None, lambda d: [ModelEntry.from_json(m) for m in d["models"]])


def price(model: str | None, usage: Mapping[str, int | float] | None, response: Any, provider: str | None,
          timestamp: datetime | str | None, service_tier: str | None, price_context: Mapping[str, str] | None,
          api_flavor: str | None) -> Call[PriceResult]:
    """``POST /price`` (fields left None are not sent)."""
    when = timestamp.isoformat() if isinstance(timestamp, datetime) else timestamp
    body = {"model": model, "provider": provider, "usage": dict(usage) if usage is not None else None,
            "response": response, "api_flavor": api_flavor, "timestamp": when, "service_tier": service_tier,
            "price_context": dict(price_context) if price_context is not None else None}
    return Call("POST", "/price", dumps({k: v for k, v in body.items() if v is not None}), PriceResult.from_json)


def _text_body(
    key: str,
    value: Any,
    tgt: dict[str, str],
    prefix: Sequence[str],
    suffix: Sequence[str],
    add_special_tokens: bool,
    report_special_lookalikes: bool,
    truncate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {**tgt, key: value}
    if truncate is not None:
        body["truncate"] = truncate
    if prefix or suffix:
        body["special_tokens"] = {"prefix": list(prefix), "suffix": list(suffix)}
    if add_special_tokens:
        body["add_special_tokens"] = True
    if report_special_lookalikes:
        body["report_special_lookalikes"] = True
    return body


def count(key: str, value: Any, tgt: dict[str, str], prefix: Sequence[str], suffix: Sequence[str],
          add_special_tokens: bool, report_special_lookalikes: bool,
          truncate: dict[str, Any] | None = None) -> Call[Any]:
    """``POST /count`` for ``text`` / ``parts`` (-> :class:`CountResult`) or ``texts`` (-> batch result)."""
    if key == "parts":
        value = _parts(value)
    body = _text_body(key, value, tgt, prefix, suffix, add_special_tokens, report_special_lookalikes, truncate)
    parse = CountBatchResult.from_json if key == "texts" else CountResult.from_json
    return Call("POST", "/count", dumps(body), parse)


def encode(key: str, value: Any, tgt: dict[str, str], prefix: Sequence[str], suffix: Sequence[str],
           add_special_tokens: bool, report_special_lookalikes: bool, return_tokens: bool,
           return_offsets: bool, truncate: dict[str, Any] | None = None) -> Call[Any]:
    """``POST /encode`` for ``text`` / ``parts`` (-> :class:`EncodeResult`) or ``texts`` (-> batch result)."""
    if key == "parts":
        value = _parts(value)
    body = _text_body(key, value, tgt, prefix, suffix, add_special_tokens, report_special_lookalikes, truncate)
    if return_tokens:
        body["return_tokens"] = True
    if return_offsets:
        body["return_offsets"] = True
    parse = EncodeBatchResult.from_json if key == "texts" else EncodeResult.from_json
    return Call("POST", "/encode", dumps(body), parse)


def decode(key: str, value: Any, tgt: dict[str, str], skip_special_tokens: bool) -> Call[Any]:
    """``POST /decode`` for ``ids`` (-> :class:`DecodeResult`) or ``batch`` (-> :class:`DecodeBatchResult`)."""
    body: dict[str, Any] = {**tgt, key: value}
    if skip_special_tokens:
        body["skip_special_tokens"] = True
    parse = DecodeBatchResult.from_json if key == "batch" else DecodeResult.from_json
    return Call("POST", "/decode", dumps(body), parse)


def tokenizers() -> Call[list[TokenizerInfo]]:
    """``GET /tokenizers``."""
    return Call("GET", "/tokenizers", None, lambda d: [TokenizerInfo.from_json(t) for t in d["tokenizers"]])


def tokenizer(name: str) -> Call[TokenizerDetail]:
    """``GET /tokenizers/{name}`` (the name is sent percent-encoded)."""
    return Call("GET", "/tokenizers/" + quote(name, safe=""), None, TokenizerDetail.from_json)


def health() -> Call[Health]:
    """``GET /healthz`` (not retried: it answers whether the process answers now)."""
    return Call("GET", "/healthz", None, Health.from_json, retry=False)


def ready() -> Call[Ready]:
    """``GET /readyz``: :class:`Ready`, or :class:`~app.client.errors.NotReadyError` (not retried)."""
    return Call("GET", "/readyz", None, Ready.from_json, retry=False)


def metrics() -> Call[str]:
    """``GET /metrics``: the Prometheus text."""
    return Call("GET", "/metrics", None, str, raw=True)
