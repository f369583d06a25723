"""The ``sample`` field of ``/encode`` and ``/count``: request options to the engine's
:class:`~app.engine.sampling.Sample`, checked against the tokenizer before any work (a tokenizer that cannot
sample, or an option of the other model family, is a 422 ``invalid_sample``)."""

from __future__ import annotations

from app.engine import Tokenizer
from app.engine.sampling import Sample

from .schemas import SampleOptions


def sample_of(options: SampleOptions | None, enc: Tokenizer) -> Sample | None:
    """The engine's sampling settings for ``options`` (None: no sampling). Raises
    :class:`~app.engine.sampling.SamplingError` (422 ``invalid_sample``) when ``enc`` cannot sample as asked."""
    if options is None:
        return None
    sample = Sample(seed=options.seed, alpha=options.alpha, nbest=options.nbest, dropout=options.dropout)
    enc.check_sample(sample)
    return sample
