"""Every OpenAI model the price data lists resolves to its tiktoken encoding by tiktoken's own rules."""

from __future__ import annotations

import tiktoken.model

from app.pricing.data import bundled
from app.pricing.openai_models import MODEL_PREFIX_TO_ENCODING, MODEL_TO_ENCODING, encoding_for_model


def _tiktoken(name: str) -> str | None:
    try:
        return tiktoken.model.encoding_name_for_model(name)
    except KeyError:
        return None


def test_tables_are_tiktokens() -> None:
    assert MODEL_TO_ENCODING == tiktoken.model.MODEL_TO_ENCODING
    assert list(MODEL_PREFIX_TO_ENCODING.items()) == list(tiktoken.model.MODEL_PREFIX_TO_ENCODING.items())


def test_every_openai_model_of_the_price_data() -> None:
    openai = next(p for p in bundled().providers if p.id == "openai")
    names = [m.id for m in openai.models]
    assert len(names) > 100
    mapped = {n: encoding_for_model(n) for n in names}
    assert mapped == {n: _tiktoken(n) for n in names}
    for family in ("gpt-5", "gpt-5.4-mini", "gpt-4.1-nano", "o3", "o4-mini", "gpt-4o", "gpt-oss-120b"):
        assert mapped[family] in ("o200k_base", "o200k_harmony"), family
    assert mapped["gpt-4"] == "cl100k_base" and mapped["gpt-3.5-turbo"] == "cl100k_base"
    assert mapped["davinci"] == "r50k_base" and mapped["gpt-image-1"] is None


def test_snapshot_names_follow_the_prefix_rules() -> None:
    for name in ("gpt-4o-2024-08-06", "gpt-4.1-2025-04-14", "o3-mini-2025-01-31", "gpt-5.2-pro", "ft:gpt-4o-mini:x",
                 "gpt-35-turbo-0613", "chatgpt-4o-latest", "text-embedding-3-large", "unknown-model"):
        assert encoding_for_model(name) == _tiktoken(name), name
