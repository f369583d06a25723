"""The Unigram model (Kudo 2018): the segmentation with the highest total piece score, by Viterbi.

For every end position the best path is kept: at each start (one character at a time) every vocabulary piece that
begins there extends the best path ending at the start; a character that no single-character piece covers is an
*unknown* node scored ``unk_score`` (the lowest piece score minus 10, as both references do). Ties keep the path
found first (shorter pieces at earlier starts). Pieces excluded from matching (control and special tokens, unused
pieces) never match text, so a text ``<s>`` is never the ``<s>`` id.

Two flavours differ only in arithmetic and in who scores user-defined pieces:

* ``float32=False`` — Hugging Face ``tokenizers``: scores are doubles; consecutive unknown characters are fused
  into one unknown piece, which is then looked up as a string (byte fallback: one ``<0xNN>`` per byte if every one
  exists, else the unknown id).
* ``float32=True`` — SentencePiece (0.2.3): scores and path sums are 32-bit floats, user-defined pieces score
  ``0.1 * (bytes - 1)``; consecutive unknowns become one unknown id (byte fallback: one ``<0xNN>`` per byte).
  Once the best score at a start leaves ±100,000, every path score reached so far is re-based by it (a float32
  subtraction) and the search goes on from zero. That re-basing changes the rounding of long texts' sums, so it
  decides their near ties; it is reproduced step for step.

The search walks a prefix table (every piece and every prefix of one), so each start costs at most the length of
the longest piece that matches there.

With the compiled extension (``app.engine._native._unigram``, ``unigram.c``) and the native backend,
:meth:`Unigram.tokenize` and :meth:`Unigram.encode_pieces` run the same search in C (a double-array trie of the
pieces, the same arithmetic and tie order, the GIL released), and :meth:`Unigram.fuse` hands a pipeline one call
that also runs SentencePiece's normalizer in C. Offsets, sampling and this module's code stay the Python
reference. For ``float32`` models the compiled model can also keep a bounded cache of whole words' best paths
(:func:`word_cache_size`, off by default), reused only where a rounding-error bound proves that the float32 search
would choose the same path at that point of the text; the ids are the same with it on or off.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
import sys
import threading
from array import array
from collections.abc import Callable, Collection, Mapping, Sequence
from itertools import filterfalse
from operator import itemgetter
from typing import Any, cast

from ... import defaults, native
from ...artifact_cache import Compiled
from ...cache import CacheStats
from ...defaults import WORD_CACHE_ENV
from ...encoding import scrub_surrogates
from ...sampling import Sample
from ..base import ItemsSampler, Model, each_pre_token
from ..compiled import UNIGRAM as _EXT
from ..derived import Derive, array_bytes, compiled, derive, read_array
from ..json_numbers import f32, f32_list, serde_f64
from .unigram_nbest import nbest, sample_nbest

#: The artifact cache part (prefix; a digest of the model's inputs follows) of the compiled model and its tables.
UNIGRAM_MODEL_PART = "unigram-model"

_RESET = 100_000.0  # SentencePiece's re-basing threshold for float32 path scores

#: Slots of the compiled word cache of SentencePiece Unigram models (``$TOKENIZER_UNIGRAM_WORD_CACHE``, default 0:
#: off). Exact either way; off by default because on a cold pass it costs more than it saves (most of a text's
#: search work is in words met once, and a hit is not much cheaper than searching a short, frequent word), while
#: one that is never cleared gains 1.1-1.4x on xlm-roberta-sentencepiece (``python -m bench.families.word_cache``).


def word_cache_size(cache_size: int | None = None, slots: int | None = None) -> int:
    """The word cache slots for a SentencePiece Unigram model: ``slots`` (None: ``$TOKENIZER_UNIGRAM_WORD_CACHE``, an
    integer >= 0, default 0), and 0 whenever ``cache_size`` (the tokenizer's cache setting) is 0. Raises
    ``ValueError`` for a negative count."""
    value = defaults.unigram_word_cache() if slots is None else slots
    if value < 0:
        raise ValueError(f"{WORD_CACHE_ENV} must be >= 0, not {value}")
    return 0 if cache_size == 0 else value


class UnigramVocab(Sequence[tuple[str, float]]):
    """A Unigram ``tokenizer.json`` model's ``vocab`` held as two columns, which a loader that derives the document
    from another artifact (:mod:`app.engine.pipeline.gguf`) puts where the file has its ``[piece, score]`` pairs:
    :meth:`Unigram.from_hf` takes the columns as they are. Reads as the list of ``(piece, score)`` tuples (made on
    first use). ``origin``: the name of the deterministic derivation of both columns from the artifact whose
    sha256 keys the cache (see :class:`Unigram`), or None. Raises ``ValueError`` unless the pieces are strings and
    the scores floats, as many."""

    __slots__ = ("_pairs", "origin", "pieces", "scores")

    def __init__(self, pieces: list[str], scores: list[float], origin: str | None = None) -> None:
        if len(pieces) != len(scores) or not set(map(type, pieces)) <= {str} or not set(map(type, scores)) <= {float}:
            raise ValueError("a Unigram vocabulary is as many string pieces as float scores")
        self.pieces, self.scores, self.origin = pieces, scores, origin
        self._pairs: list[tuple[str, float]] | None = None

    def _list(self) -> list[tuple[str, float]]:
        if self._pairs is None:
            self._pairs = list(zip(self.pieces, self.scores, strict=True))
        return self._pairs

    def __len__(self) -> int:
        return len(self.pieces)

    def __getitem__(self, index: Any) -> Any:
        return self._list()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, UnigramVocab)):
            return self._list() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<UnigramVocab of {len(self.pieces)}>"


class Unigram(Model):
    """Viterbi segmentation over scored pieces. Thread-safe (no mutable state after construction)."""

    def __init__(self, vocab: Sequence[tuple[str, float]], *, unk_id: int | None, byte_fallback: bool = False,
                 excluded: Collection[int] = (), user_defined: Collection[int] = (), float32: bool = False,
                 unk_score: float | None = None, backend: str | None = None, cache_size: int = 0,
                 derived: Derive | None = None, columns: tuple[list[str], list[float]] | None = None,
                 origin: str | None = None) -> None:
        """``vocab``: ``(piece, score)`` by id. ``excluded``: ids never matched in text. ``user_defined``: ids that
        SentencePiece scores by length (``float32`` only). ``unk_score``: default the lowest score of the
        matchable pieces minus 10 (callers pass the reference's own rule when it differs). ``backend``
        (``native``/``python``/None, see :func:`app.engine.native.resolve_backend`): native builds the compiled
        model when the extension is there (:attr:`native`; :attr:`backend` says which one is in use).
        ``cache_size``: slots of the compiled model's word cache (0: none; ``float32`` models only, and only when
        no piece has ``▁`` after its first character — the ids are the same with or without it). ``derived``: the
        artifact's cache of derivations: the compiled model, the scores table and the byte ids are then kept there
        (part ``unigram-model-<digest of the inputs>``, :data:`UNIGRAM_MODEL_PART`) and a warm load restores them
        instead of building them (the piece -> id dict is then built on first use). ``columns``: ``vocab`` as
        the lists ``(pieces, scores)`` (``vocab`` is then ignored), which the callers that have them pass.
        ``origin`` (with ``derived``): names the deterministic derivation of the pieces and scores from the artifact
        (:attr:`UnigramVocab.origin`); the stored model is then keyed by it, the count and the other settings
        instead of by a digest of every piece and score (None: by that digest)."""
        pieces: Sequence[str] = []
        scores: Sequence[float] = []
        if columns is not None:
            pieces, scores = columns
            if len(pieces) != len(scores):
                raise ValueError("unigram vocabulary: pieces and scores differ in length")
        elif set(map(len, vocab)) <= {2}:
            pieces, scores = list(map(itemgetter(0), vocab)), list(map(itemgetter(1), vocab))
        # (else not pairs: the reference's own error below)
        self._pairs: list[tuple[str, float]] | None = None
        # the usual case, without a Python loop:
        if (columns is not None or len(pieces) == len(vocab)) and set(map(type, scores)) <= {float}:
            self._pieces, self._scores = list(pieces), list(scores)
        else:
            pairs = [(p, float(s)) for p, s in (zip(pieces, scores, strict=True) if columns is not None else vocab)]
            self._pieces, self._scores = [p for p, _ in pairs], [s for _, s in pairs]
            self._pairs = pairs
        self._origin = origin
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        self.float32 = float32
        self._to_id: dict[str, int] | None = None
        self._score_dict: dict[int, float] | None = None
        self._user = frozenset(user_defined)
        self._unk_score_arg = unk_score
        self._derived = derived
        self._want_native = _EXT.resolve_backend(backend) == "native" and _EXT.module is not None
        self._cache_size = cache_size
        self._nodes_lock = threading.Lock()
        self._batch_front: tuple[object] | None = None  # the compiled front of the last fused_encoder returned
        #: The compiled model (same ids), or None on the Python backend.
        self.native: Any = None
        self._build(set(excluded))

    @property
    def backend(self) -> str:
        return "python" if self.native is None else "native"

    @property
    def vocab(self) -> list[tuple[str, float]]:
        """``(piece, score)`` by id, built on first use (a load reads the pieces and scores as columns)."""
        pairs = self._pairs
        if pairs is None:
            pairs = self._pairs = list(zip(self._pieces, self._scores, strict=True))
        return pairs

    @property
    def _token_to_id(self) -> dict[str, int]:
        """piece -> id; a repeated piece resolves to its last id, as Hugging Face does (a later key overwrites the
        value). Built on first use (a build from the pieces, the same dict whichever thread makes it)."""
        to_id = self._to_id
        if to_id is None:
            to_id = self._to_id = dict(zip(self._pieces, range(len(self._pieces)), strict=True))
        return to_id

    @property
    def _score(self) -> dict[int, float]:
        """id -> score for every matchable piece (the last id of a repeated piece), in id order of the build. Built
        on first use from the restored table after a warm load (only the reference's paths read it then)."""
        score = self._score_dict
        if score is None:
            ids, values = self._score_table
            score = dict(zip(ids, values, strict=True))
            self._score_dict = score
        return score

    def _build(self, excluded: set[int]) -> None:
        """The prefix table and scores of every matchable piece (all but ``excluded`` and the unknown piece), and the
        compiled model; with ``derived`` (native backend) restored from the artifact cache when it holds them."""
        excluded_set = set(excluded)
        if self.unk_id is not None:
            excluded_set.add(self.unk_id)
        self._excluded = frozenset(excluded_set)
        self._nodes_built: dict[str, int] | None = None
        self._score_dict = None
        self._score_table: tuple[Sequence[int], Sequence[float]] = ((), ())
        if self._want_native and self._derived is not None and sys.byteorder == "little":
            settings = self._settings()
            digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
            derive(self._derived, f"{UNIGRAM_MODEL_PART}-{digest}", self._compute_and_compile,
                   lambda _: self._dump_state(settings), lambda stored: self._restore_state(stored, settings))
        else:
            self._compute()
            self.native = self._compile() if self._want_native else None
        if self.native is None:
            self.prefix_table()  # the Python backend builds its table at load, not on the first text

    def _settings(self) -> dict[str, Any]:
        """Everything the stored state is derived from (the cache entry's ``meta``, checked on restore): the
        pieces and scores (their ``origin``, else digests of them), the excluded and user-defined ids, the
        flavour."""

        def digest(*parts: bytes) -> str:
            h = hashlib.sha256()
            for part in parts:
                h.update(len(part).to_bytes(8, "little"))
                h.update(part)
            return h.hexdigest()

        inputs: dict[str, Any]
        if self._origin is not None:
            inputs = {"origin": self._origin}
        else:
            pieces = "\0".join(self._pieces).encode("utf-8", "surrogatepass")
            lengths = array("I", map(len, self._pieces)).tobytes()
            inputs = {"pieces": digest(pieces, lengths), "scores": digest(array("d", self._scores).tobytes())}
        return {"n": len(self._pieces), **inputs,
                "unk_id": self.unk_id, "byte_fallback": self.byte_fallback, "float32": self.float32,
                "unk_score": None if self._unk_score_arg is None else self._unk_score_arg.hex(),
                "excluded": digest(array("I", sorted(self._excluded)).tobytes()),
                "user": digest(array("I", sorted(self._user)).tobytes())}

    def _compute_and_compile(self) -> None:
        self._compute()
        self.native = self._compile()

    def _dump_state(self, settings: dict[str, Any]) -> Compiled:
        score = self._score
        sections: dict[str, bytes] = {
            "ids": array_bytes(array("I", score)), "scores": array_bytes(array("d", score.values())),
            "unk_score": array_bytes(array("d", [self.unk_score])),
            "bytes": array_bytes(array("i", [-1 if b is None else b for b in self._bytes]))}
        if self.native is not None:
            sections["model"] = self.native.dump()
        return compiled({**settings, "native": self.native is not None}, sections)

    def _restore_state(self, stored: Compiled, settings: dict[str, Any]) -> None:
        """Raises ``ValueError`` when the entry was stored for other inputs or is damaged (``Model.load`` validates
        the compiled tables; the ids and byte ids are checked against the vocabulary here)."""
        assert _EXT.module is not None
        meta = stored.meta
        if {k: v for k, v in meta.items() if k != "native"} != settings or type(meta.get("native")) is not bool:
            raise ValueError("unigram model stored for other inputs")
        sections, n = stored.sections, len(self._pieces)
        count = len(sections["ids"]) // 4
        ids = read_array(sections["ids"], "I", count)
        values = read_array(sections["scores"], "d", count)
        unk_score = read_array(sections["unk_score"], "d", 1)[0]
        byte_ids = read_array(sections["bytes"], "i", 256)
        if native.u32_range(sections["ids"])[1] >= n or min(byte_ids) < -1 or max(byte_ids) >= n:
            raise ValueError("unigram model: id out of range")
        model = _EXT.module.Model.load(sections["model"], self._cache_size) if meta["native"] else None
        self.unk_score = unk_score
        self._bytes = [None if b < 0 else b for b in byte_ids]
        self._score_table = (ids, values)
        self.native = model

    def _compute(self) -> None:
        """The reference's tables: the unknown score, id -> score of every matchable piece, the byte ids."""
        float32 = self.float32
        unk_score = self._unk_score_arg
        excluded_set = self._excluded
        self._bytes = [self._token_to_id.get(f"<0x{b:02X}>") for b in range(256)]
        pieces, scores = self._pieces, self._scores
        # (the comprehensions of the reference, as C-level maps and filters: the same lists, in the same order)
        empty = {i for i, piece in enumerate(pieces) if not piece} if "" in pieces else set()
        matchable = list(filterfalse((excluded_set | empty).__contains__, range(len(pieces))))
        user = self._user
        if unk_score is None:
            normal_scores = list(map(scores.__getitem__, filterfalse(user.__contains__, matchable)))
            unk_score = (min(normal_scores) if normal_scores else 0.0) - 10.0
        self.unk_score = f32(unk_score) if float32 else unk_score
        #: id -> score, for every matchable piece (the last id of a repeated piece)
        to_id = self._token_to_id
        if len(to_id) == len(pieces):  # no repeated piece: every matchable id is its piece's last
            last = matchable
        else:
            last = [i for i in matchable if to_id[pieces[i]] == i]
        if not float32:
            score = dict(zip(last, map(scores.__getitem__, last), strict=True))
        else:
            plain = list(filterfalse(user.__contains__, last))
            score = dict.fromkeys(last, 0.0)
            score.update(zip(plain, f32_list(list(map(scores.__getitem__, plain))), strict=True))
            for i in user.intersection(last):
                score[i] = f32(0.1 * (len(pieces[i].encode("utf-8")) - 1))
        self._score_dict = score

    def prefix_table(self) -> dict[str, int]:
        """The prefix table: piece -> id (>= 0) if the piece is matchable, -1 if it is only a prefix of matchable
        pieces (shared: callers must not modify it). Built once, on first use when the compiled model runs (only
        offsets, sampling and n-best need it then); thread-safe."""
        nodes = self._nodes_built
        if nodes is None:
            with self._nodes_lock:
                nodes = self._nodes_built
                if nodes is None:
                    nodes = {}
                    pieces = self._pieces
                    for i in self._score:
                        piece = pieces[i]
                        for k in range(1, len(piece)):
                            nodes.setdefault(piece[:k], -1)
                        nodes[piece] = i
                    self._nodes_built = nodes
        return nodes

    def _compile(self) -> Any:
        """The compiled model over the same pieces and scores, or None when it cannot take them (a piece over 2048
        characters, a NaN score, ids beyond 31 bits): the reference then runs."""
        assert _EXT.module is not None
        ids = list(self._score)
        scores = list(self._score.values())
        if len(self._pieces) >= 1 << 31 or any(map(math.isnan, scores)):
            return None  # the compiled trie marks "no piece" with NaN
        try:
            return _EXT.module.Model(
                list(map(self._pieces.__getitem__, ids)), ids, scores, len(self._pieces),
                -1 if self.unk_id is None else self.unk_id, self.unk_score, self.byte_fallback, self.float32,
                [-1 if b is None else b for b in self._bytes], not self.float32, self._cache_size)
        except (ValueError, OverflowError):
            return None

    def cache_stats(self) -> CacheStats:
        """Counters of the compiled model's word cache (all 0 without one)."""
        return CacheStats(*self.native.cache_stats()) if self.native is not None else CacheStats(0, 0, 0, 0)

    def clear_cache(self) -> None:
        """Empty the compiled model's word cache."""
        if self.native is not None:
            self.native.clear_cache()

    def use_reference(self) -> None:
        """Drop the compiled model: every call runs the pure-Python reference from now on."""
        self._want_native = False
        self.native = None
        self.prefix_table()

    def exclude_from_text(self, ids: Collection[int]) -> None:
        """Never match the pieces ``ids`` in text (a ``tokenizer.json``'s special added tokens; called once by the
        loader before the model is used)."""
        extra = set(ids) - self._excluded
        if extra:
            self._build(set(self._excluded) | extra)


    @classmethod
    def from_hf(cls, config: Mapping[str, Any], *, excluded: Collection[int] = (),
                backend: str | None = None, derived: Derive | None = None) -> Unigram:
        """From a ``tokenizer.json`` model ``{"type": "Unigram", "unk_id", "vocab": [[piece, score], ...],
        "byte_fallback"}``. ``excluded``: ids of special added tokens (never matched in text). ``backend``: as
        for the constructor; ``derived``: as for the constructor."""
        raw = config.get("vocab") or []
        unk = config.get("unk_id")
        if isinstance(raw, UnigramVocab):  # columns of a derived document, checked when made
            return cls((), unk_id=None if unk is None else int(unk), byte_fallback=bool(config.get("byte_fallback")),
                       excluded=excluded, unk_score=(min(raw.scores) if raw.scores else 0.0) - 10.0,
                       backend=backend, derived=derived, columns=(raw.pieces, raw.scores), origin=raw.origin)
        # an integer beyond 64 bits is a float to serde_json too, with its rounding (a JSON-read float already has it)
        pairs = set(map(len, raw)) <= {2}
        pieces = list(map(itemgetter(0), raw)) if pairs else []
        scores = list(map(itemgetter(1), raw)) if pairs else []
        columns: tuple[list[str], list[float]] | None = None
        vocab: list[tuple[str, float]] = []
        if (pairs and set(map(type, pieces)) <= {str}
                and set(map(type, scores)) <= {float}):  # the usual case, without a Python loop
            columns = (pieces, scores)
        else:
            vocab = [(str(p), serde_f64(str(s)) if isinstance(s, int) else float(s)) for p, s in raw]
            scores = [s for _, s in vocab]
        return cls(vocab, unk_id=None if unk is None else int(unk), byte_fallback=bool(config.get("byte_fallback")),
                   excluded=excluded, unk_score=(min(scores) if scores else 0.0) - 10.0, backend=backend,
                   derived=derived, columns=columns)

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def token_to_id(self, token: str) -> int | None:
        return self._token_to_id.get(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self._pieces[token_id] if 0 <= token_id < len(self._pieces) else None

    def _viterbi(self, text: str) -> list[tuple[int, int, int]]:
        """The best path as ``(id, start, end)``; the unknown id marks unknown nodes (one character each)."""
        n = len(text)
        score = [0.0] * (n + 1)
        start_at = [-1] * (n + 1)
        node_id = [-1] * (n + 1)
        get = self.prefix_table().get
        scores = self._score
        rnd = f32 if self.float32 else None
        unk_score = self.unk_score
        unk = -2 if self.unk_id is None else self.unk_id
        frontier = 0  # the furthest end reached so far
        for s in range(n):
            base = score[s]
            if rnd is not None and not -_RESET <= base <= _RESET:  # SentencePiece re-bases (module docstring)
                for i in range(s + 1, frontier + 1):
                    if start_at[i] != -1:
                        score[i] = rnd(score[i] - base)
                score[s] = base = 0.0
            single = False
            e = s + 1
            while e <= n:
                v = get(text[s:e])
                if v is None:
                    break
                if v >= 0:
                    cand = scores[v] + base if rnd is None else rnd(scores[v] + base)
                    if start_at[e] == -1 or cand > score[e]:
                        score[e] = cand
                        start_at[e] = s
                        node_id[e] = v
                    if e == s + 1:
                        single = True
                    if e > frontier:
                        frontier = e
                e += 1
            if not single:
                frontier = max(frontier, s + 1)
                cand = unk_score + base if rnd is None else rnd(unk_score + base)
                if start_at[s + 1] == -1 or cand > score[s + 1]:
                    score[s + 1] = cand
                    start_at[s + 1] = s
                    node_id[s + 1] = unk
        path: list[tuple[int, int, int]] = []
        e = n
        while e > 0:
            s = start_at[e]
            path.append((node_id[e], s, e))
            e = s
        path.reverse()
        return path

    def tokenize_with_spans(self, text: str) -> list[tuple[int, int, int]]:
        return self._finish(text, self._viterbi(text)) if text else []

    def sampler(self, sample: Sample, name: str) -> ItemsSampler | None:
        """Subword sampling as ``sample``'s ``alpha`` and ``nbest`` ask: ``nbest=-1`` each pre-token drawn from its
        whole lattice (:meth:`sample_with_spans`; the pre-tokens are independent, so this is a draw from the whole
        text's lattice); ``nbest=1`` the deterministic ids (None); ``nbest=n`` one of the whole text's ``n`` best
        segmentations (:func:`.unigram_nbest.sample_nbest`). Raises :class:`~app.engine.sampling.SamplingError`
        for ``dropout``."""
        alpha, n = sample.for_unigram(name)
        if n == 1:
            return None
        if n > 1:
            return lambda items, rng: sample_nbest(self, items, n, alpha, rng)
        draw = self.sample_with_spans
        return each_pre_token(lambda text, rng: draw(text, rng, alpha))

    def nbest(self, items: Sequence[str | int], n: int, name: str) -> list[tuple[list[int], float]]:
        """The ``n`` best segmentations with their scores, best first (:func:`.unigram_nbest.nbest`)."""
        return nbest(self, items, n)

    def sample_with_spans(self, text: str, rng: random.Random, alpha: float) -> list[tuple[int, int, int]]:
        """One segmentation drawn from the whole lattice with probability proportional to
        ``exp(alpha * total score)`` (forward filtering, backward sampling; Kudo 2018). Seeded by ``rng``. The
        lattice is SentencePiece's sampling lattice: with ``float32``, a user-defined piece scores
        ``0.1 * (characters - 1)`` there (its Viterbi counts bytes)."""
        if not text:
            return []
        n = len(text)
        get = self.prefix_table().get
        scores = self._score
        unk = -2 if self.unk_id is None else self.unk_id
        user = self._user if self.float32 else frozenset()
        ends: list[list[tuple[int, int, float]]] = [[] for _ in range(n + 1)]
        for s in range(n):
            single = False
            e = s + 1
            while e <= n:
                v = get(text[s:e])
                if v is None:
                    break
                if v >= 0:
                    ends[e].append((s, v, f32(0.1 * (e - s - 1)) if v in user else scores[v]))
                    single = single or e == s + 1
                e += 1
            if not single:
                ends[s + 1].append((s, unk, self.unk_score))
        forward = [0.0] + [-math.inf] * n
        for e in range(1, n + 1):
            terms = [forward[s] + alpha * sc for s, _, sc in ends[e]]
            top = max(terms)
            forward[e] = top + math.log(sum(math.exp(t - top) for t in terms))
        path: list[tuple[int, int, int]] = []
        e = n
        while e > 0:
            weights = [math.exp(forward[s] + alpha * sc - forward[e]) for s, _, sc in ends[e]]
            s, token_id, _ = rng.choices(ends[e], weights)[0]
            path.append((token_id, s, e))
            e = s
        path.reverse()
        return self._finish(text, path)

    def _finish(self, text: str, path: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """Ids of a path: unknown runs fused and resolved (see the module docstring)."""
        unk = -2 if self.unk_id is None else self.unk_id
        out: list[tuple[int, int, int]] = []
        k = 0
        while k < len(path):
            token_id, s, e = path[k]
            if token_id != unk:
                out.append(path[k])
                k += 1
                continue
            while k + 1 < len(path) and path[k + 1][0] == unk:  # fuse a run of unknown characters
                k += 1
            e = path[k][2]
            k += 1
            surface = text[s:e]
            if not self.float32:
                found = self._token_to_id.get(surface)
                if found is not None and found not in self._excluded:
                    out.append((found, s, e))
                    continue
            if self.byte_fallback:
                ids = [self._bytes[b] for b in surface.encode("utf-8", "surrogatepass")]
                if all(i is not None for i in ids):
                    out.extend((i, s, e) for i in ids if i is not None)
                    continue
            if self.unk_id is None:
                raise ValueError(f"text {surface!r} has no piece and the model has no unknown token")
            out.append((self.unk_id, s, e))
        return out

    def tokenize(self, text: str) -> list[int]:
        native = self.native
        if native is not None and text:
            try:
                return native.tokenize(text)  # type: ignore[no-any-return]
            except ValueError:  # a lone surrogate, or no unknown token: the reference answers as it does
                pass
        return [t[0] for t in self.tokenize_with_spans(text)]

    def encode_pieces(self, texts: Sequence[str | int], segment_from: int) -> list[int]:
        """Ids of the pre-tokens ``texts`` in order (an ``int`` item is an id already, passed through): one call
        into the compiled model (GIL released), or the reference per piece. ``segment_from`` is unused (Unigram
        pre-tokens are never cut)."""
        native = self.native
        if native is not None:
            try:
                return native.encode(texts if type(texts) is list else list(texts))  # type: ignore[no-any-return]
            except ValueError:
                pass
        ids: list[int] = []
        for item in texts:
            if isinstance(item, int):
                ids.append(item)
            elif item:
                ids.extend(token[0] for token in self.tokenize_with_spans(item))
        return ids

    def fused_encoder(self, normalizer: object, pre_tokenizer: object) -> Callable[[str], list[int]] | None:
        """For the pipelines :meth:`fuse` takes, when the model has an unknown token (so the compiled call never
        refuses a text): one compiled call for a whole raw text (lone surrogates to U+FFFD, normalization,
        Viterbi), with no list built around it; for ``Precompiled`` + ``Metaspace`` files (XLM-R's
        ``tokenizer.json``), :func:`~app.engine.pipeline.metaspace_fast.metaspace_encoder`. None otherwise."""
        self._batch_front = None
        if self.unk_id is None:
            return None
        from ..metaspace_fast import metaspace_encoder

        metaspace = metaspace_encoder(normalizer, pre_tokenizer, self.native)
        if metaspace is not None:
            return metaspace
        compiled = self._compiled_front(normalizer, pre_tokenizer)
        if compiled is None:
            return None
        self._batch_front = compiled
        return cast("Callable[[str], list[int]]", functools.partial(self.native.encode_text, compiled[0]))

    def text_batch_encoder(self) -> Callable[[list[str], bool, int], list[Any]] | None:
        """The compiled ``encode_texts`` behind the compiled normalizer of the last encoder :meth:`fused_encoder`
        returned, when that was the compiled ``encode_text`` (not the Metaspace encoder); else None."""
        front = self._batch_front
        if front is None or self.native is None:
            return None
        batch = functools.partial(self.native.encode_texts, front[0])
        return cast("Callable[[list[str], bool, int], list[Any]]", batch)

    def _compiled_front(self, normalizer: object, pre_tokenizer: object) -> tuple[object] | None:
        """``(compiled normalizer,)`` (its inner value None for no normalizer) when the compiled model can run
        ``normalizer`` itself and there is no pre-tokenizer; None otherwise (or without the compiled model)."""
        from ..sp_normalizer import SentencePieceNormalizer

        if self.native is None or pre_tokenizer is not None:
            return None
        if normalizer is None:
            return (None,)
        if type(normalizer) is SentencePieceNormalizer:
            compiled = normalizer.compiled()
            return None if compiled is None else (compiled,)
        return None

    def fuse(self, normalizer: object, pre_tokenizer: object = None) -> Callable[[list[str | int]], list[int]] | None:
        """For a pipeline of ``normalizer`` (None or a
        :class:`~app.engine.pipeline.sp_normalizer.SentencePieceNormalizer`) then this model, no pre-tokenizer:
        a call that takes raw stretches of text (lone surrogates scrubbed as the pipeline does) and ids, and
        normalizes and segments them in one compiled call. None without the compiled model, with a pre-tokenizer
        or for any other normalizer."""
        front = self._compiled_front(normalizer, pre_tokenizer)
        if front is None:
            return None
        native, compiled = self.native, front[0]

        if self.unk_id is not None:  # every character has an answer: the compiled call never refuses a text
            return functools.partial(native.encode, normalizer=compiled, scrub=True)

        def reference(items: list[str | int]) -> list[int]:
            ids: list[int] = []
            for item in items:
                if isinstance(item, int):
                    ids.append(item)
                    continue
                text = scrub_surrogates(item)
                if normalizer is not None:
                    text = normalizer.normalize_str(text)  # type: ignore[attr-defined]
                ids.extend(t[0] for t in self.tokenize_with_spans(text))
            return ids

        def fused(items: list[str | int]) -> list[int]:
            try:
                return native.encode(items, compiled, True)  # type: ignore[no-any-return]
            except ValueError:  # no unknown token: the reference raises its precise error
                return reference(items)

        return fused
