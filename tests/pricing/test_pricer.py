"""Lookups with the closest names, service tiers and usage from providers' responses (app.pricing.pricer)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices import Usage

from app.pricing.data import bundled
from app.pricing.pricer import Pricer, PricingError, closest, make_usage


@pytest.fixture(scope="module")
def pricer() -> Pricer:
    return Pricer(bundled())


def test_unknown_model_names_the_closest(pricer: Pricer) -> None:
    with pytest.raises(PricingError) as info:
        pricer.resolve("claude-sonet-4-5")
    assert info.value.kind == "unknown_model" and "claude-sonnet-4-5" in info.value.details["closest"]
    with pytest.raises(PricingError) as info:
        pricer.resolve("gpt-4oo", "openai")
    assert "gpt-4o" in info.value.details["closest"] and "at provider 'openai'" in str(info.value)


def test_unknown_provider_names_the_closest(pricer: Pricer) -> None:
    with pytest.raises(PricingError) as info:
        pricer.resolve("gpt-4o", "antropic")
    assert info.value.kind == "unknown_provider" and info.value.details["closest"][0] == "anthropic"
    assert closest("mistrall", pricer.provider_ids)[0] == "mistral"


def test_service_tiers(pricer: Pricer) -> None:
    provider, model = pricer.resolve("gpt-5", "openai")
    usage = Usage(input_tokens=10_000, output_tokens=1_000)
    when = datetime(2026, 12, 1, tzinfo=UTC)
    std = pricer.quote(provider, model, usage, timestamp=when)
    batch = pricer.quote(provider, model, usage, timestamp=when, service_tier="batch")
    flex = pricer.quote(provider, model, usage, timestamp=when, service_tier="flex")
    priority = pricer.quote(provider, model, usage, timestamp=when, service_tier="priority")
    assert batch.total == std.total / 2 and batch.price_context == {"processing": "batch"}
    assert flex.total < std.total < priority.total
    assert pricer.quote(provider, model, usage, timestamp=when, service_tier="default").total == std.total
    p2, m2 = pricer.resolve("gpt-4o", "openai")
    with pytest.raises(PricingError) as info:
        pricer.quote(p2, m2, usage, timestamp=when, service_tier="flex")
    assert info.value.kind == "unknown_service_tier" and "batch" in info.value.details["available"]


def test_openai_cached_input_rates(pricer: Pricer) -> None:
    """OpenAI cached input is 10 % of the input rate on gpt-5, 25 % on gpt-4.1, 50 % on gpt-4o."""
    for name, share in (("gpt-5", Decimal("0.1")), ("gpt-4.1", Decimal("0.25")), ("gpt-4o", Decimal("0.5"))):
        provider, model = pricer.resolve(name, "openai")
        q = pricer.quote(provider, model, Usage(input_tokens=100, cache_read_tokens=50, output_tokens=1))
        assert q.rate("cache_read_tokens") == share * q.rate("input_tokens"), name  # type: ignore[operator]


def test_extract_usage_from_responses(pricer: Pricer) -> None:
    chat = {"model": "gpt-4o", "usage": {"prompt_tokens": 1000, "completion_tokens": 50,
                                         "prompt_tokens_details": {"cached_tokens": 200},
                                         "completion_tokens_details": {"reasoning_tokens": 20}}}
    model, usage = pricer.extract(chat, "openai")
    assert model == "gpt-4o" and usage.input_tokens == 1000 and usage.cache_read_tokens == 200
    responses = {"model": "gpt-5", "usage": {"input_tokens": 10, "output_tokens": 5,
                                             "input_tokens_details": {"cached_tokens": 4}}}
    assert pricer.extract(responses, "openai") == ("gpt-5", Usage(input_tokens=10, output_tokens=5,
                                                                   cache_read_tokens=4))
    anthropic = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 3,
                 "cache_creation_input_tokens": 2}  # a bare usage object
    _, usage = pricer.extract(anthropic, "anthropic")
    assert usage.input_tokens == 15 and usage.cache_read_tokens == 3 and usage.cache_write_tokens == 2
    gemini = {"promptTokenCount": 100, "candidatesTokenCount": 7, "cachedContentTokenCount": 40}
    _, usage = pricer.extract(gemini, "google")
    assert usage.input_tokens == 100 and usage.cache_read_tokens == 40
    with pytest.raises(PricingError) as info:
        pricer.extract({"nothing": 1}, "openai")
    assert info.value.kind == "bad_response"
    with pytest.raises(PricingError, match="api_flavor"):
        pricer.extract(chat, "openai", "nope")


def test_bad_usage(pricer: Pricer) -> None:
    with pytest.raises(PricingError, match="prompt_tokens"):
        make_usage({"prompt_tokens": 1})
    provider, model = pricer.resolve("gpt-4o")
    with pytest.raises(PricingError, match="cannot exceed"):
        pricer.quote(provider, model, make_usage({"input_tokens": 1, "cache_read_tokens": 5}))
