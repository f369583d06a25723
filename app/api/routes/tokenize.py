"""``POST /encode``, ``POST /count``, ``POST /decode``.

The handlers only move bytes: parsing, validation, tokenization and serialization run in one call of
:mod:`app.api.ops`, on a worker thread unless the body is tiny (``TOKENIZER_INLINE_BYTES``). Bodies from
``TOKENIZER_BULK_BYTES`` up use a separate, smaller thread pool, so a 10 MB request never makes small ones wait
for a thread.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response

from .. import metrics, ops
from ..deps import ServiceState, get_service
from ..middleware import LABELS_KEY
from ..schemas import (
    CountBatchResponse,
    CountResponse,
    DecodeBatchResponse,
    DecodeResponse,
    EncodeBatchResponse,
    EncodeResponse,
    ErrorResponse,
)

router = APIRouter(tags=["tokenize"])

Op = Callable[[ServiceState, bytes, MutableMapping[str, str]], ops.OpResult]

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in {
        400: "malformed JSON",
        401: "missing or wrong bearer token (when auth is on)",
        413: "body, batch, ids or text over a limit",
        415: "Content-Type is not JSON",
        422: "wrong types or shape, unknown tokenizer/model/special token, lone surrogates, ids out of range",
    }.items()
}


def body_schema(model: str) -> dict[str, Any]:
    """``openapi_extra`` for a JSON body documented by a component schema (bodies are parsed off the loop)."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{model}"}}}}}


async def run_op(request: Request, op: Op, endpoint: str) -> Response:
    """Run ``op`` on the request body (inline, on the normal pool or on the bulk pool) and build the response."""
    svc = get_service(request)
    body = await request.body()
    labels: MutableMapping[str, str] = request.scope.setdefault(LABELS_KEY, {"tokenizer": ""})
    settings = svc.settings
    if len(body) <= settings.inline_bytes:
        result = op(svc, body, labels)
    else:
        limiter = svc.bulk_limiter if len(body) >= settings.bulk_bytes else svc.limiter
        result = await anyio.to_thread.run_sync(op, svc, body, labels, limiter=limiter)
    metrics.observe_work(endpoint, result.tokenizer, result.timings.get("tokenize", 0.0), result.tokens,
                         result.input_bytes)
    return Response(result.body, media_type="application/json", headers={"Server-Timing": result.server_timing()})


@router.post("/encode", response_model=EncodeResponse | EncodeBatchResponse, responses=ERRORS,
             openapi_extra=body_schema("EncodeRequest"), summary="Token ids of a text, a batch of texts, or parts")
async def encode(request: Request) -> Response:
    """Ids of ``text`` (-> ``ids``, ``count``), ``texts`` (-> ``results``, ``total``) or ``parts``.

    Text is always ordinary text: special tokens only via ``special_tokens`` or ``parts[].special``.
    With ``model``, the response has a ``model`` block: context window, whether it fits, estimated input cost.
    """
    return await run_op(request, ops.encode, "/encode")


@router.post("/count", response_model=CountResponse | CountBatchResponse, responses=ERRORS,
             openapi_extra=body_schema("CountRequest"), summary="Number of tokens")
async def count(request: Request) -> Response:
    """Like /encode without the ids: ``count`` (or ``counts`` and ``total`` for ``texts``)."""
    return await run_op(request, ops.count, "/count")


@router.post("/decode", response_model=DecodeResponse | DecodeBatchResponse, responses=ERRORS,
             openapi_extra=body_schema("DecodeRequest"), summary="Text of token ids")
async def decode(request: Request) -> Response:
    """Text of ``ids`` (or ``texts`` of ``batch``); invalid UTF-8 becomes U+FFFD. An id outside the vocabulary
    is a 422 naming the first such id and its position."""
    return await run_op(request, ops.decode, "/decode")
