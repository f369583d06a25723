"""Rank-based byte-pair encoding of one pre-token, exactly as tiktoken does it.

Rules (tiktoken ``src/lib.rs``): a piece that is itself a token is that token (callers check this first); otherwise
start from single bytes and repeatedly merge the adjacent pair whose concatenated bytes have the lowest rank,
the leftmost pair on ties, until no adjacent pair is a token.

Two implementations give identical output:

* :func:`merge_small` — the textbook loop, O(n²) in the piece length but fastest for the short pieces that
  make up almost all real text;
* :func:`_merge_heap` — a heap of candidate pairs over a linked list of parts, with lazy invalidation:
  O(n log n), used for long pieces so that a 1 MB piece that never splits (``"a" * 10**6``) stays fast.

The heap orders candidates by ``(rank, start offset)``. Start offsets of live parts keep their left-to-right order
through every merge, so popping the smallest key is exactly "lowest rank, leftmost on ties".
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

#: Pieces longer than this many bytes use the O(n log n) heap merge.
HEAP_THRESHOLD = 128


def byte_pair_encode(piece: bytes, ranks: Mapping[bytes, int]) -> list[int]:
    """Token ids for ``piece`` (non-empty bytes) under ``ranks``.

    Every single byte must be in ``ranks`` (true for every byte-level BPE vocabulary); raises ``KeyError`` if not.
    """
    if len(piece) == 1:
        return [ranks[piece]]
    bounds = _merge_heap(piece, ranks) if len(piece) > HEAP_THRESHOLD else merge_small(piece, ranks)
    return [ranks[piece[a:b]] for a, b in zip(bounds, bounds[1:], strict=False)]


def byte_pair_split(piece: bytes, ranks: Mapping[bytes, int]) -> list[bytes]:
    """The token byte strings of ``piece`` (the same segmentation as :func:`byte_pair_encode`)."""
    if len(piece) == 1:
        return [piece]
    bounds = _merge_heap(piece, ranks) if len(piece) > HEAP_THRESHOLD else merge_small(piece, ranks)
    return [piece[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def merge_small(piece: bytes, ranks: Mapping[bytes, int], parts: int = 1) -> list[int]:
    """Part boundaries after merging (``[0, …, len(piece)]``), stopping early once ``parts`` parts remain;
    quadratic, for short pieces."""
    bounds = list(range(len(piece) + 1))
    get = ranks.get
    stop = parts + 1
    while len(bounds) > stop:
        best_rank: int | None = None
        best_i = -1
        for i in range(len(bounds) - 2):
            rank = get(piece[bounds[i] : bounds[i + 2]])
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank, best_i = rank, i
        if best_rank is None:
            break
        del bounds[best_i + 1]
    return bounds


def _merge_heap(piece: bytes, ranks: Mapping[bytes, int]) -> list[int]:
    """Part boundaries after merging; O(n log n) with a heap and a doubly linked list of part starts."""
    n = len(piece)
    get = ranks.get
    # Part starting at offset i spans [i, nxt[i]); nxt[n] is the sentinel end. prv[i] < 0 means no left part.
    nxt = list(range(1, n + 2))
    prv = list(range(-1, n))
    alive = [True] * (n + 1)
    heap: list[tuple[int, int]] = []
    for i in range(n - 1):
        rank = get(piece[i : i + 2])
        if rank is not None:
            heap.append((rank, i))
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        rank, i = pop(heap)
        if not alive[i]:
            continue
        j = nxt[i]
        if j >= n:
            continue
        k = nxt[j]
        if get(piece[i:k]) != rank:
            continue  # stale: a neighbour merged since this candidate was pushed
        # Merge part j into part i.
        alive[j] = False
        nxt[i] = k
        prv[k] = i
        if k < n:
            right = get(piece[i : nxt[k]])
            if right is not None:
                push(heap, (right, i))
        p = prv[i]
        if p >= 0:
            left = get(piece[p:k])
            if left is not None:
                push(heap, (left, p))
    bounds = [0]
    i = 0
    while i < n:
        i = nxt[i]
        bounds.append(i)
    return bounds
