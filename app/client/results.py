"""Typed results of :mod:`app.client`: one frozen dataclass per response shape of the service.

Each ``from_json`` reads the fields it knows and ignores the rest, so a newer service with more fields still
parses; a field the service may leave out has a default.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any


@dataclass(frozen=True)
class TokenPiece:
    """One token's bytes (``return_tokens``): ``text`` when they are valid UTF-8 on their own, else None."""

    data: bytes
    text: str | None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TokenPiece:
        text = obj.get("text")
        if text is not None:
            return cls(text.encode("utf-8"), text)
        return cls(base64.b64decode(obj.get("bytes") or ""), None)


@dataclass(frozen=True)
class ModelUsage:
    """The model table and the price data applied to the counted tokens (requests made with ``model=``). Money is
    :class:`~decimal.Decimal`, parsed from the service's exact decimal strings; ``price`` is the breakdown as sent
    (amounts as strings)."""

    name: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    fits: bool | None = None
    fits_each: list[bool] | None = None
    output_tokens_reserved: int | None = None
    cached_tokens: int = 0
    currency: str = "USD"
    input_price_per_million: Decimal | None = None
    cached_input_price_per_million: Decimal | None = None
    output_price_per_million: Decimal | None = None
    estimated_input_cost: Decimal | None = None
    estimated_output_cost: Decimal | None = None
    estimated_total_cost: Decimal | None = None
    price_source: str | None = None
    price_as_of: str | None = None
    price: dict[str, Any] | None = None
    price_unavailable: str | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any] | None) -> ModelUsage | None:
        if obj is None:
            return None
        values = {k: obj[k] for k in _MODEL_FIELDS if k in obj}
        for k in _MONEY_FIELDS:
            if values.get(k) is not None:
                values[k] = Decimal(values[k])
        return cls(**values)


_MONEY_FIELDS = ("input_price_per_million", "cached_input_price_per_million", "output_price_per_million",
                 "estimated_input_cost", "estimated_output_cost", "estimated_total_cost")
_MODEL_FIELDS = ("name", "context_window", "max_output_tokens", "fits", "fits_each", "output_tokens_reserved",
                 "cached_tokens", "currency", *_MONEY_FIELDS, "price_source", "price_as_of", "price",
                 "price_unavailable")


@dataclass(frozen=True)
class Encoded:
    """Ids of one input, with the token pieces / offsets / look-alike count when asked for."""

    ids: list[int]
    count: int
    tokens: list[TokenPiece] | None = None
    offsets: list[tuple[int, int]] | None = None
    special_lookalikes: int | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Encoded:
        tokens = obj.get("tokens")
        offsets = obj.get("offsets")
        return cls(
            ids=obj["ids"],
            count=obj["count"],
            tokens=[TokenPiece.from_json(t) for t in tokens] if tokens is not None else None,
            offsets=[(a, b) for a, b in offsets] if offsets is not None else None,
            special_lookalikes=obj.get("special_lookalikes"),
        )


@dataclass(frozen=True)
class EncodeResult(Encoded):
    """``POST /encode`` with ``text`` or ``parts``."""

    tokenizer: str = ""
    model: ModelUsage | None = None
    #: With ``messages``: the model's chat framing (e.g. ``"harmony"``).
    framing: str | None = None
    #: With ``truncate``: what was cut (``max_tokens``, ``side``, ``dropped_tokens``, ...), as the service reports it.
    truncated: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> EncodeResult:
        base = Encoded.from_json(obj)
        return cls(**base.__dict__, tokenizer=obj["tokenizer"], model=ModelUsage.from_json(obj.get("model")),
                   framing=obj.get("framing"), truncated=obj.get("truncated"))


@dataclass(frozen=True)
class EncodeBatchResult:
    """``POST /encode`` with ``texts``: one :class:`Encoded` per text, in order."""

    tokenizer: str
    results: list[Encoded]
    total: int
    model: ModelUsage | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> EncodeBatchResult:
        return cls(obj["tokenizer"], [Encoded.from_json(r) for r in obj["results"]], obj["total"],
                   ModelUsage.from_json(obj.get("model")))


@dataclass(frozen=True)
class CountResult:
    """``POST /count`` with ``text`` or ``parts``."""

    tokenizer: str
    count: int
    model: ModelUsage | None = None
    special_lookalikes: int | None = None
    framing: str | None = None
    truncated: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> CountResult:
        return cls(obj["tokenizer"], obj["count"], ModelUsage.from_json(obj.get("model")),
                   obj.get("special_lookalikes"), obj.get("framing"), obj.get("truncated"))


@dataclass(frozen=True)
class CountBatchResult:
    """``POST /count`` with ``texts``."""

    tokenizer: str
    counts: list[int]
    total: int
    model: ModelUsage | None = None
    special_lookalikes: list[int] | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> CountBatchResult:
        return cls(obj["tokenizer"], obj["counts"], obj["total"], ModelUsage.from_json(obj.get("model")),
                   obj.get("special_lookalikes"))


@dataclass(frozen=True)
class DecodeResult:
    """``POST /decode`` with ``ids``."""

    tokenizer: str
    text: str

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> DecodeResult:
        return cls(obj["tokenizer"], obj["text"])


@dataclass(frozen=True)
class DecodeBatchResult:
    """``POST /decode`` with ``batch``."""

    tokenizer: str
    texts: list[str]

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> DecodeBatchResult:
        return cls(obj["tokenizer"], obj["texts"])


@dataclass(frozen=True)
class TokenizerInfo:
    """One entry of ``GET /tokenizers``."""

    name: str
    aliases: list[str]
    kind: str
    backend: str
    vocab_size: int
    special_tokens_count: int
    sha256: str
    source: str = ""
    license: str = ""
    models: list[str] = field(default_factory=list)
    description: str = ""
    reference: str = ""

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TokenizerInfo:
        return cls(**_summary(obj))


def _summary(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": obj["name"],
        "aliases": obj.get("aliases", []),
        "kind": obj.get("kind", ""),
        "backend": obj.get("backend", ""),
        "vocab_size": obj["vocab_size"],
        "special_tokens_count": obj.get("special_tokens_count", 0),
        "sha256": obj.get("sha256", ""),
        "source": obj.get("source", ""),
        "license": obj.get("license", ""),
        "models": obj.get("models", []),
        "description": obj.get("description", ""),
        "reference": obj.get("reference", ""),
    }


@dataclass(frozen=True)
class TokenizerDetail(TokenizerInfo):
    """``GET /tokenizers/{name}``: the summary plus special tokens, added tokens, template and pattern."""

    special_tokens: dict[str, int] = field(default_factory=dict)
    added_tokens: dict[str, int] = field(default_factory=dict)
    template: str = ""
    pattern: str = ""

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TokenizerDetail:
        return cls(**_summary(obj), special_tokens=obj.get("special_tokens", {}),
                   added_tokens=obj.get("added_tokens", {}), template=obj.get("template", ""),
                   pattern=obj.get("pattern", ""))


@dataclass(frozen=True)
class ModelEntry:
    """One entry of ``GET /models``: the model's tokenizer, limits, chat support and prices (as published)."""

    name: str
    canonical: str
    tokenizer: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    messages: bool = False
    framing: str | None = None
    ids_public: bool = False
    price: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ModelEntry:
        return cls(obj["name"], obj.get("canonical", obj["name"]), obj["tokenizer"], obj.get("context_window"),
                   obj.get("max_output_tokens"), bool(obj.get("messages")), obj.get("framing"),
                   bool(obj.get("ids_public")), obj.get("price") or {})


@dataclass(frozen=True)
class PriceLine:
    """One priced unit of a :class:`PriceResult`: ``quantity`` units (after decomposition: input excludes cache
    reads) x ``rate`` per ``per`` units = ``amount``; ``tier_start`` is the threshold whose rate applied (None:
    the base rate)."""

    unit: str
    kind: str
    quantity: int | Decimal
    rate: Decimal
    per: int
    amount: Decimal
    tier_start: int | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PriceLine:
        q = obj["quantity"]
        return cls(obj["unit"], obj["kind"], q if isinstance(q, int) else Decimal(q), Decimal(obj["rate"]),
                   int(obj["per"]), Decimal(obj["amount"]), obj.get("tier_start"))


@dataclass(frozen=True)
class PriceResult:
    """``POST /price``: the price of one request's usage at a provider and model, from the service's price data.
    Money is :class:`~decimal.Decimal` (exact, parsed from the service's decimal strings); ``breakdown`` is the
    amount per group (``input`` uncached, ``cache_read``, ``cache_write[_5m|_1h]``, ``output`` with reasoning,
    ``other``); ``tier`` says which long-context tier applied and why (None without tiered prices)."""

    provider: str
    model: str
    total: Decimal
    breakdown: dict[str, Decimal]
    input_total: Decimal
    output_total: Decimal
    lines: list[PriceLine]
    currency: str = "USD"
    provider_name: str | None = None
    model_name: str | None = None
    tier: dict[str, Any] | None = None
    service_tier: str | None = None
    price_context: dict[str, str] = field(default_factory=dict)
    timestamp: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    price_data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PriceResult:
        return cls(obj["provider"], obj["model"], Decimal(obj["total"]),
                   {k: Decimal(v) for k, v in obj.get("breakdown", {}).items()},
                   Decimal(obj.get("input_total", "0")), Decimal(obj.get("output_total", "0")),
                   [PriceLine.from_json(line) for line in obj.get("lines", [])], obj.get("currency", "USD"),
                   obj.get("provider_name"), obj.get("model_name"), obj.get("tier"), obj.get("service_tier"),
                   obj.get("price_context") or {}, obj.get("timestamp"), obj.get("usage") or {},
                   obj.get("price_data") or {})


@dataclass(frozen=True)
class Health:
    """``GET /healthz``."""

    status: str

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Health:
        return cls(obj["status"])


@dataclass(frozen=True)
class Ready:
    """``GET /readyz`` (200): every listed tokenizer is loaded and verified."""

    status: str
    tokenizers: list[str]

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Ready:
        return cls(obj["status"], obj.get("tokenizers", []))
