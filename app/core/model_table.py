"""The model table: model name -> tokenizer, context window and prices (``models.json``, operator-editable).

File schema (``format_version`` 1)::

    {"format_version": 1,
     "currency": "USD",
     "models": {
        "gpt-4o": {"tokenizer": "o200k_base",          # a name or alias in the tokenizer store
                   "aliases": ["chatgpt-4o-latest"],     # optional, other names for the same entry
                   "chat": {"framing": "openai-cookbook", "rules": "gpt-4o"},   # optional: how `messages` are
                                                         # framed (see app.engine.chat.framings)
                   "context_window": 128000,             # tokens (input + output), or null if unknown
                   "max_output_tokens": 16384,           # or null
                   "price": {"input_per_million": 2.5,   # currency units per 1,000,000 tokens, or null
                             "output_per_million": 10.0,
                             "cached_input_per_million": 1.25,   # optional: prompt-cache hits, or null
                             "source": "https://…",      # where the price was taken from
                             "as_of": "2025-06",         # when
                             "note": "…"}},              # optional
        …}}

A name the table lacks resolves to the longest table name it extends with ``-`` (dated snapshots, as tiktoken's
model-prefix table does: ``gpt-4o-2024-08-06`` -> ``gpt-4o``, ``gpt-3.5-turbo-0301`` -> ``gpt-3.5-turbo``). A model
the table lacks still resolves if a tokenizer's manifest entry lists it under ``models`` (then context
window and prices are unknown). Prices are estimates for planning; the operator owns this file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1
MODELS_FILE = "models.json"


class ModelTableError(ValueError):
    """A model table that cannot be read or breaks the schema; the message names the file and the entry."""


@dataclass(frozen=True)
class ModelInfo:
    """One model: the tokenizer it uses and, when known, its context window and prices per million tokens."""

    name: str
    tokenizer: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    input_per_million: float | None = None
    output_per_million: float | None = None
    cached_input_per_million: float | None = None
    currency: str = "USD"
    price_source: str | None = None
    price_as_of: str | None = None
    price_note: str | None = None
    chat: Mapping[str, Any] | None = None

    def input_cost(self, tokens: int) -> float | None:
        """Estimated cost of ``tokens`` input tokens in :attr:`currency`, or None without a price."""
        if self.input_per_million is None:
            return None
        return tokens * self.input_per_million / 1_000_000

    def output_cost(self, tokens: int) -> float | None:
        """Estimated cost of ``tokens`` output tokens, or None without a price."""
        if self.output_per_million is None:
            return None
        return tokens * self.output_per_million / 1_000_000


class ModelTable:
    """Model names (and aliases) -> :class:`ModelInfo`."""

    def __init__(self, models: Mapping[str, ModelInfo], path: Path | None = None) -> None:
        self.path = path
        self._models = dict(models)

    @classmethod
    def empty(cls) -> ModelTable:
        return cls({})

    @classmethod
    def load(cls, path: Path) -> ModelTable:
        """Read and validate a table. Raises :class:`ModelTableError` naming the file (and entry) at fault."""
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ModelTableError(f"{path}: cannot read model table: {exc}") from None
        if not isinstance(raw, dict) or raw.get("format_version") != FORMAT_VERSION:
            raise ModelTableError(f"{path}: expected an object with format_version {FORMAT_VERSION}")
        currency = raw.get("currency", "USD")
        entries = raw.get("models")
        if not isinstance(currency, str) or not isinstance(entries, dict):
            raise ModelTableError(f"{path}: 'models' must be an object and 'currency' a string")
        models: dict[str, ModelInfo] = {}
        for name, entry in entries.items():
            info = _parse_entry(path, name, entry, currency)
            aliases = entry.get("aliases", [])
            if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
                raise ModelTableError(f"{path}: model {name!r}: 'aliases' must be a list of names")
            for key in (name, *aliases):
                if key in models:
                    raise ModelTableError(f"{path}: model name or alias {key!r} is used twice")
                models[key] = info
        return cls(models, Path(path))

    def get(self, name: str) -> ModelInfo | None:
        return self._models.get(name)

    def resolve(self, name: str) -> ModelInfo | None:
        """The entry of ``name``, else of the longest table name that ``name`` extends with ``-`` (a snapshot)."""
        info = self._models.get(name)
        if info is not None:
            return info
        best = max((k for k in self._models if name.startswith(k + "-")), key=len, default=None)
        return self._models[best] if best is not None else None

    def __iter__(self) -> Iterator[str]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)

    def names(self) -> list[str]:
        return sorted(self._models)

    def only(self, keep: Callable[[ModelInfo], bool]) -> ModelTable:
        """A table of the entries for which ``keep`` is true (same path)."""
        return ModelTable({k: v for k, v in self._models.items() if keep(v)}, self.path)

    def entries(self) -> dict[str, ModelInfo]:
        """Name or alias -> info (a copy)."""
        return dict(self._models)


def _parse_entry(path: Path, name: str, entry: Any, currency: str) -> ModelInfo:
    where = f"{path}: model {name!r}"
    if not name or not isinstance(entry, dict):
        raise ModelTableError(f"{where}: each model must be an object with a non-empty name")
    tokenizer = entry.get("tokenizer")
    if not isinstance(tokenizer, str) or not tokenizer:
        raise ModelTableError(f"{where}: 'tokenizer' must be a tokenizer name")

    def count(key: str) -> int | None:
        value = entry.get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ModelTableError(f"{where}: {key!r} must be a positive integer or null")
        return value

    price = entry.get("price") or {}
    if not isinstance(price, dict):
        raise ModelTableError(f"{where}: 'price' must be an object or null")

    def money(key: str) -> float | None:
        value = price.get(key)
        if value is None:
            return None
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise ModelTableError(f"{where}: price {key!r} must be a number >= 0 or null")
        return float(value)

    def text(key: str) -> str | None:
        value = price.get(key)
        if value is not None and not isinstance(value, str):
            raise ModelTableError(f"{where}: price {key!r} must be a string")
        return value

    chat = entry.get("chat")
    if chat is not None and not isinstance(chat, dict):
        raise ModelTableError(f"{where}: 'chat' must be an object or null")

    info = ModelInfo(
        name=name,
        tokenizer=tokenizer,
        context_window=count("context_window"),
        max_output_tokens=count("max_output_tokens"),
        input_per_million=money("input_per_million"),
        output_per_million=money("output_per_million"),
        cached_input_per_million=money("cached_input_per_million"),
        currency=currency,
        price_source=text("source"),
        price_as_of=text("as_of"),
        price_note=text("note"),
        chat=chat,
    )
    if (info.input_per_million is not None or info.output_per_million is not None) and not (
        info.price_source and info.price_as_of
    ):
        raise ModelTableError(f"{where}: a price needs its 'source' and 'as_of'")
    return info
