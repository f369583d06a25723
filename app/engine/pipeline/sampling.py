"""Subword regularisation for :class:`~app.engine.pipeline.pipeline.Pipeline` tokenizers (see
:mod:`app.engine.sampling` for the settings and the contract).

The pipeline's own steps run unchanged (added tokens, normalizer, pre-tokenizer); only the model's segmentation of
each pre-token is drawn, always on the pure-Python model (a compiled core, when there is one, serves the
deterministic path only):

* Unigram — ``nbest=-1``: each pre-token sampled from its whole lattice (forward filtering, backward sampling;
  the pre-tokens are independent, so this is a draw from the whole text's lattice); ``nbest=1``: the deterministic
  ids; ``nbest=n``: one of the whole text's n best segmentations (:mod:`.models.unigram_nbest`).
* SentencePiece BPE — every merge skipped with probability ``dropout``, as ``sentencepiece`` samples BPE.
* merge-list BPE (``tokenizer.json``) — Hugging Face's ``dropout`` (:mod:`app.engine.dropout`).

Other models (WordPiece, WordLevel) raise :class:`~app.engine.sampling.SamplingError`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from ..sampling import Sample, cannot_sample
from .base import Model, Piece
from .models.bpe import BPE
from .models.sp_bpe import SentencePieceBPE
from .models.unigram import Unigram
from .models.unigram_nbest import nbest as _nbest
from .models.unigram_nbest import sample_nbest


class Pipeline(Protocol):
    """What sampling needs of a pipeline tokenizer (:class:`~app.engine.pipeline.pipeline.Pipeline` provides it;
    typed here so that this module, which the pipeline imports when it samples, imports nothing back)."""

    name: str
    model: Model
    _encode_text: Callable[[str], list[int]]

    def pre_token_pieces(self, text: str) -> list[Piece]: ...

Segmenter = Callable[[str], "list[tuple[int, int, int]]"]


def check(tok: Pipeline, sample: Sample) -> None:
    """Raise :class:`~app.engine.sampling.SamplingError` if ``tok`` cannot sample as ``sample`` asks (before any
    work)."""
    model = tok.model
    if isinstance(model, Unigram):
        sample.for_unigram(tok.name)
    elif isinstance(model, SentencePieceBPE | BPE):
        sample.for_bpe(tok.name)
    else:
        raise cannot_sample(tok.name, type(model).__name__)


def sample_text(tok: Pipeline, text: str, sample: Sample, rng: random.Random) -> list[int]:
    """Ids of one sampled segmentation of ``text`` (ordinary text, as :meth:`Pipeline.encode` without special
    tokens), drawing from ``rng``."""
    model = tok.model
    run: Segmenter
    if isinstance(model, Unigram):
        alpha, nbest = sample.for_unigram(tok.name)
        if nbest == 1:
            return tok._encode_text(text)
        if nbest > 1:
            items = [p.token_id if p.token_id is not None else p.text
                     for p in tok.pre_token_pieces(text) if p.token_id is not None or p.text]
            return sample_nbest(model, items, nbest, alpha, rng)

        def run(t: str) -> list[tuple[int, int, int]]:
            return model.sample_with_spans(t, rng, alpha)
    elif isinstance(model, SentencePieceBPE | BPE):
        p = sample.for_bpe(tok.name)
        if p <= 0.0:
            return tok._encode_text(text)
        dropout = model.dropout_with_spans

        def run(t: str) -> list[tuple[int, int, int]]:
            return dropout(t, rng, p)
    else:
        raise cannot_sample(tok.name, type(model).__name__)
    ids: list[int] = []
    for piece in tok.pre_token_pieces(text):
        if piece.token_id is not None:
            ids.append(piece.token_id)
        elif piece.text:
            ids.extend(i for i, _, _ in run(piece.text))
    return ids


def nbest_encodings(tok: Pipeline, text: str, n: int) -> list[tuple[list[int], float]]:
    """The ``n`` best segmentations of ``text`` with their scores, best first, for a Unigram pipeline
    (SentencePiece's ``NBestEncode`` list). Raises :class:`~app.engine.sampling.SamplingError` for another model."""
    model = tok.model
    if not isinstance(model, Unigram):
        raise cannot_sample(tok.name, type(model).__name__)
    items = [p.token_id if p.token_id is not None else p.text
             for p in tok.pre_token_pieces(text) if p.token_id is not None or p.text]
    return _nbest(model, items, n)
