"""Every SentencePiece, tekken and GGUF tokenizer keeps the :class:`~app.engine.tokenizer.Tokenizer` contract:
counts, batches, parts, offsets, token bytes and the errors for unknown names and ids."""

from __future__ import annotations

import pytest

from app.engine import Special, get_tokenizer
from app.engine.errors import InvalidTokenIdError, UnknownSpecialTokenError
from app.engine.tokenizer import Tokenizer

NAMES = ["mistral-v1", "mistral-v3", "mistral-v7", "mistral-nemo", "llama2", "phi-3", "bge-small-en-v1.5",
         "xlm-roberta", "xlm-roberta-sentencepiece", "qwen2"]
TEXTS = ["Hello, wörld! 日本語", "  two  spaces \n\ttab", "", "x" * 150]


@pytest.mark.parametrize("name", NAMES)
def test_contract(name: str) -> None:
    tok = get_tokenizer(name)
    assert isinstance(tok, Tokenizer)
    assert tok.encode_batch(TEXTS) == [tok.encode(t) for t in TEXTS]
    assert tok.count_batch(TEXTS) == [len(tok.encode(t)) for t in TEXTS]
    special = next(iter(tok.special_tokens))
    sid = tok.special_token_id(special)
    assert tok.is_special(sid)
    assert tok.encode_parts(["a", Special(special), "b"]) == [*tok.encode("a"), sid, *tok.encode("b")]
    assert tok.count("hi", prefix=[special]) == 1 + len(tok.encode("hi"))
    template = tok.template
    assert tok.encode("hi", add_special_tokens=True) == [*template.prefix_ids, *tok.encode("hi"),
                                                         *template.suffix_ids]
    for text in TEXTS:
        ids, spans = tok.encode_with_offsets(text)
        assert ids == tok.encode(text) and len(spans) == len(ids)
        assert all(0 <= a <= b <= len(text) for a, b in spans)
        assert b"".join(tok.decode_tokens_bytes(ids)) == tok.decode_bytes(ids)
    assert tok.decode([sid], skip_special=True) == ""
    with pytest.raises(InvalidTokenIdError):
        tok.decode([tok.n_vocab + 5])
    with pytest.raises(UnknownSpecialTokenError):
        tok.encode("x", prefix=["<no such token>"])
