"""(d) Round trips and internal consistency of our API on valid text (hypothesis + the hostile corpus):

``decode(encode(x)) == x``, ``decode_bytes(encode(x)) == x.encode()``, ``count(x) == len(encode(x))``,
``encode_batch``/``count_batch`` agree, and ``encode_with_offsets`` gives ``encode``'s ids with offsets that are
monotone, cover the text, and frame exactly the text of every token whose bytes are whole characters.
"""

from __future__ import annotations

import itertools

from hypothesis import given

from app.engine import RankBPETokenizer

from . import corpus
from .reference import ours
from .strategies import valid_text
from .test_properties import stable


def check_roundtrip(tokenizer: RankBPETokenizer, text: str) -> None:
    """Every consistency property of one valid text (raises AssertionError naming the text)."""
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text, text
    assert tokenizer.decode_bytes(ids) == text.encode("utf-8"), text
    assert tokenizer.count(text) == len(ids), text
    assert b"".join(tokenizer.decode_tokens_bytes(ids)) == text.encode("utf-8"), text
    check_offsets(tokenizer, text, ids)


def check_offsets(tokenizer: RankBPETokenizer, text: str, ids: list[int]) -> None:
    """``encode_with_offsets``: same ids; spans non-empty, monotone, gap-free, covering ``text``."""
    got_ids, spans = tokenizer.encode_with_offsets(text)
    assert got_ids == ids, text
    assert len(spans) == len(ids)
    if not text:
        assert spans == []
        return
    assert spans[0][0] == 0 and spans[-1][1] == len(text), (text, spans[:2], spans[-2:])
    for (s0, e0), (s1, e1) in itertools.pairwise(spans):
        assert s0 <= s1 and e0 <= e1, (text, (s0, e0), (s1, e1))
        assert s1 <= e0, f"gap between {(s0, e0)} and {(s1, e1)} in {text!r}"  # touching, or sharing one char
    for token_id, (start, end) in zip(ids, spans, strict=True):
        assert 0 <= start < end <= len(text)
        raw = tokenizer.token_bytes(token_id)
        try:
            token_text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue  # a token that splits a character spans that whole character (overlaps its neighbour)
        assert text[start:end] == token_text, (text, token_id, (start, end), token_text)


def test_roundtrip_hostile_corpus(tokenizer: str, backend: str) -> None:
    enc = ours(tokenizer, backend)
    texts = [
        *itertools.islice(corpus.pairs(), 0, None, 7),
        *itertools.islice(corpus.glued_triples(), 0, None, 5),
        *corpus.random_mixes(seed=5, count=3000),
        *corpus.long_runs(300).values(),
    ]
    for text in texts:
        check_roundtrip(enc, text)
    assert len(texts) > 20_000


def test_roundtrip_empty_and_tiny(tokenizer: str, backend: str) -> None:
    enc = ours(tokenizer, backend)
    assert enc.encode("") == [] and enc.decode([]) == "" and enc.count("") == 0
    assert enc.encode_with_offsets("") == ([], [])
    for text in ["a", " ", "\n", "\x00", "é", "日", "👍", "👨‍👩‍👧‍👦", "\U0010ffff"]:
        check_roundtrip(enc, text)


def test_offsets_ascii_example() -> None:
    tokenizer = ours("cl100k_base", "python")
    ids, spans = tokenizer.encode_with_offsets("hello world, it's 12345!")
    assert [tokenizer.decode([i]) for i in ids] == ["hello", " world", ",", " it", "'s", " ", "123", "45", "!"]
    assert spans == [(0, 5), (5, 11), (11, 12), (12, 15), (15, 17), (17, 18), (18, 21), (21, 23), (23, 24)]


def test_offsets_of_split_character_overlap(backend: str) -> None:
    """A character split across tokens is covered by each of them (gpt2 splits most CJK characters)."""
    tokenizer = ours("gpt2", backend)
    text = "a𝓐b"
    ids, spans = tokenizer.encode_with_offsets(text)
    assert tokenizer.decode(ids) == text
    assert len(ids) > 3
    assert all(span == (1, 2) for span in spans[1:-1]), spans


def test_batch_forms_agree(tokenizer: str, backend: str) -> None:
    enc = ours(tokenizer, backend)
    texts = list(corpus.random_mixes(seed=11, count=300))
    single = [enc.encode(t) for t in texts]
    assert enc.encode_batch(texts) == single
    assert enc.encode_batch(texts, num_threads=2) == single
    assert enc.count_batch(texts, num_threads=2) == [len(x) for x in single]
    assert enc.decode_batch(single) == texts


@stable
@given(text=valid_text(80))
def test_roundtrip_hypothesis(tokenizer: str, backend: str, text: str) -> None:
    check_roundtrip(ours(tokenizer, backend), text)
