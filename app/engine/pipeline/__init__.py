"""Pipeline tokenizers: normalizer -> pre-tokenizer -> model -> post-processor, and a decoder back.

See :mod:`app.engine.pipeline.base` for the component protocols and the offset rules, :mod:`.pipeline` for the
tokenizer that runs them and :mod:`.hf_json` for the ``tokenizer.json`` loader.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .added import AddedToken
    from .base import Piece
    from .pipeline import Pipeline

#: Imported on first use (PEP 562): a component module (the BERT normalizer a trainer uses) loads without the
#: whole pipeline.
_LAZY = {"AddedToken": "added", "Piece": "base", "Pipeline": "pipeline"}

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = ["AddedToken", "Piece", "Pipeline"]
