"""The item lists every compiled model's ``encode`` takes (``app/engine/_native/py_items.h``): str items are
tokenized, int ids pass through in place, anything else is a TypeError and an id outside 0..2**31-1 a ValueError
-- the same contract for the merge-list BPE (gemma3), WordPiece (bge), Unigram (xlm-roberta) and SentencePiece BPE
(mistral-v3), each checked against its own pure-Python model."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine import get_tokenizer

SEGMENT_FROM = 64  # the merge-list core's second argument: cut pre-tokens longer than this where no merge crosses


def _encode(name: str, model: Any, items: list[Any]) -> list[int]:
    return model.encode(items, SEGMENT_FROM) if name == "gemma3" else model.encode(items)


@pytest.mark.parametrize("name", ["gemma3", "bge-small-en-v1.5", "xlm-roberta-sentencepiece", "mistral-v3"])
def test_items_contract(name: str) -> None:
    model = get_tokenizer(name, backend="native").model  # type: ignore[attr-defined]
    native = model.native
    assert native is not None, name
    words = ["hello", "▁naïve", "日本語", ""]
    ids = _encode(name, native, [7, *words, 2**31 - 1, 0])
    alone = [_encode(name, native, [w]) for w in words]
    assert ids == [7, *(i for a in alone for i in a), 2**31 - 1, 0]
    cases: list[tuple[list[Any], type[Exception]]] = [
        ([1.5], TypeError), (["a", None], TypeError), ([b"ab"], TypeError),
        ([-1], ValueError), ([2**31], ValueError), ([2**70], ValueError),
    ]
    for bad, error in cases:
        with pytest.raises(error):
            _encode(name, native, bad)
    assert _encode(name, native, []) == []
