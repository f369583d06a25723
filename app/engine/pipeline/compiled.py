"""The pipeline's optional compiled extension, ``app.engine._native._mergebpe`` (``mergebpe.c``): BPE over a merge
list (:class:`~app.engine.pipeline.models.bpe.BPE`) and the added-token finder
(:class:`~app.engine.pipeline.added.AddedMatcher`). Both give the same results as their pure-Python code, which
stays the reference and runs when the extension is missing or ``$TOKENIZER_ENGINE=python``.
``app.engine._native._spbpe`` (``spbpe.c``): SentencePiece BPE by piece score
(:class:`~app.engine.pipeline.models.sp_bpe.SentencePieceBPE`), under the same rules."""

from __future__ import annotations

from ..native import OptionalExtension

MERGE_BPE = OptionalExtension("app.engine._native._mergebpe", "compiled merge-list BPE", "the pure-Python pipeline")
SP_BPE = OptionalExtension("app.engine._native._spbpe", "compiled SentencePiece BPE", "the pure-Python pipeline")
#: ``app.engine._native._unigram`` (``unigram.c``): the Unigram Viterbi and SentencePiece's normalizer.
UNIGRAM = OptionalExtension("app.engine._native._unigram", "compiled Unigram", "the pure-Python pipeline")
