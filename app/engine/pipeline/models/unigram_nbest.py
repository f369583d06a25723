"""The n best segmentations of a Unigram model, and sampling among them, as SentencePiece defines them.

SentencePiece (0.2.3) answers ``NBestEncode`` and ``SampleEncode(nbest_size > 1)`` from a *lattice*: at every
character, one node per vocabulary piece that starts there (shorter pieces first; unused, control and unknown
pieces never; a user-defined piece scores ``0.1 * (characters - 1)``), plus an unknown node of one character where
no single-character piece exists (scored like the model's unknown). A left-to-right Viterbi pass gives every node
the best score of a path from the beginning to its end (``h``); an A* search from the end then pops partial paths
by ``f = g + h`` (``g``: the scores from the end back to the path's leftmost node), so complete paths come out best
first. Every score and sum is a 32-bit float; the agenda is C++'s ``std::priority_queue`` (a binary max-heap on
``f``), whose sift order decides which of two equal-``f`` paths comes first, so :class:`_Agenda` performs the same
sifts. SentencePiece bounds the search, and so does this module, step for step: at 10,000 agenda entries (or at
100,000 hypotheses since the last cut, with more than ``min(512, 10 n)`` entries) the agenda keeps its best
``min(512, 10 n)`` entries; the 11th cut, or 500,000 hypotheses in all, gives up and returns the Viterbi path only.
(SentencePiece also gives up after 30 seconds of search, which this module does not imitate.)

``SampleEncode`` with ``nbest_size = n > 1`` draws one of the n best with probability proportional to
``exp(alpha * score)``. The draw here uses the caller's :class:`random.Random`; the list it draws from is
SentencePiece's.

Unigram models read from ``tokenizer.json`` (``float32=False``) get the same search in double precision over the
same lattice (Hugging Face has no n-best of its own). Pre-tokens and matched added tokens are searched as one
lattice whose nodes never cross a pre-token boundary (an added token is a fixed node scored 0), so the n best are
those of the whole text.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Protocol

from ..json_numbers import f32


class LatticeModel(Protocol):
    """What the search reads of a :class:`~app.engine.pipeline.models.unigram.Unigram` model (typed here, so that
    the model, which samples with this module, is not imported back)."""

    float32: bool
    unk_id: int | None
    unk_score: float
    _user: frozenset[int]

    @property
    def _score(self) -> dict[int, float]: ...

    def prefix_table(self) -> Mapping[str, int]: ...

    def _finish(self, text: str, path: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]: ...

    def tokenize(self, text: str) -> list[int]: ...

#: SentencePiece's bounds on the search (see the module docstring).
MAX_AGENDA = 10_000
MIN_AGENDA = 512
MAX_HYPOTHESES = 100_000
MAX_ALLOCATED = 500_000
MAX_SHRINKS = 10

_FIXED = -3  # node kind of a matched added token (its id is the segment's)


class _Node:
    __slots__ = ("start", "end", "id", "score", "bt", "segment")

    def __init__(self, start: int, end: int, token_id: int, score: float, segment: int) -> None:
        self.start = start
        self.end = end
        self.id = token_id
        self.score = score
        self.bt = 0.0  # best score of a path from the beginning through this node (Viterbi's backtrace score)
        self.segment = segment


class _Hyp:
    __slots__ = ("node", "next", "fx", "gx")

    def __init__(self, node: _Node, nxt: _Hyp | None, fx: float, gx: float) -> None:
        self.node = node
        self.next = nxt
        self.fx = fx
        self.gx = gx


class _Agenda:
    """``std::priority_queue<Hypothesis*, vector, fx-less>`` with libstdc++'s ``push_heap``/``pop_heap``."""

    __slots__ = ("heap",)

    def __init__(self) -> None:
        self.heap: list[_Hyp] = []

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, item: _Hyp) -> None:
        heap = self.heap
        heap.append(item)
        self._sift_up(len(heap) - 1, 0, item)

    def _sift_up(self, hole: int, top: int, value: _Hyp) -> None:
        heap = self.heap
        fx = value.fx
        parent = (hole - 1) // 2
        while hole > top and heap[parent].fx < fx:
            heap[hole] = heap[parent]
            hole = parent
            parent = (hole - 1) // 2
        heap[hole] = value

    def pop(self) -> _Hyp:
        heap = self.heap
        first = heap[0]
        value = heap.pop()
        n = len(heap)
        if n == 0:
            return first
        # __adjust_heap(first, 0, n, value)
        hole = 0
        child = 0
        while child < (n - 1) // 2:
            child = 2 * (child + 1)
            if heap[child].fx < heap[child - 1].fx:
                child -= 1
            heap[hole] = heap[child]
            hole = child
        if n % 2 == 0 and child == (n - 2) // 2:
            child = 2 * (child + 1)
            heap[hole] = heap[child - 1]
            hole = child - 1
        self._sift_up(hole, 0, value)
        return first


class _Lattice:
    """The lattice of a sequence of segments (pre-token texts, or added-token ids)."""

    def __init__(self, model: LatticeModel, segments: Sequence[str | int]) -> None:
        self.model = model
        self.segments = segments
        rnd = f32 if model.float32 else float
        self.add = (lambda a, b: f32(a + b)) if model.float32 else (lambda a, b: a + b)
        nodes_of = model.prefix_table()  # piece or prefix -> id (-1: a prefix only)
        scores = model._score
        user = model._user if model.float32 else frozenset()
        unk = -2 if model.unk_id is None else model.unk_id
        starts: list[int] = []  # global start of each segment
        pos = 0
        ends: list[list[_Node]] = [[]]  # nodes ending at each global position
        begins: list[list[_Node]] = []
        for k, seg in enumerate(segments):
            starts.append(pos)
            if isinstance(seg, int):
                node = _Node(pos, pos + 1, seg, 0.0, k)
                begins.append([node])
                ends.append([node])
                pos += 1
                continue
            n = len(seg)
            local_begins: list[list[_Node]] = [[] for _ in range(n)]
            local_ends: list[list[_Node]] = [[] for _ in range(n)]
            for s in range(n):
                single = False
                e = s + 1
                while e <= n:
                    v = nodes_of.get(seg[s:e])
                    if v is None:
                        break
                    if v >= 0:
                        score = rnd(0.1 * (e - s - 1)) if v in user else scores[v]
                        node = _Node(pos + s, pos + e, v, score, k)
                        local_begins[s].append(node)
                        local_ends[e - 1].append(node)
                        single = single or e == s + 1
                    e += 1
                if not single:
                    node = _Node(pos + s, pos + s + 1, unk, model.unk_score, k)
                    local_begins[s].append(node)
                    local_ends[s].append(node)
            begins.extend(local_begins)
            ends.extend(local_ends)
            pos += n
        self.length = pos
        self.starts = starts
        self.bos = _Node(0, 0, -1, 0.0, -1)
        self.eos = _Node(pos, pos, -1, 0.0, -1)
        ends[0] = [self.bos]
        begins.append([self.eos])
        self.begins = begins
        self.ends = ends

    def viterbi_scores(self) -> None:
        """Fill every node's backtrace score (Viterbi's forward pass)."""
        add = self.add
        for pos in range(self.length + 1):
            lnodes = self.ends[pos]
            best = lnodes[0].bt
            for lnode in lnodes:
                if lnode.bt > best:
                    best = lnode.bt
            for rnode in self.begins[pos]:
                rnode.bt = add(best, rnode.score)  # rounding is monotone: the max of the sums is the sum of the max

    def viterbi_path(self) -> tuple[list[_Node], float]:
        """SentencePiece's Viterbi path (each node's predecessor: the first one whose sum is the largest)."""
        add = self.add
        prev: dict[int, _Node] = {}
        for pos in range(self.length + 1):
            lnodes = self.ends[pos]
            for rnode in self.begins[pos]:
                best_node = lnodes[0]
                best_score = add(best_node.bt, rnode.score)
                for lnode in lnodes[1:]:
                    score = add(lnode.bt, rnode.score)
                    if score > best_score:
                        best_node, best_score = lnode, score
                prev[id(rnode)] = best_node
                rnode.bt = best_score
        path: list[_Node] = []
        node = prev[id(self.eos)]
        while node is not self.bos:
            path.append(node)
            node = prev[id(node)]
        path.reverse()
        return path, self.eos.bt

    def nbest(self, n: int) -> list[tuple[list[_Node], float]]:
        """The ``n`` best paths (nodes left to right) with their scores, best first (see the module docstring)."""
        if self.length == 0:
            return [([], 0.0)]
        if n <= 1:
            return [self.viterbi_path()]
        self.viterbi_scores()
        add = self.add
        agenda = _Agenda()
        agenda.push(_Hyp(self.eos, None, self.eos.bt, 0.0))
        min_agenda = min(MIN_AGENDA, n * 10)
        max_hypotheses = MAX_HYPOTHESES
        allocated = total = 1
        shrinks = 0
        results: list[tuple[list[_Node], float]] = []
        bos = self.bos
        ends = self.ends
        while len(agenda):
            top = agenda.pop()
            node = top.node
            if node is bos:
                path: list[_Node] = []
                h = top.next
                while h is not None and h.next is not None:
                    path.append(h.node)
                    h = h.next
                results.append((path, top.fx))
                if len(results) == n:
                    break
                continue
            lnodes = ends[node.start]
            gx = top.gx
            for lnode in lnodes:
                agenda.push(_Hyp(lnode, top, add(lnode.bt, gx), add(lnode.score, gx)))
            allocated += len(lnodes)
            total += len(lnodes)
            if total >= MAX_ALLOCATED or allocated >= MAX_ALLOCATED:
                return [self.viterbi_path()]
            if len(agenda) >= MAX_AGENDA or (len(agenda) > min_agenda and allocated >= max_hypotheses):
                if shrinks >= MAX_SHRINKS:
                    return [self.viterbi_path()]
                shrinks += 1
                keep = min(len(agenda), min_agenda)
                kept = _Agenda()
                cloned: set[int] = set()
                for _ in range(keep):
                    hyp = agenda.pop()
                    chain: _Hyp | None = hyp
                    while chain is not None and id(chain) not in cloned:
                        cloned.add(id(chain))
                        chain = chain.next
                    kept.push(hyp)
                agenda = kept
                allocated = len(cloned)
                max_hypotheses = allocated + MAX_HYPOTHESES
        return results

    def ids(self, path: list[_Node]) -> list[int]:
        """The ids of a path: each segment's nodes finished as the model finishes a segmentation (unknown runs
        fused, byte fallback)."""
        out: list[int] = []
        k = 0
        while k < len(path):
            segment = path[k].segment
            seg = self.segments[segment]
            if isinstance(seg, int):
                out.append(seg)
                k += 1
                continue
            base = self.starts[segment]
            local: list[tuple[int, int, int]] = []
            while k < len(path) and path[k].segment == segment:
                node = path[k]
                local.append((node.id, node.start - base, node.end - base))
                k += 1
            out.extend(i for i, _, _ in self.model._finish(seg, local))
        return out


def nbest(model: LatticeModel, segments: Sequence[str | int], n: int) -> list[tuple[list[int], float]]:
    """The ``n`` best segmentations of ``segments`` (pre-token texts in order, an ``int`` for a matched added
    token) as ``(ids, score)``, best first: SentencePiece's ``NBestEncode`` list for a single normalized text."""
    if n <= 1:  # SentencePiece answers nbest_size <= 1 with its ordinary encoding
        ids: list[int] = []
        for seg in segments:
            ids.extend([seg] if isinstance(seg, int) else model.tokenize(seg))
        return [(ids, 0.0)]
    lattice = _Lattice(model, segments)
    return [(lattice.ids(path), score) for path, score in lattice.nbest(min(n, 1024))]


def sample_nbest(model: LatticeModel, segments: Sequence[str | int], n: int, alpha: float,
                 rng: random.Random) -> list[int]:
    """One of the ``n`` best segmentations, drawn with probability proportional to ``exp(alpha * score)``."""
    best = nbest(model, segments, n)
    if len(best) == 1:
        return best[0][0]
    logs = [alpha * score for _, score in best]
    top = max(logs)
    z = top + math.log(sum(math.exp(x - top) for x in logs))
    probs = [math.exp(x - z) for x in logs]
    probs = [p if math.isfinite(p) and p > 0 else 0.0 for p in probs]
    if not any(probs):
        probs[0] = 1.0
    return best[rng.choices(range(len(best)), probs)[0]][0]
