"""The work behind ``POST /price``: a request's usage (or the provider's response) in, its price out (the priced
``model`` block of /count and /encode is :func:`app.api.ops.common.model_block`)."""

from __future__ import annotations

import time
from collections.abc import MutableMapping

import orjson

from app.pricing.pricer import PricingError, make_usage

from ..deps import ServiceState
from ..errors import ApiError
from ..price_schemas import PriceRequest
from .common import OpResult, parse, pricing_error


def price(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """``POST /price``: see :class:`~app.api.price_schemas.PriceRequest`."""
    start = time.perf_counter()
    req = parse(PriceRequest, body)
    pricer = svc.prices
    if pricer is None:
        raise ApiError(503, "not_ready", "no price data loaded")
    parsed = time.perf_counter()
    try:
        model_ref = req.model
        if req.response is not None:
            assert req.provider is not None
            found, usage = pricer.extract(req.response, req.provider, req.api_flavor)
            model_ref = model_ref or found
            if model_ref is None:
                raise PricingError("bad_response", "the response names no model; give 'model'")
        else:
            usage = make_usage(req.usage or {})
        assert model_ref is not None
        provider, model = pricer.resolve(model_ref, req.provider)
        quote = pricer.quote(provider, model, usage, timestamp=req.timestamp, service_tier=req.service_tier,
                             price_context=req.price_context)
    except PricingError as exc:
        raise pricing_error(exc) from None
    out = quote.as_dict()
    out["usage"] = {k: v for k, v in vars(usage).items() if not k.startswith("_")}
    out["price_data"] = pricer.data.provenance.as_dict()
    priced = time.perf_counter()
    payload = orjson.dumps(out, default=str)
    return OpResult(payload, "", 0, 0, {"parse": parsed - start, "price": priced - parsed,
                                        "serialize": time.perf_counter() - priced})
