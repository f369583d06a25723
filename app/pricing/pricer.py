"""Pricing requests: model and provider lookup (with the closest names on a miss), service tiers, usage from a
provider's own response, and quotes (:mod:`app.pricing.quote`) against the price data in force.

Errors are :class:`PricingError` with a machine ``kind`` (``unknown_model``, ``unknown_provider``,
``unknown_service_tier``, ``bad_usage``, ``bad_response``) and a message that names what was wrong; the HTTP layer
turns them into 422s.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from genai_prices import Usage
from genai_prices.types import ModelInfo, ModelPrice, Provider

from .data import PriceData
from .periods import price_period
from .quote import USAGE_KEYS, Quote, price_key, price_usage, resolved_prices

# Each provider's own token-counting endpoint, for the models this service cannot count (no public tokenizer).
COUNTING_ENDPOINTS: dict[str, str] = {
    "anthropic": "Anthropic POST https://api.anthropic.com/v1/messages/count_tokens",
    "google": "Gemini POST https://generativelanguage.googleapis.com/v1beta/models/{model}:countTokens",
    "openai": "OpenAI POST https://api.openai.com/v1/responses/input_tokens",
    "aws": "Amazon Bedrock POST /model/{modelId}/count-tokens",
}

# ``service_tier`` values and the genai-prices price context each selects ("batch" is the batch API's price).
SERVICE_TIERS: dict[str, dict[str, str]] = {
    "default": {"service_tier": "default"},
    "flex": {"service_tier": "flex"},
    "priority": {"service_tier": "priority"},
    "fast": {"service_tier": "fast"},
    "batch": {"processing": "batch"},
}


#: Most quotes :meth:`Pricer.quote` keeps for reuse, and most entries of its other memos (each is emptied when
#: full).
QUOTE_CACHE = 4096


@dataclass(frozen=True)
class PricePeriod:
    """A model's price set (at one provider, with one price context) and the period ``[start, end)`` in which it
    is the one in force."""

    provider: Provider
    model: ModelInfo
    prices: ModelPrice
    start: datetime
    end: datetime
    key: tuple[tuple[str, int], ...] = ()  # :func:`app.pricing.quote.price_key` of ``prices``


class PricingError(ValueError):
    """A request the price data cannot answer; ``kind`` names the case, ``details`` carry closest matches."""

    def __init__(self, kind: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.details = dict(details or {})


def closest(name: str, candidates: list[str], n: int = 5) -> list[str]:
    """Up to ``n`` candidates closest to ``name`` (difflib ratio), best first; names containing it come first."""
    low = name.lower()
    contains = sorted((c for c in candidates if low and low in c.lower()), key=len)[:n]
    rest = difflib.get_close_matches(low, [c.lower() for c in candidates], n=n, cutoff=0.5)
    by_lower = {c.lower(): c for c in candidates}
    out = list(dict.fromkeys([*contains, *(by_lower[r] for r in rest)]))
    return out[:n]


def make_usage(fields: Mapping[str, Any]) -> Usage:
    """A genai-prices ``Usage`` from usage fields (genai-prices' names); PricingError ``bad_usage`` for an unknown
    field or a value that is not a finite number >= 0."""
    unknown = sorted(set(fields) - set(USAGE_KEYS))
    if unknown:
        raise PricingError("bad_usage", f"unknown usage field(s) {', '.join(unknown)}; known: "
                           f"{', '.join(USAGE_KEYS)}", {"unknown": unknown})
    try:
        return Usage(**{k: v for k, v in fields.items() if v is not None})
    except ValueError as exc:
        raise PricingError("bad_usage", str(exc)) from None


@dataclass
class Pricer:
    """Quotes against one :class:`PriceData` (read-only after construction; safe to share between threads)."""

    data: PriceData
    _ids: dict[str, list[str]] = field(default_factory=dict, init=False)
    _quotes: dict[tuple[Any, ...], Quote] = field(default_factory=dict, init=False, repr=False)
    _periods: dict[tuple[Any, ...], PricePeriod] = field(default_factory=dict, init=False, repr=False)
    _resolved: dict[tuple[str, str | None], tuple[Provider, ModelInfo] | PricingError] = field(
        default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._ids = {p.id: [m.id for m in p.models] for p in self.data.providers}

    @property
    def provider_ids(self) -> list[str]:
        return sorted(self._ids)

    def provider(self, provider_id: str) -> Provider:
        """The provider of an id (genai-prices' matching: ids and their provider_match rules); PricingError."""
        try:
            return self.data.snapshot.find_provider(None, provider_id, None)
        except LookupError:
            near = closest(provider_id, self.provider_ids)
            raise PricingError("unknown_provider", f"unknown provider {provider_id!r}; closest: "
                               f"{', '.join(near) or 'none'} (providers: {', '.join(self.provider_ids)})",
                               {"provider": provider_id, "closest": near}) from None

    def resolve(self, model_ref: str, provider_id: str | None = None) -> tuple[Provider, ModelInfo]:
        """The provider and model genai-prices matches for ``model_ref`` (a model name as sent to the provider);
        PricingError ``unknown_model`` / ``unknown_provider`` naming the closest matches. Answers (misses too) are
        memoised: the data does not change under a Pricer."""
        key = (model_ref, provider_id)
        hit = self._resolved.get(key)
        if hit is None:
            try:
                hit = self._resolve(model_ref, provider_id)
            except PricingError as exc:
                hit = exc
            if len(self._resolved) >= QUOTE_CACHE:
                self._resolved.clear()
            self._resolved[key] = hit
        if isinstance(hit, PricingError):
            raise PricingError(hit.kind, str(hit), hit.details)
        return hit

    def _resolve(self, model_ref: str, provider_id: str | None) -> tuple[Provider, ModelInfo]:
        if provider_id is not None:
            self.provider(provider_id)
        try:
            return self.data.snapshot.find_provider_model(model_ref, None, provider_id, None)
        except LookupError:
            pool = self._ids.get(provider_id or "", None) if provider_id else None
            if pool is None:
                pool = sorted({m for ids in self._ids.values() for m in ids})
            near = closest(model_ref, pool)
            where = f" at provider {provider_id!r}" if provider_id else ""
            raise PricingError("unknown_model", f"no price for model {model_ref!r}{where}; closest: "
                               f"{', '.join(near) or 'none'}",
                               {"model": model_ref, "provider": provider_id, "closest": near}) from None

    def knows(self, model_ref: str) -> Provider | None:
        """The provider genai-prices matches for ``model_ref`` without a provider id, or None."""
        try:
            return self.data.snapshot.find_provider_model(model_ref, None, None, None)[0]
        except LookupError:
            return None

    def context(self, provider: Provider, model: ModelInfo, service_tier: str | None,
                extra: Mapping[str, str] | None, when: datetime) -> dict[str, str]:
        """The price context of a service tier (plus ``extra`` keys); PricingError ``unknown_service_tier`` when
        the model has no prices for it (``default`` always has: the standard prices)."""
        ctx = dict(extra or {})
        if service_tier is None:
            return ctx
        if service_tier not in SERVICE_TIERS:
            raise PricingError("unknown_service_tier", f"unknown service_tier {service_tier!r}; one of "
                               f"{', '.join(SERVICE_TIERS)}", {"service_tier": service_tier})
        ctx.update(SERVICE_TIERS[service_tier])
        own = any(model is m for m in provider.models)
        variants = [v for v in (model.price_variants or []) if v.constraint is None or v.constraint.active(when)]
        available = sorted({f"{k}={val}" for v in variants for k, val in v.when.items()}) if own else []
        if service_tier != "default" and not any(all(ctx.get(k) == val for k, val in v.when.items())
                                                 for v in variants if own):
            tiers = sorted(t for t, c in SERVICE_TIERS.items() if t == "default" or any(
                all(c.get(k) == val for k, val in v.when.items()) for v in variants if own))
            raise PricingError("unknown_service_tier", f"model {model.id!r} at {provider.id!r} has no "
                               f"{service_tier!r} prices in the price data; available: {', '.join(tiers)}",
                               {"service_tier": service_tier, "available": tiers, "variants": available})
        return ctx

    def quote(self, provider: Provider, model: ModelInfo, usage: Usage, *, timestamp: datetime | None = None,
              service_tier: str | None = None, price_context: Mapping[str, str] | None = None,
              reuse: bool = False) -> Quote:
        """Price ``usage`` at ``timestamp`` (default now, UTC; naive means UTC). PricingError for bad usage or an
        unavailable service tier. ``reuse``: return the quote already made for the same model, integer usage,
        context and price set (its ``timestamp`` is then that quote's; the amounts are the same by construction)."""
        when = timestamp or datetime.now(tz=UTC)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        ctx = self.context(provider, model, service_tier, price_context, when)
        period = self.prices_at(provider, model, when, ctx)
        prices = period.prices
        key: tuple[Any, ...] | None = None
        if reuse:
            reported = tuple(sorted(vars(usage).items()))
            if all(type(v) is int for _, v in reported):
                key = (id(provider), id(model), service_tier, tuple(sorted(ctx.items())), period.key, reported)
                hit = self._quotes.get(key)
                if hit is not None:
                    return hit
        try:
            q = price_usage(model, provider, usage, when, ctx, prices)
        except ValueError as exc:
            raise PricingError("bad_usage", str(exc)) from None
        q = Quote(q.provider, q.model, q.timestamp, q.lines, q.total, q.input_total, q.output_total, q.tier,
                  service_tier, ctx)
        if key is not None:
            if len(self._quotes) >= QUOTE_CACHE:
                self._quotes.clear()
            self._quotes[key] = q
        return q

    def prices_at(self, provider: Provider, model: ModelInfo, when: datetime,
                  context: Mapping[str, str] | None = None) -> PricePeriod:
        """The model's price set at ``when`` (aware) with ``context`` applied
        (:func:`app.pricing.quote.resolved_prices`), with the period in which it holds
        (:func:`app.pricing.periods.price_period`). Memoised per provider, model and context until the period
        ends: the same object is returned for every timestamp inside it, and the answer is the one an uncached
        lookup gives (tested across every dated price change)."""
        ctx_key = tuple(sorted(context.items())) if context else ()
        key = (id(provider), id(model), ctx_key)
        hit = self._periods.get(key)
        if hit is not None and hit.model is model and hit.provider is provider and hit.start <= when < hit.end:
            return hit
        start, end = price_period(model, when)
        prices = resolved_prices(model, provider, when, context)
        period = PricePeriod(provider, model, prices, start, end, price_key(prices))
        if len(self._periods) >= QUOTE_CACHE:
            self._periods.clear()
        self._periods[key] = period
        return period

    def extract(self, response: Any, provider_id: str, api_flavor: str | None = None) -> tuple[str | None, Usage]:
        """(model name or None, usage) from a provider's response or bare usage object, read with genai-prices'
        extractors (``extract_usage``): ``api_flavor`` if given, else each of the provider's flavors in turn
        (OpenAI: chat, responses, ...); a bare usage object is read as the response's usage. PricingError
        ``bad_response`` when no extractor reads it."""
        provider = self.provider(provider_id)
        extractors = provider.extractors or []
        if not extractors:
            raise PricingError("bad_response", f"the price data has no usage extractor for provider {provider.id!r}")
        flavors = [e for e in extractors if api_flavor is None or e.api_flavor == api_flavor]
        if not flavors:
            raise PricingError("bad_response", f"unknown api_flavor {api_flavor!r} for {provider.id!r}; one of "
                               f"{', '.join(e.api_flavor for e in extractors)}")
        errors: list[str] = []
        for extractor in flavors:
            root = [extractor.root] if isinstance(extractor.root, str) else list(extractor.root)
            wrapped: Any = response
            for key in reversed(root):
                wrapped = {key: wrapped}
            for candidate in (response, wrapped):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        return extractor.extract(candidate)
                except (ValueError, TypeError, KeyError) as exc:
                    errors.append(f"{extractor.api_flavor}: {exc}")
        raise PricingError("bad_response", f"cannot read usage from the {provider.id} response: {errors[0]}",
                           {"tried": errors[:6]})
