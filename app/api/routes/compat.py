"""More inference-server shapes: vLLM's ``GET /tokenizer_info``, llama.cpp's ``POST /apply-template`` and the
LiteLLM proxy's ``POST /utils/token_counter`` (:mod:`app.api.ops.compat`, :mod:`app.api.ops.llamacpp` and
:mod:`app.api.ops.litellm` do the work; llama.cpp's ``/tokenize`` and ``/detokenize`` share vLLM's routes)."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..deps import get_service
from ..ops import compat as compat_ops
from ..ops import litellm as litellm_ops
from ..ops import llamacpp as llamacpp_ops
from ..schemas import ErrorResponse
from .tokenize import ERRORS, run_op

router = APIRouter(tags=["compatibility"])


def inline_body(model: type[Any]) -> dict[str, Any]:
    """``openapi_extra`` for a JSON body described inline by a flat request model."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": model.model_json_schema()}}}}


@router.get("/tokenizer_info", summary="vLLM-compatible tokenizer configuration",
            responses={422: {"model": ErrorResponse, "description": "unknown model, or none given and no default"}})
async def tokenizer_info(request: Request, model: str | None = None) -> dict[str, Any]:
    """The model's tokenizer configuration in ``tokenizer_config.json`` keys, as vLLM's ``GET /tokenizer_info``
    answers (``tokenizer_class``, ``model_max_length``, ``bos_token``/``eos_token``…, ``chat_template``,
    ``added_tokens_decoder``). vLLM serves one model: here ``?model=`` picks one, else the default model
    (``TOKENIZER_DEFAULT_MODEL``). ``tokenizer_class`` names this service's tokenizer family."""
    svc = get_service(request)
    return await anyio.to_thread.run_sync(compat_ops.tokenizer_info, svc, model)


@router.post("/apply-template", responses=ERRORS, summary="llama.cpp-compatible apply-template",
             openapi_extra=inline_body(llamacpp_ops.LlamaCppApplyTemplateRequest))
async def apply_template(request: Request) -> Response:
    """``{"prompt": text}``: the model's framed prompt for ``messages`` (``tools``, ``add_generation_prompt``,
    ``chat_template_kwargs``) as one string, as llama.cpp's ``POST /apply-template`` answers. ``model`` (this
    service's extension) else the default model. The string holds the framing's special tokens as text: llama.cpp's
    ``/tokenize`` (``parse_special`` on by default) would also turn role markers typed in the messages into control
    tokens; ``POST /count`` with the same ``messages`` counts them as text."""
    return await run_op(request, llamacpp_ops.apply_template, "/apply-template")


@router.post("/utils/token_counter", responses=ERRORS, summary="LiteLLM-proxy-compatible token counter",
             openapi_extra=inline_body(litellm_ops.TokenCounterRequest))
async def token_counter(request: Request) -> Response:
    """``{total_tokens, request_model, model_used, tokenizer_type}`` as the LiteLLM proxy answers. ``prompt`` is
    ordinary text; ``messages`` are framed as the model frames them (LiteLLM applies OpenAI's per-message rule to
    every model). Special-token strings in either stay text."""
    return await run_op(request, litellm_ops.token_counter, "/utils/token_counter")
