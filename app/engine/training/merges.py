"""Incremental learning of a BPE merge table over weighted symbol sequences (the trainer's core).

Input: distinct *words* (pre-tokens), each a sequence of base-symbol ids, with a frequency, in **corpus order**
(the order of each word's first appearance in the corpus). Output: the ordered merges.

Each step merges, in every word, every occurrence (left to right, non-overlapping) of the adjacent pair with
the highest frequency — the sum of the frequencies of the words it occurs in, counted per occurrence. The
pair's merge creates a new symbol whose text is the concatenation of the two; if a symbol with that text (and,
for the classic kind, the same end-of-word flag) already exists — it can be reached by two different splits —
the merge reuses that symbol and adds no new one.

Tie-breaking between pairs of equal frequency (the two rules of the literature, :data:`TIE_BREAKS`):

``first-seen``
    The pair whose earliest occurrence comes first in the corpus wins. An occurrence's position is
    ``(word index, offset of the pair's first unit within the word)``: the word index is the rank of the word
    in order of first appearance, the offset counts base units (bytes or characters; the end-of-word marker is
    one unit). Positions are those of the *current* occurrences, so a pair created by a merge is placed where
    it occurs, and a pair whose earliest occurrence was merged away moves back to its next one.
``lexicographic``
    The lexicographically greatest pair ``(left text, right text)`` wins (compared as bytes, or as strings by
    code point, with the end-of-word marker spelled ``</w>``), as in subword-nmt's ``max(stats, key=(count,
    pair))``.

Algorithm (never recounts): pair counts, a pair -> words index (a superset: words are appended, never removed,
except when a pair's count reaches zero and it is dropped), and a max-heap of ``(count, tie key, pair)`` with
lazy invalidation. After a merge only the words in the merged pair's index are rewritten; in each, only the
pairs touching a merged occurrence change (the old neighbours' pairs lose the word's frequency, the pairs with
the new symbol gain it). A count increase pushes a fresh heap entry (if the count reaches ``min_frequency``; a
pair below it cannot be chosen until it grows, which pushes it then); decreases are left in the heap and
corrected when the stale entry surfaces. In ``first-seen`` mode a pair whose earliest occurrence disappeared
keeps its old position as a lower bound and is marked dirty; its exact position is recomputed only when it
reaches the top, which keeps the choice exact (every other entry's key is a lower bound of its true key).

Stopping: the limits (``max_symbols``, ``max_merges``) are checked once the heap's top is a pair that could be
merged, so the stop reason does not depend on which outdated entries are still in the heap: when the last
mergeable pair is used up exactly as a limit is reached, the reason is "min frequency reached" or "no pairs left".

Cost: O(total length of the rewritten words) per merge plus heap operations. Memory: the distinct words, the
pair counts and the index — independent of the corpus size beyond the number of distinct words.

This module is the reference. The same merges and stop reason come from C (``app/engine/_native/trainer.c``,
wrapped by :func:`.compiled.learn_merges_native`), which training uses by default; the tests require them
identical. The C learner keeps, instead of the word index, every pair's occurrence positions, so that a merge
visits only the merged occurrences and their neighbours.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

TIE_BREAKS = ("first-seen", "lexicographic")

_SHIFT = 32  # pair key = left << _SHIFT | right
_MASK = (1 << _SHIFT) - 1
_POS_SHIFT = 40  # first-seen key = word index << _POS_SHIFT | offset


@dataclass
class MergeResult:
    """The outcome of :func:`learn_merges`.

    ``merges[k] = (left, right, result)`` in learned order (symbol ids); ``symbols`` are the keys of every
    symbol by id (base symbols first, then new ones in creation order); ``words`` the final segmentation of
    each input word (symbol ids), in input order.
    """

    merges: list[tuple[int, int, int]]
    symbols: list[Hashable]
    words: list[list[int]]
    counts: list[int] = field(default_factory=list)
    stop_reason: str = ""


def learn_merges(
    words: Sequence[Sequence[int]],
    counts: Sequence[int],
    *,
    base_symbols: Sequence[Hashable],
    concat: Callable[[Hashable, Hashable], Hashable],
    order_key: Callable[[Hashable], tuple[int, ...]],
    unit_length: Callable[[Hashable], int],
    max_symbols: int | None = None,
    max_merges: int | None = None,
    min_frequency: int = 2,
    tie_break: str = "first-seen",
    progress: Callable[[int], None] | None = None,
    copy_words: bool = True,
    valid: Callable[[Hashable], bool] | None = None,
) -> MergeResult:
    """Learn merges over ``words`` (base-symbol ids; ``counts[i]`` is the frequency of ``words[i]``).

    ``base_symbols[i]`` is the key of symbol ``i`` (bytes, or ``(text, end_of_word)``); ``concat`` builds a
    merged symbol's key; ``order_key(key)`` maps a key to a tuple that sorts *descending* in the symbol's
    lexicographic order (smaller tuple = greater symbol; it must compare correctly when two are concatenated);
    ``unit_length(key)`` is the symbol's length in base units.

    Stops when the vocabulary holds ``max_symbols`` distinct symbols, after ``max_merges`` merges, when the most
    frequent pair occurs fewer than ``min_frequency`` times (``MergeResult.stop_reason`` says which), or when no
    pair is left. ``progress(n)`` is called after each merge with the number of merges so far. Raises
    ``ValueError`` for an unknown ``tie_break`` or ``min_frequency < 1``. With ``copy_words=False`` the
    trainer works in place on ``words`` (a list of lists, which it then owns) instead of copying it.
    ``valid(key)``, when given, is asked once per distinct pair about its merged key; a refused pair is never
    counted, so it never becomes a candidate (the SentencePiece-style piece rules).
    """
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, not {tie_break!r}")
    if min_frequency < 1:
        raise ValueError("min_frequency must be >= 1")
    first_seen = tie_break == "first-seen"
    symbols: list[Hashable] = list(base_symbols)
    sym_id: dict[Hashable, int] = {k: i for i, k in enumerate(symbols)}
    if len(sym_id) != len(symbols):
        raise ValueError("base symbols must be distinct")
    sym_len = [unit_length(k) for k in symbols]
    sym_order: list[tuple[int, ...]] = [order_key(k) for k in symbols] if not first_seen else []
    ws: list[list[int]] = [list(w) for w in words] if copy_words else words  # type: ignore[assignment]
    wc: list[int] = list(counts)

    pair_count: dict[int, int] = {}
    where: dict[int, list[int]] = {}  # may list a word twice, or words that lost the pair
    first: dict[int, int] = {}  # first-seen: pair -> position key (exact, or a lower bound if in `dirty`)
    dirty: set[int] = set()

    verdicts: dict[int, bool] = {}

    def allowed(p: int) -> bool:
        """The one gate of ``valid`` (asked only when there is one): may pair ``p`` be counted (and so become a
        candidate)?"""
        assert valid is not None
        v = verdicts.get(p)
        if v is None:
            v = verdicts[p] = bool(valid(concat(symbols[p >> _SHIFT], symbols[p & _MASK])))
        return v

    for wi, w in enumerate(ws):
        c = wc[wi]
        off = 0
        for j in range(len(w) - 1):
            x = w[j]
            p = x << _SHIFT | w[j + 1]
            if valid is None or allowed(p):
                if p in pair_count:
                    pair_count[p] += c
                    where[p].append(wi)
                else:
                    pair_count[p] = c
                    where[p] = [wi]
                    if first_seen:
                        first[p] = wi << _POS_SHIFT | off
            off += sym_len[x]

    def tie_key(p: int) -> object:
        if first_seen:
            return first[p]
        return sym_order[p >> _SHIFT] + sym_order[p & _MASK]

    # A pair's count only grows during the merge that creates one of its symbols (or that reuses one), and
    # every growth pushes a fresh entry; so pairs below min_frequency need no entry until they grow.
    heap: list[tuple[int, object, int]] = [
        (-cnt, tie_key(p), p) for p, cnt in pair_count.items() if cnt >= min_frequency
    ]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush

    def exact_position(p: int) -> int | None:
        """Earliest current occurrence of ``p``; prunes words that no longer hold it from the index."""
        a, b = p >> _SHIFT, p & _MASK
        holders = sorted(set(where[p]))
        for n, wi in enumerate(holders):
            w = ws[wi]
            off = 0
            for j in range(len(w) - 1):
                if w[j] == a and w[j + 1] == b:
                    where[p] = holders[n:]
                    return wi << _POS_SHIFT | off
                off += sym_len[w[j]]
        return None

    merges: list[tuple[int, int, int]] = []
    stop = "no pairs left"
    while heap:
        negc, key, p = heap[0]
        cur = pair_count.get(p, 0)
        if -negc != cur:
            pop(heap)
            if -negc > cur >= min_frequency:  # a lazily ignored decrease: re-file under the true count
                push(heap, (-cur, tie_key(p), p))
            continue
        if first_seen:
            if key != first[p]:
                pop(heap)  # superseded by an entry with the current position
                continue
            if p in dirty:
                pop(heap)
                dirty.discard(p)
                pos = exact_position(p)
                assert pos is not None  # a pair with a positive count occurs somewhere
                first[p] = pos
                push(heap, (negc, pos, p))
                continue
        if cur < min_frequency:
            stop = "min frequency reached"
            break
        # a limit stops the loop only when a pair could still be merged: the reason does not depend on which
        # outdated entries happen to be left in the heap
        if max_merges is not None and len(merges) >= max_merges:
            stop = "max merges reached"
            break
        if max_symbols is not None and len(symbols) >= max_symbols:
            stop = "vocabulary size reached"
            break
        pop(heap)

        a, b = p >> _SHIFT, p & _MASK
        new_key = concat(symbols[a], symbols[b])
        new = sym_id.get(new_key)
        if new is None:
            new = len(symbols)
            symbols.append(new_key)
            sym_id[new_key] = new
            sym_len.append(sym_len[a] + sym_len[b])
            if not first_seen:
                sym_order.append(order_key(new_key))
        merges.append((a, b, new))

        changed: set[int] = set()
        len_new = sym_len[new]
        len_a = sym_len[a]
        for wi in where.pop(p):
            w = ws[wi]
            n = len(w)
            # Rewrite the word: every (a, b), left to right, non-overlapping; note (old index, new index, offset).
            out: list[int] = []
            occ: list[tuple[int, int, int]] = []
            i = 0
            off = 0
            while i < n:
                s = w[i]
                if s == a and i + 1 < n and w[i + 1] == b:
                    occ.append((i, len(out), off))
                    out.append(new)
                    off += len_new
                    i += 2
                else:
                    out.append(s)
                    off += sym_len[s]
                    i += 1
            if not occ:
                continue  # the index is a superset (or lists this word twice)
            ws[wi] = out
            c = wc[wi]
            base = wi << _POS_SHIFT
            # Old pairs next to an occurrence disappear (each pair position once; the merged pair itself is
            # dropped as a whole below). Unrolled for speed: left neighbour pair, then right neighbour pair.
            last = -1
            for i, _, o in occ:
                for q, pos, j in (
                    (w[i - 1] << _SHIFT | a, o - sym_len[w[i - 1]], i - 1) if i - 1 > last else (-1, 0, 0),
                    (b << _SHIFT | w[i + 2], o + len_a, i + 1) if i + 2 < n else (-1, 0, 0),
                ):
                    if q < 0 or q == p or (valid is not None and not allowed(q)):
                        continue
                    last = j
                    cnt = pair_count[q] - c
                    if cnt:
                        pair_count[q] = cnt
                        if first_seen and first[q] == base | pos:
                            dirty.add(q)  # its earliest occurrence is gone: the key is now a lower bound
                    else:
                        del pair_count[q]
                        where.pop(q, None)
                        if first_seen:
                            del first[q]
                            dirty.discard(q)
                if i + 2 < n:
                    last = i + 1
            # New pairs around each merged symbol appear (each pair position once).
            last = -1
            m = len(out)
            for _, k, o in occ:
                for q, pos, j in (
                    (out[k - 1] << _SHIFT | new, o - sym_len[out[k - 1]], k - 1) if k - 1 > last else (-1, 0, 0),
                    (new << _SHIFT | out[k + 1], o, k) if k + 1 < m else (-1, 0, 0),
                ):
                    if q < 0:
                        continue
                    last = j
                    if valid is not None and not allowed(q):
                        continue
                    had = pair_count.get(q)
                    if had is None:
                        pair_count[q] = c
                        where[q] = [wi]
                        if first_seen:
                            first[q] = base | pos
                    else:
                        pair_count[q] = had + c
                        where[q].append(wi)
                        if first_seen and base | pos < first[q]:
                            first[q] = base | pos  # exact: below the (lower bound of the) earliest position
                            dirty.discard(q)
                    changed.add(q)
        pair_count.pop(p, None)  # the merged pair is gone from every word
        if first_seen:
            first.pop(p, None)
            dirty.discard(p)
        for q in changed:
            cnt = pair_count.get(q, 0)
            if cnt >= min_frequency:
                push(heap, (-cnt, tie_key(q), q))
        if progress is not None:
            progress(len(merges))
    else:
        stop = "min frequency reached" if pair_count else "no pairs left"
    return MergeResult(merges=merges, symbols=symbols, words=ws, counts=wc, stop_reason=stop)


def byte_order_key(token: bytes) -> tuple[int, ...]:
    """Descending-order key for bytes: a smaller tuple is a lexicographically greater byte string."""
    return (*(255 - x for x in token), 256)


def text_order_key(text: str) -> tuple[int, ...]:
    """Descending-order key for strings by code point."""
    return (*(0x10FFFF - ord(ch) for ch in text), 0x110000)
