"""The precompiled charsmap (XLM-R's ``nmt_nfkc``) under both semantics: SentencePiece's normalizer against
``sentencepiece``'s own ``normalize``, Hugging Face's ``Precompiled`` against ``tokenizers``' — including inputs
where the two references disagree with each other — and the Hugging Face Unigram path (``tokenizer.json``) against
``tokenizers`` on the same vocabulary."""

from __future__ import annotations

import base64
import json
import random
from functools import lru_cache
from typing import Any

import pytest

from app.engine.pipeline.charsmap import CharsMap, CharsMapError, Precompiled
from app.engine.pipeline.hf_json import from_hf_json
from app.engine.pipeline.sp_normalizer import SentencePieceNormalizer
from harness.texts import SPECIAL_STRINGS, sample

from .references import gguf_kv, sentencepiece_reference

#: Inputs where SentencePiece (longest match over code points) and Hugging Face (per grapheme, shortest match,
#: whole-grapheme replacement) normalize differently.
DIVERGENT = ["\uff45\u0301", "\uff21\u0308", "\u1100\u1161\u11a8", "\u0915\u094d\u0937"]


@lru_cache(maxsize=1)
def charsmap() -> CharsMap:
    return CharsMap(gguf_kv("xlm-roberta-sentencepiece")["tokenizer.ggml.precompiled_charsmap"])


def _code_point_texts(seed: int) -> list[str]:
    rng = random.Random(seed)
    singles = [chr(c) for c in rng.sample(range(0x30000), 6000) if not 0xD800 <= c < 0xE000]
    keys = rng.sample(sorted(charsmap().table), 3000)  # every kind of key: single characters and sequences
    return [*singles, *keys, *("a" + k + "b" for k in keys[:500]), *DIVERGENT]


def test_sentencepiece_semantics_equal_sentencepiece_normalize() -> None:
    ref = sentencepiece_reference("xlm-roberta-sentencepiece")
    ours = SentencePieceNormalizer(charsmap(), add_dummy_prefix=True, remove_extra_whitespaces=True)
    texts = [*_code_point_texts(1), *sample(40, 100, seed=2)]
    wrong = [t for t in texts if ours.normalize_str(t) != ref.normalize(t)]
    assert not wrong, f"{len(wrong)}/{len(texts)} differ; first {wrong[0][:40]!r}"


def test_hf_semantics_equal_tokenizers_precompiled() -> None:
    from tokenizers import normalizers

    blob = gguf_kv("xlm-roberta-sentencepiece")["tokenizer.ggml.precompiled_charsmap"]
    ref = normalizers.Precompiled(blob)
    ours = Precompiled.from_hf({"type": "Precompiled", "precompiled_charsmap": base64.b64encode(blob).decode()})
    texts = [*_code_point_texts(3), *sample(40, 100, seed=4)]
    wrong = [t for t in texts if ours.normalize_str(t) != ref.normalize_str(t)]
    assert not wrong, f"{len(wrong)}/{len(texts)} differ; first {wrong[0][:40]!r}"


def test_the_two_semantics_really_differ() -> None:
    from tokenizers import normalizers

    blob = gguf_kv("xlm-roberta-sentencepiece")["tokenizer.ggml.precompiled_charsmap"]
    sp = SentencePieceNormalizer(charsmap(), add_dummy_prefix=False, remove_extra_whitespaces=False,
                                 escape_whitespaces=False)
    hf = normalizers.Precompiled(blob)
    assert any(sp.normalize_str(t) != hf.normalize_str(t) for t in DIVERGENT)


def test_malformed_charsmap() -> None:
    with pytest.raises(CharsMapError):
        CharsMap(b"\x01\x00")
    with pytest.raises(CharsMapError):
        CharsMap(b"\xff\xff\x00\x00" + bytes(16))
    assert len(CharsMap(b"")) == 0


@lru_cache(maxsize=1)
def hf_unigram_doc() -> dict[str, Any]:
    kv = gguf_kv("xlm-roberta-sentencepiece")
    toks, scores, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"], kv["tokenizer.ggml.token_type"]
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": toks[i], "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i in range(len(toks)) if types[i] in (2, 3)],
        "normalizer": {"type": "Precompiled",
                       "precompiled_charsmap": base64.b64encode(kv["tokenizer.ggml.precompiled_charsmap"]).decode()},
        "pre_tokenizer": metaspace, "post_processor": None, "decoder": metaspace,
        "model": {"type": "Unigram", "unk_id": 3, "vocab": [[t, s] for t, s in zip(toks, scores, strict=True)],
                  "byte_fallback": False},
    }


def test_hf_unigram_equals_tokenizers() -> None:
    from tokenizers import Tokenizer

    doc = hf_unigram_doc()
    ref = Tokenizer.from_str(json.dumps(doc))
    ours = from_hf_json(doc, "xlmr-json")
    texts = [t for t in sample(50, 120, seed=9) if not any(s in t for s in SPECIAL_STRINGS)] + DIVERGENT
    wrong = [t for t in texts if ours.encode(t) != ref.encode(t, add_special_tokens=False).ids]
    assert not wrong, f"{len(wrong)}/{len(texts)} differ; first {wrong[0][:80]!r}"
    # Hugging Face matches the control piece's string inside the model when special-token splitting is off;
    # the engine never produces a special id from text.
    assert not any(ours.is_special(i) for i in ours.encode("<s> x </s> <unk>"))
