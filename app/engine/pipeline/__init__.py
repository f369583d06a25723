"""Pipeline tokenizers: normalizer -> pre-tokenizer -> model -> post-processor, and a decoder back.

See :mod:`app.engine.pipeline.base` for the component protocols and the offset rules, :mod:`.pipeline` for the
tokenizer that runs them and :mod:`.hf_json` for the ``tokenizer.json`` loader.
"""

from .added import AddedToken
from .base import Piece
from .pipeline import Pipeline

__all__ = ["AddedToken", "Piece", "Pipeline"]
