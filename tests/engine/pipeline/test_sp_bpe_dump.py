"""``Model.dump`` / ``Model.load`` of the compiled SentencePiece BPE (``app/engine/_native/spbpe.c``): a model
rebuilt from its dump gives the ids of the built one (random vocabularies with user-defined, unused, duplicate,
astral and byte pieces, on both pair-table widths; the five bundled tokenizers on hostile text) and dumps the same
bytes; a damaged dump (truncated, bit-flipped, hundreds of random corruptions re-sealed with a valid checksum,
crafted out-of-range fields) raises ``ValueError`` or loads a model that stays in bounds, and never crashes (run in
this process)."""

from __future__ import annotations

import itertools
import random
import struct
from typing import Any

import pytest

from app.engine import get_tokenizer
from app.engine.pipeline import Pipeline
from app.engine.pipeline.models import sp_bpe
from app.engine.pipeline.models.sp_bpe import SentencePieceBPE
from tests.engine.exactness.corpus import surrogate_strings

from .corpus import hostile, long_strings

pytestmark = pytest.mark.skipif(sp_bpe._EXT.module is None,
                                reason=f"compiled SentencePiece BPE not built: {sp_bpe._EXT.error}")

HEADER = 8 + 4 + 4 + 4 + 4 + 8 * 6 + 4 * 256
BIGRAMS = (1 << 19) // 8
M64 = (1 << 64) - 1
ALPHABET = "abcd\u2581 é中😀"
BUNDLED = ["mistral-v1", "mistral-v3", "mistral-v7", "llama2", "phi-3"]


def _module() -> Any:
    module = sp_bpe._EXT.module
    assert module is not None
    return module


def _random_model(rng: random.Random, *, wide: bool = False) -> SentencePieceBPE:
    """A random native model: <unk>, byte pieces (some missing), characters (one astral), pieces joined from
    earlier ones with tied scores, a few unused, user-defined and repeated pieces. ``wide``: more than 65535
    symbols (the 16-byte pair table)."""
    pieces, scores = ["<unk>", "<s>"], [0.0, 0.0]
    unused: list[int] = []
    user: list[int] = []
    for b in range(256):
        if rng.random() < 0.8:
            pieces.append(f"<0x{b:02X}>")
            scores.append(0.0)
    chars = rng.sample(ALPHABET, rng.randint(2, len(ALPHABET)))
    made = list(chars)
    for c in chars:
        pieces.append(c)
        scores.append(float(rng.choice([-1, -2, -3])))
    for _ in range(rng.randint(0, 60)):
        piece = rng.choice(made) + rng.choice(made)
        if len(piece) > 7:
            continue
        if rng.random() < 0.1:
            unused.append(len(pieces))
        elif rng.random() < 0.05:
            user.append(len(pieces))
        pieces.append(piece)
        scores.append(float(rng.choice([-1, -2, -2.5, -4])) if rng.random() < 0.7 else -rng.random() * 9)
        made.append(piece)
    for _ in range(rng.randint(0, 2)):
        user.append(len(pieces))
        pieces.append(rng.choice(["[X]", "ab", "é中", "a\u2581"]))
        scores.append(0.0)
    if rng.random() < 0.3:
        pieces.append(rng.choice(made))
        scores.append(-1.0)
    if wide:  # many single characters: symbols beyond 16 bits
        pieces += [chr(0x4E00 + i) for i in range(66000)]
        scores += [-5.0] * 66000
        pieces.append("\u4e00\u4e01")
        scores.append(-0.5)
    special = {1}
    mergeable = [i for i in range(len(pieces)) if i not in special and i != 0]
    model = SentencePieceBPE(list(zip(pieces, scores, strict=True)), unk_id=0, byte_fallback=rng.random() < 0.7,
                             mergeable=mergeable, user_defined=user, unused=unused, backend="native")
    assert model.backend == "native"
    return model


def _random_text(rng: random.Random) -> str:
    pool = ALPHABET + "xyz \u2581[]X<>\ud800\ud83d\ude00ß\n\u4e00\u4e01"
    n = rng.choice([0, 1, 3, 8, 20, 40, 90, 200])
    return "".join(rng.choice(pool) for _ in range(rng.randint(0, n)))


def _same(built: Any, loaded: Any, texts: list[str]) -> None:
    m = _module()
    flags = m.DUMMY_PREFIX | m.REMOVE_EXTRA_WHITESPACES | m.ESCAPE_WHITESPACES | m.SPLIT
    assert (loaded.n_pairs, loaded.n_pieces) == (built.n_pairs, built.n_pieces)
    for text in texts:
        assert loaded.tokenize(text) == built.tokenize(text), text
        assert loaded.encode([text, 5, text[:3]]) == built.encode([text, 5, text[:3]]), text
        assert loaded.encode_text(flags, text) == built.encode_text(flags, text), text
    assert loaded.encode_texts(flags, texts, False) == built.encode_texts(flags, texts, False)


@pytest.mark.parametrize("wide", [False, True])
def test_random_models_round_trip(wide: bool) -> None:
    rng = random.Random(29 + wide)
    for _ in range(6 if wide else 150):
        built = _random_model(rng, wide=wide).native
        dump = built.dump()
        assert isinstance(dump, bytes) and dump[:8] == b"SPBPDUMP"
        loaded = _module().Model.load(memoryview(dump), 64)
        assert loaded.dump() == dump  # the same tables
        texts = [_random_text(rng) for _ in range(20)]
        _same(built, loaded, [*texts, "a\ud800b", "\u2581" * 300, "ab" * 200])
        assert loaded.cache_stats()[3] > 0  # (slots: the cache_size asked for)


@pytest.fixture(scope="module", params=BUNDLED)
def bundled(request: pytest.FixtureRequest) -> tuple[Pipeline, Any, Any]:
    tok = get_tokenizer(request.param, backend="native")
    assert isinstance(tok, Pipeline) and isinstance(tok.model, SentencePieceBPE)
    built = tok.model.native
    return tok, built, _module().Model.load(built.dump())


def test_bundled_round_trip_same_ids(bundled: tuple[Pipeline, Any, Any]) -> None:
    tok, built, loaded = bundled
    assert loaded.dump() == built.dump()
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
    """The dump's checksum (spbpe.c ``dump_checksum``), to craft well-checksummed damaged dumps."""
    n = len(data)
    h = 0x7370627065646D70 ^ n
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


def _small() -> Any:
    """A small model with every section filled: byte fallback, an unused piece, a user-defined piece, an astral
    character."""
    pieces = ["<unk>", "a", "b", "ab", "c", "abc", "<0x41>", "[U]", "😀", "b😀", "\u2581", "\u2581a"]
    scores = [0.0, -1.0, -1.0, -0.5, -2.0, -0.25, 0.0, 0.0, -1.0, -3.0, -1.0, -0.1]
    model = SentencePieceBPE(list(zip(pieces, scores, strict=True)), unk_id=0, byte_fallback=True, user_defined=[7],
                             unused=[3], backend="native")
    return model.native


def test_checksum_replica_matches() -> None:
    dump = _small().dump()
    assert _sealed(dump[:-8]) == dump
    _module().Model.load(_sealed(dump[:-8]))


def test_truncated_and_flipped_dumps_raise() -> None:
    dump = _small().dump()
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
    with pytest.raises(ValueError):
        _module().Model.load(dump, -1)


def test_bundled_damaged_dumps_raise(bundled: tuple[Pipeline, Any, Any]) -> None:
    dump = bundled[2].dump()
    rng = random.Random(4)
    view = memoryview(dump)
    for cut in sorted({*range(0, HEADER + 16, 7), *rng.sample(range(len(dump)), 40)}):
        _rejects(view[:cut])
    for at in rng.sample(range(len(dump)), 40):
        flipped = bytearray(dump)
        flipped[at] ^= 0x10
        _rejects(flipped)


def _layout(body: bytes | bytearray) -> dict[str, int]:
    n_pieces, n_syms, n_chars, n_pairs, n_user, user_total = struct.unpack_from("<6Q", body, 24)
    syms = HEADER
    chars = syms + 8 * n_syms
    pairs = chars + 12 * n_chars
    user = pairs + 16 * n_pairs + BIGRAMS
    return {"n_pieces": n_pieces, "n_syms": n_syms, "n_chars": n_chars, "n_pairs": n_pairs, "n_user": n_user,
            "user_total": user_total, "syms": syms, "chars": chars, "pairs": pairs, "user": user,
            "pool": user + 8 * n_user, "low": user + 8 * n_user + 4 * user_total,
            "n_low_words": struct.unpack_from("<Q", body, user + 8 * n_user + 4 * user_total)[0]}


def _field(body: bytearray, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(body)
    struct.pack_into(fmt, out, offset, value)
    return _sealed(out)


def test_well_checksummed_bad_fields_raise() -> None:
    body = bytearray(_small().dump()[:-8])
    at = _layout(body)
    assert at["n_pieces"] == 12 and at["n_user"] == 1 and at["user_total"] == 3 and at["n_pairs"] >= 4
    assert at["n_low_words"] >= 2 and at["low"] + 8 + 8 * at["n_low_words"] == len(body)
    for bad in [
        _field(body, 8, "<I", 1),  # version
        _field(body, 8, "<I", 3),
        _field(body, 12, "<I", 4),  # unknown flag
        _field(body, 16, "<i", 12),  # unknown id beyond the pieces
        _field(body, 16, "<i", -1),
        _field(body, 20, "<I", 1),  # reserved
        _field(body, 24, "<Q", 0),  # no pieces
        _field(body, 24, "<Q", 1 << 40),
        _field(body, 32, "<Q", at["n_syms"] + 1),  # counts that do not fit the length
        _field(body, 40, "<Q", 1 << 62),
        _field(body, 48, "<Q", at["n_pairs"] - 1),
        _field(body, 56, "<Q", 2),
        _field(body, 64, "<Q", 4),
        _field(body, 72 + 4 * 0x41, "<i", 12),  # a byte id beyond the pieces
        _field(body, 72, "<i", -2),
        _field(body, at["syms"] + 8 * 3, "<i", 12),  # a symbol's output id
        _field(body, at["syms"] + 8 * 3, "<i", -2),
        _field(body, at["chars"], "<I", 0x110000),  # code points beyond Unicode / out of order
        _field(body, at["chars"] + 12, "<I", struct.unpack_from("<I", body, at["chars"])[0]),
        _field(body, at["chars"] + 4, "<i", at["n_syms"]),  # a character's symbol / output id
        _field(body, at["chars"] + 4, "<i", 3),  # a character whose symbol is two characters long
        _field(body, at["chars"] + 8, "<i", 12),
        _field(body, at["pairs"], "<I", at["n_syms"]),  # pair left / right / merged / rank
        _field(body, at["pairs"] + 4, "<I", 0xFFFFFFFF),
        _field(body, at["pairs"] + 8, "<I", 12),
        _field(body, at["pairs"] + 8, "<I", 1),  # merged length not the sum of the halves'
        _field(body, at["pairs"] + 12, "<I", 12),
        _sealed(body[:at["pairs"] + 16] + body[at["pairs"]:at["pairs"] + 16] + body[at["pairs"] + 32:]),  # twice
        _field(body, at["user"], "<I", 0),  # user piece length 0 / beyond its pool
        _field(body, at["user"], "<I", 4),
        _field(body, at["user"] + 4, "<i", 12),
        _field(body, at["pool"], "<I", 0x110000),
        _field(body, at["low"], "<Q", at["n_low_words"] + 1),  # bigram rows: more than the length holds
        _field(body, at["low"], "<Q", 1 << 62),
        _sealed(body[:at["low"]] + struct.pack("<Q", at["n_low_words"] - 1) + body[at["low"] + 16:]),  # one short
        _sealed(b"SPBPDUMQ" + body[8:]),  # magic
        _sealed(body[:-4]),  # the bigram rows cut short
    ]:
        _rejects(bad)


def test_random_corruptions_never_crash() -> None:
    """Hundreds of random corruptions of a small dump, re-sealed so they pass the checksum: each raises
    ``ValueError`` or loads a model whose ids stay within the vocabulary on every path."""
    dump = _small().dump()
    body = bytes(dump[:-8])
    at = _layout(body)
    rng = random.Random(11)
    # the bytes other than the bigram filter (any value of which is in bounds): header and tables
    spots = [*range(0, at["pairs"] + 16 * at["n_pairs"]), *range(at["user"], len(body))]
    texts = ["abc ab😀 [U]a", "\u2581a\u2581ab c", "b😀b😀😀A", "x" * 50 + "abc" * 30, "[U]" * 3, ""]
    m = _module()
    loaded = refused = 0
    for _ in range(400):
        out = bytearray(body)
        for _ in range(rng.choice([1, 1, 2, 4])):
            spot = rng.choice(spots)
            out[spot] = rng.choice([0, 0xFF, rng.randrange(256), out[spot] ^ (1 << rng.randrange(8))])
        try:
            model = m.Model.load(_sealed(out), 8)
        except ValueError:
            refused += 1
            continue
        loaded += 1
        n = model.n_pieces
        for text in texts:
            ids = model.tokenize(text)
            assert all(0 <= i < n for i in ids)
            assert model.encode_text(m.DUMMY_PREFIX | m.SPLIT, text) == model.encode_text(m.DUMMY_PREFIX | m.SPLIT,
                                                                                          text)
        model.dump()
    assert refused > 100 and loaded > 10
