"""The priced ``model`` block (app.core.billing): one request per text, tier from the counted prompt, cached
tokens, service tiers, the provider chosen by the table or the request, and why there is no price."""

from __future__ import annotations

from decimal import Decimal

import pytest
from genai_prices import Usage

from app.core.billing import model_block, price_target, quotes_by_kind
from app.core.model_table import ModelInfo
from app.pricing.data import bundled
from app.pricing.pricer import Pricer, PricingError


@pytest.fixture(scope="module")
def pricer() -> Pricer:
    return Pricer(bundled())


GPT4O = ModelInfo(name="gpt-4o", tokenizer="o200k_base", context_window=128000, max_output_tokens=16384)


def test_block_is_the_quote_of_each_text(pricer: Pricer) -> None:
    block = model_block(GPT4O, [100, 100, 7], True, pricer, max_output_tokens=10, cached_tokens=5)
    provider, model = pricer.resolve("gpt-4o")
    want = sum((pricer.quote(provider, model, Usage(input_tokens=c, cache_read_tokens=5, output_tokens=10)).total
                for c in (100, 100, 7)), Decimal(0))
    assert Decimal(block["estimated_total_cost"]) == want == Decimal(block["price"]["total"])
    assert block["price"]["requests"] == 3 and block["price"]["input_tokens"] == 207
    assert block["price"]["cache_read_tokens"] == 15 and block["price"]["output_tokens"] == 30
    assert sum(Decimal(v) for v in block["price"]["breakdown"].values()) == want
    assert block["fits_each"] == [True, True, True] and block["cached_tokens"] == 5
    assert all(isinstance(block[k], str) for k in ("estimated_input_cost", "estimated_output_cost",
                                                   "estimated_total_cost", "input_price_per_million"))
    kinds = quotes_by_kind(block)
    assert kinds["input"][0] == 207 - 15 and kinds["cached"][0] == 15 and kinds["output"][0] == 30
    assert sum(cost for _, cost in kinds.values()) == want


def test_tier_from_the_counted_prompt(pricer: Pricer) -> None:
    """A model the table lacks but priced by name: the long-context tier applies above 200K tokens, per text."""
    info = ModelInfo(name="claude-sonnet-4-5", tokenizer="none")
    below = model_block(info, [200_000], False, pricer, max_output_tokens=1)
    above = model_block(info, [200_001], False, pricer, max_output_tokens=1)
    assert below["price"]["tier"]["applied"] is None and above["price"]["tier"]["applied"] == 200_000
    assert Decimal(above["input_price_per_million"]) == 2 * Decimal(below["input_price_per_million"])
    batch = model_block(info, [10, 300_000], True, pricer, max_output_tokens=1)
    assert [t["applied"] for t in batch["price"]["tier"]] == [None, 200_000]


def test_service_tier_and_provider_choice(pricer: Pricer) -> None:
    std = model_block(GPT4O, [1000], False, pricer, max_output_tokens=100)
    batch = model_block(GPT4O, [1000], False, pricer, max_output_tokens=100, service_tier="batch")
    assert Decimal(batch["estimated_total_cost"]) * 2 == Decimal(std["estimated_total_cost"])
    assert batch["price"]["service_tier"] == "batch"
    llama = ModelInfo(name="llama-3.3-70b-instruct", tokenizer="llama3", pricing_provider="together",
                      pricing_model="meta-llama/Llama-3.3-70B-Instruct-Turbo")
    assert model_block(llama, [10], False, pricer)["price"]["provider"] == "together"
    with pytest.raises(PricingError) as missed:  # novita names it differently: the 422 names its id
        model_block(llama, [10], False, pricer, provider="novita")
    assert "meta-llama/llama-3.3-70b-instruct" in missed.value.details["closest"]
    other = model_block(llama, [10], False, pricer, provider="novita:meta-llama/llama-3.3-70b-instruct")
    assert other["price"]["provider"] == "novita" and other["price"]["model"] == "meta-llama/llama-3.3-70b-instruct"
    assert model_block(GPT4O, [10], False, pricer, provider="azure")["price"]["provider"] == "azure"
    with pytest.raises(PricingError) as info:
        model_block(llama, [10], False, pricer, provider="nope-provider")
    assert info.value.kind == "unknown_provider"


def test_no_price_says_why(pricer: Pricer) -> None:
    gpt2 = ModelInfo(name="gpt2", tokenizer="gpt2", context_window=1024)
    block = model_block(gpt2, [3], False, pricer)
    assert block["price"] is None and block["estimated_input_cost"] is None
    assert "no price for 'gpt2'" in block["price_unavailable"]
    assert price_target(None, gpt2).reason == "no price data loaded"
    assert quotes_by_kind(block) == {}


def test_cached_tokens_above_the_count(pricer: Pricer) -> None:
    with pytest.raises(PricingError) as info:
        model_block(GPT4O, [3, 10], True, pricer, cached_tokens=5)
    assert info.value.kind == "bad_usage"


def test_snapshot_name_is_priced_as_itself(pricer: Pricer) -> None:
    """A dated name reaching a table entry by prefix keeps its own price where the data has one."""
    block = model_block(GPT4O, [1], False, pricer, requested="gpt-4o-2024-05-13", max_output_tokens=1)
    assert block["price"]["model"] == "gpt-4o-2024-05-13" and block["input_price_per_million"] == "5"
