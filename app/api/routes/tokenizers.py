"""``GET /tokenizers`` and ``GET /tokenizers/{name}``: what the store holds."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app.engine import Tokenizer

from ..deps import ServiceState, get_service
from ..errors import ApiError
from ..schemas import ErrorResponse, TokenizerDetail, TokenizerList

router = APIRouter(tags=["tokenizers"])


def _summary(svc: ServiceState, tokenizer: Tokenizer) -> dict[str, Any]:
    spec = tokenizer.spec
    return {
        "name": tokenizer.name,
        "aliases": list(spec.aliases) if spec else [],
        "kind": spec.kind if spec else "byte_bpe",
        "backend": tokenizer.backend,
        "vocab_size": tokenizer.n_vocab,
        "special_tokens_count": len(tokenizer.special_tokens),
        "sha256": spec.sha256 if spec else "",
        "source": spec.source if spec else "",
        "license": spec.license if spec else "",
        "reference": spec.reference if spec else "",
        "models": svc.models_of(tokenizer.name),
        "description": spec.description if spec else "",
    }


@router.get("/tokenizers", response_model=TokenizerList, summary="List tokenizers")
async def list_tokenizers(request: Request) -> dict[str, Any]:
    """Every tokenizer of the store, in manifest order, with its artifact's sha256."""
    svc = get_service(request)
    return {"tokenizers": [_summary(svc, tokenizer) for tokenizer in svc.tokenizers.values()]}


@router.get("/tokenizers/{name}", response_model=TokenizerDetail, summary="One tokenizer",
            responses={404: {"model": ErrorResponse, "description": "no such tokenizer"}})
async def get_tokenizer(name: str, request: Request) -> dict[str, Any]:
    """One tokenizer by name or alias, with its special tokens (string -> id) and pre-tokenizer pattern."""
    svc = get_service(request)
    try:
        tokenizer = svc.tokenizer(name)
    except KeyError:
        known = svc.store.known_names()
        shown = name if len(name) <= 256 else name[:256] + "..."
        raise ApiError(404, "unknown_tokenizer", f"unknown tokenizer {shown!r}; known tokenizers: {', '.join(known)}",
                       {"name": shown, "known": known}) from None
    return {**_summary(svc, tokenizer), "special_tokens": tokenizer.special_tokens,
            "added_tokens": tokenizer.added_tokens, "template": tokenizer.template.describe(),
            "pattern": tokenizer.pattern}
