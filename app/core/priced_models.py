"""Models the model table lacks: the price data's models, and names of providers without a public tokenizer.

One path answers, for every caller that counts (``/count``, ``/encode``, the providers' counting calls, the CLI):

- an OpenAI model of the price data (or Azure's deployment of one) resolves to its tiktoken encoding by tiktoken's
  rules (:mod:`app.pricing.openai_models`), with the context window from the price data (:func:`openai_names`
  lists them for ``GET /models``);
- any other model of the price data has no public tokenizer;
- so has a name the price data lacks that carries a provider's own prefix (:data:`PROVIDER_PREFIXES`: Claude's
  ``claude-``, ``anthropic/``; Gemini's ``gemini-``, ``google/gemini``, …) — a model newer than the data, say.

:class:`NoPublicTokenizer` names the provider and the provider's own counting endpoint, so the caller can say so
instead of estimating with another model's tokenizer.
"""

from __future__ import annotations

from typing import Any

from app.core.model_table import ModelInfo
from app.pricing.openai_models import encoding_for_model
from app.pricing.pricer import COUNTING_ENDPOINTS, Pricer, PricingError

#: Provider id -> (display name, lower-case name prefixes of its models whose tokenizer is not public). Only
#: names the model table and the price data both lack are matched here (the price data knows the rest); prefixes
#: are narrow enough not to catch an open-weight model (``google/gemma-…`` is not ``google/gemini``).
PROVIDER_PREFIXES: dict[str, tuple[str, tuple[str, ...]]] = {
    "anthropic": ("Anthropic", ("claude-", "claude/", "anthropic/", "anthropic.claude", "us.anthropic.",
                                "eu.anthropic.", "apac.anthropic.", "global.anthropic.")),
    "google": ("Google", ("gemini-", "gemini/", "google/gemini", "models/gemini", "vertex_ai/gemini")),
}


class NoPublicTokenizer(LookupError):
    """A model whose tokenizer is not public; ``provider``, ``provider_name``, ``endpoint`` (or None) and
    ``priced`` (whether the price data prices it: ``POST /price`` then works)."""

    def __init__(self, name: str, provider: str, provider_name: str, endpoint: str | None,
                 priced: bool = True) -> None:
        where = f"; count with the provider's own endpoint: {endpoint}" if endpoint else (
            "; the provider publishes no counting endpoint: read the usage of its response (POST /price prices it)")
        super().__init__(f"model {name!r} ({provider_name}) has no public tokenizer, so this service cannot count "
                         f"its tokens exactly and will not estimate them with another model's{where}")
        self.name, self.provider, self.provider_name, self.endpoint = name, provider, provider_name, endpoint
        self.priced = priced

    def details(self) -> dict[str, Any]:
        """The 422's details: the field at fault (``model``), the model, its provider and counting endpoint."""
        return {"field": "model", "model": self.name, "provider": self.provider,
                "counting_endpoint": self.endpoint, "priced": self.priced}


def by_prefix(name: str) -> NoPublicTokenizer | None:
    """The :class:`NoPublicTokenizer` of a name carrying a provider's prefix (:data:`PROVIDER_PREFIXES`), else
    None. For names the price data lacks; ``priced`` is False."""
    low = name.lower()
    for provider, (display, prefixes) in PROVIDER_PREFIXES.items():
        if low.startswith(prefixes):
            return NoPublicTokenizer(name, provider, display, COUNTING_ENDPOINTS.get(provider), priced=False)
    return None


def priced_model(pricer: Pricer | None, name: str) -> ModelInfo | None:
    """The entry of a model the model table lacks: an OpenAI model of the price data with its tiktoken encoding
    (the caller checks that the encoding is loaded); :class:`NoPublicTokenizer` for any other model of the price
    data and for a name with a provider's prefix (:func:`by_prefix`); None if the name is unknown."""
    provider = pricer.knows(name) if pricer is not None else None
    if provider is None and pricer is not None and encoding_for_model(name) is not None:
        try:  # genai-prices finds some OpenAI models only at their provider (text-embedding-3-small, davinci-002)
            provider, _ = pricer.resolve(name, "openai")
        except PricingError:
            provider = None
    if provider is None:
        refused = by_prefix(name)
        if refused is not None:
            raise refused
        return None
    encoding = encoding_for_model(name) if provider.id in ("openai", "azure") else None
    if encoding is None:
        raise NoPublicTokenizer(name, provider.id, provider.name, COUNTING_ENDPOINTS.get(provider.id))
    assert pricer is not None
    _, priced = pricer.resolve(name, provider.id)
    return ModelInfo(name=name, tokenizer=encoding, context_window=priced.context_window,
                     pricing_provider=provider.id)


def openai_names(pricer: Pricer | None) -> list[str]:
    """The OpenAI models of the price data that count here: each model id of the ``openai`` provider that
    tiktoken's rules map to an encoding and that :func:`priced_model` resolves back to that same model (an id that
    is only a name pattern, such as ``ft:gpt-4o`` matching ``ft:gpt-4o-2024-…``, is left out), in the data's
    order."""
    if pricer is None:
        return []
    provider = next((p for p in pricer.data.providers if p.id == "openai"), None)
    out = []
    for model in provider.models if provider is not None else []:
        if encoding_for_model(model.id) is None:
            continue
        try:
            if priced_model(pricer, model.id) is not None and pricer.resolve(model.id, "openai")[1] is model:
                out.append(model.id)
        except (NoPublicTokenizer, PricingError):
            continue
    return out
