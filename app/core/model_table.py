"""The model table: model name -> tokenizer, chat framing, context window, maximum output (``models.json``,
operator-editable). Prices are not kept here: they come from genai-prices (:mod:`app.pricing`); an entry may name
the provider whose price applies.

File schema (``format_version`` 1)::

    {"format_version": 1,
     "models": {
        "gpt-4o": {"tokenizer": "o200k_base",          # a name or alias in the tokenizer store
                   "aliases": ["chatgpt-4o-latest"],     # optional, other names for the same entry
                   "chat": {"framing": "openai-cookbook", "rules": "gpt-4o"},   # optional: how `messages` are
                                                         # framed (see app.engine.chat.framings)
                   "context_window": 128000,             # tokens (input + output), or null if unknown
                   "max_output_tokens": 16384,           # or null
                   "pricing": {"provider": "together",   # optional: whose price applies (a genai-prices provider
                               "model": "meta-llama/…"}},   # id) and that provider's model id (default: the name)
        …}}

An entry without ``pricing`` is priced under its own name wherever genai-prices' model-matching rules find it
(``gpt-4o`` -> OpenAI). A ``price`` block (the old hand-typed prices) is refused with a message saying so.

A name the table lacks resolves to the longest table name it extends with ``-`` (dated snapshots, as tiktoken's
model-prefix table does: ``gpt-4o-2024-08-06`` -> ``gpt-4o``, ``gpt-3.5-turbo-0301`` -> ``gpt-3.5-turbo``). A model
the table lacks still resolves if a tokenizer's manifest entry lists it under ``models`` (then context
window is unknown).
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
    """One model: the tokenizer it uses, its chat framing, context window and maximum output when known, and the
    genai-prices provider (and that provider's model id) whose price applies, when the table names one."""

    name: str
    tokenizer: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    chat: Mapping[str, Any] | None = None
    pricing_provider: str | None = None
    pricing_model: str | None = None


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
        entries = raw.get("models")
        if not isinstance(entries, dict):
            raise ModelTableError(f"{path}: 'models' must be an object")
        models: dict[str, ModelInfo] = {}
        for name, entry in entries.items():
            info = _parse_entry(path, name, entry)
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

    def chat_models(self) -> list[str]:
        """The names (and aliases) whose entry has a ``chat`` framing (those that take ``messages``), sorted."""
        return sorted(name for name, info in self._models.items() if info.chat is not None)


def _parse_entry(path: Path, name: str, entry: Any) -> ModelInfo:
    where = f"{path}: model {name!r}"
    if not name or not isinstance(entry, dict):
        raise ModelTableError(f"{where}: each model must be an object with a non-empty name")
    tokenizer = entry.get("tokenizer")
    if not isinstance(tokenizer, str) or not tokenizer:
        raise ModelTableError(f"{where}: 'tokenizer' must be a tokenizer name")
    if "price" in entry:
        raise ModelTableError(f"{where}: 'price' is no longer read: prices come from genai-prices (docs/pricing.md); "
                              "remove it, and name the provider whose price applies with 'pricing': "
                              "{\"provider\": ..., \"model\": ...} if the model's own name is not priced")

    def count(key: str) -> int | None:
        value = entry.get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ModelTableError(f"{where}: {key!r} must be a positive integer or null")
        return value

    pricing = entry.get("pricing")
    if pricing is not None and (not isinstance(pricing, dict) or set(pricing) - {"provider", "model"}
                                or not all(isinstance(v, str) and v for v in pricing.values())
                                or "provider" not in pricing):
        raise ModelTableError(f"{where}: 'pricing' must be {{\"provider\": id, \"model\"?: id}} with non-empty "
                              "strings, or null")
    chat = entry.get("chat")
    if chat is not None and not isinstance(chat, dict):
        raise ModelTableError(f"{where}: 'chat' must be an object or null")
    return ModelInfo(
        name=name,
        tokenizer=tokenizer,
        context_window=count("context_window"),
        max_output_tokens=count("max_output_tokens"),
        chat=chat,
        pricing_provider=pricing["provider"] if pricing else None,
        pricing_model=pricing.get("model") if pricing else None,
    )
