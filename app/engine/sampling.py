"""Subword regularisation settings: :class:`Sample`, passed as ``sample=`` to :meth:`Tokenizer.encode` & co.

Off by default (``sample=None``: the deterministic encoding). With a :class:`Sample` the tokenizer draws one
segmentation of the text at random, reproducibly for a given ``seed``:

* **Unigram** models (Kudo 2018): ``nbest=-1`` draws from the whole lattice with probability proportional to
  ``exp(alpha * score)``; ``nbest=1`` is the best segmentation; ``nbest=n > 1`` draws among the ``n`` best
  segmentations (SentencePiece's n-best list, in its order), again in proportion to ``exp(alpha * score)``.
  Defaults: ``alpha=0.1``, ``nbest=-1`` (SentencePiece's defaults).
* **BPE** models (Provilkov et al. 2020, BPE-dropout): merges are skipped with probability ``dropout`` (default
  0.1): SentencePiece BPE as ``sentencepiece`` skips them; merge-list BPE (``tokenizer.json``), byte-level BPE
  over ranks (tiktoken-format and tekken files; a pair merges when its bytes joined are a token) and the classic
  character BPE as Hugging Face ``tokenizers`` does with its ``dropout`` option.
  ``dropout=0`` is the deterministic encoding, ``dropout=1`` leaves single characters (byte-level: bytes).

A parameter that does not apply to the tokenizer's model (``dropout`` for Unigram, ``alpha``/``nbest`` for BPE),
or a tokenizer that cannot sample (WordPiece, WordLevel) raises
:class:`SamplingError`. Special tokens (``prefix``/``suffix``, the template, :class:`~app.engine.specials.Special`
parts) and matched added tokens are the same as without sampling; only the model's segmentation of the text is
drawn, so every sample decodes to what the deterministic encoding decodes to.

Randomness: Python's :class:`random.Random` seeded with ``seed`` (one generator per text, consumed left to right),
so a seed gives the same ids on every machine and Python version that keeps ``random``'s documented seeding; these
are not the samples SentencePiece's or Hugging Face's own generators would draw (those are not seedable the same
way), only the same distribution. Item ``i`` of a batch is sampled with ``seed + i``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from .errors import EngineError

#: The most segmentations ``nbest`` may ask for (SentencePiece's own cap).
MAX_NBEST = 512
DEFAULT_ALPHA = 0.1
DEFAULT_NBEST = -1
DEFAULT_DROPOUT = 0.1


class SamplingError(EngineError, ValueError):
    """Sampling asked of a tokenizer that cannot sample, or with a parameter its model does not take."""

    def __init__(self, message: str, *, tokenizer: str | None = None, model: str | None = None) -> None:
        super().__init__(message)
        self.tokenizer = tokenizer
        self.model = model


@dataclass(frozen=True)
class Sample:
    """How to sample. ``seed``: the generator's seed (>= 0). ``alpha`` (Unigram): smoothing, >= 0 (0 = every
    segmentation equally likely, larger = closer to the best one). ``nbest`` (Unigram): -1 = the whole lattice,
    1 = the best segmentation, 2..512 = among that many best. ``dropout`` (BPE): probability in [0, 1] of
    skipping a merge. ``None`` = the model's default. Raises ``ValueError`` for a value out of range."""

    seed: int = 0
    alpha: float | None = None
    nbest: int | None = None
    dropout: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, not {self.seed!r}")  # (random.Random(-n) is Random(n))
        if self.alpha is not None and not (math.isfinite(self.alpha) and self.alpha >= 0.0):
            raise ValueError(f"alpha must be a finite number >= 0, not {self.alpha!r}")
        if self.nbest is not None and (isinstance(self.nbest, bool) or not isinstance(self.nbest, int)
                                       or not (self.nbest == -1 or 1 <= self.nbest <= MAX_NBEST)):
            raise ValueError(f"nbest must be -1 (the whole lattice) or 1..{MAX_NBEST}, not {self.nbest!r}")
        if self.dropout is not None and not (0.0 <= self.dropout <= 1.0):
            raise ValueError(f"dropout must be in [0, 1], not {self.dropout!r}")

    def at(self, index: int) -> Sample:
        """The settings for item ``index`` of a batch (seed ``seed + index``)."""
        return replace(self, seed=self.seed + index)

    def rng(self, offset: int = 0) -> random.Random:
        """A fresh generator for one text (``offset``: its index in a batch)."""
        return random.Random(self.seed + offset)

    def for_unigram(self, tokenizer: str) -> tuple[float, int]:
        """``(alpha, nbest)`` with defaults; :class:`SamplingError` if ``dropout`` was given."""
        if self.dropout is not None:
            raise SamplingError(f"tokenizer {tokenizer!r} has a Unigram model: it samples with 'alpha' and "
                                "'nbest', not 'dropout' (a BPE option)", tokenizer=tokenizer, model="Unigram")
        return (DEFAULT_ALPHA if self.alpha is None else float(self.alpha),
                DEFAULT_NBEST if self.nbest is None else self.nbest)

    def for_bpe(self, tokenizer: str) -> float:
        """The dropout probability with its default; :class:`SamplingError` if ``alpha``/``nbest`` was given."""
        if self.alpha is not None or self.nbest is not None:
            raise SamplingError(f"tokenizer {tokenizer!r} has a BPE model: it samples with 'dropout', not "
                                "'alpha'/'nbest' (Unigram options)", tokenizer=tokenizer, model="BPE")
        return DEFAULT_DROPOUT if self.dropout is None else float(self.dropout)


def cannot_sample(tokenizer: str, model: str) -> SamplingError:
    """The error for a tokenizer whose model has no subword regularisation."""
    return SamplingError(f"tokenizer {tokenizer!r} cannot sample: its {model} model has one segmentation per text "
                         "(subword regularisation needs a Unigram or a BPE model)", tokenizer=tokenizer, model=model)
