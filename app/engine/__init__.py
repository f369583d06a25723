"""The tokenizer engine: exact tokenizers of every family over frozen, verified artifacts.

Public surface::

    from app.engine import get_encoding
    enc = get_encoding("cl100k_base")          # or an alias: "gpt2" / "r50k_base", …
    ids = enc.encode("hello world")            # text is always plain text
    enc.decode(ids) == "hello world"

Every tokenizer ``get_encoding`` returns implements :class:`Tokenizer` (byte-level BPE as :class:`Encoding`, the
compiled fast path; component pipelines for ``tokenizer.json`` and the other families). This package imports
nothing from the web layer and can be used as a library.
"""

from __future__ import annotations

from .cache import CacheStats
from .encoding import Encoding
from .errors import (
    ArtifactError,
    EngineError,
    InvalidTokenIdError,
    ManifestError,
    UnknownSpecialTokenError,
    UnknownTokenizerError,
)
from .loaders import LOADERS, LoadOptions, load_tokenizer
from .registry import get_encoding, get_store, list_encodings, load_all, load_encoding, reset
from .specials import Special, Template
from .store import Store, TokenizerSpec, default_store_dir
from .tokenizer import Tokenizer

__all__ = [
    "ArtifactError",
    "CacheStats",
    "Encoding",
    "EngineError",
    "InvalidTokenIdError",
    "LOADERS",
    "LoadOptions",
    "ManifestError",
    "Special",
    "Store",
    "Template",
    "Tokenizer",
    "TokenizerSpec",
    "UnknownSpecialTokenError",
    "UnknownTokenizerError",
    "default_store_dir",
    "get_encoding",
    "get_store",
    "list_encodings",
    "load_all",
    "load_encoding",
    "load_tokenizer",
    "reset",
]
