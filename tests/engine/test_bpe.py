"""Unit tests of ``app.engine.bpe``: both merge paths agree with each other, with an independent textbook
implementation written here, and with tiktoken; ties go leftmost; long pieces take the heap path."""

from __future__ import annotations

import base64
import itertools
import random
import time
from functools import cache

import pytest

from app.engine import bpe, get_store, get_tokenizer
from app.engine.bpe import HEAP_THRESHOLD, _merge_heap, byte_pair_encode, byte_pair_split, merge_small

from .exactness import corpus
from .exactness.reference import reference_encoding, reference_ranks


def textbook(piece: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    """Independent reference: list of parts; merge the lowest-ranked adjacent pair, leftmost on ties."""
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        candidates = [(ranks[a + b], i) for i, (a, b) in enumerate(itertools.pairwise(parts)) if a + b in ranks]
        if not candidates:
            break
        _, i = min(candidates)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


def parts_of(piece: bytes, bounds: list[int]) -> list[bytes]:
    return [piece[a:b] for a, b in itertools.pairwise(bounds)]


@cache
def real_ranks(name: str) -> dict[bytes, int]:
    spec = get_store().spec(name)
    return reference_ranks(spec.artifact_path.name, spec.sha256)


def random_table(rng: random.Random, alphabet: bytes) -> dict[bytes, int]:
    """A small random rank table over ``alphabet``: every single byte, plus random 2–5 byte strings, with
    random (sometimes equal-prefix, sometimes tied-looking) ranks; not necessarily a consistent BPE vocab."""
    ranks = {bytes([b]): i for i, b in enumerate(alphabet)}
    next_rank = len(ranks)
    for _ in range(rng.randint(1, 40)):
        token = bytes(rng.choice(alphabet) for _ in range(rng.randint(2, 5)))
        if token not in ranks:
            ranks[token] = next_rank + rng.randint(0, 60)
            next_rank += 1
    return ranks


def test_merge_paths_agree_on_random_tables() -> None:
    rng = random.Random(1234)
    checked = 0
    for _ in range(1500):
        alphabet = bytes(rng.sample(range(256), rng.randint(1, 4)))
        ranks = random_table(rng, alphabet)
        piece = bytes(rng.choice(alphabet) for _ in range(rng.randint(2, 300)))
        small, heap = merge_small(piece, ranks), _merge_heap(piece, ranks)
        assert small == heap, (piece, ranks)
        assert parts_of(piece, small) == textbook(piece, ranks), (piece, ranks)
        checked += 1
    assert checked == 1500


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base", "llama3"])
def test_merge_paths_agree_on_real_vocabularies(name: str) -> None:
    """Both paths (forced) on real pieces of the hostile corpus and on random bytes / base64 / letters."""
    ranks = real_ranks(name)
    rng = random.Random(name)
    pieces = {p.encode("utf-8") for p in corpus.ALL_FRAGMENTS if len(p.encode("utf-8")) > 1}
    pieces |= {bytes(rng.getrandbits(8) for _ in range(rng.randint(2, 200))) for _ in range(300)}
    pieces |= {base64.b64encode(rng.randbytes(rng.randint(2, 150))) for _ in range(300)}
    pieces |= {"".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 200))).encode() for _ in range(300)}
    for piece in sorted(pieces):
        small, heap = merge_small(piece, ranks), _merge_heap(piece, ranks)
        assert small == heap, piece
        assert parts_of(piece, small) == textbook(piece, ranks), piece


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base", "llama3"])
def test_byte_pair_encode_equals_tiktoken_single_piece(name: str) -> None:
    """``byte_pair_encode`` equals tiktoken's BPE of one piece, on both sides of the heap threshold."""
    ranks = real_ranks(name)
    ref = reference_encoding(name)
    rng = random.Random(7)
    pieces = [bytes(rng.getrandbits(8) for _ in range(n)) for n in (2, 3, 17, 127, 128, 129, 130, 500, 5000)]
    pieces += [base64.b64encode(rng.randbytes(n)) for n in (10, 96, 97, 1000, 30_000)]
    pieces += ["".join(rng.choice("xyzXYZ0 ") for _ in range(n)).encode() for n in (50, 300, 3000)]
    for piece in pieces:
        if piece in ranks:
            continue  # whole-piece lookup is the caller's job (tested below)
        assert byte_pair_encode(piece, ranks) == ref._encode_single_piece(piece), (name, len(piece))
        assert b"".join(byte_pair_split(piece, ranks)) == piece
        assert [ranks[p] for p in byte_pair_split(piece, ranks)] == byte_pair_encode(piece, ranks)


def test_ties_go_leftmost() -> None:
    ranks = {b"a": 0, b"aa": 1}
    for merge in (merge_small, _merge_heap):
        assert parts_of(b"aaa", merge(b"aaa", ranks)) == [b"aa", b"a"]
        assert parts_of(b"aaaaa", merge(b"aaaaa", ranks)) == [b"aa", b"aa", b"a"]
    # Lower rank wins over position; equal ranks of different pairs cannot happen in a table, position decides.
    ranks = {b"a": 0, b"b": 1, b"ab": 5, b"ba": 3}
    for merge in (merge_small, _merge_heap):
        assert parts_of(b"aba", merge(b"aba", ranks)) == [b"a", b"ba"]
        assert parts_of(b"abab", merge(b"abab", ranks)) == [b"a", b"ba", b"b"]


def test_merge_uses_rank_of_concatenation_after_merges() -> None:
    """A merged part pairs with its neighbour by the rank of the concatenated bytes (not of the pair of ids)."""
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"abc": 4, b"bc": 10}
    for merge in (merge_small, _merge_heap):
        assert parts_of(b"abc", merge(b"abc", ranks)) == [b"abc"]
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4}
    for merge in (merge_small, _merge_heap):
        assert parts_of(b"abc", merge(b"abc", ranks)) == [b"a", b"bc"]


def test_whole_piece_lookup_comes_first() -> None:
    """Llama 3 " Việt" is token 101798, although merging its bytes would not reach it: the whole piece is looked
    up in the rank table first."""
    ranks = real_ranks("llama3")
    piece = " Việt".encode()
    assert ranks[piece] == 101798
    assert byte_pair_encode(piece, ranks) != [101798]  # merging alone gives other tokens
    for backend in ("python", "native"):
        tokenizer = get_tokenizer("llama3", backend=backend)
        assert tokenizer.encode(" Việt") == [101798]
        assert tokenizer.encode("Tiếng Việt") == reference_encoding("llama3").encode_ordinary("Tiếng Việt")
        assert 101798 in tokenizer.encode("Tiếng Việt")


def test_single_bytes_and_missing_bytes() -> None:
    ranks = {b"a": 0, b"b": 1, b"ab": 2}
    assert byte_pair_encode(b"a", ranks) == [0]
    assert byte_pair_split(b"b", ranks) == [b"b"]
    assert byte_pair_encode(b"ab", ranks) == [2]
    with pytest.raises(KeyError):
        byte_pair_encode(b"ac", ranks)


def test_heap_threshold_routes_long_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_small, real_heap = bpe.merge_small, bpe._merge_heap

    def small(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
        calls.append("small")
        return real_small(piece, ranks)

    def heap(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
        calls.append("heap")
        return real_heap(piece, ranks)

    monkeypatch.setattr(bpe, "merge_small", small)
    monkeypatch.setattr(bpe, "_merge_heap", heap)
    ranks = {b"a": 0, b"aa": 1}
    byte_pair_encode(b"a" * HEAP_THRESHOLD, ranks)
    byte_pair_encode(b"a" * (HEAP_THRESHOLD + 1), ranks)
    assert calls == ["small", "heap"]


@pytest.mark.slow
def test_heap_path_on_a_million_byte_piece() -> None:
    """1,000,000 x "a" as one piece: finishes (O(n log n)) and equals tiktoken. The time is printed, not asserted."""
    ranks = real_ranks("llama3")
    piece = b"a" * 1_000_000
    started = time.perf_counter()
    ids = byte_pair_encode(piece, ranks)
    elapsed = time.perf_counter() - started
    print(f"\nheap merge of 1,000,000 x 'a' (llama3 ranks): {elapsed:.2f}s, {len(ids)} tokens")
    assert ids == reference_encoding("llama3")._encode_single_piece(piece)
    assert len(ids) == 125_000
