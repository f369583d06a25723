"""A longer n-best comparison than the suite's: ``python -m tests.engine.pipeline.run_nbest COUNT SEED``.

COUNT texts on each of: the SentencePiece model trained by ``test_unigram_nbest`` (real-text slices, n in
2..512), random tie-heavy vocabularies (as the suite builds them), and xlm-roberta; prints how many n-best lists
(and segmentations in them) equal ``sentencepiece``'s ``NBestEncodeAsIds``, and exits 1 on any difference.
"""

from __future__ import annotations

import random
import sys
import time

import sentencepiece as spm

from app.engine import get_tokenizer
from app.engine.pipeline import Pipeline
from app.engine.pipeline.sentencepiece import build_pipeline, parse_model
from harness.texts import SPECIAL_STRINGS, real_documents

from ..families.references import sentencepiece_reference
from .test_unigram_nbest import _corpus, _ours, _random_model, trained


def main(count: int, seed: int) -> int:
    rng = random.Random(seed)
    data, tok = trained()
    cases: list[tuple[str, Pipeline, object, list[str]]] = []
    corpus = _corpus()
    slices = []
    for _ in range(count):
        line = rng.choice(corpus)
        start = rng.randrange(len(line))
        slices.append(line[start:start + rng.randint(1, 120)])
    cases.append(("trained", tok, spm.SentencePieceProcessor(model_proto=data), slices))
    for k in range(max(1, count // 100)):
        model = _random_model(rng, ties=k % 2 == 0)
        texts = ["".join(rng.choice("ab cé[X]xy") for _ in range(rng.randint(0, rng.choice([10, 30, 200]))))
                 for _ in range(100)]
        cases.append((f"random{k}", build_pipeline(f"r{k}", parse_model(model, "r.model"), source="r.model"),
                      spm.SentencePieceProcessor(model_proto=model), texts))
    x = get_tokenizer("xlm-roberta-sentencepiece")
    assert isinstance(x, Pipeline)
    docs = real_documents()
    texts = []
    while len(texts) < count:
        doc = rng.choice(docs)
        start = rng.randrange(len(doc))
        text = doc[start:start + rng.randint(1, 120)]
        if not any(s in text for s in SPECIAL_STRINGS):
            texts.append(text)
    cases.append(("xlm-roberta-sentencepiece", x, sentencepiece_reference("xlm-roberta-sentencepiece"), texts))
    bad = lists = segmentations = 0
    started = time.perf_counter()
    for label, ours, ref, items in cases:
        for text in items:
            n = rng.choice([2, 5, 17, 64, 512])
            expected = ref.nbest_encode_as_ids(text, n)  # type: ignore[attr-defined]
            lists += 1
            segmentations += len(expected)
            if _ours(ours, text, n) != expected:
                bad += 1
                print(f"DIFFERENT {label} n={n} {text!r}")
    print(f"{lists} n-best lists ({segmentations} segmentations) compared, {bad} different, "
          f"{time.perf_counter() - started:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000, int(sys.argv[2]) if len(sys.argv) > 2 else 1))
