"""Rank tables restored as mapped sections (:class:`app.engine.rank_tables.RankSections`): the compiled checks, the
core built from them in one call, and the core restored from the image of its tables stored with them."""

from __future__ import annotations

import hashlib
import logging
import random
from pathlib import Path

import pytest

from app.engine import get_tokenizer, native
from app.engine.artifact_cache import ArtifactCache, Compiled, u32_bytes
from app.engine.encoding import RankBPETokenizer
from app.engine.native import NativeCore
from app.engine.rank_tables import RankSections, dump_ranks, restore_ranks

from .test_native import hostile_corpus

pytestmark = pytest.mark.skipif(not native.available(), reason="compiled core not built")
_core = native.CORE.module

RANKS = {bytes([b]): b for b in range(256)} | {b"ab": 300, b"abc": 301, b"hello world!": 260}


def _sections(tokens: list[bytes], ids: list[int], *, all_bytes: bool = True) -> Compiled:
    """Sections of ``tokens`` (ids ``ids``) after the 256 single bytes (ids 0..255) when ``all_bytes``."""
    if all_bytes:
        tokens, ids = [bytes([b]) for b in range(256)] + tokens, list(range(256)) + [256 + i for i in ids]
    offsets = [0]
    for t in tokens:
        offsets.append(offsets[-1] + len(t))
    return Compiled(meta={"n": len(tokens), "core_image": True},
                    sections={"tokens": b"".join(tokens), "offsets": u32_bytes(offsets), "ids": u32_bytes(ids)})


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
        restore_ranks(Compiled({**good.meta, "n": len(RANKS) + 1}, sections))


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


# ------------------------------------------------------------------------------------------------ the core's image

#: Bundled rank tables of each kind the core treats differently: with atomic characters (o200k_base, cl100k_base),
#: tokens that are no merge of two others (llama3), a small vocabulary (gpt2).
IMAGE_NAMES = ["gpt2", "cl100k_base", "o200k_base", "llama3"]
IMAGE_TEXTS = [
    "", "hello world", "don'T I'M", " \n  \n\t", "Привет мир, 日本語 and 😀😀 x\u0301y ＡＢＣ", "1234567 ²٣",
    "ab" * 3_000, "中" * 2_000, "🙂" * 1_000, "a" * 5_000 + "b", " " * 4_000 + "x",
    "".join(chr(c) for c in range(0x20, 0x3000, 7)),
]  # fmt: skip


@pytest.fixture(scope="module", params=IMAGE_NAMES)
def bundled(request: pytest.FixtureRequest) -> tuple[str, dict[bytes, int], RankSections]:
    """(pattern, ranks dict, the same ranks dumped and restored with their core image) of a bundled tokenizer."""
    tok = get_tokenizer(request.param, backend="native")
    restored = restore_ranks(dump_ranks(tok.ranks))
    assert isinstance(restored, RankSections)
    return tok.pattern, tok.ranks, restored


def test_dumped_ranks_carry_the_core_image() -> None:
    dumped = dump_ranks(RANKS)
    restored = restore_ranks(dumped)
    assert isinstance(restored, RankSections) and restored.image is not None
    assert bytes(restored.image) == bytes(dumped.sections["core"])
    assert bytes(restored.image) == native.rank_table_image(restored.buffers())  # deterministic


def test_a_core_from_its_image_equals_a_built_core(bundled: tuple[str, dict[bytes, int], RankSections]) -> None:
    pattern, ranks, restored = bundled
    image = restored.image
    assert image is not None
    built = NativeCore(ranks, pattern)
    from_image = NativeCore(restored, pattern)
    assert restored.image is None  # dropped once the core copied it
    for atomic in (True, False):  # the image also serves a core asked for no atomic characters
        bare = _core.Core(restored.buffers(), built.scanner, 0, atomic_chars=atomic)
        imaged = _core.Core(restored.buffers(), built.scanner, 0, atomic_chars=atomic, image=image)
        for text in IMAGE_TEXTS[:6]:
            assert imaged.encode(text) == bare.encode(text)
    pieces = [t.encode() for t in IMAGE_TEXTS[:6]] + [bytes(range(256)), b"\xe4\xb8" * 50, b"\xff\xfe" * 30]
    assert from_image.encode_pieces(pieces) == built.encode_pieces(pieces)
    for text in IMAGE_TEXTS + hostile_corpus(seed=11, n=150):
        assert from_image.encode(text) == built.encode(text), repr(text[:60])


def test_an_image_of_other_ranks_is_refused_and_the_tables_are_built(caplog: pytest.LogCaptureFixture) -> None:
    other = restore_ranks(dump_ranks({**RANKS, b"xyz": 302}))
    restored = restore_ranks(dump_ranks(RANKS))
    assert isinstance(other, RankSections) and isinstance(restored, RankSections)
    with pytest.raises(ValueError, match="built from other ranks"):
        _core.Core(restored.buffers(), 0, 0, image=other.image)
    swapped = RankSections(*restored.buffers(), image=other.image)  # type: ignore[arg-type]
    pattern = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    with caplog.at_level(logging.WARNING, logger="app.engine"):
        core = NativeCore(swapped, pattern)
    assert "ignoring a cached rank table image" in caplog.text
    pieces = [b"abc", b" hello world!", b"abab"]
    assert core.encode_pieces(pieces) == NativeCore(RANKS, pattern).encode_pieces(pieces)


def test_damaged_images_raise_or_load_safely() -> None:
    """Any flipped, cut or grown image either raises ValueError or gives a core that encodes without reading out of
    bounds (a flip the checks cannot see, e.g. in the filter, may change ids: the file's checksum catches those)."""
    restored = restore_ranks(dump_ranks(RANKS))
    assert isinstance(restored, RankSections) and restored.image is not None
    image = bytes(restored.image)
    rng = random.Random(5)
    header, slots_at = 128, 128 + 4 * 256 + 4 * 65536 + (1 << 21) // 8  # header, byte and pair ranks, filter
    spots = [*range(header), *range(header, header + 1024),
             *(slots_at + rng.randrange(len(image) - slots_at) for _ in range(300)),
             *(rng.randrange(len(image)) for _ in range(300))]
    refused = 0
    for k, at in enumerate(spots):
        damaged = bytearray(image)
        damaged[at] ^= 1 << (k % 8)
        try:
            core = _core.Core(restored.buffers(), 0, 0, image=bytes(damaged))
        except ValueError as exc:
            assert str(exc).startswith("rank table image:")
            refused += 1
            continue
        core.encode_pieces([b"abc hello world!", bytes(range(256)), b"abab" * 20])
    assert refused >= 2 * header  # every header flip is refused, and most slot flips
    for cut in (0, 1, 127, 128, len(image) // 2, len(image) - 8, len(image) - 1):
        with pytest.raises(ValueError, match="rank table image"):
            _core.Core(restored.buffers(), 0, 0, image=image[:cut])
    with pytest.raises(ValueError, match="rank table image"):
        _core.Core(restored.buffers(), 0, 0, image=image + bytes(8))


# ------------------------------------------------------------------------------ tables written without the core
def test_a_table_written_without_the_core_is_rebuilt_once_with_its_image(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache entry written by a process without the compiled core has no image; a process with the core rebuilds
    it once (image included) and then restores it, instead of building the core's tables on every load."""
    cache = ArtifactCache(tmp_path)
    sha = hashlib.sha256(b"ranks").hexdigest()
    builds: list[int] = []

    def build() -> dict[bytes, int]:
        builds.append(1)
        return RANKS

    def load() -> dict[bytes, int] | RankSections:
        return cache.load(sha, "tiktoken-ranks", build, dump_ranks, restore_ranks)

    with monkeypatch.context() as m:
        m.setattr(native, "available", lambda: False)
        assert load() == RANKS  # a dict without the core
        assert load() == RANKS and cache.hits == 1  # that process reads its own entry back
    stored = cache.get(sha, "tiktoken-ranks")
    assert stored is not None and "core" not in stored.sections and stored.meta["core_image"] is False
    assert load() == RANKS  # refused and built again (the built dict is what this load gets)
    assert len(builds) == 2 and cache.rebuilt == 1
    stored = cache.get(sha, "tiktoken-ranks")
    assert stored is not None and "core" in stored.sections and stored.meta["core_image"] is True
    for hits in (2, 3):
        again = load()
        assert isinstance(again, RankSections) and again.image is not None and again.as_dict() == RANKS
        assert len(builds) == 2 and cache.rebuilt == 1 and cache.hits == hits


def test_a_table_the_core_refused_is_not_rebuilt_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry whose writer had the core but got no image (refused) restores as it is: no rebuild loop."""
    def refuse(buffers: tuple[object, ...]) -> bytes:
        raise ValueError("refused")

    with monkeypatch.context() as m:
        m.setattr(native, "rank_table_image", refuse)
        dumped = dump_ranks(RANKS)
    assert "core" not in dumped.sections and dumped.meta["core_image"] is True
    restored = restore_ranks(dumped)
    assert isinstance(restored, RankSections) and restored.image is None and restored.as_dict() == RANKS
    with pytest.raises(ValueError, match="without the compiled core's image"):
        restore_ranks(Compiled({**dumped.meta, "core_image": False}, dumped.sections))
    with pytest.raises(ValueError, match="without the compiled core's image"):
        restore_ranks(Compiled({"n": dumped.meta["n"]}, dumped.sections))  # a meta of before the flag
