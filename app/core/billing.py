"""The ``model`` block of /count and /encode (and the CLI's ``count --model``): context window, whether the prompt
fits with the output reserved, and the price of each counted prompt as one request, from genai-prices.

Each text (each item of a batch) is one request: ``input_tokens`` = its count, ``cache_read_tokens`` = the
caller's ``cached_tokens`` (at most the count), ``output_tokens`` = ``max_output_tokens`` or the model's maximum
(the worst case); the tier is chosen from the counted prompt size, as the provider bills it. The calculation is
:func:`app.pricing.quote.price_usage`, the one behind ``POST /price``. Amounts are exact decimal strings
(:mod:`app.pricing.money`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson
from genai_prices import Usage
from genai_prices.types import ModelInfo as PricedModel
from genai_prices.types import Provider

from app.core.config import Settings
from app.core.model_table import ModelInfo
from app.pricing.data import load_price_data
from app.pricing.money import money
from app.pricing.periods import EARLIEST, LATEST
from app.pricing.pricer import Pricer, PricingError
from app.pricing.quote import Quote


def load_pricer(settings: Settings | None = None) -> Pricer:
    """A :class:`Pricer` on ``settings.price_data_file`` (default: the ``TOKENIZER_*`` environment), else the
    bundled data; :class:`~app.pricing.data.PriceDataError` names a bad file."""
    settings = settings or Settings.from_env()
    return Pricer(load_price_data(settings.price_data_file))


@dataclass(frozen=True)
class PriceTarget:
    """Where a table model's price comes from: a provider and its model, or the reason there is none."""

    provider: Provider | None
    model: PricedModel | None
    reason: str | None = None


def price_target(pricer: Pricer | None, info: ModelInfo, provider: str | None = None,
                 requested: str | None = None) -> PriceTarget:
    """The provider and model whose price applies to ``info`` (reached as ``requested``, a dated snapshot name
    say). Names tried: the table's ``pricing.model`` if set (with a requested ``provider``, then also the requested
    and the table name), else the requested name, then the table name. Where: ``provider`` if the request names
    one (the model must be priced there: :class:`PricingError` otherwise), else the table's ``pricing.provider``,
    else wherever genai-prices' model matching finds it; ``provider`` may also be ``"provider:model"`` (that
    provider's own model id, genai-prices' notation). No price: a target with the reason."""
    if pricer is None:
        return PriceTarget(None, None, "no price data loaded")
    if provider is not None and ":" in provider:  # "provider:model", genai-prices' own notation
        provider, _, model_ref = provider.partition(":")
        p, m = pricer.resolve(model_ref, provider)
        return PriceTarget(p, m)
    names: tuple[str | None, ...] = (requested, info.name)
    if info.pricing_model and provider is None:
        names = (info.pricing_model,)
    elif info.pricing_model:
        names = (info.pricing_model, *names)
    refs = list(dict.fromkeys(r for r in names if r))
    where = provider if provider is not None else info.pricing_provider
    error: PricingError | None = None
    for ref in refs:
        try:
            p, m = pricer.resolve(ref, where)
            return PriceTarget(p, m)
        except PricingError as exc:
            error = error or exc
    assert error is not None
    if provider is not None or error.kind == "unknown_provider":
        raise error
    version = pricer.data.provenance.version
    if info.pricing_provider is not None:
        return PriceTarget(None, None, f"{version}: {error}")
    return PriceTarget(None, None, f"{version} has no price for {refs[0]!r} and the model table names no provider "
                                   "whose price applies")


def _per_million(quote: Quote, usage_key: str) -> str | None:
    line = next((ln for ln in quote.lines if ln.usage_key == usage_key), None)
    if line is None:
        return None
    hit = _PER_MILLION.get((id(line.rate), line.per))
    if hit is None or hit[0] is not line.rate:
        if len(_PER_MILLION) >= 4096:
            _PER_MILLION.clear()
        hit = _PER_MILLION[(id(line.rate), line.per)] = (
            line.rate, money(line.rate * Decimal(1_000_000) / Decimal(line.per)))
    return hit[1]


#: A rate (a Decimal of the price data, kept to check the identity) per its unit -> its price per million, written.
_PER_MILLION: dict[tuple[int, int], tuple[Decimal, str]] = {}


def model_block(info: ModelInfo, counts: Sequence[int], batch: bool, pricer: Pricer | None, *,
                max_output_tokens: int | None = None, cached_tokens: int | None = None,
                provider: str | None = None, service_tier: str | None = None,
                requested: str | None = None) -> dict[str, Any]:
    """The ``model`` block (see the module docstring); ``requested`` is the model name as the caller wrote it.
    Raises :class:`PricingError` for a requested provider or service tier the price data lacks, or
    ``cached_tokens`` above a text's count (``bad_usage``). A single text at the standard prices is
    :func:`single_block` (memoised)."""
    if not batch and service_tier is None and pricer is not None and len(counts) == 1:
        return dict(single_block(info, counts[0], pricer, max_output_tokens=max_output_tokens,
                                 cached_tokens=cached_tokens, provider=provider, requested=requested).fields)
    return _model_block(info, counts, batch, pricer, max_output_tokens, cached_tokens, provider, service_tier,
                        requested)


@dataclass(eq=False)
class SingleBlock:
    """A memoised ``model`` block of one text at the standard prices: its ``fields`` (shared: do not modify) and
    their JSON (``orjson.dumps(fields)``), valid while the clock is in ``[since, until)`` (POSIX seconds: the
    period of the price set it was computed with; unbounded without a price). ``served`` is the caller's to keep
    what it derives from the block once (the web layer: the JSON fragment and the billing counter updates); it
    lives and dies with the memo entry."""

    info: ModelInfo
    pricer: Pricer
    fields: dict[str, Any]
    json: bytes
    since: float
    until: float
    served: Any = None


#: Memoised single-text blocks (see :func:`single_block`).
_SINGLE: dict[tuple[Any, ...], SingleBlock] = {}
#: Most entries of :data:`_SINGLE` (emptied when full).
SINGLE_CACHE = 4096


def _posix(moment: datetime) -> float:
    return float("-inf") if moment == EARLIEST else float("inf") if moment == LATEST else moment.timestamp()


def single_block(info: ModelInfo, count: int, pricer: Pricer, *, max_output_tokens: int | None = None,
                 cached_tokens: int | None = None, provider: str | None = None,
                 requested: str | None = None) -> SingleBlock:
    """The ``model`` block of one text of ``count`` tokens at the model's standard prices (no service tier), as
    :func:`model_block` computes it, memoised: the same model, names, count, cached and reserved tokens give the
    same block until the price period it was computed in ends (:meth:`Pricer.prices_at`: a dated or time-of-day
    price change applies from its first instant). Raises as :func:`model_block` does."""
    key = (id(pricer), id(info), provider, requested, count, cached_tokens, max_output_tokens)
    hit = _SINGLE.get(key)
    if hit is not None and hit.info is info and hit.pricer is pricer and hit.since <= time.time() < hit.until:
        return hit
    now = datetime.now(tz=UTC)
    target = price_target(pricer, info, provider, requested)
    fields = _model_block(info, [count], False, pricer, max_output_tokens, cached_tokens, provider, None,
                          requested, now, target)
    since, until = float("-inf"), float("inf")
    if target.model is not None and target.provider is not None:
        period = pricer.prices_at(target.provider, target.model, now)
        since, until = _posix(period.start), _posix(period.end)
    block = SingleBlock(info, pricer, fields, orjson.dumps(fields), since, until)
    if len(_SINGLE) >= SINGLE_CACHE:
        _SINGLE.clear()
    _SINGLE[key] = block
    return block


def _model_block(info: ModelInfo, counts: Sequence[int], batch: bool, pricer: Pricer | None,
                 max_output_tokens: int | None, cached_tokens: int | None, provider: str | None,
                 service_tier: str | None, requested: str | None, when: datetime | None = None,
                 target: PriceTarget | None = None) -> dict[str, Any]:
    if target is None:
        target = price_target(pricer, info, provider, requested)
    window = info.context_window
    if window is None and target.model is not None:
        window = target.model.context_window
    reserved = max_output_tokens if max_output_tokens is not None else info.max_output_tokens
    cached = cached_tokens or 0
    if cached and any(cached > c for c in counts):
        raise PricingError("bad_usage", f"cached_tokens {cached} exceeds the counted prompt "
                           f"({min(counts)} tokens)", {"cached_tokens": cached, "count": min(counts)})
    each = [c + (reserved or 0) <= window for c in counts] if window is not None else None
    block: dict[str, Any] = {
        "name": info.name, "context_window": window, "max_output_tokens": info.max_output_tokens,
        "fits": all(each) if each is not None else None,
    }
    if batch:
        block["fits_each"] = each
    block.update(output_tokens_reserved=reserved, cached_tokens=cached, currency="USD",
                 input_price_per_million=None, cached_input_price_per_million=None,
                 output_price_per_million=None, estimated_input_cost=None, estimated_output_cost=None,
                 estimated_total_cost=None, price_source=None, price_as_of=None, price=None)
    if target.provider is None or target.model is None or pricer is None:
        block["price_unavailable"] = target.reason
        return block
    quotes: dict[int, Quote] = {}
    for c in counts:
        if c not in quotes:
            usage = Usage(input_tokens=c, cache_read_tokens=cached, output_tokens=reserved or 0)
            quotes[c] = pricer.quote(target.provider, target.model, usage, timestamp=when,
                                     service_tier=service_tier, reuse=True)
    if not batch:
        key = (quotes[counts[0]], reserved is not None)
        section = _SECTIONS.get(id(key[0]))
        if section is None or section[0] is not key[0] or section[1] != key[1]:
            section = (*key, _priced(pricer, target, counts, [quotes[counts[0]]], cached, reserved, service_tier,
                                     batch))
            if len(_SECTIONS) >= 4096:
                _SECTIONS.clear()
            _SECTIONS[id(key[0])] = section
        block.update(section[2])
        return block
    block.update(_priced(pricer, target, counts, [quotes[c] for c in counts], cached, reserved, service_tier, batch))
    return block


#: Priced fields of single-text blocks by quote (the quote object is kept to check the identity).
_SECTIONS: dict[int, tuple[Quote, bool, dict[str, Any]]] = {}


def _priced(pricer: Pricer, target: PriceTarget, counts: Sequence[int], per_text: list[Quote], cached: int,
            reserved: int | None, service_tier: str | None, batch: bool) -> dict[str, Any]:
    """The priced fields of a block (see :func:`model_block`)."""
    assert target.provider is not None and target.model is not None
    first = per_text[0]
    breakdown: dict[str, Decimal] = {}
    for q in per_text:
        for kind, amount in q.breakdown().items():
            breakdown[kind] = breakdown.get(kind, Decimal(0)) + amount
    input_cost = sum((q.input_total for q in per_text), Decimal(0))
    output_cost = sum((q.output_total for q in per_text), Decimal(0))
    total = sum((q.total for q in per_text), Decimal(0))
    tiers = [q.tier.as_dict() if q.tier is not None else None for q in per_text]
    version = pricer.data.provenance.version
    return dict(
        input_price_per_million=_per_million(first, "input_tokens"),
        cached_input_price_per_million=_per_million(first, "cache_read_tokens"),
        output_price_per_million=_per_million(first, "output_tokens"),
        estimated_input_cost=money(input_cost),
        estimated_output_cost=money(output_cost) if reserved is not None else None,
        estimated_total_cost=money(total) if reserved is not None else None,
        price_source=f"genai-prices: {target.provider.id} {target.model.id}",
        price_as_of=version,
        price={
            "provider": target.provider.id, "model": target.model.id, "requests": len(counts),
            "input_tokens": sum(counts), "cache_read_tokens": cached * len(counts),
            "output_tokens": (reserved or 0) * len(counts), "output_priced": reserved is not None,
            "breakdown": {k: money(v) for k, v in breakdown.items()}, "total": money(total),
            "tier": tiers if batch else tiers[0], "service_tier": service_tier, "data_version": version,
        },
    )


def quotes_by_kind(block: dict[str, Any]) -> dict[str, tuple[int, Decimal]]:
    """(tokens, cost) per metrics kind (input, cached, output) of a filled ``model`` block; empty without a price."""
    price = block.get("price")
    if not price:
        return {}
    b = price["breakdown"]
    cache_write = sum((Decimal(v) for k, v in b.items() if k.startswith("cache_write")), Decimal(0))
    return {
        "input": (price["input_tokens"] - price["cache_read_tokens"], Decimal(b.get("input", "0")) + cache_write),
        "cached": (price["cache_read_tokens"], Decimal(b.get("cache_read", "0"))),
        "output": (price["output_tokens"], Decimal(b.get("output", "0"))),
    }
