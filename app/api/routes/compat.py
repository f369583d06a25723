"""More inference-server shapes: vLLM's ``GET /tokenizer_info`` (:mod:`app.api.compat_ops` does the work)."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Request

from .. import compat_ops
from ..deps import get_service
from ..schemas import ErrorResponse

router = APIRouter(tags=["compatibility"])


@router.get("/tokenizer_info", summary="vLLM-compatible tokenizer configuration",
            responses={422: {"model": ErrorResponse, "description": "unknown model, or none given and no default"}})
async def tokenizer_info(request: Request, model: str | None = None) -> dict[str, Any]:
    """The model's tokenizer configuration in ``tokenizer_config.json`` keys, as vLLM's ``GET /tokenizer_info``
    answers (``tokenizer_class``, ``model_max_length``, ``bos_token``/``eos_token``…, ``chat_template``,
    ``added_tokens_decoder``). vLLM serves one model: here ``?model=`` picks one, else the default model
    (``TOKENIZER_DEFAULT_MODEL``). ``tokenizer_class`` names this service's tokenizer family."""
    svc = get_service(request)
    return await anyio.to_thread.run_sync(compat_ops.tokenizer_info, svc, model)
