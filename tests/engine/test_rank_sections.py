"""Rank tables restored as mapped sections (:class:`app.engine.rank_tables.RankSections`): the compiled checks and
the core built from them in one call."""

from __future__ import annotations

import pytest

from app.engine import native
from app.engine.artifact_cache import Compiled, u32_bytes
from app.engine.encoding import RankBPETokenizer
from app.engine.rank_tables import RankSections, dump_ranks, restore_ranks

pytestmark = pytest.mark.skipif(not native.available(), reason="compiled core not built")

RANKS = {bytes([b]): b for b in range(256)} | {b"ab": 300, b"abc": 301, b"hello world!": 260}


def _sections(tokens: list[bytes], ids: list[int], *, all_bytes: bool = True) -> Compiled:
    """Sections of ``tokens`` (ids ``ids``) after the 256 single bytes (ids 0..255) when ``all_bytes``."""
    if all_bytes:
        tokens, ids = [bytes([b]) for b in range(256)] + tokens, list(range(256)) + [256 + i for i in ids]
    offsets = [0]
    for t in tokens:
        offsets.append(offsets[-1] + len(t))
    return Compiled(meta={"n": len(tokens)}, sections={"tokens": b"".join(tokens), "offsets": u32_bytes(offsets),
                                                       "ids": u32_bytes(ids)})


def test_restored_sections_equal_the_dict() -> None:
    restored = restore_ranks(dump_ranks(RANKS))
    assert isinstance(restored, RankSections)
    assert restored.as_dict() == RANKS
    assert (restored.min_id, restored.max_id, len(restored)) == (0, 301, len(RANKS))
    assert restored.has_id(260) and not restored.has_id(256) and not restored.has_id(302)
    table = restored.token_table(302)
    assert table[301] == b"abc" and table[257] is None


@pytest.mark.parametrize("tokens, ids, reason", [
    ([b"ab", b"bc", b"ab"], [0, 1, 2], "repeated token"),
    ([b"ab", b"bc", b"a"], [0, 1, 2], "repeated token"),  # a single byte again
    ([b"a long token", b"bc", b"a long token"], [0, 1, 2], "repeated token"),
    ([b"ab", b"bc", b"cd"], [0, 2, 1], "ids are not strictly increasing"),
    ([b"ab", b"bc", b"cd"], [0, 1, 1], "ids are not strictly increasing"),
    ([b"ab", b"", b"cd"], [0, 1, 2], "offsets are not strictly increasing"),
    ([b"ab", b"bc", b"cd"], [0, 1, 2**31 - 257], "below 2\\*\\*31-1"),
])
def test_inconsistent_sections_are_refused(tokens: list[bytes], ids: list[int], reason: str) -> None:
    assert isinstance(restore_ranks(_sections([b"ab", b"bc", b"cd"], [0, 1, 2])), RankSections)  # (the good form)
    with pytest.raises(ValueError, match=reason):
        restore_ranks(_sections(tokens, ids))


def test_sections_lacking_a_single_byte_are_refused() -> None:
    tokens = [bytes([b]) for b in range(256) if b != 7] + [b"ab"]
    with pytest.raises(ValueError, match="lacks a single byte"):
        restore_ranks(_sections(tokens, list(range(len(tokens))), all_bytes=False))


def test_bad_layouts_are_refused() -> None:
    good = dump_ranks(RANKS)
    sections = dict(good.sections)
    with pytest.raises(ValueError):  # offsets past the tokens
        restore_ranks(Compiled(good.meta, {**sections, "tokens": bytes(sections["tokens"])[:-1]}))
    with pytest.raises(ValueError):  # one id too few
        restore_ranks(Compiled(good.meta, {**sections, "ids": bytes(sections["ids"])[:-4]}))
    with pytest.raises(ValueError):  # n in meta disagrees
        restore_ranks(Compiled({"n": len(RANKS) + 1}, sections))


def test_encoding_from_sections_equals_encoding_from_dict() -> None:
    restored = restore_ranks(dump_ranks(RANKS))
    pattern = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    a = RankBPETokenizer("t", pattern=pattern, mergeable_ranks=RANKS, special_tokens={"<s>": 400}, backend="native")
    b = RankBPETokenizer("t", pattern=pattern, mergeable_ranks=restored, special_tokens={"<s>": 400},
                         backend="native")
    text = "abc hello world! abab ümlaut"
    assert a.encode(text) == b.encode(text)
    assert a.n_vocab == b.n_vocab == 401
    assert a.decode(a.encode(text)) == b.decode(b.encode(text)) == text
    assert b.ranks == RANKS
    with pytest.raises(ValueError):  # a special id that is an ordinary token
        RankBPETokenizer("t", pattern=pattern, mergeable_ranks=restored, special_tokens={"<s>": 300})
    py = RankBPETokenizer("t", pattern=pattern, mergeable_ranks=restored, special_tokens={}, backend="python")
    assert py.encode(text) == a.encode(text)
