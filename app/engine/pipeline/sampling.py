"""Subword regularisation for :class:`~app.engine.pipeline.pipeline.Pipeline` tokenizers (see
:mod:`app.engine.sampling` for the settings and the contract).

The pipeline's own steps run unchanged (added tokens, normalizer, pre-tokenizer); each model draws its own
segmentation of the pre-tokens (:meth:`~app.engine.pipeline.base.Model.sampler`), always on the pure-Python model
(a compiled core, when there is one, serves the deterministic path only):

* Unigram (:class:`~app.engine.pipeline.models.unigram.Unigram`) -- ``nbest=-1``: each pre-token sampled from its
  whole lattice; ``nbest=1``: the deterministic ids; ``nbest=n``: one of the whole text's n best segmentations
  (:mod:`.models.unigram_nbest`).
* SentencePiece BPE -- every merge skipped with probability ``dropout``, as ``sentencepiece`` samples BPE.
* merge-list BPE (``tokenizer.json``, the byte-level rank BPE included) -- Hugging Face's ``dropout``
  (:mod:`app.engine.dropout`).

Other models (WordPiece, WordLevel) raise :class:`~app.engine.sampling.SamplingError`. This module keeps the
n-best list of a pipeline (:func:`nbest_encodings`).
"""

from __future__ import annotations

from typing import Protocol

from .base import Model


class NBestPipeline(Protocol):
    """What :func:`nbest_encodings` needs of a pipeline tokenizer (:class:`~app.engine.pipeline.pipeline.Pipeline`
    provides it; typed here so that this module imports nothing back)."""

    name: str
    model: Model

    def pre_token_items(self, text: str) -> list[str | int]: ...


def nbest_encodings(tok: NBestPipeline, text: str, n: int) -> list[tuple[list[int], float]]:
    """The ``n`` best segmentations of ``text`` with their scores, best first, for a Unigram pipeline
    (SentencePiece's ``NBestEncode`` list). Raises :class:`~app.engine.sampling.SamplingError` for another model."""
    return tok.model.nbest(tok.pre_token_items(text), n, tok.name)
