"""``GET /healthz`` (the process answers), ``GET /readyz`` (every artifact loaded and verified), ``GET /metrics``."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response

from .. import metrics
from ..deps import get_service
from ..schemas import ErrorResponse, Health, Ready

router = APIRouter(tags=["operations"])


# One route per path with both methods, so a 405 lists both in ``Allow`` (the OpenAPI document keeps GET only).
@router.api_route("/healthz", methods=["GET", "HEAD"], response_model=Health, summary="Liveness")
async def healthz() -> dict[str, Any]:
    """200 whenever the process can answer."""
    return {"status": "ok"}


@router.api_route("/readyz", methods=["GET", "HEAD"], response_model=Ready, summary="Readiness",
            responses={503: {"model": ErrorResponse, "description": "still starting or stopping"}})
async def readyz(request: Request) -> dict[str, Any]:
    """200 once every tokenizer's artifact is sha256-verified and (``TOKENIZER_LOAD=eager``) loaded; 503 before that
    and while stopping."""
    svc = get_service(request)
    return {"status": "ready", "tokenizers": list(svc.tokenizers)}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text exposition format"}})
async def prometheus_metrics(request: Request) -> Response:
    """Prometheus exposition of the whole service (all workers in multiprocess mode)."""
    svc = get_service(request)
    data = await anyio.to_thread.run_sync(metrics.render, svc.tokenizers.loaded())
    return Response(data, media_type=metrics.CONTENT_TYPE)
