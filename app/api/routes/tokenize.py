"""``POST /encode``, ``POST /count``, ``POST /decode``.

These routes document the endpoints (OpenAPI) and run them through :func:`app.api.dispatch.run`; in the app the
gateway reaches these paths first and calls that same function directly (see :mod:`app.api.dispatch`).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from .. import dispatch
from ..middleware import LABELS_KEY
from ..ops import encode as encode_ops
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


async def run_op(request: Request, op: dispatch.Op, endpoint: str) -> Response:
    """Run ``op`` on the request body through :func:`app.api.dispatch.run` (the gateway normally answers these
    paths itself, with the same function)."""
    labels: MutableMapping[str, str] = request.scope.setdefault(LABELS_KEY, {"tokenizer": ""})
    answer = await dispatch.run(getattr(request.app.state, "service", None), op, endpoint, await request.body(),
                                labels)
    return Response(answer.body, status_code=answer.status, headers={k.decode("latin-1"): v.decode("latin-1")
                                                                      for k, v in answer.headers},
                    media_type="application/json")


@router.post("/encode", response_model=EncodeResponse | EncodeBatchResponse, responses=ERRORS,
             openapi_extra=body_schema("EncodeRequest"), summary="Token ids of a text, a batch of texts, or parts")
async def encode(request: Request) -> Response:
    """Ids of ``text`` (-> ``ids``, ``count``), ``texts`` (-> ``results``, ``total``) or ``parts``.

    Text is always ordinary text: special tokens only via ``special_tokens`` or ``parts[].special``.
    With ``model``, the response has a ``model`` block: context window, whether it fits, estimated input cost.
    """
    return await run_op(request, encode_ops.encode, "/encode")


@router.post("/count", response_model=CountResponse | CountBatchResponse, responses=ERRORS,
             openapi_extra=body_schema("CountRequest"), summary="Number of tokens")
async def count(request: Request) -> Response:
    """Like /encode without the ids: ``count`` (or ``counts`` and ``total`` for ``texts``)."""
    return await run_op(request, encode_ops.count, "/count")


@router.post("/decode", response_model=DecodeResponse | DecodeBatchResponse, responses=ERRORS,
             openapi_extra=body_schema("DecodeRequest"), summary="Text of token ids")
async def decode(request: Request) -> Response:
    """Text of ``ids`` (or ``texts`` of ``batch``); invalid UTF-8 becomes U+FFFD. An id outside the vocabulary
    is a 422 naming the first such id and its position."""
    return await run_op(request, encode_ops.decode, "/decode")
