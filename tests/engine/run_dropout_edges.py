"""BPE-dropout's edges on more text than the suite's: ``python -m tests.engine.run_dropout_edges SLICES SEED``.

``dropout=1`` and ``dropout=0`` of every bundled SentencePiece BPE tokenizer against ``sentencepiece``
(``enable_sampling=True, alpha=1`` and the plain encoding) and ``dropout=1`` of the ``tokenizer.json`` BPE files
against Hugging Face ``tokenizers`` with its model's ``dropout`` at 1.0, on the hostile strings, 20 real documents
and SLICES random slices; exits 1 on any difference.
"""

from __future__ import annotations

import sys
import time

from app.engine import Sample, get_tokenizer
from harness.texts import SPECIAL_STRINGS, sample

from .families.references import sentencepiece_reference
from .test_dropout import hf_with_dropout


def main(slices: int, seed: int) -> int:
    texts = [t for t in sample(20, slices, seed=seed, max_doc=3000) if not any(s in t for s in SPECIAL_STRINGS)]
    total = bad = 0
    started = time.perf_counter()
    every_merge_dropped, plain = Sample(seed=1, dropout=1.0), Sample(seed=1, dropout=0.0)
    for name in ["mistral-v1", "mistral-v3", "mistral-v7", "llama2", "phi-3"]:
        tok, ref = get_tokenizer(name), sentencepiece_reference(name)
        for text in texts:
            total += 2
            if tok.encode(text, sample=every_merge_dropped) != ref.encode(text, enable_sampling=True, alpha=1.0,
                                                                          nbest_size=-1):
                bad += 1
                print(f"DIFFERENT {name} dropout=1 {text[:80]!r}")
            if tok.encode(text, sample=plain) != ref.encode(text):
                bad += 1
                print(f"DIFFERENT {name} dropout=0 {text[:80]!r}")
    for name in ["qwen3", "deepseek-v3", "gemma3"]:
        tok = get_tokenizer(name)
        expected = [e.ids for e in hf_with_dropout(name, 1.0).encode_batch(texts, add_special_tokens=False)]
        for text, ids in zip(texts, expected, strict=True):
            total += 1
            if tok.encode(text, sample=every_merge_dropped) != ids:
                bad += 1
                print(f"DIFFERENT {name} dropout=1 {text[:80]!r}")
    print(f"{len(texts)} texts, {total} comparisons, {bad} different, {time.perf_counter() - started:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1500, int(sys.argv[2]) if len(sys.argv) > 2 else 21))
