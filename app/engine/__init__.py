"""The tokenizer engine: exact byte-level BPE over frozen, verified artifacts.

Public surface::

    from app.engine import get_encoding
    enc = get_encoding("cl100k_base")          # or an alias: "gpt2" / "r50k_base", …
    ids = enc.encode("hello world")            # text is always plain text
    enc.decode(ids) == "hello world"

This package imports nothing from the web layer and can be used as a library.
"""

from __future__ import annotations

from .cache import CacheStats
from .encoding import Encoding, Special
from .errors import (
    ArtifactError,
    EngineError,
    InvalidTokenIdError,
    ManifestError,
    UnknownSpecialTokenError,
    UnknownTokenizerError,
)
from .registry import get_encoding, get_store, list_encodings, load_all, load_encoding, reset
from .store import Store, TokenizerSpec, default_store_dir

__all__ = [
    "ArtifactError",
    "CacheStats",
    "Encoding",
    "EngineError",
    "InvalidTokenIdError",
    "ManifestError",
    "Special",
    "Store",
    "TokenizerSpec",
    "UnknownSpecialTokenError",
    "UnknownTokenizerError",
    "default_store_dir",
    "get_encoding",
    "get_store",
    "list_encodings",
    "load_all",
    "load_encoding",
    "reset",
]
