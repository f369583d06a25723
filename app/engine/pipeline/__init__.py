"""Pipeline tokenizers: normalizer -> pre-tokenizer -> model -> post-processor, and a decoder back.

See :mod:`app.engine.pipeline.base` for the component protocols and the offset rules, :mod:`.pipeline` for the
tokenizer that runs them and :mod:`.hf_json` for the ``tokenizer.json`` loader.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .added import AddedToken
    from .base import Piece
    from .pipeline import Pipeline

#: Imported on first use (PEP 562): a component module (the BERT normalizer a trainer uses) loads without the
#: whole pipeline.
_LAZY = {"AddedToken": "added", "Piece": "base", "Pipeline": "pipeline"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = ["AddedToken", "Piece", "Pipeline"]
