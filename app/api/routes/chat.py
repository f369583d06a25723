"""``GET /models`` and the vLLM-compatible ``POST /tokenize`` and ``POST /detokenize``.

``messages`` on ``/count`` and ``/encode`` live with those routes (:mod:`app.api.chat_ops` does the work).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from .. import chat_ops
from ..deps import get_service
from .tokenize import ERRORS, body_schema, run_op

router = APIRouter(tags=["chat"])


@router.get("/models", summary="Models: tokenizer, context window, prices, chat support")
async def list_models(request: Request) -> dict[str, Any]:
    """Every model name of the model table (aliases included) with its tokenizer, context window, maximum output,
    prices (with source and date; cached-input price where the provider has one) and whether ``messages`` work."""
    return chat_ops.models_list(get_service(request))


@router.post("/tokenize", responses=ERRORS, openapi_extra=body_schema("TokenizeRequest"),
             summary="vLLM-compatible tokenize (prompt or messages)")
async def tokenize(request: Request) -> Response:
    """``{count, max_model_len, tokens[, token_strs]}`` as vLLM answers. Unlike vLLM, ``prompt`` is always ordinary
    text: special-token strings in it are not parsed."""
    return await run_op(request, chat_ops.tokenize, "/tokenize")


@router.post("/detokenize", responses=ERRORS, openapi_extra=body_schema("DetokenizeRequest"),
             summary="vLLM-compatible detokenize")
async def detokenize(request: Request) -> Response:
    """``{"prompt": text}`` of ``tokens``."""
    return await run_op(request, chat_ops.detokenize, "/detokenize")
