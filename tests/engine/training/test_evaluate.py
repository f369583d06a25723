"""Evaluation metrics: bytes per token, tokens per word, byte-fallback and unknown shares."""

from __future__ import annotations

from app.engine import RankBPETokenizer, get_tokenizer
from app.engine.training import CharBPEEncoding, train_char_bpe
from app.engine.training.evaluate import evaluate_text


def test_byte_level_metrics_on_a_bytes_only_vocabulary() -> None:
    tokenizer = RankBPETokenizer("bytes", pattern=r"\S+|\s+", mergeable_ranks={bytes([b]): b for b in range(256)},
                   special_tokens={})
    m = evaluate_text(tokenizer, "ab é", label="x")  # a, b, ' ', 0xC3, 0xA9
    assert (m.bytes, m.tokens, m.words) == (5, 5, 2)
    assert m.bytes_per_token == 1.0 and m.tokens_per_word == 2.5
    assert m.byte_fallback_tokens == 2 and m.byte_fallback_share == 0.4  # the two halves of é, not a/b/space
    assert m.unknown_tokens == 0


def test_stock_tokenizer_has_no_fallback_on_english_and_some_on_rare_scripts() -> None:
    tokenizer = get_tokenizer("cl100k_base")
    english = evaluate_text(tokenizer, "The quick brown fox jumps over the lazy dog.")
    assert english.tokens == 10 and english.byte_fallback_tokens == 0
    assert english.as_dict()["bytes_per_token"] == round(44 / 10, 4)
    rare = evaluate_text(tokenizer, "𓀀𓀁𓀂")  # Egyptian hieroglyphs: no whole-character tokens
    assert rare.byte_fallback_tokens > 0


def test_classic_kind_counts_unknowns_not_fallbacks() -> None:
    tokenizer = CharBPEEncoding("c", train_char_bpe({"low": 5, "lower": 2}, num_merges=3, min_frequency=1))
    m = evaluate_text(tokenizer, "low lowér")
    assert m.unknown_tokens == 1 and m.byte_fallback_tokens == 0
    assert m.tokens == len(tokenizer.encode("low lowér")) and m.words == 2


def test_pipeline_unknowns_and_tokens_per_char() -> None:
    from app.engine.pipeline.hf_json import from_hf_json
    from app.engine.training.trainer import train_on
    from app.engine.training.wordpiece import WordPieceTrainer

    art = train_on(WordPieceTrainer(vocab_size=40, min_frequency=1), ["low lower lowest\n" * 3])
    tokenizer = from_hf_json(art.data, "wp")
    m = evaluate_text(tokenizer, "low \u2603 lowest", label="x")
    assert m.unknown_tokens == 1 and m.chars == 12 and m.tokens_per_char == m.tokens / 12
    assert m.as_dict()["tokens_per_char"] == round(m.tokens / 12, 4)
