"""``xlm-roberta`` against Hugging Face ``tokenizers`` (the tokenizer text-embeddings-inference,
sentence-transformers and vLLM run for XLM-R models), ``xlm-roberta-sentencepiece`` against ``sentencepiece``, and
the compiled whole-text path (:mod:`app.engine.pipeline.metaspace_fast`) against the pure-Python pipeline."""

from __future__ import annotations

import random
from functools import cache

import pytest

from app.engine import Tokenizer, get_tokenizer
from app.engine.pipeline.gguf import from_gguf
from harness.texts import HOSTILE, SPECIAL_STRINGS, real_documents, sample

from .references import artifact_bytes, hf_xlm_roberta_reference, sentencepiece_reference

#: whitespace at the ends and inside, the cases SentencePiece and Hugging Face treat differently
WHITESPACE = ["abc ", "abc\n", "abc\r\n", " abc", "\nabc", "a  b", "a \n b", "a\t\tb ", " ", "\n", "\t", "  ",
              "", "\u3000x\u3000", "x\u00a0", "x\u200b", "▁", "a ▁b", "a▁▁b ", "x \u0301 y ", "\r\n\r\n"]
#: grapheme clusters where Hugging Face's per-grapheme charsmap and SentencePiece's longest match differ, and the
#: Hangul jamo that SentencePiece composes across clusters
GRAPHEMES = ["\uff45\u0301 x", "\uff21\u0308", "\u1100\u1161\u11a8 ", "\u0915\u094d\u0937 x", "ﾾￜ", "ㄱㅏ",
             "e\u0301\u0302 ", "👩‍👩‍👧 🇫🇷🇩🇪 ", "\u0600\u0661 ", "नमस्ते दुनिया\n", "สวัสดีครับ "]


@cache
def python_backend() -> Tokenizer:
    return from_gguf(artifact_bytes("xlm-roberta"), "xlm-roberta", backend="python", tokenizer_json="xlm-roberta")


def _texts(n_docs: int, n_slices: int, seed: int) -> list[str]:
    docs = real_documents()
    lines = [line + "\n" for d in docs[:n_docs] for line in d.split("\n")]
    rng = random.Random(seed)
    ends = [t + rng.choice([" ", "\n", "  ", "\t", " \n"]) for t in sample(n_docs, n_slices, seed=seed)]
    out = [*HOSTILE, *WHITESPACE, *GRAPHEMES, *docs[:n_docs], *lines, *ends]
    return [t for t in out if not any(s in t for s in SPECIAL_STRINGS)]


def test_equals_hugging_face_tokenizers() -> None:
    tok, ref = get_tokenizer("xlm-roberta"), hf_xlm_roberta_reference()
    assert tok.backend == "native" and tok.text_path == "whole-text"  # type: ignore[attr-defined]
    texts = _texts(150, 600, seed=5)
    assert len(texts) > 10_000
    wrong = [t for t in texts if tok.encode(t) != ref.encode(t, add_special_tokens=False).ids]
    assert not wrong, f"{len(wrong)}/{len(texts)} differ; first {wrong[0][:60]!r}"
    # decoding the reference's ids (special tokens, <unk> among them, by name on both sides)
    undecoded = [t for t in texts[:3000] if tok.decode(ids := ref.encode(t, add_special_tokens=False).ids)
                 != ref.decode(ids, skip_special_tokens=False)]
    assert not undecoded, f"{len(undecoded)} decode differently; first {undecoded[0][:60]!r}"


def test_trailing_whitespace_is_a_token() -> None:
    """The issue's case: a line with its newline counts one more token than under SentencePiece's rules."""
    hf, sp = get_tokenizer("xlm-roberta"), get_tokenizer("xlm-roberta-sentencepiece")
    line = "Le renard brun saute par-dessus le chien paresseux."
    assert hf.encode(line + "\n") == [*hf.encode(line), 6]  # 6 is the piece "▁"
    assert sp.encode(line + "\n") == sp.encode(line) == hf.encode(line)
    assert hf.encode(line, add_special_tokens=True) == [0, *hf.encode(line), 2]


def test_python_backend_equals_compiled() -> None:
    native, python = get_tokenizer("xlm-roberta"), python_backend()
    assert python.text_path == "python"  # type: ignore[attr-defined]
    texts = _texts(20, 300, seed=7)
    wrong = [t for t in texts if native.encode(t) != python.encode(t)]
    assert not wrong, f"{len(wrong)}/{len(texts)} differ; first {wrong[0][:60]!r}"


def test_code_points_equal_hugging_face() -> None:
    """Every kind of character, alone and between letters, through the compiled path's safety check."""
    tok, ref = get_tokenizer("xlm-roberta"), hf_xlm_roberta_reference()
    rng = random.Random(11)
    chars = [chr(c) for c in rng.sample(range(0x30000), 4000) if not 0xD800 <= c < 0xE000]
    texts = [f"a{c}b {c}{c} " for c in chars]
    wrong = [t for t in texts if tok.encode(t) != ref.encode(t, add_special_tokens=False).ids]
    assert not wrong, f"{len(wrong)}/{len(texts)} differ; first {wrong[0]!r}"


def test_sentencepiece_variant_equals_sentencepiece() -> None:
    tok, ref = get_tokenizer("xlm-roberta-sentencepiece"), sentencepiece_reference("xlm-roberta-sentencepiece")
    texts = _texts(10, 200, seed=3)
    wrong = [t for t in texts if tok.encode(t) != ref.encode(t)]
    assert not wrong, f"{len(wrong)}/{len(texts)} differ; first {wrong[0][:60]!r}"


def test_vocabulary_and_specials() -> None:
    tok = get_tokenizer("xlm-roberta")
    assert tok.n_vocab == 250_002 and get_tokenizer("xlm-roberta-sentencepiece").n_vocab == 250_048
    assert tok.special_tokens == {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 250_001}
    assert not any(tok.is_special(i) for i in tok.encode("<s> x </s> <mask> <unk>"))
    assert tok.decode(tok.encode("Hello  world \n")) == "Hello world "


def test_tokenizer_json_needs_a_t5_vocabulary() -> None:
    from app.engine.errors import ArtifactError

    with pytest.raises(ArtifactError, match="tokenizer.json"):
        from_gguf(artifact_bytes("llama2"), "x", tokenizer_json="xlm-roberta")
    with pytest.raises(ArtifactError, match="tokenizer.json"):
        from_gguf(artifact_bytes("xlm-roberta"), "x", tokenizer_json="no-such-model")


def test_compiled_call_declines_only_risky_text() -> None:
    """``encode_metaspace`` answers for text normalized alike both ways and declines (None) where a cluster of
    several code points starts with a key or a key of several code points can match; the pipeline then takes the
    exact way, with the same ids as Hugging Face."""
    from app.engine.pipeline.compiled import UNIGRAM
    from app.engine.pipeline.metaspace_fast import flagged_class, risk_tables

    tok = get_tokenizer("xlm-roberta")
    charsmap = tok.normalizer.normalizers[0].charsmap  # type: ignore[attr-defined]
    classes, pairs = risk_tables(charsmap, flagged_class(charsmap, True))
    normalizer = UNIGRAM.module.Normalizer(charsmap.blob, False, False, False, False, [])
    native = tok.model.native  # type: ignore[attr-defined]
    ref = hf_xlm_roberta_reference()
    for text in ["Hello  world\r\n", "สวัสดีครับ ", "नमस्ते", "ｈｅｌｌｏ ½ ﬁ", "e\u0301"[:1]]:
        assert native.encode_metaspace(normalizer, classes, pairs, text) == ref.encode(text).ids[1:-1], text
    for text in ["e\u0301", "\uff45\u0301", "\u0930\u093c", "ﾾￜ", "a\ud800"]:
        assert native.encode_metaspace(normalizer, classes, pairs, text) is None, text
        assert tok.encode(text) == ref.encode(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"),
                                              add_special_tokens=False).ids
