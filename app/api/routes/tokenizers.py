"""``GET /tokenizers`` and ``GET /tokenizers/{name}``: what the store holds."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app.engine import Tokenizer

from ..deps import ServiceState, get_service
from ..errors import ApiError
from ..schemas import ErrorResponse, TokenizerDetail, TokenizerList

router = APIRouter(tags=["tokenizers"])


def _summary(svc: ServiceState, enc: Tokenizer) -> dict[str, Any]:
    spec = enc.spec
    return {
        "name": enc.name,
        "aliases": list(spec.aliases) if spec else [],
        "kind": spec.kind if spec else "byte_bpe",
        "backend": enc.backend,
        "vocab_size": enc.n_vocab,
        "special_tokens_count": len(enc.special_tokens),
        "sha256": spec.sha256 if spec else "",
        "source": spec.source if spec else "",
        "license": spec.license if spec else "",
        "reference": spec.reference if spec else "",
        "models": svc.models_of(enc.name),
        "description": spec.description if spec else "",
    }


@router.get("/tokenizers", response_model=TokenizerList, summary="List tokenizers")
async def list_tokenizers(request: Request) -> dict[str, Any]:
    """Every tokenizer of the store, in manifest order, with its artifact's sha256."""
    svc = get_service(request)
    return {"tokenizers": [_summary(svc, enc) for enc in svc.encodings.values()]}


@router.get("/tokenizers/{name}", response_model=TokenizerDetail, summary="One tokenizer",
            responses={404: {"model": ErrorResponse, "description": "no such tokenizer"}})
async def get_tokenizer(name: str, request: Request) -> dict[str, Any]:
    """One tokenizer by name or alias, with its special tokens (string -> id) and pre-tokenizer pattern."""
    svc = get_service(request)
    try:
        enc = svc.encoding(name)
    except KeyError:
        known = svc.store.known_names()
        shown = name if len(name) <= 256 else name[:256] + "..."
        raise ApiError(404, "unknown_tokenizer", f"unknown tokenizer {shown!r}; known tokenizers: {', '.join(known)}",
                       {"name": shown, "known": known}) from None
    return {**_summary(svc, enc), "special_tokens": enc.special_tokens, "added_tokens": enc.added_tokens,
            "template": enc.template.describe(), "pattern": enc.pattern}
