"""The ``sample`` field of ``/encode`` and ``/count``: request options to the engine's
:class:`~app.engine.sampling.Sample`, checked against the tokenizer before any work (a tokenizer that cannot
sample, or an option of the other model family, is a 422 ``invalid_sample``).

Sampling runs the pure-Python models and builds the whole lattice of a Unigram text, so a sampled request is
limited to :data:`MAX_SAMPLE_BYTES` of text (413 above; the deterministic encoding has no such limit)."""

from __future__ import annotations

from app.engine import Tokenizer
from app.engine.sampling import Sample

from ..errors import ApiError
from ..schemas import SampleOptions

#: The most UTF-8 bytes of text one sampled request may hold.
MAX_SAMPLE_BYTES = 2**20


def sample_of(options: SampleOptions | None, tokenizer: Tokenizer, input_bytes: int) -> Sample | None:
    """The engine's sampling settings for ``options`` (None: no sampling). Raises
    :class:`~app.engine.sampling.SamplingError` (422 ``invalid_sample``) when ``tokenizer`` cannot sample as asked,
    and a 413 for more than :data:`MAX_SAMPLE_BYTES` of text."""
    if options is None:
        return None
    if input_bytes > MAX_SAMPLE_BYTES:
        raise ApiError(413, "payload_too_large", f"sampling works on at most {MAX_SAMPLE_BYTES} bytes of text per "
                       f"request; this one has {input_bytes}: split the text", {"limit": MAX_SAMPLE_BYTES,
                                                                                 "actual": input_bytes,
                                                                                 "field": "sample"})
    sample = Sample(seed=options.seed, alpha=options.alpha, nbest=options.nbest, dropout=options.dropout)
    tokenizer.check_sample(sample)
    return sample
