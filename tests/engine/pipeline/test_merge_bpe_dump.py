"""``Model.dump`` / ``Model.load`` of the compiled merge-list BPE (``app/engine/_native/mergebpe.c``): a model
rebuilt from its dump gives the ids (and errors) of the built one, on random small models (compact and wide pair
tables) and on gemma3 with hostile and sampled text; a damaged dump (truncated, flipped bytes, wrong version, and
well-checksummed dumps with out-of-range entries) raises ``ValueError`` and never crashes (run in this process)."""

from __future__ import annotations

import itertools
import random
import struct
from typing import Any

import pytest

from app.engine import get_tokenizer
from app.engine.pipeline import Pipeline
from app.engine.pipeline.models import bpe as bpe_module
from app.engine.pipeline.models.bpe import BPE
from app.engine.pipeline.pipeline import SEGMENT_FROM
from tests.engine.exactness.corpus import surrogate_strings

from .corpus import hostile, long_strings
from .merge_models import random_bpe_config, random_text

pytestmark = pytest.mark.skipif(bpe_module._EXT.module is None,
                                reason=f"compiled merge-list BPE not built: {bpe_module._EXT.error}")

HEADER = 8 + 4 + 4 + 4 + 4 + 8 * 4 + 4 * 256
M64 = (1 << 64) - 1


def _module() -> Any:
    module = bpe_module._EXT.module
    assert module is not None
    return module


def _outcome(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except ValueError as exc:
        return ("ValueError", str(exc))


def _same(built: Any, loaded: Any, texts: list[str]) -> None:
    assert loaded.n_merges == built.n_merges
    for text in texts:
        assert _outcome(loaded.tokenize, text) == _outcome(built.tokenize, text), text
        assert _outcome(loaded.encode, [text, 5], SEGMENT_FROM) == _outcome(built.encode, [text, 5], SEGMENT_FROM)
        assert _outcome(loaded.encode, [text], 2) == _outcome(built.encode, [text], 2), text


def _native(config: dict[str, Any]) -> Any:
    model = BPE.from_hf(config, backend="native")
    assert model.backend == "native"
    return model.native


@pytest.mark.parametrize("wide", [False, True])
def test_random_models_round_trip(wide: bool) -> None:
    rng = random.Random(29 + wide)
    for _ in range(150):
        built = _native(random_bpe_config(rng, wide=wide, reorder=False, missing=(0, 3, 40)))
        dump = built.dump()
        assert isinstance(dump, bytes) and dump[:8] == b"MBPEDUMP"
        loaded = _module().Model.load(memoryview(dump))
        assert loaded.dump() == dump  # the same tables
        texts = [random_text(rng, rng.choice([0, 1, 2, 5, 20, 47, 48, 49, 120, 400])) for _ in range(20)]
        _same(built, loaded, [*texts, "a\ud800b"])


@pytest.fixture(scope="module")
def gemma3() -> tuple[Pipeline, Any, Any]:
    tok = get_tokenizer("gemma3", backend="native")
    assert isinstance(tok, Pipeline) and isinstance(tok.model, BPE)
    built = tok.model.native
    return tok, built, _module().Model.load(built.dump())


def test_gemma3_round_trip_same_ids(gemma3: tuple[Pipeline, Any, Any]) -> None:
    tok, built, loaded = gemma3
    texts = [*hostile(sorted(tok.special_tokens), seed=29, count=300, token_limit=40),
             *itertools.islice(surrogate_strings(), 100), *long_strings(2000)]
    assert len(texts) > 400
    _same(built, loaded, texts)


def _mix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    return x ^ (x >> 33)


def _checksum(data: bytes) -> int:
    """The dump's checksum (mergebpe.c ``dump_checksum``), to craft well-checksummed damaged dumps."""
    n = len(data)
    h = 0x6D65726765627065 ^ n
    whole = n - n % 8
    for i, (word,) in enumerate(struct.iter_unpack("<Q", data[:whole])):
        h = (_mix64(h ^ word) + 8 * i) & M64
    tail = int.from_bytes(data[whole:], "little")
    return _mix64(h ^ tail ^ 0x9E3779B97F4A7C15)


def _sealed(body: bytes | bytearray) -> bytes:
    return bytes(body) + struct.pack("<Q", _checksum(bytes(body)))


def _rejects(data: bytes | bytearray | memoryview) -> None:
    with pytest.raises(ValueError):
        _module().Model.load(data)


def _small_dump() -> tuple[bytes, dict[str, Any]]:
    config = {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<unk>": 3, "c": 4, "abc": 5, "<0x41>": 6},
              "merges": [["a", "b"], ["ab", "c"], ["a", "b"]], "unk_token": "<unk>", "byte_fallback": True}
    return _native(config).dump(), config


def test_checksum_replica_matches() -> None:
    dump, _ = _small_dump()
    assert _sealed(dump[:-8]) == dump
    _module().Model.load(_sealed(dump[:-8]))


def test_truncated_and_flipped_dumps_raise() -> None:
    dump, _ = _small_dump()
    rng = random.Random(3)
    offsets = sorted({*range(0, HEADER + 64), *range(0, len(dump), 997), *rng.sample(range(len(dump)), 300),
                      len(dump) - 1})
    for cut in offsets:
        _rejects(dump[:cut])
    _rejects(dump + b"\0")
    for at in offsets:
        flipped = bytearray(dump)
        flipped[at] ^= 1 << rng.randrange(8)
        _rejects(flipped)
    _rejects(b"")
    with pytest.raises(TypeError):
        _module().Model.load("not bytes")


def test_gemma3_damaged_dumps_raise(gemma3: tuple[Pipeline, Any, Any]) -> None:
    dump = gemma3[2].dump()
    rng = random.Random(4)
    view = memoryview(dump)
    for cut in sorted({*range(0, HEADER + 16, 7), *rng.sample(range(len(dump)), 40)}):
        _rejects(view[:cut])
    for at in rng.sample(range(len(dump)), 40):
        flipped = bytearray(dump)
        flipped[at] ^= 0x10
        _rejects(flipped)


def _field(body: bytearray, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(body)
    struct.pack_into(fmt, out, offset, value)
    return _sealed(out)


def test_well_checksummed_bad_fields_raise() -> None:
    dump, _ = _small_dump()
    body = bytearray(dump[:-8])
    n_ids, n_merges, n_chars, n_pairs = struct.unpack_from("<4Q", body, 24)
    assert (n_ids, n_merges) == (7, 3) and n_pairs == 2
    chars_at, pairs_at = HEADER, HEADER + 8 * n_chars
    for bad in [
        _field(body, 8, "<I", 2),  # version
        _field(body, 8, "<I", 0),
        _field(body, 12, "<I", 8),  # unknown flag
        _field(body, 20, "<I", 1),  # reserved
        _field(body, 24, "<Q", 1 << 40),  # n_ids
        _field(body, 32, "<Q", 1 << 40),  # n_merges
        _field(body, 40, "<Q", n_chars + 1),  # counts that do not fit the length
        _field(body, 48, "<Q", n_pairs - 1),
        _field(body, 48, "<Q", 1 << 62),
        _field(body, 56 + 4 * 0x41, "<i", 7),  # a byte id beyond n_ids
        _field(body, 56, "<i", -2),
        _field(body, chars_at, "<I", 0x110000),  # a code point beyond Unicode
        _field(body, chars_at + 4, "<i", 7),  # a character id beyond n_ids
        _field(body, chars_at + 4, "<i", -1),
        _field(body, pairs_at, "<I", 7),  # pair left id
        _field(body, pairs_at + 4, "<I", 0xFFFFFFFF),  # pair right id
        _field(body, pairs_at + 8, "<i", 3),  # rank beyond n_merges
        _field(body, pairs_at + 8, "<i", -1),
        _field(body, pairs_at + 12, "<i", 7),  # merged id beyond n_ids
        _sealed(b"MBPEDUMQ" + body[8:]),  # magic
        _sealed(body[:-8]),  # the filters cut short
    ]:
        _rejects(bad)


def test_other_settings_fail_to_restore() -> None:
    """The BPE side refuses a stored model of other settings (the artifact cache then rebuilds it)."""
    dump, config = _small_dump()
    other = BPE.from_hf({**config, "fuse_unk": True}, backend="native", lazy_native=True)
    stored = bpe_module.compiled({"refused": False, "byte_fallback": True, "fuse_unk": False, "unk_id": 3,
                                  "merges": 3, "ids": 7}, {"model": dump})
    with pytest.raises(ValueError):
        other._restore_native(stored)
    same = BPE.from_hf(config, backend="native", lazy_native=True)
    assert same._restore_native(stored).dump() == dump
