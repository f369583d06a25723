"""``GET /models``, the vLLM-compatible ``POST /tokenize`` and ``POST /detokenize``, and TEI's ``POST /tokenize``
and ``POST /decode`` under ``/tei/{model}/``.

``messages`` on ``/count`` and ``/encode`` live with those routes (:mod:`app.api.ops.chat` does the work).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..deps import ServiceState, get_service
from ..ops import chat as chat_ops
from ..ops import compat as compat_ops
from ..schemas import ErrorResponse
from .tokenize import ERRORS, body_schema, run_op

router = APIRouter(tags=["chat"])

TEI_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS, 404: {"model": ErrorResponse, "description": "no such model or tokenizer in the URL"}}


@router.get("/models", summary="Models: tokenizer, context window, prices, chat support")
async def list_models(request: Request) -> dict[str, Any]:
    """Every model name of the model table (aliases included) with its tokenizer, context window, maximum output,
    prices (with source and date; cached-input price where the provider has one) and whether ``messages`` work."""
    return chat_ops.models_list(get_service(request))


@router.post("/tokenize", responses=ERRORS, openapi_extra=body_schema("TokenizeRequest"), tags=["compatibility"],
             summary="vLLM- and llama.cpp-compatible tokenize")
async def tokenize(request: Request) -> Response:
    """``{count, max_model_len, tokens[, token_strs]}`` as vLLM answers, with vLLM's options honoured
    (``chat_template_kwargs``, ``continue_final_message``, ``add_generation_prompt``, ``add_special_tokens``,
    ``tools``, ``return_token_strs``; ``model`` optional with a default model). A caller's ``chat_template`` is a
    422 unless the operator allows it; any other field this service cannot honour is a 422 naming it.

    Differences from vLLM: text is always ordinary text. vLLM parses special-token strings in ``prompt`` and turns
    role-marker look-alikes typed in ``messages`` into control tokens; here they stay text (the chat framing alone
    adds control tokens). ``token_strs`` are each token's text (base64 of its bytes when not valid UTF-8 on their
    own), not vocabulary strings such as ``Ġworld``.

    A body with ``content`` (and neither ``prompt`` nor ``messages``) is llama.cpp's ``/tokenize``: ``content``,
    ``add_special``, ``with_pieces`` answered as llama.cpp answers (``{"tokens": ids | [{id, piece}]}``). Unlike
    llama.cpp, whose ``parse_special`` defaults to true, special-token strings in ``content`` stay text
    (``parse_special: true`` is a 422)."""
    return await run_op(request, compat_ops.tokenize_either, "/tokenize")


@router.post("/detokenize", responses=ERRORS, openapi_extra=body_schema("DetokenizeRequest"), tags=["compatibility"],
             summary="vLLM- and llama.cpp-compatible detokenize")
async def detokenize(request: Request) -> Response:
    """The text of ``tokens`` as ``{"prompt": text, "content": text}``: vLLM clients read ``prompt``, llama.cpp
    clients ``content`` (both send ``{tokens}``). ``model`` is optional with a default model."""
    return await run_op(request, compat_ops.detokenize, "/detokenize")


@router.post("/tei/{model}/tokenize", responses=TEI_ERRORS, openapi_extra=body_schema("TeiTokenizeRequest"),
             tags=["compatibility"], summary="TEI-compatible tokenize (base URL /tei/MODEL)")
async def tei_tokenize(model: str, request: Request) -> Response:
    """``[[{id, text, special, start, stop}]]`` with UTF-8 byte offsets, as TEI answers; ``model`` is a model or
    tokenizer name. Unlike TEI, special-token strings in ``inputs`` stay text."""

    def op(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> Any:
        return compat_ops.tei_tokenize(svc, model, body, labels)

    return await run_op(request, op, "/tei/tokenize")


@router.post("/tei/{model}/decode", responses=TEI_ERRORS, openapi_extra=body_schema("TeiDecodeRequest"),
             tags=["compatibility"], summary="TEI-compatible decode")
async def tei_decode(model: str, request: Request) -> Response:
    """A list with the text of ``ids`` (or of each list of ids)."""

    def op(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> Any:
        return compat_ops.tei_decode(svc, model, body, labels)

    return await run_op(request, op, "/tei/decode")
