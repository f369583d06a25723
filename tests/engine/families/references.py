"""References for the family tests: llama.cpp's ``.inp``/``.out`` vectors (``data/``), which llama.cpp produced from
Hugging Face tokenizers, and the reference tokenizers of :mod:`harness.references` (``sentencepiece``,
``mistral-common``'s ``Tekkenizer``, Hugging Face ``tokenizers``), which the benchmarks share."""

from __future__ import annotations

from pathlib import Path

from harness.references import (
    artifact_bytes,
    gguf_kv,
    hf_unigram_reference,
    hf_xlm_roberta_reference,
    sentencepiece_reference,
    tekken_reference,
)

__all__ = ["DATA", "artifact_bytes", "gguf_kv", "hf_unigram_reference", "hf_xlm_roberta_reference", "llama_cpp_vectors",
           "sentencepiece_reference", "tekken_reference"]

DATA = Path(__file__).resolve().parent / "data"


def llama_cpp_vectors(stem: str) -> list[tuple[str, list[int]]]:
    """``(text, expected ids)`` from ``data/<stem>.inp`` / ``.out`` (llama.cpp's test-tokenizer-0 format)."""
    texts = (DATA / f"{stem}.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")[:-1]
    lines = (DATA / f"{stem}.out").read_text(encoding="utf-8").split("\n")
    assert len(lines) >= len(texts)
    return [(t, [int(v) for v in lines[i].split()]) for i, t in enumerate(texts)]
