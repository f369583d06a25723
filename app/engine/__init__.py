"""The tokenizer engine: exact tokenizers of every family over frozen, verified artifacts.

Public surface (``__all__``; the package ships a ``py.typed`` marker, so type checkers use these hints)::

    from app.engine import get_tokenizer
    tokenizer = get_tokenizer("cl100k_base")    # or an alias: "gpt2" / "r50k_base", …
    ids = tokenizer.encode("hello world")      # text is always plain text
    tokenizer.decode(ids) == "hello world"

Every tokenizer ``get_tokenizer`` returns implements :class:`Tokenizer` (byte-level BPE over ranks as
:class:`RankBPETokenizer`, the compiled fast path; component pipelines for ``tokenizer.json`` and the other
families). This package imports nothing from the web layer and can be used as a library.

The names this package had before issue 25 still work, each with a ``DeprecationWarning`` (:data:`DEPRECATED`
maps them to today's names).

``LOADERS``, ``load_all``, ``load_encoding``, ``reset`` and ``default_store_dir`` are importable too (the service
and the tests use them) but are not in ``__all__``: they are not part of the library's contract.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from ._lazy import lazy_names

if TYPE_CHECKING:
    from .cache import CacheStats
    from .encoding import RankBPETokenizer
    from .errors import (
        ArtifactError,
        EngineError,
        InvalidTokenIdError,
        ManifestError,
        UnknownSpecialTokenError,
        UnknownTokenizerError,
    )
    from .loaders import LOADERS, LoadOptions, load_tokenizer  # noqa: F401
    from .registry import get_store, get_tokenizer, list_tokenizers, load_all, load_encoding, reset  # noqa: F401
    from .sampling import Sample, SamplingError
    from .specials import Special, Template
    from .store import Store, TokenizerSpec, default_store_dir  # noqa: F401
    from .tokenizer import Tokenizer

#: Where each name of the package lives. They are imported on first use (PEP 562), so that importing a submodule
#: (the trainers, the CLI's helpers) does not load the whole engine first. ``load_tokenizer`` (defined in
#: ``loaders``) is taken from ``registry``, which registers how tokenizers pickle.
_LAZY = {
    "CacheStats": "cache", "RankBPETokenizer": "encoding",
    "ArtifactError": "errors", "EngineError": "errors", "InvalidTokenIdError": "errors", "ManifestError": "errors",
    "UnknownSpecialTokenError": "errors", "UnknownTokenizerError": "errors",
    "LOADERS": "loaders", "LoadOptions": "loaders", "load_tokenizer": "registry",
    "get_tokenizer": "registry", "get_store": "registry", "list_tokenizers": "registry", "load_all": "registry",
    "load_encoding": "registry", "reset": "registry",
    "Sample": "sampling", "SamplingError": "sampling", "Special": "specials", "Template": "specials",
    "Store": "store", "TokenizerSpec": "store", "default_store_dir": "store", "Tokenizer": "tokenizer",
}  # fmt: skip


#: Old name -> the name that replaced it (issue 25): importing an old name warns and gives the new name's object.
DEPRECATED = {
    "get_encoding": "get_tokenizer",  # old name kept
    "list_encodings": "list_tokenizers",  # old name kept
    "Encoding": "RankBPETokenizer",  # old name kept
}

_lazy_getattr, __dir__ = lazy_names(__name__, _LAZY, globals())


def __getattr__(name: str) -> Any:
    new = DEPRECATED.get(name)
    if new is not None:  # not cached in the namespace: every use warns
        warnings.warn(f"app.engine.{name} is deprecated; use app.engine.{new}", DeprecationWarning, stacklevel=2)
        return _lazy_getattr(new)
    return _lazy_getattr(name)


#: The public surface (pinned by tests/engine/test_public_api.py): load a tokenizer, use it, catch its errors.
__all__ = [
    # getting a tokenizer
    "get_tokenizer",
    "list_tokenizers",
    "get_store",
    "load_tokenizer",
    "LoadOptions",
    "Store",
    "TokenizerSpec",
    # using it
    "Tokenizer",
    "RankBPETokenizer",
    "Special",
    "Template",
    "CacheStats",
    "Sample",
    # its errors
    "EngineError",
    "UnknownTokenizerError",
    "UnknownSpecialTokenError",
    "InvalidTokenIdError",
    "ArtifactError",
    "ManifestError",
    "SamplingError",
]
