"""Subword regularisation: a random segmentation instead of the best one, for training-data augmentation.

* Unigram models (Kudo 2018): one segmentation drawn from the whole lattice with probability proportional to
  ``exp(alpha * score)`` (``nbest=-1``, as SentencePiece's ``nbest_size=-1``); ``nbest=1`` is the best one.
* SentencePiece BPE models: BPE-dropout (Provilkov et al. 2020), each merge skipped with probability ``p``.

Off by default: :meth:`~app.engine.tokenizer.Tokenizer.encode` is deterministic; :func:`encode_sampled` samples.
Samples are reproducible for a given ``seed`` (Python's ``random``; they are not the samples SentencePiece's C++
generator would draw). Every sample is a valid segmentation of the same normalized text, so it decodes to what the
deterministic encoding decodes to.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .models.sp_bpe import SentencePieceBPE
from .models.unigram import Unigram
from .pipeline import Pipeline


@dataclass(frozen=True)
class Sample:
    """Sampling settings. ``alpha``: Unigram smoothing (0 = uniform over segmentations, larger = closer to the
    best); ``nbest``: -1 (whole lattice) or 1 (no sampling); ``p``: BPE-dropout probability; ``seed``."""

    seed: int = 0
    alpha: float = 0.1
    nbest: int = -1
    p: float = 0.1

    def __post_init__(self) -> None:
        if self.nbest not in (-1, 1):
            raise ValueError("nbest must be -1 (sample from the whole lattice) or 1 (the best segmentation)")
        if not 0.0 <= self.p <= 1.0 or self.alpha < 0.0:
            raise ValueError("p must be in [0, 1] and alpha >= 0")


def encode_sampled(tok: Pipeline, text: str, sample: Sample) -> list[int]:
    """Ids of one sampled segmentation of ``text`` (ordinary text, as :meth:`Pipeline.encode`). Raises
    ``ValueError`` for a tokenizer whose model cannot sample (only Unigram and SentencePiece BPE can)."""
    rng = random.Random(sample.seed)
    model = tok.model
    if isinstance(model, Unigram):
        if sample.nbest == 1:
            def run(t: str) -> list[tuple[int, int, int]]:
                return model.tokenize_with_spans(t)
        else:
            def run(t: str) -> list[tuple[int, int, int]]:
                return model.sample_with_spans(t, rng, sample.alpha)
    elif isinstance(model, SentencePieceBPE):
        def run(t: str) -> list[tuple[int, int, int]]:
            return model.dropout_with_spans(t, rng, sample.p)
    else:
        raise ValueError(f"tokenizer {tok.name!r} cannot sample: subword regularisation needs a Unigram or a "
                         f"SentencePiece BPE model, not {type(model).__name__}")
    ids: list[int] = []
    for piece in tok.pre_token_pieces(text):
        if piece.token_id is not None:
            ids.append(piece.token_id)
        elif piece.text:
            ids.extend(i for i, _, _ in run(piece.text))
    return ids
