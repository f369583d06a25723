"""The quote equals genai_prices.calc_price: a differential test over every provider of the data.

Generated (fixed seed) usage cases: one or more per model of every provider; for tiered prices, input exactly at
each threshold and one token over; for dated prices, the day before and the day a price starts; for price variants
(service tiers, batch, ...), the variant's context after it starts. Totals, input and output amounts must be equal
as Decimals (0 differences), and a usage genai-prices refuses must be refused here too.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import genai_prices
from genai_prices import Usage
from genai_prices.types import ConditionalPrice, ModelInfo, Provider, StartDateConstraint, TieredPrices

from app.pricing.data import bundled
from app.pricing.quote import UNITS_BY_PRICE_KEY, kind_of, price_usage

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


def _price_sets(model: ModelInfo) -> list[Any]:
    sets = [c.prices for c in model.prices] if isinstance(model.prices, list) else [model.prices]
    sets += [v.prices for v in model.price_variants or []]
    return sets


def _thresholds(model: ModelInfo) -> set[int]:
    return {t.start for ps in _price_sets(model) for v in vars(ps).values() if isinstance(v, TieredPrices)
            for t in v.tiers}


def _usage(rng: random.Random, model: ModelInfo, input_tokens: int | None = None) -> Usage:
    keys = {UNITS_BY_PRICE_KEY[k].usage_key for ps in _price_sets(model) for k, v in vars(ps).items()
            if v is not None and k in UNITS_BY_PRICE_KEY}
    n = input_tokens if input_tokens is not None else rng.choice([0, 1, 17, 999, 12_345, 150_000, 320_000])
    fields: dict[str, int] = {"input_tokens": n, "output_tokens": rng.randrange(0, 20_000)}
    room = n
    for key in ("cache_read_tokens", "cache_write_tokens"):
        if key in keys and room:
            fields[key] = rng.randrange(0, room // 2 + 1)
            room -= fields[key]
    if "cache_write_1h_tokens" in keys and fields.get("cache_write_tokens"):
        fields["cache_write_1h_tokens"] = rng.randrange(0, fields["cache_write_tokens"] + 1)
    if "output_reasoning_tokens" in keys:
        fields["output_reasoning_tokens"] = rng.randrange(0, fields["output_tokens"] + 1)
    for key in sorted(keys):
        if key not in fields and key.endswith(("_tokens", "_seconds", "_searches", "_characters", "_pages")) \
                and "cache" not in key and rng.random() < 0.3:
            fields[key] = rng.randrange(0, 50)
    return Usage(**fields)


def _cases(providers: list[Provider]) -> Iterator[tuple[Provider, ModelInfo, Usage, datetime, dict[str, str] | None]]:
    rng = random.Random(20261203)
    for provider in providers:
        for model in provider.models:
            yield provider, model, _usage(rng, model), NOW, None
            for start in sorted(_thresholds(model)):
                for n in (start, start + 1):
                    yield provider, model, _usage(rng, model, n), NOW, None
            if isinstance(model.prices, list):
                for c in model.prices:
                    if isinstance(c, ConditionalPrice) and isinstance(c.constraint, StartDateConstraint):
                        day = datetime.combine(c.constraint.start_date, datetime.min.time(), tzinfo=UTC)
                        usage = _usage(rng, model)
                        yield provider, model, usage, day - timedelta(seconds=1), None
                        yield provider, model, usage, day, None
            for variant in model.price_variants or []:
                when = NOW
                if isinstance(variant.constraint, StartDateConstraint):
                    when = max(NOW, datetime.combine(variant.constraint.start_date, datetime.min.time(), tzinfo=UTC))
                yield provider, model, _usage(rng, model), when, dict(variant.when)


def _ours(provider: Provider, model: ModelInfo, usage: Usage, when: datetime,
          ctx: dict[str, str] | None) -> tuple[Decimal, Decimal, Decimal] | str:
    try:
        q = price_usage(model, provider, usage, when, ctx)
    except ValueError as exc:
        return f"error: {exc}"
    assert sum((line.amount for line in q.lines), Decimal(0)) == q.total
    assert sum(q.breakdown().values(), Decimal(0)) == q.total
    return q.total, q.input_total, q.output_total


def _theirs(provider: Provider, model: ModelInfo, usage: Usage, when: datetime,
            ctx: dict[str, str] | None) -> tuple[Decimal, Decimal, Decimal] | str:
    try:
        c = model.calc_price(usage, provider, genai_request_timestamp=when, price_context=ctx)
    except ValueError as exc:
        return f"error: {exc}"
    return c.total_price, c.input_price, c.output_price


def test_zero_differences_against_genai_prices() -> None:
    providers = bundled().providers
    seen: set[str] = set()
    n = priced = tier_edges = dated = variants = 0
    differences = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for provider, model, usage, when, ctx in _cases(providers):
            ours, theirs = _ours(provider, model, usage, when, ctx), _theirs(provider, model, usage, when, ctx)
            n += 1
            seen.add(provider.id)
            priced += isinstance(theirs, tuple) and theirs[0] > 0
            tier_edges += bool(_thresholds(model))
            dated += isinstance(model.prices, list)
            variants += ctx is not None
            if ours != theirs:
                differences.append((provider.id, model.id, usage, when, ctx, ours, theirs))
    assert differences == []
    assert n >= 1000 and priced >= 1000
    assert seen == {p.id for p in providers}  # every provider of the data
    assert tier_edges >= 200 and dated >= 100 and variants >= 100


def test_calc_price_by_name_matches_the_lookup_and_quote() -> None:
    """The public entry point too: calc_price(model_ref, provider_id=...) == our lookup + quote."""
    from app.pricing.pricer import Pricer

    pricer = Pricer(bundled())
    rng = random.Random(7)
    cases = [("gpt-4o", "openai"), ("claude-sonnet-4-5", None), ("gemini-2.5-pro", None), ("gpt-5", None),
             ("deepseek-chat", "deepseek"), ("mistral-large", "mistral"), ("o3", "openai")]
    for ref, pid in cases:
        for _ in range(30):
            provider, model = pricer.resolve(ref, pid)
            usage = _usage(rng, model)
            for tier in (None, "batch"):
                ctx = {"processing": "batch"} if tier else None
                want = genai_prices.calc_price(usage, ref, provider_id=pid, genai_request_timestamp=NOW,
                                               price_context=ctx)
                try:
                    got = pricer.quote(provider, model, usage, timestamp=NOW, service_tier=tier)
                except Exception as exc:  # a tier the model lacks is refused here, priced standard there
                    assert tier == "batch" and "batch" in str(exc)
                    continue
                assert (got.total, got.input_total, got.output_total) == (
                    want.total_price, want.input_price, want.output_price)


def test_breakdown_kinds() -> None:
    pricer_provider = next(p for p in bundled().providers if p.id == "anthropic")
    model = next(m for m in pricer_provider.models if m.is_match("claude-sonnet-4-5"))
    usage = Usage(input_tokens=300_000, cache_read_tokens=1_000, cache_write_tokens=1_000,
                  cache_write_1h_tokens=400, output_tokens=100, output_reasoning_tokens=50)
    q = price_usage(model, pricer_provider, usage, NOW)
    b = q.breakdown()
    # Anthropic: the generic cache write is the 5-minute write; the 1-hour write has its own rate (2x input)
    assert set(b) >= {"input", "cache_read", "cache_write", "cache_write_1h", "output"}
    assert q.tier is not None and q.tier.applied == 200_000 and "300000 > 200000" in q.tier.reason
    lines = {line.usage_key: line for line in q.lines}
    assert lines["cache_write_1h_tokens"].rate == 2 * lines["input_tokens"].rate
    assert lines["cache_write_tokens"].quantity == 600 and lines["input_tokens"].quantity == 298_000
    assert lines["output_tokens"].quantity == 100  # reasoning tokens are output
    assert {kind_of(UNITS_BY_PRICE_KEY[line.price_key]) for line in q.lines} <= set(b) | {"other"}


def test_non_integer_usage_takes_genai_prices_own_path() -> None:
    """Float and Decimal usage values (durations, fractional units) skip the integer fast path and still agree."""
    rng = random.Random(11)
    providers = bundled().providers
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for provider in providers[::3]:
            for model in provider.models[:10]:
                base = _usage(rng, model)
                values = {k: v for k, v in vars(base).items() if not k.startswith("_")}
                for convert in (float, lambda v: Decimal(v) / 4):
                    usage = Usage(**{k: convert(v) for k, v in values.items()})
                    ours, theirs = _ours(provider, model, usage, NOW, None), _theirs(provider, model, usage, NOW, None)
                    assert ours == theirs, (provider.id, model.id, usage)
                    checked += 1
    assert checked >= 100
