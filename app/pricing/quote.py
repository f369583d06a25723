"""A price quote: genai-prices' calculation with its parts shown.

:func:`price_usage` is ``ModelPrice.calc_price`` of genai-prices (``genai_prices/types.py``) step for step, with
each priced unit kept as a :class:`Line`: the usage is decomposed into leaf counts (a cache read is not also an
input token; ``genai_prices.decompose.compute_leaf_values``), each unit is priced with genai-prices'
``calc_unit_price`` (tiers chosen by the request's total ``input_tokens``: past a threshold the whole request is
billed at that tier's rate), and the lines are summed in the same order, so the total is the one
``genai_prices.calc_price`` returns (the differential test checks this). The price set is the model's at the
request's timestamp, with the request's price context (service tier, batch) applied as genai-prices applies it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from copy import copy
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from genai_prices import Usage
from genai_prices.data_units import unit_data
from genai_prices.decompose import compute_leaf_values, is_descendant_or_self
from genai_prices.types import ModelInfo, ModelPrice, Provider, TieredPrices, calc_unit_price
from genai_prices.units import UnitDef, UnitRegistry
from genai_prices.validation import validate_priced_units

from .money import money

REGISTRY = UnitRegistry(unit_data)
UNITS_BY_PRICE_KEY: dict[str, UnitDef] = {u.price_key: u for u in REGISTRY.units.values()}
USAGE_KEYS: tuple[str, ...] = tuple(k for k in REGISTRY.units if k != "requests")

# The breakdown's groups, in display order.
KINDS = ("input", "cache_read", "cache_write", "cache_write_5m", "cache_write_1h", "output", "other")


def kind_of(unit: UnitDef) -> str:
    """The breakdown group of a priced unit: input, cache_read, cache_write[_5m|_1h], output (reasoning and
    every other output token included) or other (requests, tool calls, durations, pages...)."""
    dims = unit.dimensions
    if dims.get("family") != "tokens":
        return "other"
    if dims.get("direction") == "output":
        return "output"
    token_type = dims.get("token_type")
    if token_type == "cache_read":
        return "cache_read"
    if token_type == "cache_write":
        ttl = dims.get("cache_ttl")
        return f"cache_write_{ttl}" if ttl in ("5m", "1h") else "cache_write"
    return "input"


@dataclass(frozen=True)
class Line:
    """One priced unit: ``quantity`` units (after decomposition) x ``rate`` per ``per`` units = ``amount``."""

    usage_key: str
    price_key: str
    kind: str
    quantity: int | Decimal | float
    rate: Decimal
    per: int
    amount: Decimal
    tier_start: int | None  # the threshold of the tier whose rate applied, None for the base rate

    def as_dict(self) -> dict[str, Any]:
        q = self.quantity
        return {"unit": self.usage_key, "kind": self.kind, "quantity": q if isinstance(q, int) else money(Decimal(q)),
                "rate": money(self.rate), "per": self.per, "amount": money(self.amount),
                "tier_start": self.tier_start}


@dataclass(frozen=True)
class TierChoice:
    """Which tier applied: the request's ``input_tokens`` against the tier thresholds (a rate tier applies when
    the input is strictly above its start, as genai-prices and the providers bill)."""

    input_tokens: int | Decimal | float
    thresholds: tuple[int, ...]
    applied: int | None

    @property
    def reason(self) -> str:
        n = self.input_tokens
        if self.applied is None:
            return (f"input_tokens {n} <= {self.thresholds[0]}: base rates (the first tier applies above "
                    f"{self.thresholds[0]})")
        return (f"input_tokens {n} > {self.applied}: the whole request is billed at the rates of the tier above "
                f"{self.applied}")

    def as_dict(self) -> dict[str, Any]:
        n = self.input_tokens
        return {"basis": "input_tokens", "input_tokens": n if isinstance(n, int) else money(Decimal(n)),
                "thresholds": list(self.thresholds), "applied": self.applied, "reason": self.reason}


@dataclass(frozen=True)
class Quote:
    """The price of one usage at one provider and model, line by line."""

    provider: Provider
    model: ModelInfo
    timestamp: datetime
    lines: tuple[Line, ...]
    total: Decimal
    input_total: Decimal
    output_total: Decimal
    tier: TierChoice | None
    service_tier: str | None = None
    price_context: Mapping[str, str] = field(default_factory=dict)
    currency: str = "USD"

    def breakdown(self) -> dict[str, Decimal]:
        """Amount per group (:data:`KINDS`); input and output always, the cache groups where the model prices
        them, ``other`` when it is not zero."""
        out: dict[str, Decimal] = {"input": Decimal(0)}
        for line in self.lines:
            out[line.kind] = out.get(line.kind, Decimal(0)) + line.amount
        out.setdefault("output", Decimal(0))
        if not out.get("other", 1):
            del out["other"]
        return {k: out[k] for k in KINDS if k in out}

    def rate(self, usage_key: str) -> Decimal | None:
        """The rate applied to ``usage_key`` (per its unit), None if the model does not price it."""
        return next((line.rate for line in self.lines if line.usage_key == usage_key), None)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: amounts as exact decimal strings (see :mod:`app.pricing.money`)."""
        return {
            "provider": self.provider.id, "provider_name": self.provider.name,
            "model": self.model.id, "model_name": self.model.name, "currency": self.currency,
            "total": money(self.total),
            "breakdown": {k: money(v) for k, v in self.breakdown().items()},
            "input_total": money(self.input_total), "output_total": money(self.output_total),
            "lines": [line.as_dict() for line in self.lines],
            "tier": self.tier.as_dict() if self.tier is not None else None,
            "service_tier": self.service_tier,
            "price_context": dict(self.price_context),
            "timestamp": self.timestamp.isoformat(),
        }


def resolved_prices(model: ModelInfo, provider: Provider, timestamp: datetime,
                    context: Mapping[str, str] | None) -> ModelPrice:
    """The model's price set at ``timestamp`` with ``context`` applied, as ``ModelInfo.calc_price`` picks it (a
    model reached through another provider's fallback ignores the context)."""
    if context and not any(model is m for m in provider.models):
        return model.get_prices(timestamp)
    return model.get_prices(timestamp, context or None)


@dataclass(frozen=True)
class _Plan:
    """What a price set needs for every usage: its priced units (validated once), the leaf order and each
    unit's priced descendants (``compute_leaf_values``' own order and rule)."""

    resolved: tuple[tuple[UnitDef, Decimal | TieredPrices], ...]
    order: tuple[UnitDef, ...]
    descendants: dict[str, tuple[str, ...]]
    tiered: bool
    has_requests: bool
    # per priced unit, in ``resolved`` order: its price, usage key, price key, breakdown kind, direction, per
    lines: tuple[tuple[Decimal | TieredPrices, str, str, str, str | None, int], ...] = ()
    inferred: dict[frozenset[str], frozenset[str] | None] = field(default_factory=dict)


_PLANS: dict[tuple[tuple[str, int], ...], _Plan] = {}
_REPORTED = frozenset(USAGE_KEYS)


#: The plan of a price set object (kept in the entry, so its id is not reused while the entry lives): price sets
#: come from :meth:`app.pricing.pricer.Pricer.prices_at`, one object per price period.
_PLAN_OF: dict[int, tuple[ModelPrice, _Plan]] = {}


def _plan(prices: ModelPrice) -> _Plan:
    hit = _PLAN_OF.get(id(prices))
    if hit is not None and hit[0] is prices:
        return hit[1]
    plan = _plan_of(prices)
    if len(_PLAN_OF) >= 4096:
        _PLAN_OF.clear()
    _PLAN_OF[id(prices)] = (prices, plan)
    return plan


def _plan_of(prices: ModelPrice) -> _Plan:
    items = [(key, value) for key, value in vars(prices).items()
             if not key.startswith("_") and value is not None and key in UNITS_BY_PRICE_KEY]
    key = tuple((k, id(v)) for k, v in items)
    plan = _PLANS.get(key)
    if plan is None:
        resolved = tuple((UNITS_BY_PRICE_KEY[k], v) for k, v in items)
        validate_priced_units(tuple(unit for unit, _ in resolved), REGISTRY)
        units = [u for u, _ in resolved if u.usage_key != "requests"]
        order = tuple(sorted(units, key=lambda u: (-len(u.dimensions), u.usage_key)))
        desc = {u.usage_key: tuple(d.usage_key for d in order if d is not u and is_descendant_or_self(u, d))
                for u in order}
        plan = _Plan(resolved, order, desc, any(isinstance(v, TieredPrices) for _, v in resolved),
                     any(u.usage_key == "requests" for u, _ in resolved),
                     tuple((v, u.usage_key, u.price_key, kind_of(u), u.dimensions.get("direction"), u.per)
                           for u, v in resolved))
        if len(_PLANS) < 100_000:  # bounded by the price data's distinct price sets
            _PLANS[key] = plan
    return plan


def _fast_leaves(plan: _Plan, usage: Usage) -> dict[str, Any] | None:
    """Leaf counts for integer usage without genai-prices' per-read inference (the outcome of inferring an
    unreported unit depends only on which units are reported non-zero, so it is computed once per such set);
    None to take genai-prices' own path (non-integers, an inference error, a negative leaf: it raises)."""
    reported = {k: v for k, v in vars(usage).items() if k in _REPORTED}
    if not all(type(v) is int for v in reported.values()):
        return None
    positive = frozenset(k for k, v in reported.items() if v > 0)
    missing = plan.inferred.get(positive, ...)
    if missing is ...:
        probe = Usage(**{k: 1 for k in positive})
        try:
            for unit in plan.order:
                if unit.usage_key not in reported:
                    getattr(probe, unit.usage_key)
            missing = frozenset()
        except ValueError:
            missing = None
        if len(plan.inferred) < 64:
            plan.inferred[positive] = missing
    if missing is None:
        return None
    leaves: dict[str, Any] = {}
    for unit in plan.order:
        key = unit.usage_key
        leaf = reported.get(key, 0) - sum(leaves[d] for d in plan.descendants[key])
        if leaf < 0:
            return None
        leaves[key] = leaf
    return leaves


def price_key(prices: ModelPrice) -> tuple[tuple[str, int], ...]:
    """An identity of a resolved price set (its keys and the identities of its values), for caches."""
    return tuple((k, id(v)) for k, v in vars(prices).items() if v is not None and not k.startswith("_"))


def price_usage(model: ModelInfo, provider: Provider, usage: Usage, timestamp: datetime,
                context: Mapping[str, str] | None = None, prices: ModelPrice | None = None) -> Quote:
    """Price ``usage`` (see the module docstring); ``prices``: the set :func:`resolved_prices` gives, if the
    caller has it. Raises ValueError for inconsistent usage (a cache read larger than the input, say) or a price
    set genai-prices refuses."""
    if prices is None:
        prices = resolved_prices(model, provider, timestamp, context)
    if provider.id == "groq" and model.id in ("whisper-large-v3", "whisper-large-v3-turbo"):
        # genai-prices bills Groq's Whisper for at least 10 seconds (ModelInfo.calc_price)
        usage = copy(usage)
        seconds = usage.__dict__.get("audio_seconds") or usage.__dict__.get("input_audio_seconds")
        if seconds is not None:
            billed = max(seconds, 10) if seconds > 0 else 0
            usage.audio_seconds = billed
            usage.input_audio_seconds = billed
    plan = _plan(prices)
    counts: dict[str, Any] | None = _fast_leaves(plan, usage)
    if counts is None:
        by_usage_key = {unit.usage_key: unit for unit in plan.order}
        with warnings.catch_warnings():  # genai-prices' own path may warn; its answer is what counts
            warnings.simplefilter("ignore")
            counts = compute_leaf_values(set(by_usage_key), usage, by_usage_key) if by_usage_key else {}
    if plan.has_requests:
        counts["requests"] = 1
    total_input = usage.input_tokens if plan.tiered else 0
    lines: list[Line] = []
    total = input_total = output_total = Decimal(0)
    thresholds: set[int] = set()
    for price, usage_key, key, kind, direction, per in plan.lines:
        count = counts[usage_key]
        amount = calc_unit_price(price, count, total_input, per)
        total += amount
        if direction == "input":
            input_total += amount
        elif direction == "output":
            output_total += amount
        if isinstance(price, TieredPrices):
            thresholds.update(t.start for t in price.tiers)
            tier = next((t for t in reversed(price.tiers) if total_input > t.start), None)
            rate, start = (tier.price, tier.start) if tier is not None else (price.base, None)
        else:
            rate, start = price, None
        lines.append(Line(usage_key, key, kind, count, rate, per, amount, start))
    choice = None
    if thresholds:
        ordered = tuple(sorted(thresholds))
        choice = TierChoice(total_input, ordered, max((t for t in ordered if total_input > t), default=None))
    return Quote(provider, model, timestamp, tuple(lines), total, input_total, output_total, choice)
