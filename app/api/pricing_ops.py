"""The priced ``model`` block of /count and /encode (``POST /price`` is :mod:`app.api.price_ops`).

Pricing errors (:class:`~app.pricing.pricer.PricingError`) become 422s with the same ``type`` (``unknown_model``,
``unknown_provider``, ``unknown_service_tier``, ``bad_usage``, ``bad_response``) and the closest names in the
details. The ``model`` block also feeds the billing counters (:func:`app.api.metrics.observe_billing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from app.core.billing import model_block as build_block
from app.core.billing import price_target, quotes_by_kind
from app.core.model_table import ModelInfo
from app.pricing.money import money
from app.pricing.pricer import Pricer, PricingError
from app.pricing.quote import UNITS_BY_PRICE_KEY

from . import metrics
from .deps import ServiceState
from .errors import ApiError


def pricing_error(exc: PricingError) -> ApiError:
    """The 422 of a pricing error."""
    return ApiError(422, exc.kind, str(exc), exc.details or None)


def model_block(svc: ServiceState, info: ModelInfo, counts: Sequence[int], batch: bool, req: Any) -> dict[str, Any]:
    """The ``model`` block of a /count or /encode request (``req`` carries model, max_output_tokens, cached_tokens,
    provider, service_tier); 422 for a provider, service tier or cached_tokens the price data cannot take."""
    try:
        block = build_block(info, counts, batch, svc.prices, max_output_tokens=req.max_output_tokens,
                            cached_tokens=getattr(req, "cached_tokens", None),
                            provider=getattr(req, "provider", None), service_tier=getattr(req, "service_tier", None),
                            requested=req.model)
    except PricingError as exc:
        raise pricing_error(exc) from None
    price = block.get("price")
    if price:
        kinds = _KINDS.get(id(price))
        if kinds is None or kinds[0] is not price:
            if len(_KINDS) >= 4096:
                _KINDS.clear()
            by_kind = [(k, tokens, float(cost)) for k, (tokens, cost) in quotes_by_kind(block).items()]
            kinds = _KINDS[id(price)] = (price, metrics.billing_updates(price["model"], by_kind))
        metrics.observe_billing(kinds[1])
    return block


#: The billing counter updates of a (memoised) ``price`` dict, kept with the dict to check its identity.
_KINDS: dict[int, tuple[dict[str, Any], tuple[tuple[Any, float], ...]]] = {}


def model_price(pricer: Pricer | None, info: ModelInfo, name: str) -> dict[str, Any]:
    """A table model's price for ``GET /models``: provider and model priced, the current standard rates per
    million tokens (exact decimal strings; ``tiered`` when a rate changes past a prompt size) and the service tiers
    the data has for it; or ``{"available": false, "reason": ...}``."""
    target = price_target(pricer, info, None, name)
    if target.provider is None or target.model is None:
        return {"available": False, "reason": target.reason}
    prices = target.model.get_prices(datetime.now(tz=UTC))
    rates: dict[str, str] = {}
    tiered = False
    for key, value in vars(prices).items():
        unit = UNITS_BY_PRICE_KEY.get(key)
        if unit is None or value is None or unit.per != 1_000_000:
            continue
        base = getattr(value, "base", value)
        tiered = tiered or base is not value
        rates[f"{unit.usage_key.removesuffix('_tokens')}_per_million"] = money(base)
    own = any(target.model is m for m in target.provider.models)
    variants = target.model.price_variants or [] if own else []
    tiers = sorted({f"{k}={v}" for pv in variants for k, v in pv.when.items()})
    return {"available": True, "provider": target.provider.id, "model": target.model.id, "currency": "USD",
            **rates, "tiered": tiered, "price_variants": tiers,
            "source": "table" if info.pricing_provider else "name"}
