"""The price-period memo (:meth:`Pricer.prices_at`, :func:`app.core.billing.single_block`) gives the answer an
uncached calculation gives, on both sides of every dated and time-of-day price change of the data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import genai_prices
import pytest
from genai_prices import Usage
from genai_prices.types import ModelInfo as PricedModel
from genai_prices.types import Provider

from app.core import billing
from app.core.model_table import ModelInfo
from app.pricing.data import bundled
from app.pricing.periods import EARLIEST, LATEST, change_instants, price_period
from app.pricing.pricer import SERVICE_TIERS, Pricer

TICK = timedelta(microseconds=1)


@pytest.fixture(scope="module")
def pricer() -> Pricer:
    return Pricer(bundled())


def _changing(pricer: Pricer) -> list[tuple[Provider, PricedModel]]:
    """Every model of the data whose prices change by timestamp (a dated or a time-of-day constraint)."""
    return [(p, m) for p in pricer.data.providers for m in p.models
            if change_instants(m, datetime(2026, 1, 1, tzinfo=UTC))]


def test_the_data_has_both_kinds_of_change(pricer: Pricer) -> None:
    changing = _changing(pricer)
    assert len(changing) > 100
    assert any(p.id == "deepseek" for p, _ in changing)  # DeepSeek's off-peak hours: a time-of-day price


def test_period_bounds_are_change_instants_and_hold_the_same_prices(pricer: Pricer) -> None:
    for _, model in _changing(pricer):
        for t in change_instants(model, datetime(2026, 6, 1, 12, tzinfo=UTC)):
            start, end = price_period(model, t)
            assert start == t < end  # an instant starts a period
            before_start, before_end = price_period(model, t - TICK)
            assert before_end == t and before_start < t
            if end != LATEST:  # the whole period has one price set
                assert model.get_prices(end - TICK) is model.get_prices(t)


def test_memo_equals_uncached_across_every_price_change(pricer: Pricer) -> None:
    """One Pricer walks each change instant in time order (1 us before, at, 1 us after), so the memo is reused
    where it may be and must be dropped at the change; every answer equals genai-prices' own, uncached."""
    usage = Usage(input_tokens=300_000, cache_read_tokens=1_000, output_tokens=2_000)
    checked = changed = 0
    for provider, model in _changing(pricer):
        instants = sorted(set(change_instants(model, datetime(2026, 6, 1, 12, tzinfo=UTC))))
        for ctx in ({}, *SERVICE_TIERS.values()):
            last = None
            for t in instants:
                for when in (t - TICK, t, t + TICK):
                    got = pricer.prices_at(provider, model, when, ctx or None).prices
                    assert got == model.get_prices(when, ctx or None), (provider.id, model.id, when, ctx)
                    if not ctx:
                        quote = pricer.quote(provider, model, usage, timestamp=when, reuse=True)
                        want = model.calc_price(usage, provider, genai_request_timestamp=when)
                        assert quote.total == want.total_price, (provider.id, model.id, when)
                    changed += last is not None and got != last
                    last = got
                    checked += 1
    assert checked > 1000 and changed > 50


def test_period_of_a_model_without_changes_is_unbounded(pricer: Pricer) -> None:
    now = datetime.now(tz=UTC)
    fixed = [m for p in pricer.data.providers for m in p.models if not change_instants(m, now)]
    assert len(fixed) > 1000
    assert all(price_period(m, now) == (EARLIEST, LATEST) for m in fixed)


class _Clock(datetime):
    """``datetime`` whose ``now`` is :attr:`at` (the block memo reads the clock through its module)."""

    at = datetime(2026, 1, 1, tzinfo=UTC)

    @classmethod
    def now(cls, tz: object = None) -> _Clock:  # type: ignore[override]
        return cls.fromtimestamp(cls.at.timestamp(), tz=UTC)


def test_block_memo_follows_deepseek_off_peak_hours(pricer: Pricer, monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepSeek's off-peak price starts and ends at fixed UTC times: a block memoised 1 us before is not served at
    the change, and each block's total is genai-prices' own (uncached) at that instant."""
    provider, model = pricer.resolve("deepseek-chat", "deepseek")
    bounds = sorted({t.time() for t in change_instants(model, datetime(2026, 6, 1, tzinfo=UTC))})
    assert bounds, "deepseek-chat has no time-of-day price in this data"
    info = ModelInfo(name="deepseek-chat", tokenizer="o200k_base", pricing_provider="deepseek")
    monkeypatch.setattr(billing, "datetime", _Clock)
    day = datetime(2026, 6, 1, tzinfo=UTC)
    for bound in bounds:
        change = datetime.combine(day.date(), bound)
        totals = []
        for when in (change - timedelta(seconds=1), change - TICK, change, change + TICK):
            _Clock.at = when
            monkeypatch.setattr(billing.time, "time", when.timestamp)
            block = billing.single_block(info, 1000, pricer, max_output_tokens=100)
            want = genai_prices.calc_price(Usage(input_tokens=1000, output_tokens=100), "deepseek-chat",
                                           provider_id="deepseek", genai_request_timestamp=when)
            assert Decimal(block.fields["estimated_total_cost"]) == want.total_price, when
            assert block.since <= when.timestamp() < block.until
            totals.append(block.fields["estimated_total_cost"])
        assert totals[0] == totals[1] and totals[1] != totals[2] and totals[2] == totals[3], (bound, totals)
