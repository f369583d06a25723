"""The :class:`Pipeline` rules on the bundled files: specials only by name, added tokens from text, templates,
offsets, token bytes, the cache."""

from __future__ import annotations

import pytest

from app.engine.errors import InvalidTokenIdError, UnknownSpecialTokenError
from app.engine.pipeline.hf_json import load_hf_json
from app.engine.specials import Special
from app.engine.store import Store
from app.engine.tokenizer import Tokenizer

from .reference import ours, reference


def test_is_a_tokenizer() -> None:
    assert isinstance(ours("qwen3"), Tokenizer)


@pytest.mark.parametrize(("name", "special"), [("qwen3", "<|im_start|>"), ("deepseek-v3", "<｜begin▁of▁sentence｜>"),
                                               ("gemma3", "<start_of_turn>")])
def test_special_tokens_never_come_from_text(name: str, special: str) -> None:
    tok = ours(name)
    sid = tok.special_token_id(special)
    assert sid not in tok.encode(special) and sid not in tok.encode(f"x{special}y {special}")
    assert tok.encode("hi", prefix=[special]) == [sid, *tok.encode("hi")]
    assert tok.encode_parts([Special(special), "hi"]) == [sid, *tok.encode("hi")]
    with pytest.raises(UnknownSpecialTokenError):
        tok.encode("hi", prefix=["<not-a-special>"])


def test_non_special_added_tokens_are_matched_in_text() -> None:
    tok = ours("qwen3")
    assert "<tool_call>" in tok.added_tokens and "<|im_start|>" not in tok.added_tokens
    assert tok.encode("<tool_call>") == [tok.added_tokens["<tool_call>"]]
    gemma = ours("gemma3")
    assert gemma.encode("\n\n") == [gemma.added_tokens["\n\n"]]


def test_templates() -> None:
    gemma = ours("gemma3")
    assert gemma.template.describe() == "<bos> $text"
    assert gemma.encode("hi", add_special_tokens=True) == [2, *gemma.encode("hi")]
    assert ours("qwen3").template.describe() == "$text"  # its ByteLevel post-processor adds nothing
    assert ours("qwen3").encode("hi", add_special_tokens=True) == ours("qwen3").encode("hi")


def test_offsets_and_token_bytes() -> None:
    tok = ours("qwen3")
    text = "Héllo wörld 👍🏽"
    ids, spans = tok.encode_with_offsets(text)
    assert spans == [tuple(o) for o in reference("qwen3").encode(text, add_special_tokens=False).offsets]
    assert b"".join(tok.decode_tokens_bytes(ids)) == text.encode()
    gemma = ours("gemma3")
    ids = gemma.encode("a 😀")
    assert b"".join(gemma.decode_tokens_bytes(ids)) == "a 😀".encode()


def test_decode_rejects_unknown_ids_and_skips_specials() -> None:
    tok = ours("qwen3")
    with pytest.raises(InvalidTokenIdError):
        tok.decode([1, tok.n_vocab])
    with pytest.raises(InvalidTokenIdError):
        tok.decode([-1])
    sid = tok.special_token_id("<|im_end|>")
    assert tok.decode([sid, *tok.encode("ok")], skip_special=True) == "ok"
    assert tok.decode([sid]) == "<|im_end|>"
    assert tok.decode_tokens_bytes([sid], skip_special=True) == []


def test_cache_counts_and_does_not_change_results() -> None:
    # the piece cache serves the Python model (a compiled model takes whole runs of pre-tokens, uncached)
    tok = load_hf_json(Store.load().spec("deepseek-v3"), backend="python")
    tok.clear_cache()
    first = tok.encode("the cache the cache the cache")
    stats = tok.cache_stats()
    assert stats.hits > 0 and stats.misses > 0 and stats.size > 0
    assert tok.encode("the cache the cache the cache") == first
    assert tok.cache_stats().hits > stats.hits
