"""BPE-dropout with Hugging Face ``tokenizers``' semantics (its BPE ``dropout`` option), for any merge table.

The symbols start as the pre-token's characters (byte-level: its bytes). Candidate merges wait in a queue ordered
by merge rank, then by position (leftmost first). Each candidate taken from the queue is *skipped* with
probability ``p`` and set aside; the first one that is not skipped puts every candidate set aside back into the
queue, and is then applied if it is still valid (its left symbol alive, its right neighbour unchanged). The new
symbol's pairs with its neighbours join the queue. When the queue is empty, whatever was skipped last stays
unmerged. So at every step each merge is dropped independently with probability ``p`` and the best surviving one
is applied (Provilkov et al. 2020); ``p = 0`` is ordinary BPE, ``p = 1`` merges nothing.

Hugging Face draws ``p`` from its thread's generator; here the caller's :class:`random.Random` decides, so a seed
reproduces a sample.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

#: ``pair(left id, right id) -> (rank, merged id)`` or None when the two never merge.
PairLookup = Callable[[int, int], "tuple[int, int] | None"]


def merge_with_dropout(ids: list[int], spans: list[tuple[int, int]] | None, pair: PairLookup, rng: random.Random,
                       p: float) -> tuple[list[int], list[tuple[int, int]] | None]:
    """The merged symbols of ``ids`` (and their spans, when given: each merge joins its halves' spans) under
    BPE-dropout ``p``. ``ids``/``spans`` are not modified."""
    n = len(ids)
    if n < 2:
        return list(ids), (list(spans) if spans is not None else None)
    syms = list(ids)
    alive = [True] * n
    nxt = list(range(1, n + 1))
    nxt[-1] = -1
    prv = list(range(-1, n - 1))
    heap: list[tuple[int, int, int]] = []  # (rank, position, merged id)
    for i in range(n - 1):
        found = pair(syms[i], syms[i + 1])
        if found is not None:
            heap.append((found[0], i, found[1]))
    heapq.heapify(heap)
    out_spans = list(spans) if spans is not None else None
    skipped: list[tuple[int, int, int]] = []
    draw = rng.random
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        top = pop(heap)
        if draw() < p:
            skipped.append(top)
            continue
        for item in skipped:
            push(heap, item)
        skipped.clear()
        _, i, new = top
        if not alive[i]:
            continue
        j = nxt[i]
        if j < 0:
            continue
        found = pair(syms[i], syms[j])
        if found is None or found[1] != new:
            continue  # expired: a neighbour changed since this candidate was queued
        syms[i] = new
        alive[j] = False
        if out_spans is not None:
            out_spans[i] = (out_spans[i][0], out_spans[j][1])
        k = nxt[j]
        nxt[i] = k
        if k >= 0:
            prv[k] = i
        before = prv[i]
        if before >= 0:
            found = pair(syms[before], new)
            if found is not None:
                push(heap, (found[0], before, found[1]))
        if k >= 0:
            found = pair(new, syms[k])
            if found is not None:
                push(heap, (found[0], i, found[1]))
    kept = [s for s, a in zip(syms, alive, strict=True) if a]
    if out_spans is not None:
        out_spans = [s for s, a in zip(out_spans, alive, strict=True) if a]
    return kept, out_spans
