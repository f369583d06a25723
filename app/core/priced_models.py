"""Models the model table lacks but the price data knows.

An OpenAI model (or Azure's deployment of one) resolves to its tiktoken encoding by tiktoken's rules
(:mod:`app.pricing.openai_models`), with the context window from the price data. Any other priced model has no
public tokenizer: :class:`NoPublicTokenizer` names its provider and the provider's own counting endpoint, so the
caller can say so instead of estimating with another model's tokenizer.
"""

from __future__ import annotations

from app.core.model_table import ModelInfo
from app.pricing.openai_models import encoding_for_model
from app.pricing.pricer import Pricer


class NoPublicTokenizer(LookupError):
    """A priced model whose tokenizer is not public; ``provider``, ``provider_name`` and ``endpoint`` (or None)."""

    def __init__(self, name: str, provider: str, provider_name: str, endpoint: str | None) -> None:
        where = f"; count with the provider's own endpoint: {endpoint}" if endpoint else (
            "; the provider publishes no counting endpoint: read the usage of its response (POST /price prices it)")
        super().__init__(f"model {name!r} ({provider_name}) has no public tokenizer, so this service cannot count "
                         f"its tokens exactly and will not estimate them with another model's{where}")
        self.name, self.provider, self.provider_name, self.endpoint = name, provider, provider_name, endpoint


def priced_model(pricer: Pricer | None, name: str) -> ModelInfo | None:
    """The entry of a model only the price data knows: an OpenAI model with its tiktoken encoding (the caller
    checks that the encoding is loaded); :class:`NoPublicTokenizer` for any other priced model; None if the price
    data does not know ``name`` either."""
    if pricer is None:
        return None
    provider = pricer.knows(name)
    if provider is None:
        return None
    encoding = encoding_for_model(name) if provider.id in ("openai", "azure") else None
    if encoding is None:
        raise NoPublicTokenizer(name, provider.id, provider.name, pricer.counting_endpoint(provider))
    _, priced = pricer.resolve(name, provider.id)
    return ModelInfo(name=name, tokenizer=encoding, context_window=priced.context_window,
                     pricing_provider=provider.id)
