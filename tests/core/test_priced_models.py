"""Models only the price data knows (app.core.priced_models)."""

from __future__ import annotations

import pytest

from app.core.priced_models import NoPublicTokenizer, by_prefix, priced_model
from app.pricing.data import bundled
from app.pricing.pricer import Pricer


@pytest.fixture(scope="module")
def pricer() -> Pricer:
    return Pricer(bundled())


def test_openai_models_get_their_tiktoken_encoding(pricer: Pricer) -> None:
    info = priced_model(pricer, "gpt-5.4-mini")
    assert info is not None and info.tokenizer == "o200k_base" and info.pricing_provider == "openai"
    assert info.context_window == 400000
    legacy = priced_model(pricer, "gpt-4-32k")
    assert legacy is not None and legacy.tokenizer == "cl100k_base" and legacy.context_window == 32000


def test_other_priced_models_have_no_public_tokenizer(pricer: Pricer) -> None:
    with pytest.raises(NoPublicTokenizer) as info:
        priced_model(pricer, "claude-opus-4-1")
    assert info.value.provider == "anthropic" and "/v1/messages/count_tokens" in str(info.value)
    with pytest.raises(NoPublicTokenizer) as other:
        priced_model(pricer, "gpt-image-1")  # OpenAI, but tiktoken maps no encoding to it
    assert other.value.provider == "openai" and "responses/input_tokens" in str(other.value)
    with pytest.raises(NoPublicTokenizer) as none:
        priced_model(pricer, "grok-4")
    assert none.value.endpoint is None and "POST /price" in str(none.value)


def test_provider_prefixes_for_names_the_data_lacks(pricer: Pricer) -> None:
    for name, provider in (("claude-zeta-9", "anthropic"), ("Anthropic/claude-x", "anthropic"),
                           ("anthropic.claude-v9", "anthropic"), ("gemini-9-ultra", "google"),
                           ("google/gemini-x", "google")):
        assert pricer.knows(name) is None, name
        with pytest.raises(NoPublicTokenizer) as err:
            priced_model(pricer, name)
        assert err.value.provider == provider and err.value.endpoint and not err.value.priced
        assert err.value.details()["field"] == "model"
        assert by_prefix(name) is not None
    for name in ("google/gemma-3-4b-it-unknown", "no-such-model-anywhere", "claudette"):
        assert by_prefix(name) is None, name
    known = by_prefix("claude-sonnet-4-5")  # the data knows it: priced_model says so with priced=True
    assert known is not None and not known.priced
    with pytest.raises(NoPublicTokenizer) as err:
        priced_model(pricer, "claude-sonnet-4-5")
    assert err.value.priced


def test_unknown_models(pricer: Pricer) -> None:
    assert priced_model(pricer, "no-such-model-anywhere") is None
    assert priced_model(None, "gpt-4o") is None
