"""POST /price, the priced model block of /count and /encode, models without a public tokenizer, provenance in
/models and /metrics, and no float amount anywhere (app.api.ops.price, app.api.ops.common)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from fastapi.testclient import TestClient
from genai_prices import Usage

from app.api.deps import ServiceState
from app.api.main import create_app
from app.core.config import Settings
from app.pricing.data import PriceDataError, bundled
from app.pricing.openai_models import encoding_for_model
from app.pricing.pricer import Pricer, PricingError
from tests.pricing.test_data import ACME

MONEY = ("total", "input_total", "output_total", "amount", "rate", "estimated_input_cost", "estimated_output_cost",
         "estimated_total_cost", "input_price_per_million", "output_price_per_million",
         "cached_input_price_per_million")


def _floats(value: Any, path: str = "") -> list[str]:
    """Paths of every JSON float in a decoded body (money must be strings; counts are integers)."""
    if isinstance(value, float):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _floats(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _floats(v, f"{path}[{i}]")]
    return []


def _money_strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        out = [v for k, v in value.items() if k in MONEY and isinstance(v, str)]
        return out + [s for v in value.values() for s in _money_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _money_strings(v)]
    return []


def test_price_from_usage_equals_genai_prices(client: TestClient) -> None:
    usage = {"input_tokens": 300_000, "cache_read_tokens": 1_000, "cache_write_tokens": 500,
             "cache_write_1h_tokens": 200, "output_tokens": 200, "output_reasoning_tokens": 50}
    r = client.post("/price", json={"model": "claude-sonnet-4-5", "usage": usage})
    assert r.status_code == 200, r.text
    body = r.json()
    want = genai_prices.calc_price(Usage(**usage), "claude-sonnet-4-5")
    assert Decimal(body["total"]) == want.total_price and body["currency"] == "USD"
    assert Decimal(body["input_total"]) == want.input_price and Decimal(body["output_total"]) == want.output_price
    assert set(body["breakdown"]) >= {"input", "cache_read", "cache_write", "cache_write_1h", "output"}
    assert sum(Decimal(v) for v in body["breakdown"].values()) == Decimal(body["total"])
    assert body["tier"]["applied"] == 200_000 and "the whole request" in body["tier"]["reason"]
    assert body["provider"] == "anthropic" and body["price_data"]["version"] == "genai-prices 0.2.3 (bundled)"
    batch = client.post("/price", json={"model": "claude-sonnet-4-5", "usage": usage, "service_tier": "batch"}).json()
    assert Decimal(batch["total"]) * 2 == Decimal(body["total"]) and batch["service_tier"] == "batch"


def test_price_from_a_provider_response(client: TestClient) -> None:
    response = {"id": "x", "model": "gpt-4o-2024-08-06", "usage": {
        "prompt_tokens": 1000, "completion_tokens": 50, "prompt_tokens_details": {"cached_tokens": 200},
        "completion_tokens_details": {"reasoning_tokens": 10}}}
    body = client.post("/price", json={"provider": "openai", "response": response}).json()
    assert body["model"] == "gpt-4o" and body["usage"]["cache_read_tokens"] == 200
    assert body["breakdown"] == {"input": "0.002", "cache_read": "0.00025", "output": "0.0005"}
    gemini = {"promptTokenCount": 1000, "candidatesTokenCount": 10}
    g = client.post("/price", json={"provider": "google", "model": "gemini-2.5-pro", "response": gemini})
    assert g.status_code == 200 and g.json()["provider"] == "google"
    anon = client.post("/price", json={"provider": "anthropic", "response": {"input_tokens": 3, "output_tokens": 1}})
    assert anon.status_code == 422 and "names no model" in anon.json()["error"]["message"]


def test_past_prices_by_timestamp(client: TestClient) -> None:
    """o3 cost $10/$40 per million until 2025-06-10 and $2/$8 from that day (genai-prices' history)."""
    usage = {"input_tokens": 1_000_000, "output_tokens": 0}
    before = client.post("/price", json={"model": "o3", "usage": usage, "timestamp": "2025-06-09T23:59:59Z"}).json()
    after = client.post("/price", json={"model": "o3", "usage": usage, "timestamp": "2025-06-10T00:00:00Z"}).json()
    assert before["total"] == "10" and after["total"] == "2"
    when = datetime(2025, 6, 9, tzinfo=UTC)
    assert Decimal(before["total"]) == genai_prices.calc_price(Usage(**usage), "o3",
                                                               genai_request_timestamp=when).total_price


@pytest.mark.parametrize("body,kind,needle", [
    ({"model": "claude-sonet-4-5", "usage": {"input_tokens": 1}}, "unknown_model", "claude-sonnet-4-5"),
    ({"model": "gpt-4o", "provider": "opnai", "usage": {"input_tokens": 1}}, "unknown_provider", "openai"),
    ({"model": "gpt-4o", "usage": {"input_tokens": 1}, "service_tier": "flex"}, "unknown_service_tier", "priority"),
    ({"model": "gpt-4o", "usage": {"prompt_tokens": 1}}, "bad_usage", "input_tokens"),
    ({"model": "gpt-4o", "usage": {"input_tokens": 1, "cache_read_tokens": 9}}, "bad_usage", "cannot exceed"),
    ({"provider": "openai", "response": {"nothing": 1}}, "bad_response", "usage"),
    ({"model": "gpt-4o", "usage": {"input_tokens": -1}}, "validation_error", "usage"),
    ({"model": "gpt-4o"}, "validation_error", "exactly one"),
    ({"response": {"usage": {}}}, "validation_error", "provider"),
    ({"usage": {"input_tokens": 1}}, "validation_error", "model"),
])
def test_price_errors_are_422_naming_the_fix(client: TestClient, body: dict[str, Any], kind: str,
                                             needle: str) -> None:
    r = client.post("/price", json=body)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["type"] == kind and needle in json.dumps(err)


def test_models_without_a_public_tokenizer(client: TestClient) -> None:
    for model, endpoint in (("claude-sonnet-4-5", "/v1/messages/count_tokens"), ("gemini-2.5-pro", ":countTokens")):
        r = client.post("/count", json={"model": model, "text": "hello"})
        assert r.status_code == 422
        err = r.json()["error"]
        assert err["type"] == "no_public_tokenizer" and endpoint in err["message"] and err["details"]["priced"]
        assert err["details"]["field"] == "model" and endpoint in err["details"]["counting_endpoint"]
        assert client.post("/price", json={"model": model, "usage": {"input_tokens": 5}}).status_code == 200
    unknown = client.post("/count", json={"model": "no-such-model-x", "text": "hi"}).json()["error"]
    assert unknown["type"] == "unknown_model"
    newer = client.post("/encode", json={"model": "gemini-9-ultra", "text": "hi"}).json()["error"]  # not in the data
    assert newer["type"] == "no_public_tokenizer" and newer["details"]["provider"] == "google"
    assert ":countTokens" in newer["details"]["counting_endpoint"] and newer["details"]["priced"] is False


def test_openai_models_of_the_price_data_count(client: TestClient) -> None:
    for model, tokenizer in (("gpt-5", "o200k_base"), ("gpt-5.4-mini", "o200k_base"), ("gpt-4-32k", "cl100k_base"),
                             ("o1-pro", "o200k_base")):
        r = client.post("/count", json={"model": model, "text": "hello world", "max_output_tokens": 10})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["tokenizer"] == tokenizer and body["model"]["price"]["model"] == model
        assert body["model"]["context_window"]  # from the price data


def test_count_and_encode_breakdown(client: TestClient) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 20
    counted = client.post("/count", json={"model": "gpt-4o", "text": text, "max_output_tokens": 100,
                                          "cached_tokens": 64, "service_tier": "batch"}).json()
    n = counted["count"]
    price = counted["model"]["price"]
    want = genai_prices.calc_price(Usage(input_tokens=n, cache_read_tokens=64, output_tokens=100), "gpt-4o",
                                   price_context={"processing": "batch"})
    assert Decimal(price["total"]) == want.total_price == Decimal(counted["model"]["estimated_total_cost"])
    assert set(price["breakdown"]) == {"input", "cache_read", "output"} and price["service_tier"] == "batch"
    encoded = client.post("/encode", json={"model": "gpt-4o", "text": text, "max_output_tokens": 100,
                                           "cached_tokens": 64, "service_tier": "batch"}).json()
    assert encoded["model"]["price"] == price and len(encoded["ids"]) == n
    too_many = client.post("/count", json={"model": "gpt-4o", "text": "hi", "cached_tokens": 5})
    assert too_many.status_code == 422 and too_many.json()["error"]["type"] == "bad_usage"
    other = client.post("/count", json={"model": "llama-3.3-70b-instruct", "text": "hi",
                                        "provider": "novita:meta-llama/llama-3.3-70b-instruct"}).json()
    assert other["model"]["price"]["provider"] == "novita"


def test_every_model_counts_and_prices_or_says_why(client: TestClient) -> None:
    """Every entry of GET /models (the table's and the price data's OpenAI models) has a price or a plain reason,
    and counts through /count with its listed tokenizer and the listed price."""
    listing = client.get("/models").json()
    assert listing["price_data"]["package_version"] == "0.2.3"
    priced = 0
    for m in listing["models"]:
        price = m["price"]
        assert price["available"] or (isinstance(price["reason"], str) and len(price["reason"]) > 20), m["name"]
        priced += bool(price["available"])
        r = client.post("/count", json={"model": m["name"], "text": "hello", "max_output_tokens": 1})
        assert r.status_code == 200, (m["name"], r.text)
        body = r.json()
        assert body["tokenizer"] == m["tokenizer"], m["name"]
        block = body["model"]
        assert (block["price"] is not None) == bool(price["available"]), m["name"]
        if price["available"]:
            assert (block["price"]["provider"], block["price"]["model"]) == (price["provider"], price["model"])
        assert _floats(body) == []
    assert priced >= 45
    names = [m["name"] for m in listing["models"]]
    assert len(names) == len(set(names))
    from_data = {m["name"]: m for m in listing["models"] if m["listed_from"] == "price_data"}
    assert {"gpt-5", "gpt-5.4-mini", "o1-pro", "gpt-4-32k", "davinci-002"} <= set(from_data)
    assert all(m["price"]["available"] and m["price"]["source"] == "price_data" for m in from_data.values())
    # every OpenAI model of the data that tiktoken's rules map is listed, or is only a name pattern
    pricer = Pricer(bundled())
    openai = next(p for p in pricer.data.providers if p.id == "openai")
    for model in openai.models:
        if encoding_for_model(model.id) is None or model.id in names:
            continue
        try:
            found = pricer.resolve(model.id, "openai")[1]
        except PricingError:
            continue
        assert found is not model, model.id


def test_no_float_amount_anywhere(client: TestClient) -> None:
    bodies = [
        client.post("/count", json={"model": "gpt-4o", "texts": ["a b c", "d" * 300], "max_output_tokens": 333}),
        client.post("/encode", json={"model": "gpt-4.1", "text": "x " * 50, "cached_tokens": 3}),
        client.post("/count", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}),
        client.post("/price", json={"model": "gpt-4o-mini", "usage": {"input_tokens": 124, "output_tokens": 16384}}),
        client.post("/price", json={"model": "deepseek-chat", "provider": "deepseek",
                                    "usage": {"input_tokens": 7, "cache_read_tokens": 3, "output_tokens": 11}}),
        client.get("/models"),
    ]
    for r in bodies:
        assert r.status_code == 200, r.text
        decoded = json.loads(r.content)
        assert _floats(decoded) == []
        for amount in _money_strings(decoded):
            assert "e" not in amount.lower() and Decimal(amount).is_finite() and amount == amount.strip()
            assert not (("." in amount) and amount.endswith("0")), amount  # no trailing zeros, no noise
    # the motivating case: 124 + 16,384 tokens of gpt-4o-mini is exactly 0.0098490 USD, not 0.009849000000000001
    assert bodies[3].json()["total"] == "0.0098490".rstrip("0")


def test_metrics_and_openapi(client: TestClient) -> None:
    client.post("/count", json={"model": "gpt-4o", "text": "hello world", "max_output_tokens": 7})
    text = client.get("/metrics").text
    assert 'tokenizer_price_data_info{' in text and 'source="bundled"' in text
    assert 'tokenizer_billed_tokens_total{kind="input",model="gpt-4o"}' in text
    assert 'tokenizer_billed_tokens_total{kind="output",model="gpt-4o"}' in text
    assert 'tokenizer_estimated_cost_usd_total{kind="output",model="gpt-4o"}' in text
    spec = client.get("/openapi.json").json()
    assert "/price" in spec["paths"] and "PriceRequest" in spec["components"]["schemas"]
    rule = spec["components"]["schemas"]["ModelUsage"]["x-rounding"]
    assert "ROUND_HALF_EVEN" in rule and spec["components"]["schemas"]["PriceResponse"]["x-rounding"] == rule


@pytest.fixture
def restore_bundled() -> Iterator[None]:
    yield
    bundled()


def test_price_data_file_at_start_up(tmp_path: Path, restore_bundled: None) -> None:
    good = tmp_path / "data.json"
    good.write_text(json.dumps(ACME))
    with TestClient(create_app(Settings(tokenizers="gpt2", price_data_file=good))) as c:
        listing = c.get("/models").json()
        assert listing["price_data"]["source"] == "file" and listing["price_data"]["path"] == str(good)
        r = c.post("/price", json={"model": "acme-1", "usage": {"input_tokens": 200_000, "output_tokens": 1000}})
        assert r.json()["total"] == "0.506" and r.json()["price_data"]["sha256"] == listing["price_data"]["sha256"]
        assert 'source="file"' in c.get("/metrics").text
    bad = tmp_path / "bad.json"
    bad.write_text("[{\"id\": 1}]")
    with pytest.raises(PriceDataError, match="bad.json"):
        ServiceState.load(Settings(tokenizers="gpt2", price_data_file=bad))
