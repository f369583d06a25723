"""The long differential run behind the family tests (not collected by pytest): every bundled SentencePiece,
tekken and GGUF tokenizer against its reference on far more text than the default suite samples.

    python -m tests.engine.families.exactness [--slices N] [--seed S] [--names a,b]

Prints, per tokenizer, the number of texts compared (hostile strings, every real document whole, and N random
slices), characters, mismatching encodings and mismatching decodes.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from app.engine import get_tokenizer
from harness.references import hf_qwen2
from harness.texts import HOSTILE, SPECIAL_STRINGS, real_documents

from .references import llama_cpp_vectors, sentencepiece_reference, tekken_reference

REFERENCES: dict[str, str] = {
    "mistral-v1": "sentencepiece", "mistral-v3": "sentencepiece", "mistral-v7": "sentencepiece",
    "mistral-nemo": "mistral-common", "llama2": "sentencepiece", "phi-3": "sentencepiece",
    "xlm-roberta-sentencepiece": "sentencepiece", "xlm-roberta": "tokenizers", "bge-small-en-v1.5": "tokenizers",
    "qwen2": "tokenizers",
}


def _reference(name: str) -> tuple[Callable[[str], list[int]], Callable[[list[int]], str]]:
    kind = REFERENCES[name]
    if kind == "sentencepiece":
        sp = sentencepiece_reference(name)
        return sp.encode, sp.decode
    if kind == "mistral-common":
        tk = tekken_reference(name)
        return (lambda t: tk.encode(t, bos=False, eos=False)), tk.decode
    from .test_wordpiece import hf_bert

    if name == "bge-small-en-v1.5":
        hf = hf_bert()
    elif name == "xlm-roberta":  # its specials (<unk> among them) decode by name, as ours do
        from .references import hf_xlm_roberta_reference

        xlmr = hf_xlm_roberta_reference()
        return (lambda t: xlmr.encode(t, add_special_tokens=False).ids,
                lambda ids: xlmr.decode(ids, skip_special_tokens=False))
    else:
        hf = hf_qwen2()
    return (lambda t: hf.encode(t, add_special_tokens=False).ids), hf.decode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--names", default=",".join(REFERENCES))
    args = parser.parse_args()
    docs = real_documents()
    rng = random.Random(args.seed)
    slices = []
    for _ in range(args.slices):
        d = rng.choice(docs)
        i = rng.randrange(max(1, len(d) - 400))
        slices.append(d[i:i + rng.randrange(1, 400)])
    texts = [t for t in [*HOSTILE, *docs, *slices] if not any(s in t for s in SPECIAL_STRINGS)]
    for name in args.names.split(","):
        tok = get_tokenizer(name)
        encode, decode = _reference(name)
        t0 = time.perf_counter()
        bad_ids = bad_text = 0
        first = None
        for t in texts:
            ids = encode(t)
            if tok.encode(t) != ids:
                bad_ids += 1
                first = first or t
            if tok.decode(ids) != decode(ids):
                bad_text += 1
        vectors = ""
        stem = {"llama2": "ggml-vocab-llama-spm.gguf", "phi-3": "ggml-vocab-phi-3.gguf",
                "bge-small-en-v1.5": "ggml-vocab-bert-bge.gguf", "qwen2": "ggml-vocab-qwen2.gguf"}.get(name)
        if stem:
            cases = llama_cpp_vectors(stem)
            vectors = f", llama.cpp vectors {sum(tok.encode(x) != e for x, e in cases)}/{len(cases)} mismatches"
        print(f"{name}: {len(texts)} texts, {sum(map(len, texts))} chars vs {REFERENCES[name]}: "
              f"{bad_ids} id mismatches, {bad_text} decode mismatches{vectors} "
              f"({time.perf_counter() - t0:.0f}s)" + (f"; first {first[:60]!r}" if first else ""), flush=True)


if __name__ == "__main__":
    main()
