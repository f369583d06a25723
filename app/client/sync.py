""":class:`Client`: the service's routes as typed, blocking method calls over one pooled ``httpx.Client``."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx

from . import calls
from .calls import Call, Part, Retry
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

#: Base URL used on a Unix socket (the host part is not used for routing).
UDS_BASE_URL = "http://tokenizer-service"


def client_options(base_url: str | None, uds: str | Path | None, token: str | None, timeout: float | httpx.Timeout,
                   headers: dict[str, str] | None) -> dict[str, Any]:
    """The keyword arguments both clients pass to their httpx client."""
    if uds is not None and base_url is not None:
        raise ValueError("give base_url or uds, not both")
    all_headers = {"accept": "application/json", **(headers or {})}
    if token is not None:
        all_headers["authorization"] = f"Bearer {token}"
    return {
        "base_url": UDS_BASE_URL if uds is not None else (base_url or "http://127.0.0.1:8000"),
        "headers": all_headers,
        "timeout": timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout, connect=min(timeout, 5)),
    }


class Client:
    """A blocking client for the tokenizer service. Thread-safe; reuse one per process (it pools connections).

    ``base_url`` (default ``http://127.0.0.1:8000``) or ``uds`` (a Unix socket path); ``token``: the bearer
    token when the service requires one; ``tokenizer``: the default for calls that name none; ``timeout``
    seconds (connect at most 5 s); ``retry``: see :class:`~app.client.calls.Retry`; ``max_connections``: pool
    size. ``transport`` replaces the HTTP transport (then ``uds`` and ``max_connections`` do not apply).

    Errors: :class:`~app.client.errors.ServiceError` subclasses for error responses,
    :class:`~app.client.errors.ConnectionFailedError` / :class:`~app.client.errors.RequestTimeoutError` for none.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        uds: str | Path | None = None,
        token: str | None = None,
        tokenizer: str | None = None,
        timeout: float | httpx.Timeout = 30.0,
        retry: Retry | None = None,
        max_connections: int = 16,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        options = client_options(base_url, uds, token, timeout, headers)
        if transport is None:
            limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
            transport = httpx.HTTPTransport(uds=str(uds) if uds is not None else None, limits=limits)
        self._http = httpx.Client(transport=transport, **options)
        self.default_tokenizer = tokenizer
        self.retry = retry or Retry()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    def _run(self, call: Call[T]) -> T:
        policy = self.retry if call.retry else calls.NO_RETRY
        headers = calls.JSON_HEADERS if call.body is not None else None
        for attempt in range(policy.attempts):
            try:
                response = self._http.request(call.method, call.path, content=call.body, headers=headers)
            except calls.RETRYABLE_ERRORS as exc:
                if attempt + 1 >= policy.attempts:
                    raise calls.transport_failure(exc, call, policy.attempts) from exc
                time.sleep(policy.delay(attempt))
                continue
            except httpx.TransportError as exc:
                raise calls.transport_failure(exc, call, attempt + 1) from exc
            if calls.should_retry(call, policy, attempt, response):
                time.sleep(policy.delay(attempt, response.headers.get("retry-after")))
                continue
            return calls.result_of(call, response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    # ------------------------------------------------------------------ operations

    def health(self) -> Health:
        """``GET /healthz``."""
        return self._run(calls.health())

    def ready(self) -> Ready:
        """``GET /readyz``; raises :class:`~app.client.errors.NotReadyError` while the service starts."""
        return self._run(calls.ready())

    def metrics(self) -> str:
        """``GET /metrics`` (Prometheus text)."""
        return self._run(calls.metrics())

    def price(self, model: str | None = None, *, usage: Mapping[str, int | float] | None = None,
              response: Any = None, provider: str | None = None, timestamp: datetime | str | None = None,
              service_tier: str | None = None, price_context: Mapping[str, str] | None = None,
              api_flavor: str | None = None) -> PriceResult:
        """``POST /price``: the price of one request's usage (genai-prices' usage names: ``input_tokens`` (all
        input, cached included), ``cache_read_tokens``, ``cache_write_tokens``, ``output_tokens``, ...), or of a
        provider's own ``response`` / usage object (then ``provider`` is required and ``model`` defaults to the
        response's). ``timestamp`` prices a past request; ``service_tier``: default, flex, priority, fast or batch.
        Unknown model or provider: :class:`~app.client.errors.UnknownModelError` /
        :class:`~app.client.errors.RequestValidationError` naming the closest names."""
        return self._run(calls.price(model, usage, response, provider, timestamp, service_tier, price_context,
                                      api_flavor))

    def models(self) -> list[ModelEntry]:
        """``GET /models``: every model of the table with its tokenizer, limits, chat support and prices."""
        return self._run(calls.models())

    def count_messages(self, messages: Sequence[dict[str, Any]], *, model: str,
                       tools: Sequence[dict[str, Any]] | None = None, add_generation_prompt: bool = True,
                       max_output_tokens: int | None = None, truncate: int | None = None,
                       truncate_side: str = "right") -> CountResult:
        """``POST /count`` of a conversation (OpenAI Chat Completions shape) as ``model`` frames it."""
        body = calls.messages_body(messages, model, tools, add_generation_prompt, max_output_tokens,
                                   calls.truncation(truncate, truncate_side))
        return self._run(calls.count_messages(body))

    def encode_messages(self, messages: Sequence[dict[str, Any]], *, model: str,
                        tools: Sequence[dict[str, Any]] | None = None, add_generation_prompt: bool = True,
                        max_output_tokens: int | None = None, truncate: int | None = None,
                        truncate_side: str = "right", return_tokens: bool = False) -> EncodeResult:
        """``POST /encode`` of a conversation (models whose framing ids are public; else a 422)."""
        body = calls.messages_body(messages, model, tools, add_generation_prompt, max_output_tokens,
                                   calls.truncation(truncate, truncate_side))
        return self._run(calls.encode_messages(body, return_tokens))

    def tokenizers(self) -> list[TokenizerInfo]:
        """``GET /tokenizers``: every tokenizer, in the store's order."""
        return self._run(calls.tokenizers())

    def tokenizer(self, name: str) -> TokenizerDetail:
        """``GET /tokenizers/{name}`` (a name or alias); :class:`~app.client.errors.UnknownTokenizerError` if none."""
        return self._run(calls.tokenizer(name))

    def count(self, text: str, *, tokenizer: str | None = None, model: str | None = None,
              prefix: Sequence[str] = (), suffix: Sequence[str] = (), add_special_tokens: bool = False,
              report_special_lookalikes: bool = False, truncate: int | None = None,
              truncate_side: str = "right") -> CountResult:
        """``POST /count`` of one text (always ordinary text; special tokens by name in ``prefix``/``suffix``).
        ``truncate``: count at most that many tokens, cutting the ``truncate_side`` end."""
        tgt = calls.target(tokenizer, model, self.default_tokenizer)
        return self._run(calls.count("text", text, tgt, prefix, suffix, add_special_tokens,
                                     report_special_lookalikes, calls.truncation(truncate, truncate_side)))

    def count_batch(self, texts: Sequence[str], *, tokenizer: str | None = None, model: str | None = None,
                    prefix: Sequence[str] = (), suffix: Sequence[str] = (), add_special_tokens: bool = False,
                    report_special_lookalikes: bool = False) -> CountBatchResult:
        """``POST /count`` of a batch (``counts`` in order, and the ``total``)."""
        tgt = calls.target(tokenizer, model, self.default_tokenizer)
        return self._run(calls.count("texts", list(texts), tgt, prefix, suffix, add_special_tokens,
                                     report_special_lookalikes))

    def count_parts(self, parts: Sequence[Part], *, tokenizer: str | None = None, model: str | None = None,
                    prefix: Sequence[str] = (), suffix: Sequence[str] = (), add_special_tokens: bool = False,
                    report_special_lookalikes: bool = False) -> CountResult:
        """``POST /count`` of parts: texts and special tokens (objects with a ``name``, e.g. ``Special``)."""
        tgt = calls.target(tokenizer, model, self.default_tokenizer)
        return self._run(calls.count("parts", parts, tgt, prefix, suffix, add_special_tokens,
                                     report_special_lookalikes))

    def encode(self, text: str, *, tokenizer: str | None = None, model: str | None = None,
               prefix: Sequence[str] = (), suffix: Sequence[str] = (), add_special_tokens: bool = False,
               return_tokens: bool = False, return_offsets: bool = False,
               report_special_lookalikes: bool = False, truncate: int | None = None,
               truncate_side: str = "right") -> EncodeResult:
        """``POST /encode`` of one text: ``ids`` (and ``tokens`` / ``offsets`` when asked); ``truncate`` keeps at
        most that many tokens (``truncated`` in the result says what was cut)."""
        tgt = calls.target(tokenizer, model, self.default_tokenizer)
        return self._run(calls.encode("text", text, tgt, prefix, suffix, add_special_tokens,
                                      report_special_lookalikes, return_tokens, return_offsets,
                                      calls.truncation(truncate, truncate_side)))

    def encode_batch(self, texts: Sequence[str], *, tokenizer: str | None = None, model: str | None = None,
                     prefix: Sequence[str] = (), suffix: Sequence[str] = (), add_special_tokens: bool = False,
                     return_tokens: bool = False, return_offsets: bool = False,
                     report_special_lookalikes: bool = False) -> EncodeBatchResult:
        """``POST /encode`` of a batch: one result per text, in order."""
        tgt = calls.target(tokenizer, model, self.default_tokenizer)
        return self._run(calls.encode("texts", list(texts), tgt, prefix, suffix, add_special_tokens,
                                      report_special_lookalikes, return_tokens, return_offsets))

    def encode_parts(self, parts: Sequence[Part], *, tokenizer: str | None = None, model: str | None = None,
                     prefix: Sequence[str] = (), suffix: Sequence[str] = (), add_special_tokens: bool = False,
                     return_tokens: bool = False, return_offsets: bool = False,
                     report_special_lookalikes: bool = False) -> EncodeResult:
        """``POST /encode`` of parts (texts and named special tokens, in order)."""
        tgt = calls.target(tokenizer, model, self.default_tokenizer)
        return self._run(calls.encode("parts", parts, tgt, prefix, suffix, add_special_tokens,
                                      report_special_lookalikes, return_tokens, return_offsets))

    def decode(self, ids: Sequence[int], *, tokenizer: str | None = None, model: str | None = None,
               skip_special_tokens: bool = False) -> DecodeResult:
        """``POST /decode`` of one id list (invalid UTF-8 comes back as U+FFFD)."""
        tgt = calls.target(tokenizer, model, self.default_tokenizer)
        return self._run(calls.decode("ids", list(ids), tgt, skip_special_tokens))

    def decode_batch(self, batch: Sequence[Sequence[int]], *, tokenizer: str | None = None,
                     model: str | None = None, skip_special_tokens: bool = False) -> DecodeBatchResult:
        """``POST /decode`` of several id lists."""
        tgt = calls.target(tokenizer, model, self.default_tokenizer)
        return self._run(calls.decode("batch", [list(ids) for ids in batch], tgt, skip_special_tokens))
