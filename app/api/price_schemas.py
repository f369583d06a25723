"""Request and response schemas of ``POST /price``.

Money in responses is an exact decimal string (see ``x-rounding`` on :class:`PriceResponse`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.pricing.money import ROUNDING_RULE

Name = Annotated[str, Field(min_length=1, max_length=256)]
ServiceTier = Literal["default", "flex", "priority", "fast", "batch"]


class PriceRequest(BaseModel):
    """Price one request from its usage. Give exactly one of ``usage`` (genai-prices' Usage field names) or
    ``response`` (the provider's own response or usage object: OpenAI Chat Completions or Responses, Anthropic
    Messages, Gemini ``usageMetadata``, ...; needs ``provider``)."""

    model_config = ConfigDict(extra="forbid")

    model: Name | None = Field(None, description="model name as sent to the provider (with 'response': default "
                               "the response's own 'model')", examples=["claude-sonnet-4-5"])
    provider: Name | None = Field(None, description="genai-prices provider id (default: the provider whose "
                                  "model-matching rules match 'model')", examples=["anthropic"])
    usage: dict[str, Annotated[int, Field(ge=0)] | Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = Field(
        None, description="token counts by genai-prices' Usage names: input_tokens (all input, cached included), "
        "cache_read_tokens, cache_write_tokens (cache_write_5m_tokens / cache_write_1h_tokens where the provider "
        "distinguishes), output_tokens (reasoning included), output_reasoning_tokens, input_audio_tokens, ...",
        examples=[{"input_tokens": 1200, "cache_read_tokens": 1000, "output_tokens": 300}])
    response: dict[str, Any] | None = Field(None, description="a provider's response (or its usage object), read "
                                            "as genai-prices' extract_usage reads it")
    api_flavor: Name | None = Field(None, description="with 'response': the extractor to use (OpenAI: chat, "
                                    "responses, ...); default: each of the provider's in turn")
    timestamp: datetime | None = Field(None, description="when the request was made (ISO 8601; naive = UTC): "
                                       "the prices then in force. Default: now")
    service_tier: ServiceTier | None = Field(None, description="service tier billed (batch: the batch API)")
    price_context: dict[str, Annotated[str, Field(max_length=64)]] | None = Field(
        None, description="other price selectors of the data, e.g. {\"speed\": \"fast\"} (Anthropic)",
        max_length=8)

    @model_validator(mode="after")
    def _one_input(self) -> PriceRequest:
        if (self.usage is None) == (self.response is None):
            raise ValueError("give exactly one of 'usage' or 'response'")
        if self.response is not None and self.provider is None:
            raise ValueError("'response' needs 'provider' (whose response format to read)")
        if self.usage is not None and self.model is None:
            raise ValueError("'usage' needs 'model'")
        return self


class PriceResponse(BaseModel):
    """The price of one request, line by line. Money: exact decimal strings (see ``x-rounding``)."""

    model_config = ConfigDict(json_schema_extra={"x-rounding": ROUNDING_RULE})

    provider: str = Field(description="genai-prices provider id priced")
    provider_name: str = Field(description="the provider's display name")
    model: str = Field(description="genai-prices model id matched")
    model_name: str | None = Field(description="the model's display name in the price data, if it has one")
    currency: str = Field(description="always USD (genai-prices' currency)")
    total: str = Field(description="the whole request, exact decimal string", examples=["0.00601625"])
    breakdown: dict[str, str] = Field(description="amount per group: input (uncached), cache_read, cache_write "
                                      "(cache_write_5m, cache_write_1h where the provider distinguishes), output "
                                      "(reasoning tokens included), other (requests, tool calls, ...)")
    input_total: str = Field(description="every input-direction amount (input, cache reads and writes)")
    output_total: str = Field(description="every output-direction amount (reasoning included)")
    lines: list[dict[str, Any]] = Field(description="each priced unit: unit, kind, quantity (after "
                                        "decomposition), rate per 'per' units, amount, tier_start")
    tier: dict[str, Any] | None = Field(description="null without tiered prices; else the input_tokens, the "
                                        "thresholds, the one applied and why")
    service_tier: str | None = Field(description="the service tier requested, null for the standard prices")
    price_context: dict[str, str] = Field(description="the genai-prices price context applied, e.g. "
                                          "{\"processing\": \"batch\"}")
    timestamp: str = Field(description="the time whose prices were used")
    usage: dict[str, Any] = Field(description="the usage priced (as read from 'response' when given)")
    price_data: dict[str, Any] = Field(description="the price data's version and provenance")
