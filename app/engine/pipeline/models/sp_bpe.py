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

With the compiled extension (``app/engine/_native/spbpe.c``, backend native) :meth:`tokenize` and
:meth:`encode_pieces` run in C with the GIL released, and :meth:`fused_encoder` gives the pipeline one call that also
normalizes and splits a whole text (SentencePiece's normalizer without a precompiled charsmap); words of up to 12
characters go through a bounded cache in C (:meth:`cache_stats`, :meth:`clear_cache`). The ids are the
reference's. Offsets, BPE-dropout and :meth:`tokenize_with_spans` stay on the code below, whose tables are built
on first use when the compiled model runs (:meth:`SentencePieceBPE.prepare_reference`). With the artifact cache
(``derived``) a warm load restores the compiled model's tables (``Model.load``, part ``"sp-bpe-model"``) instead of
building them.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import random
import threading
from array import array
from collections.abc import Callable, Collection, Sequence
from itertools import compress
from typing import Any, cast

from ...artifact_cache import Compiled
from ...cache import CacheStats
from ...sampling import Sample
from ..base import ItemsSampler, Model, bpe_dropout_sampler
from ..compiled import SP_BPE as _EXT
from ..derived import Derive, compiled, derive
from ..sp_normalizer import SentencePieceNormalizer
from ..sp_split import SpaceSymbolSplit, splits_exactly

#: The artifact cache part of the compiled model's tables (:class:`SentencePieceBPE` with ``derived``).
SP_BPE_MODEL_PART = "sp-bpe-model"


def _digest(ids: Sequence[int]) -> str:
    return hashlib.sha256(array("q", ids).tobytes()).hexdigest()


class SentencePieceBPE(Model):
    """Score-ordered BPE over a SentencePiece vocabulary. Thread-safe: the only state made after construction is the
    reference's tables and the piece -> id dict, each built once under a lock (:meth:`prepare_reference`)."""

    def __init__(self, vocab: Sequence[tuple[str, float]], *, unk_id: int | None, byte_fallback: bool = False,
                 mergeable: Collection[int] | None = None, user_defined: Collection[int] = (),
                 unused: Collection[int] = (), backend: str | None = None, cache_size: int = 0,
                 derived: Derive | None = None, columns: tuple[list[str], list[float]] | None = None,
                 origin: str | None = None) -> None:
        """``vocab``: ``(piece, score)`` by id. ``mergeable``: ids a merge may produce (SentencePiece: normal,
        user-defined and unused pieces; default all but ``unk_id``). ``user_defined``: pieces matched whole in the
        text and never merged further. ``unused``: pieces split back after merging. ``backend``: ``native``,
        ``python`` or None (see :func:`app.engine.native.resolve_backend`); :attr:`backend` says which runs.
        ``cache_size``: slots of the compiled model's word cache (0: none). ``columns``: ``vocab`` as the lists
        ``(pieces, scores)`` (``vocab`` is then ignored). ``derived``: the artifact's cache of derivations; the
        compiled model's tables are then kept there (part ``"sp-bpe-model"``, :data:`SP_BPE_MODEL_PART`, with the
        settings it was built for in its meta, checked on restore) and a warm load restores them instead of building
        them. ``origin`` (with ``derived``): names the deterministic derivation of the pieces and scores from the
        artifact; the stored model is keyed by it instead of by digests of every piece and score.

        With the compiled model the pure-Python reference's tables (used by offsets, BPE-dropout and
        :meth:`tokenize_with_spans`) are built on first use, or by :meth:`prepare_reference`."""
        if columns is not None:
            pieces, scores = columns
            if len(pieces) != len(scores):
                raise ValueError("SentencePiece BPE vocabulary: pieces and scores differ in length")
            self._pairs: list[tuple[str, float]] | None = None
        else:
            self._pairs = [(p, float(s)) for p, s in vocab]
            pieces, scores = [p for p, _ in self._pairs], [s for _, s in self._pairs]
        if not set(map(type, scores)) <= {float}:
            scores = [float(s) for s in scores]
        self._piece_list: list[str] = list(pieces)
        self._scores: list[float] = list(scores)
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        self._mergeable = None if mergeable is None else list(mergeable)
        self._user_ids = sorted(set(user_defined))
        self._unused_ids = sorted(set(unused))
        self._origin = origin
        self._lock = threading.Lock()
        self._reference_ready = False
        self._all_built: dict[str, int] | None = None
        self._cache_size = cache_size
        self._space_split: bool | None = None  # splits_at_space(), once known
        #: The compiled model (same ids) when the backend is native and the vocabulary has an unknown id.
        self.native: Any = None
        if _EXT.resolve_backend(backend) == "native" and _EXT.module is not None and unk_id is not None:
            if derived is None:
                self.native = self._build_native()
            else:
                self.native = derive(derived, SP_BPE_MODEL_PART, self._build_native, self._dump_native,
                                     self._restore_native)
        self.backend = "python" if self.native is None else "native"
        if self.native is None:
            self.prepare_reference()
        self._batch_flags: int | None = None  # the flags of the last encoder fused_encoder returned

    @property
    def vocab(self) -> list[tuple[str, float]]:
        """``(piece, score)`` by id (made on first use when the model was given columns)."""
        pairs = self._pairs
        if pairs is None:
            pairs = self._pairs = list(zip(self._piece_list, self._scores, strict=True))
        return pairs

    @property
    def vocab_size(self) -> int:
        return len(self._piece_list)

    def token_to_id(self, token: str) -> int | None:
        return self._piece_ids().get(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self._piece_list[token_id] if 0 <= token_id < len(self._piece_list) else None

    def _piece_ids(self) -> dict[str, int]:
        """piece -> its first id, over every piece; built once (thread-safe)."""
        ids = self._all_built
        if ids is None:
            with self._lock:
                ids = self._all_built
                if ids is None:
                    pieces = self._piece_list
                    # built from the last id down, so the first id of a repeated piece is the one kept
                    ids = dict(zip(reversed(pieces), range(len(pieces) - 1, -1, -1), strict=True))
                    self._all_built = ids
        return ids

    def _mergeable_ranks(self) -> tuple[dict[str, int], dict[int, int]]:
        """piece -> the first mergeable id spelling it (not the unknown id, not empty; first in ``mergeable``'s
        order), and that id -> the rank of its score among them (0 = highest; equal scores share a rank)."""
        pieces, scores = self._piece_list, self._scores
        ids = list(range(len(pieces))) if self._mergeable is None else self._mergeable
        ids = list(compress(ids, map(pieces.__getitem__, ids)))  # (non-empty pieces only)
        if self.unk_id is not None:
            ids = list(filter(self.unk_id.__ne__, ids))
        ids.reverse()  # the earliest id of a repeated piece is written last, so it is kept
        first = dict(zip(map(pieces.__getitem__, ids), ids, strict=True))
        kept = list(first.values())
        kept_scores = list(map(scores.__getitem__, kept))
        order = sorted(set(kept_scores), reverse=True)
        position = dict(zip(order, range(len(order)), strict=True))
        return first, dict(zip(kept, map(position.__getitem__, kept_scores), strict=True))

    def prepare_reference(self) -> None:
        """Build the pure-Python reference's tables now (once; later calls return at once). Thread-safe. Every
        path that runs the reference calls it first."""
        if self._reference_ready:
            return
        piece_ids = self._piece_ids()
        with self._lock:
            if self._reference_ready:
                return
            self._all = piece_ids
            self._pieces, self._rank = self._mergeable_ranks()
            self._unused = frozenset(self._unused_ids)
            user = self._user_pieces()
            self._user = frozenset(user)
            lengths: dict[str, set[int]] = {}
            for u in user:
                lengths.setdefault(u[0], set()).add(len(u))
            self._user_lengths = {c: sorted(v, reverse=True) for c, v in lengths.items()}
            self._bytes = [piece_ids.get(f"<0x{b:02X}>") for b in range(256)]
            self._max_len = max((len(p) for p in self._pieces), default=1)
            self._reference_ready = True

    def splits_at_space(self) -> bool:
        """True if no mergeable piece has ``▁`` after a character other than ``▁``
        (:func:`~app.engine.pipeline.sp_split.splits_exactly` over them), so cutting the text before every such
        ``▁`` gives the same ids. Stored with the compiled model in the artifact cache (a warm load reads it)."""
        split = self._space_split
        if split is None:
            pieces = self._piece_list
            ids = range(len(pieces)) if self._mergeable is None else self._mergeable
            split = self._space_split = splits_exactly(list(map(pieces.__getitem__, ids)))
        return split

    def _user_pieces(self) -> list[str]:
        """The user-defined pieces (non-empty, distinct), longest first (the compiled model's order)."""
        pieces = self._piece_list
        return sorted({pieces[i] for i in self._user_ids if pieces[i]}, key=len, reverse=True)

    def _build_native(self) -> Any:
        """The compiled model, or None when it cannot hold the vocabulary (over 16 M pieces)."""
        assert _EXT.module is not None and self.unk_id is not None
        ranks = [-1] * len(self._piece_list)
        for i, r in self._mergeable_ranks()[1].items():
            ranks[i] = r
        try:
            return _EXT.module.Model(list(self._piece_list), ranks, self.unk_id, self.byte_fallback,
                                     self._user_pieces(), list(self._unused_ids), self._cache_size)
        except ValueError:  # a vocabulary the compiled model cannot hold: the reference
            return None

    def _settings(self) -> dict[str, Any]:
        """Everything the compiled model is built from (the cache entry's ``meta``, checked on restore)."""
        if self._origin is not None:
            inputs: dict[str, Any] = {"origin": self._origin}
        else:
            pieces = "\0".join(self._piece_list).encode("utf-8", "surrogatepass")
            lengths = array("q", map(len, self._piece_list)).tobytes()
            inputs = {"pieces": hashlib.sha256(pieces + lengths).hexdigest(),
                      "scores": hashlib.sha256(array("d", self._scores).tobytes()).hexdigest()}
        return {"n": len(self._piece_list), **inputs, "unk_id": self.unk_id, "byte_fallback": self.byte_fallback,
                "mergeable": None if self._mergeable is None else _digest(self._mergeable),
                "user": _digest(self._user_ids), "unused": _digest(self._unused_ids)}

    def _dump_native(self, model: Any) -> Compiled:
        meta = {"refused": model is None, "space_split": self.splits_at_space(), **self._settings()}
        return compiled(meta, {} if model is None else {"model": model.dump()})

    def _restore_native(self, stored: Compiled) -> Any:
        """The stored compiled model (None for a stored refusal) and :meth:`splits_at_space`'s answer. Raises
        ``ValueError`` when it was stored for other settings or is damaged (``Model.load`` validates its tables)."""
        assert _EXT.module is not None
        meta = stored.meta
        refused, split = meta.get("refused"), meta.get("space_split")
        if (type(refused) is not bool or type(split) is not bool
                or meta != {"refused": refused, "space_split": split, **self._settings()}):
            raise ValueError("SentencePiece BPE model stored for other settings")
        self._space_split = split
        if refused:
            return None
        model = _EXT.module.Model.load(stored.sections["model"], self._cache_size)
        if model.n_pieces != len(self._piece_list):
            raise ValueError("SentencePiece BPE model stored for another vocabulary size")
        return model

    def fused_encoder(self, normalizer: object, pre_tokenizer: object) -> Callable[[str], list[int]] | None:
        """One compiled call for a whole text behind ``normalizer`` and ``pre_tokenizer`` (lone surrogates to
        U+FFFD as the pipeline does, normalization, the cut before word-initial ``▁``, BPE), or None when they are
        not ones the compiled model reproduces: a :class:`SentencePieceNormalizer` without a precompiled charsmap
        whose user-defined pieces hold no space, and no pre-tokenizer or :class:`SpaceSymbolSplit`."""
        native = self.native
        self._batch_flags = None
        if (native is None or type(normalizer) is not SentencePieceNormalizer or normalizer.charsmap is not None
                or any(" " in u for u in normalizer.user_defined)
                or not (pre_tokenizer is None or type(pre_tokenizer) is SpaceSymbolSplit)):
            return None
        m = _EXT.module
        assert m is not None
        flags = ((m.DUMMY_PREFIX if normalizer.add_dummy_prefix else 0)
                 | (m.REMOVE_EXTRA_WHITESPACES if normalizer.remove_extra_whitespaces else 0)
                 | (m.ESCAPE_WHITESPACES if normalizer.escape_whitespaces else 0)
                 | (m.WHITESPACE_AS_SUFFIX if normalizer.treat_whitespace_as_suffix else 0)
                 | (m.SPLIT if pre_tokenizer is not None else 0))
        self._batch_flags = flags
        return cast("Callable[[str], list[int]]", functools.partial(native.encode_text, flags))

    def text_batch_encoder(self) -> Callable[[list[str], bool, int], list[Any]] | None:
        """The compiled ``encode_texts`` with the flags of the last encoder :meth:`fused_encoder` returned (None if
        it returned None, or was not asked)."""
        flags = self._batch_flags
        if flags is None or self.native is None:
            return None
        return cast("Callable[[list[str], bool, int], list[Any]]", functools.partial(self.native.encode_texts, flags))

    def cache_stats(self) -> CacheStats:
        """Counters of the compiled model's word cache (all 0 without one)."""
        return CacheStats(*self.native.cache_stats()) if self.native is not None else CacheStats(0, 0, 0, 0)

    def clear_cache(self) -> None:
        """Empty the compiled model's word cache."""
        if self.native is not None:
            self.native.clear_cache()

    def encode_pieces(self, texts: Sequence[str | int], segment_from: int) -> list[int]:
        """Ids of the pre-tokens ``texts`` in order (an ``int`` item is an id already, passed through): one call
        into the compiled model, or the reference per piece. ``segment_from`` is unused (pre-tokens are merged
        whole; the pipeline's cut before word-initial ``▁`` is its pre-tokenizer)."""
        native = self.native
        if native is not None:
            return cast("list[int]", native.encode(texts if type(texts) is list else list(texts)))
        self.prepare_reference()
        ids: list[int] = []
        for t in texts:
            if isinstance(t, int):
                ids.append(t)
            elif t:
                ids.extend(self.tokenize(t))
        return ids

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
        self.prepare_reference()
        return self._ids(self._merge(text))

    def sampler(self, sample: Sample, name: str) -> ItemsSampler | None:
        """BPE-dropout (``sample``'s ``dropout``, :meth:`dropout_with_spans` per pre-token); None for ``dropout=0``
        (the deterministic ids). Raises :class:`~app.engine.sampling.SamplingError` for Unigram options."""
        return bpe_dropout_sampler(self.dropout_with_spans, sample, name)

    def dropout_with_spans(self, text: str, rng: random.Random, p: float) -> list[tuple[int, int, int]]:
        """BPE-dropout (Provilkov et al. 2020): every merge is skipped with probability ``p``. Seeded by ``rng``."""
        self.prepare_reference()
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
        if self.native is not None:
            return cast("list[int]", self.native.tokenize(text))
        return [t[0] for t in self.tokenize_with_spans(text)]
