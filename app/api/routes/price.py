"""``POST /price``: the price of one request from its usage or the provider's own response (genai-prices)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..ops import price as price_ops
from ..price_schemas import PriceResponse
from .tokenize import ERRORS, body_schema, run_op

router = APIRouter(tags=["pricing"])


@router.post("/price", response_model=PriceResponse, responses=ERRORS, openapi_extra=body_schema("PriceRequest"),
             summary="Price of one request from its usage (genai-prices)")
async def price(request: Request) -> Response:
    """``total`` and a breakdown (input, cache read, cache write 5-minute/1-hour, output with reasoning), the tier
    applied and why, the service tier, at the prices in force at ``timestamp``. Amounts are exact decimal strings.
    An unknown model or provider is a 422 naming the closest matches."""
    return await run_op(request, price_ops.price, "/price")
