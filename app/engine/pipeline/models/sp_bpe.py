"""SentencePiece's BPE model: merges chosen by the *score of the merged piece*, not by a merge list.

The input (one whole normalized text) starts as symbols: the longest user-defined piece at each position (frozen:
never merged), else one character. Every adjacent pair whose concatenation is a vocabulary piece is a candidate;
the candidate with the highest score is merged first, the leftmost on ties, and new neighbours become candidates,
until none is left. A merged piece of type UNUSED is split back into the two symbols it was made from, recursively
(SentencePiece's resegmentation). A symbol that is no piece is unknown: with byte fallback one ``<0xNN>`` per UTF-8
byte, otherwise a run of unknown symbols becomes one unknown id.

This differs from Hugging Face's merge-list BPE (:mod:`app.engine.pipeline.models.bpe`) whenever the order of the
merges a file lists disagrees with the scores of their results; SentencePiece ``.model`` files and GGUF ``llama``
vocabularies are defined by scores.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Collection, Sequence


class SentencePieceBPE:
    """Score-ordered BPE over a SentencePiece vocabulary. Thread-safe (no mutable state after construction)."""

    def __init__(self, vocab: Sequence[tuple[str, float]], *, unk_id: int | None, byte_fallback: bool = False,
                 mergeable: Collection[int] | None = None, user_defined: Collection[int] = (),
                 unused: Collection[int] = ()) -> None:
        """``vocab``: ``(piece, score)`` by id. ``mergeable``: ids a merge may produce (SentencePiece: normal,
        user-defined and unused pieces; default all but ``unk_id``). ``user_defined``: pieces matched whole in the
        text and never merged further. ``unused``: pieces split back after merging."""
        self.vocab = [(p, float(s)) for p, s in vocab]
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        ids = range(len(self.vocab)) if mergeable is None else mergeable
        self._pieces: dict[str, int] = {}
        for i in ids:
            if i != unk_id and self.vocab[i][0]:
                self._pieces.setdefault(self.vocab[i][0], i)
        self._all: dict[str, int] = {}
        for i, (piece, _) in enumerate(self.vocab):
            self._all.setdefault(piece, i)
        self._unused = frozenset(unused)
        user = sorted({self.vocab[i][0] for i in user_defined if self.vocab[i][0]}, key=len, reverse=True)
        self._user = frozenset(user)
        lengths: dict[str, set[int]] = {}
        for u in user:
            lengths.setdefault(u[0], set()).add(len(u))
        self._user_lengths = {c: sorted(v, reverse=True) for c, v in lengths.items()}
        self._bytes = [self._all.get(f"<0x{b:02X}>") for b in range(256)]
        #: piece id -> rank of its score among mergeable pieces (0 = highest; equal scores share a rank)
        order = sorted({self.vocab[i][1] for i in self._pieces.values()}, reverse=True)
        position = {score: r for r, score in enumerate(order)}
        self._rank = {i: position[self.vocab[i][1]] for i in self._pieces.values()}
        self._max_len = max((len(p) for p in self._pieces), default=1)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def token_to_id(self, token: str) -> int | None:
        return self._all.get(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self.vocab[token_id][0] if 0 <= token_id < len(self.vocab) else None

    def _symbols(self, text: str) -> tuple[list[str], list[bool], list[int]]:
        """Initial symbols, frozen flags and start positions (characters)."""
        syms: list[str] = []
        frozen: list[bool] = []
        starts: list[int] = []
        i, n = 0, len(text)
        user_lengths = self._user_lengths
        while i < n:
            lengths = user_lengths.get(text[i]) if user_lengths else None
            used = 0
            if lengths is not None:
                for k in lengths:
                    if text[i:i + k] in self._user:
                        used = k
                        break
            starts.append(i)
            if used:
                syms.append(text[i:i + used])
                frozen.append(True)
                i += used
            else:
                syms.append(text[i])
                frozen.append(False)
                i += 1
        return syms, frozen, starts

    def _merge(self, text: str, skip: Callable[[], bool] | None = None) -> list[tuple[str, int]]:
        """The final symbols as ``(piece, start)`` after merging and resegmentation. ``skip``: BPE-dropout — a
        merge about to be applied is dropped when it returns True (as SentencePiece samples)."""
        syms, frozen, starts = self._symbols(text)
        n = len(syms)
        if n == 0:
            return []
        pieces = self._pieces
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prv = list(range(-1, n - 1))
        # Candidates as plain ints (score rank, then leftmost, then merged length), so the heap holds no objects
        # the garbage collector would have to scan on long inputs.
        heap: list[int] = []
        rev: dict[str, tuple[str, str]] = {}
        unused = self._unused
        rank = self._rank
        width = n + 1
        sizes = self._max_len + 1
        push, pop = heapq.heappush, heapq.heappop

        def add(left: int, right: int) -> None:
            if left < 0 or right < 0 or frozen[left] or frozen[right]:
                return
            merged = syms[left] + syms[right]
            pid = pieces.get(merged)
            if pid is None:
                return
            push(heap, (rank[pid] * width + left) * sizes + len(merged))
            if pid in unused:
                rev[merged] = (syms[left], syms[right])

        for i in range(1, n):
            add(i - 1, i)

        while heap:
            key = pop(heap)
            size = key % sizes
            left = (key // sizes) % width
            right = nxt[left]
            if right < 0 or not syms[left] or not syms[right] or len(syms[left]) + len(syms[right]) != size:
                continue
            merged = syms[left] + syms[right]
            if skip is not None and skip():
                continue
            syms[left] = merged
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prv[nxt[right]] = left
            syms[right] = ""
            add(prv[left], left)
            add(left, nxt[left])
        out: list[tuple[str, int]] = []

        def resegment(piece: str, start: int) -> None:
            pid = self._all.get(piece)
            split = rev.get(piece) if pid is not None and pid in unused else None
            if split is None:
                out.append((piece, start))
                return
            resegment(split[0], start)
            resegment(split[1], start + len(split[0]))

        i = 0
        while i >= 0:
            resegment(syms[i], starts[i])
            i = nxt[i]
        return out

    def tokenize_with_spans(self, text: str) -> list[tuple[int, int, int]]:
        return self._ids(self._merge(text))

    def dropout_with_spans(self, text: str, rng: random.Random, p: float) -> list[tuple[int, int, int]]:
        """BPE-dropout (Provilkov et al. 2020): every merge is skipped with probability ``p``. Seeded by ``rng``."""
        return self._ids(self._merge(text, lambda: rng.random() < p))

    def _ids(self, symbols: list[tuple[str, int]]) -> list[tuple[int, int, int]]:
        out: list[tuple[int, int, int]] = []
        prev_unk = False
        for piece, start in symbols:
            end = start + len(piece)
            pid = self._all.get(piece)
            if pid is not None and pid != self.unk_id:
                out.append((pid, start, end))
                prev_unk = False
                continue
            if self.byte_fallback:
                ids = [self._bytes[b] for b in piece.encode("utf-8", "surrogatepass")]
                if all(i is not None for i in ids):
                    out.extend((i, start, end) for i in ids if i is not None)
                    prev_unk = False
                    continue
            if self.unk_id is None:
                raise ValueError(f"text {piece!r} has no piece and the model has no unknown token")
            if prev_unk:  # a run of unknown symbols is one unknown token
                out[-1] = (self.unk_id, out[-1][1], end)
            else:
                out.append((self.unk_id, start, end))
            prev_unk = True
        return out

    def tokenize(self, text: str) -> list[int]:
        return [t[0] for t in self.tokenize_with_spans(text)]
