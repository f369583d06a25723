"""WordPiece (bge-small-en-v1.5, BERT uncased) against Hugging Face ``tokenizers`` built directly from the same
vocabulary, and BERT's normalizer and pre-tokenizer against Hugging Face's over a seeded sample of every code point
(the character classes of :mod:`app.engine.pipeline.bert_tables` included)."""

from __future__ import annotations

import random

import pytest

from app.engine import get_tokenizer
from app.engine.pipeline.base import Piece
from app.engine.pipeline.bert import BertNormalizer, BertPreTokenizer
from app.engine.pipeline.bert_tables import CONTROL_FLIP, LOWER, MARK_FLIP, NFD, PUNCT_FLIP
from app.engine.pipeline.models.wordpiece import WordPiece
from harness.references import hf_bert
from harness.texts import SPECIAL_STRINGS, sample


def test_ids_and_decode_equal_hf() -> None:
    ref, tok = hf_bert(), get_tokenizer("bge-small-en-v1.5")
    texts = [t for t in sample(60, 150, seed=3) if not any(s in t for s in SPECIAL_STRINGS)]
    wrong = [t for t in texts if tok.encode(t) != ref.encode(t, add_special_tokens=False).ids]
    assert not wrong, f"{len(wrong)}/{len(texts)} differ; first {wrong[0][:80]!r}"
    for t in texts:
        ids = ref.encode(t, add_special_tokens=False).ids
        assert tok.decode(ids) == ref.decode(ids)


def test_offsets_equal_hf() -> None:
    ref, tok = hf_bert(), get_tokenizer("bge-small-en-v1.5")
    for t in ["Héllo, wörld! 日本語", "  spaces\tand\nlines ", "don't stop", "x" * 120 + " end"]:
        ids, spans = tok.encode_with_offsets(t)
        tokenizer = ref.encode(t, add_special_tokens=False)
        assert ids == tokenizer.ids
        assert spans == [tuple(o) for o in tokenizer.offsets]


def _code_points(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    flips = sorted(CONTROL_FLIP | PUNCT_FLIP | MARK_FLIP | set(LOWER) | set(NFD))
    picked = {c for c in flips} | {rng.randrange(0x110000) for _ in range(n)} | set(range(0x3000))
    return [chr(c) for c in sorted(picked) if not 0xD800 <= c < 0xE000]


@pytest.mark.parametrize("options", [{}, {"lowercase": False}, {"strip_accents": False},
                                     {"clean_text": False, "handle_chinese_chars": False}])
def test_normalizer_equals_hf_per_code_point(options: dict[str, bool]) -> None:
    from tokenizers import normalizers

    ref = normalizers.BertNormalizer(**{"lowercase": True, **options})
    ours = BertNormalizer(**options)
    wrong = [hex(ord(c)) for c in _code_points(1, 20000) if ref.normalize_str(c) != ours.normalize_str(c)]
    assert not wrong, wrong[:10]


def test_pre_tokenizer_equals_hf_per_code_point() -> None:
    from tokenizers import pre_tokenizers

    ref = pre_tokenizers.BertPreTokenizer()
    ours = BertPreTokenizer()
    for c in _code_points(2, 20000):
        text = f"a{c}b"
        assert [p for p, _ in ref.pre_tokenize_str(text)] == [p.text for p in ours.pre_tokenize([Piece(text)])], c


def test_wordpiece_greedy_longest_match_and_unknown_word() -> None:
    model = WordPiece({"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3, "unaff": 4, "##a": 5}, max_input_chars_per_word=8)
    assert model.tokenize("unaffable") == [0]  # 9 characters > 8
    model = WordPiece({"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3, "unaff": 4, "##a": 5})
    assert model.tokenize_with_spans("unaffable") == [(4, 0, 5), (3, 5, 9)]
    assert model.tokenize("unafx") == [0]  # one position without a match: the whole word is [UNK]
