"""BPE over an ordered merge list, as Hugging Face ``tokenizers``' ``BPE`` model.

A pre-token starts as one symbol per character (``continuing_subword_prefix`` on every character but the first,
``end_of_word_suffix`` on the last). A character missing from the vocabulary becomes one ``<0xNN>`` symbol per
UTF-8 byte with ``byte_fallback`` (when all of them exist), else the ``unk_token`` (runs of unknowns fused into one
with ``fuse_unk``), else it is dropped. Then the pair with the lowest merge rank is merged, leftmost first, until
no pair has a merge; a pair listed twice keeps its last rank. ``ignore_merges``: a pre-token that is itself in
the vocabulary is that one token.

Long pre-tokens (SentencePiece-style files split nothing, so a whole line is one pre-token) are cut, exactly,
where no merge can ever join two neighbouring characters: a merge only joins symbols across the boundary
between its two halves, so a boundary between characters ``a`` and ``b`` that ends no merge's left half with
``a`` while starting its right half with ``b`` is never crossed, and the two sides merge independently.
"""

from __future__ import annotations

import heapq
import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

from ...cache import CacheStats
from ...dropout import merge_with_dropout
from ...sampling import Sample
from ..base import ItemsSampler, Model, bpe_dropout_sampler
from ..compiled import MERGE_BPE as _EXT
from ..derived import Derive, LazyMerges, LazyVocab, compiled, derive
from ..text_plan import TextPlan

#: Below this many symbols the quadratic scan beats the heap.
_HEAP_FROM = 48
#: Sorts after every real merge (ranks are list indices).
_NO_MERGE = (1 << 62, -1)
#: :attr:`BPE.native` before its first use.
_UNBUILT = object()
#: The artifact cache part of the compiled model's tables (:meth:`BPE.native` with ``derived``).
MERGE_MODEL_PART = "merge-model"


class BPEError(ValueError):
    """A vocabulary or merge list the model cannot be built from (the loader names the file)."""


class BPE(Model):
    """The model. ``merges`` in rank order, each ``(left, right)`` token strings, a ``[left, right]`` list or a
    ``"left right"`` string. ``lazy_native``: build the compiled model on first use (see ``__init__``).
    ``derived``: the artifact's cache of derivations; the compiled model's tables are then kept there (part
    ``"merge-model"``, :data:`MERGE_MODEL_PART`) and a warm load restores them instead of building them.
    ``backend`` (``native``/``python``/None, see :func:`app.engine.native.resolve_backend`):
    native runs :meth:`tokenize` and :meth:`encode_pieces` on the compiled model (identical ids) when the extension
    is built and the file uses no ``continuing_subword_prefix``/``end_of_word_suffix``/``ignore_merges``;
    :attr:`backend` says which one is in use."""

    def __init__(self, vocab: Mapping[str, int], merges: Sequence[tuple[str, str]], *, unk_token: str | None = None,
                 fuse_unk: bool = False, byte_fallback: bool = False, continuing_subword_prefix: str | None = None,
                 end_of_word_suffix: str | None = None, ignore_merges: bool = False,
                 backend: str | None = None, lazy_native: bool = False, derived: Derive | None = None) -> None:
        # a LazyVocab (a cached tokenizer.json's) is kept as it is: its dict is built on first use of :attr:`vocab`
        self._vocab: dict[str, int] | LazyVocab = vocab if isinstance(vocab, LazyVocab) else dict(vocab)
        self._derived = derived
        self.unk_token = unk_token
        self.fuse_unk = fuse_unk
        self.byte_fallback = byte_fallback
        self.prefix = continuing_subword_prefix or ""
        self.suffix = end_of_word_suffix or ""
        self.ignore_merges = ignore_merges
        self._id_table: list[str | None] | None = None
        self.unk_id: int | None = None
        # (a LazyVocab's ids come from a u32 array: non-negative ints)
        top = self._vocab.max_id if isinstance(self._vocab, LazyVocab) else max(self._vocab.values(), default=-1)
        self._vocab_size = top + 1
        if isinstance(self._vocab, LazyVocab):
            if unk_token is not None:
                self.unk_id = self._vocab.find(unk_token)
        else:
            values = self._vocab.values()
            if not set(map(type, values)) <= {int} or min(values, default=0) < 0:
                self._token_table()  # built now: raises as the reference does (negative or non-int id)
            if unk_token is not None and unk_token in self._vocab:
                self.unk_id = self._vocab[unk_token]
        self._width = max(top + 1, 1)
        self._raw_merges = merges
        self._ranks: dict[int, tuple[int, int]] = {}
        self._merges: list[tuple[str, str]] = []
        # Cutting long pre-tokens is exact only when symbols are plain characters (built on first use).
        self._cuttable = not self.prefix and not self.suffix and not ignore_merges
        self._junction_set: set[str] | None = None
        self._bytes: list[int | None] | None = None  # byte -> id of its <0xNN> token, built on first use
        # The compiled model (same ids) when the backend is native and the options are ones it supports. With
        # ``lazy_native`` it is built on first use of :attr:`native` (a pipeline asks at construction; a model
        # wrapped by a faster one, such as the byte-level rank path's reference, may never need it), so a bad merge
        # list raises then; otherwise here.
        self._native: Any = None
        self._native_lock = threading.Lock()
        eligible = (_EXT.resolve_backend(backend) == "native" and _EXT.module is not None and self._cuttable
                    and (unk_token is None or self.unk_id is not None) and top < (1 << 31) - 1)
        if eligible:
            self._native = _UNBUILT
        self.backend = "native" if eligible else "python"
        self._plan_encoder: Any = None
        self._python_ready = False
        if not eligible:
            self._prepare_python()
        elif not lazy_native:
            self._built_native()  # now: a bad merge list raises BPEError from the constructor

    @property
    def vocab(self) -> dict[str, int]:
        """Token -> id (built on first use when the model was given a :class:`LazyVocab`; callers must not modify
        it)."""
        vocab = self._vocab
        return vocab.as_dict() if isinstance(vocab, LazyVocab) else vocab

    def _byte_ids(self) -> list[int | None]:
        """Byte -> id of its ``<0xNN>`` token (None where absent), for ``byte_fallback``; built on first use."""
        table = self._bytes
        if table is None:
            get = self.vocab.get
            table = self._bytes = [get(f"<0x{b:02X}>") for b in range(256)]
        return table

    @property
    def native(self) -> Any:
        """The compiled model, built on first access (None on the python backend, or when the compiled model
        refuses the vocabulary: then the reference is prepared, raising :class:`BPEError` for a bad merge list, and
        :attr:`backend` becomes ``"python"``). Thread-safe."""
        return self._built_native()

    @native.setter
    def native(self, value: Any) -> None:
        self._native = value

    def _built_native(self) -> Any:
        """:attr:`native`, built now if it waits for its first use."""
        model = self._native
        if model is _UNBUILT:
            with self._native_lock:
                if self._native is _UNBUILT:
                    self._native = self._load_native()
                model = self._native
        return model

    @property
    def native_built(self) -> bool:
        """False while the compiled model waits for its first use (``lazy_native``), True otherwise."""
        return self._native is not _UNBUILT

    def _load_native(self) -> Any:
        """The compiled model: built, or with ``derived`` restored from (or built and stored in) the artifact cache.
        A cached refusal builds again (the reference then raises the precise error or takes over)."""
        if self._derived is None:
            return self._build_native()
        model = derive(self._derived, MERGE_MODEL_PART, self._build_native, self._dump_native, self._restore_native)
        return self._build_native() if model is None else model

    def _settings(self) -> dict[str, Any]:
        return {"byte_fallback": self.byte_fallback, "fuse_unk": self.fuse_unk, "unk_id": self.unk_id,
                "merges": len(self._raw_merges), "ids": self._vocab_size}

    def _dump_native(self, model: Any) -> Any:
        if model is None:
            return compiled({"refused": True, **self._settings()}, {})
        return compiled({"refused": False, **self._settings()}, {"model": model.dump()})

    def _restore_native(self, stored: Any) -> Any:
        """The stored compiled model (None for a stored refusal). Raises ``ValueError`` when it does not fit this
        model's settings or its tables are damaged (``Model.load`` validates them)."""
        assert _EXT.module is not None
        if stored.meta != {"refused": stored.meta.get("refused"), **self._settings()}:
            raise ValueError("merge model stored for other settings")
        if stored.meta["refused"] is True:
            return None
        if stored.meta["refused"] is not False:
            raise ValueError("merge model: bad 'refused' flag")
        model = _EXT.module.Model.load(stored.sections["model"])
        if model.n_merges != len(self._raw_merges):
            raise ValueError("merge model stored for another merge list")
        return model

    def _build_native(self) -> Any:
        assert _EXT.module is not None
        merges = self._raw_merges
        try:
            return _EXT.module.Model(self.vocab, merges if type(merges) is list else list(merges), self.byte_fallback,
                                     -1 if self.unk_id is None else self.unk_id, self.fuse_unk, True)
        except (ValueError, TypeError):
            self.backend = "python"
            self._prepare_python()  # raises the precise error
            return None

    def plan_encoder(self, plan: TextPlan, cache_size: int) -> Callable[[str], list[int]] | None:
        """The compiled ``TextEncoder`` of ``plan`` (added tokens, normalizer, cut, model and a segment cache of
        ``cache_size`` slots in one call per text; the same ids as the pipeline's steps), or None without the
        compiled model or when its pair table is not the compact one (ids of 2**20 and more)."""
        module = _EXT.module
        if self.native is None or module is None or self._vocab_size > (1 << module.COMPACT_ID_BITS):
            return None
        matcher = module.Matcher(list(plan.patterns)) if plan.patterns else None
        replace_from = -1 if plan.replace_from is None else ord(plan.replace_from)
        encoder = module.TextEncoder(self.native, matcher, list(plan.token_ids), replace_from, plan.replace_to,
                                     cache_size)
        self._plan_encoder = encoder
        return cast("Callable[[str], list[int]]", encoder.encode)

    def text_batch_encoder(self) -> Callable[[list[str], bool, int], list[Any]] | None:
        """The compiled ``TextEncoder``'s ``encode_batch`` (on its own threads) once :meth:`plan_encoder` made one
        (else None)."""
        encoder = self._plan_encoder
        return None if encoder is None else cast("Callable[[list[str], bool, int], list[Any]]", encoder.encode_batch)

    def cache_stats(self) -> CacheStats | None:
        """Counters of the compiled text encoder's segment cache; None without one (the pipeline's own cache)."""
        encoder = self._plan_encoder
        return None if encoder is None else CacheStats(*encoder.cache_stats())

    def clear_cache(self) -> None:
        """Empty the compiled text encoder's segment cache."""
        if self._plan_encoder is not None:
            self._plan_encoder.clear_cache()

    def use_reference(self) -> None:
        """Drop the compiled model: every call runs the pure-Python reference from now on."""
        self._prepare_python()
        self.native = None
        self.backend = "python"

    def _prepare_python(self) -> None:
        """Parse the merge list into the reference's rank table (eagerly on the Python backend, on first use of a
        Python-only method on the native one). Raises :class:`BPEError` for a bad merge list."""
        if self._python_ready:
            return
        raw = self._raw_merges
        merges = [m if type(m) is tuple else tuple(m.split(" ", 1)) if type(m) is str else tuple(m)
                  if type(m) is list else (m,) for m in raw]
        for rank, pair in enumerate(merges):
            if len(pair) != 2 or type(pair[0]) is not str or type(pair[1]) is not str:
                raise BPEError(f"merge {rank} ({raw[rank]!r:.60}) is neither 'a b' nor [a, b]")
        width = self._width
        ranks: dict[int, tuple[int, int]] = {}
        cut = len(self.prefix)
        get = self.vocab.get
        for rank, (left, right) in enumerate(cast("list[tuple[str, str]]", merges)):
            a, b, new = get(left), get(right), get(left + right[cut:])
            if a is None or b is None or new is None:
                raise BPEError(f"merge {rank} ({left!r} {right!r}) uses or makes a token outside the vocabulary")
            ranks[a * width + b] = (rank, new)
        self._ranks = ranks
        self._merges = cast("list[tuple[str, str]]", merges)
        self._python_ready = True

    @classmethod
    def from_hf(cls, config: dict[str, Any], *, backend: str | None = None, lazy_native: bool = False,
                derived: Derive | None = None) -> BPE:
        """From a ``tokenizer.json`` ``model`` entry (merges as ``"a b"`` strings or ``[a, b]`` pairs). Raises
        :class:`BPEError` for ``dropout`` (randomised, cannot be reproduced) or a bad vocabulary/merge list (with
        ``lazy_native``, see the constructor, a merge list the compiled model refuses raises on first use)."""
        if config.get("dropout") not in (None, 0, 0.0):
            raise BPEError(f"dropout {config.get('dropout')!r} (only null is supported)")
        vocab = config.get("vocab")
        if not isinstance(vocab, (dict, LazyVocab)):
            raise BPEError("vocab must be an object")
        raw = config.get("merges") or []
        if not isinstance(raw, (list, LazyMerges)):
            raise BPEError("merges must be a list")
        unk = config.get("unk_token")
        if unk is not None and (vocab.find(unk) is None if isinstance(vocab, LazyVocab) else unk not in vocab):
            raise BPEError(f"unk_token {unk!r} is not in the vocabulary")
        return cls(vocab, raw, unk_token=unk, fuse_unk=bool(config.get("fuse_unk", False)),
                   byte_fallback=bool(config.get("byte_fallback", False)),
                   continuing_subword_prefix=config.get("continuing_subword_prefix"),
                   end_of_word_suffix=config.get("end_of_word_suffix"),
                   ignore_merges=bool(config.get("ignore_merges", False)), backend=backend,
                   lazy_native=lazy_native, derived=derived)

    # -- protocol ------------------------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def _token_table(self) -> list[str | None]:
        """id -> token (None where no token has the id), built on first use when every id is a non-negative int
        (a warm load never needs it); a build from the vocabulary, the same list whichever thread makes it."""
        table = self._id_table
        if table is None:
            table = [None] * self._vocab_size
            for token, token_id in self.vocab.items():
                if token_id < 0:
                    raise BPEError(f"negative id {token_id} for {token!r}")
                table[token_id] = token
            self._id_table = table
        return table

    def token_to_id(self, token: str) -> int | None:
        return self.vocab.get(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self._token_table()[token_id] if 0 <= token_id < self._vocab_size else None

    def tokenize(self, text: str) -> list[int]:
        """Ids of one pre-token."""
        if not text:
            return []
        native = self.native
        if native is not None:
            try:
                return cast("list[int]", native.tokenize(text))
            except ValueError:  # a lone surrogate with byte fallback: the reference raises as it does
                pass
        self._prepare_python()
        if self.ignore_merges:
            whole = self.vocab.get(text)
            if whole is not None:
                return [whole]
        syms, _ = self._symbols(text, False)
        return self._merge(syms, None)

    def tokenize_with_spans(self, text: str) -> list[tuple[int, int, int]]:
        """``(id, start, end)`` per token, in characters of ``text``; byte-fallback tokens of one character each
        span that character."""
        if not text:
            return []
        self._prepare_python()
        if self.ignore_merges:
            whole = self.vocab.get(text)
            if whole is not None:
                return [(whole, 0, len(text))]
        syms, spans = self._symbols(text, True)
        assert spans is not None
        ids = self._merge(syms, spans)
        return [(i, s, e) for i, (s, e) in zip(ids, spans, strict=True)]

    def sampler(self, sample: Sample, name: str) -> ItemsSampler | None:
        """BPE-dropout (``sample``'s ``dropout``, :meth:`dropout_with_spans` per pre-token); None for ``dropout=0``
        (the deterministic ids). Raises :class:`~app.engine.sampling.SamplingError` for Unigram options."""
        return bpe_dropout_sampler(self.dropout_with_spans, sample, name)

    def dropout_with_spans(self, text: str, rng: random.Random, p: float) -> list[tuple[int, int, int]]:
        """``(id, start, end)`` of one pre-token under BPE-dropout ``p``, as Hugging Face's BPE with ``dropout``
        (:mod:`app.engine.dropout`): ``p = 0`` is :meth:`tokenize_with_spans`; for ``p > 0`` no cache and no
        ``ignore_merges`` shortcut (Hugging Face skips both when dropout is on). Seeded by ``rng``."""
        if p <= 0.0 or not text:
            return self.tokenize_with_spans(text)
        self._prepare_python()
        syms, spans = self._symbols(text, True)
        ranks, width = self._ranks, self._width
        ids, merged = merge_with_dropout(syms, spans, lambda a, b: ranks.get(a * width + b), rng, p)
        assert merged is not None
        return [(i, s, e) for i, (s, e) in zip(ids, merged, strict=True)]

    def segments(self, text: str) -> Iterator[tuple[int, int]]:
        """``(start, end)`` stretches of ``text`` that merge independently (see the module docstring); the whole
        text when it cannot be cut."""
        if not self._cuttable or len(text) < 2:
            yield 0, len(text)
            return
        junctions = self._junction_set
        if junctions is None:
            self._prepare_python()
            junctions = self._junction_set = {left[-1] + right[0] for left, right in self._merges if left and right}
        vocab = self.vocab
        start = 0
        known_prev = text[0] in vocab
        for i in range(1, len(text)):
            known = text[i] in vocab
            if known and known_prev and text[i - 1:i + 1] not in junctions:
                yield start, i
                start = i
            known_prev = known
        yield start, len(text)

    def encode_pieces(self, texts: Sequence[str | int], segment_from: int) -> list[int]:
        """Ids of the pre-tokens ``texts`` in order (an ``int`` item is an id already, passed through), each
        longer than ``segment_from`` characters cut as :meth:`segments` cuts it: one call into the compiled model
        (GIL released), or the reference per piece."""
        native = self.native
        if native is not None:
            try:
                return cast("list[int]", native.encode(texts if type(texts) is list else list(texts), segment_from))
            except ValueError:
                pass
        ids: list[int] = []
        for t in texts:
            if isinstance(t, int):
                ids.append(t)
            elif len(t) > segment_from:
                for start, end in self.segments(t):
                    ids.extend(self.tokenize(t[start:end]))
            else:
                ids.extend(self.tokenize(t))
        return ids

    # -- algorithm -----------------------------------------------------------------------------------------------

    def _symbols(self, text: str, with_spans: bool) -> tuple[list[int], list[tuple[int, int]] | None]:
        vocab = self.vocab
        syms: list[int] = []
        spans: list[tuple[int, int]] | None = [] if with_spans else None
        if not self.prefix and not self.suffix:
            # The common case: every character is in the vocabulary (no unknowns, no byte fallback needed).
            try:
                syms = [vocab[ch] for ch in text]
                return syms, ([(i, i + 1) for i in range(len(text))] if with_spans else None)
            except KeyError:
                syms = []
        if not self.prefix and not self.suffix and not self.byte_fallback and self.unk_id is None:
            # Byte-level files: a character outside the vocabulary is dropped.
            for i, ch in enumerate(text):
                token_id = vocab.get(ch)
                if token_id is not None:
                    syms.append(token_id)
                    if spans is not None:
                        spans.append((i, i + 1))
            return syms, spans
        unk: list[int] | None = None  # [id, start, end] of the pending unknown
        last = len(text) - 1
        for i, ch in enumerate(text):
            s = ch
            if i and self.prefix:
                s = self.prefix + s
            if i == last and self.suffix:
                s = s + self.suffix
            token_id = vocab.get(s)
            if token_id is not None:
                if unk is not None:
                    syms.append(unk[0])
                    if spans is not None:
                        spans.append((unk[1], unk[2]))
                    unk = None
                syms.append(token_id)
                if spans is not None:
                    spans.append((i, i + 1))
                continue
            if self.byte_fallback:
                byte_table = self._byte_ids()
                byte_ids = [byte_table[b] for b in s.encode("utf-8")]
                if all(b is not None for b in byte_ids):
                    for b in byte_ids:
                        assert b is not None
                        syms.append(b)
                        if spans is not None:
                            spans.append((i, i + 1))
                    continue
            if self.unk_token is not None:
                if self.unk_id is None:
                    raise BPEError(f"unk_token {self.unk_token!r} is not in the vocabulary")
                if unk is not None and self.fuse_unk:
                    unk[2] = i + 1
                else:
                    if unk is not None:
                        syms.append(unk[0])
                        if spans is not None:
                            spans.append((unk[1], unk[2]))
                    unk = [self.unk_id, i, i + 1]
        if unk is not None:
            syms.append(unk[0])
            if spans is not None:
                spans.append((unk[1], unk[2]))
        return syms, spans

    def _merge(self, syms: list[int], spans: list[tuple[int, int]] | None) -> list[int]:
        if len(syms) >= _HEAP_FROM:
            return self._merge_heap(syms, spans)
        ranks = self._ranks
        width = self._width
        none = _NO_MERGE
        # pair i = (syms[i], syms[i + 1]) -> (rank, new id); ``min`` takes the lowest rank, leftmost on ties
        pairs = [ranks.get(syms[i] * width + syms[i + 1], none) for i in range(len(syms) - 1)]
        while pairs:
            at = min(range(len(pairs)), key=pairs.__getitem__)
            found = pairs[at]
            if found is none:
                break
            new = found[1]
            syms[at] = new
            del syms[at + 1]
            del pairs[at]
            if spans is not None:
                spans[at] = (spans[at][0], spans[at + 1][1])
                del spans[at + 1]
            if at > 0:
                pairs[at - 1] = ranks.get(syms[at - 1] * width + new, none)
            if at < len(pairs):
                pairs[at] = ranks.get(new * width + syms[at + 1], none)
        return syms

    def _merge_heap(self, syms: list[int], spans: list[tuple[int, int]] | None) -> list[int]:
        ranks = self._ranks
        width = self._width
        n = len(syms)
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prv = list(range(-1, n - 1))
        alive = [True] * n
        heap: list[tuple[int, int, int]] = []
        for i in range(n - 1):
            found = ranks.get(syms[i] * width + syms[i + 1])
            if found is not None:
                heap.append((found[0], i, found[1]))
        heapq.heapify(heap)
        while heap:
            _, i, new = heapq.heappop(heap)
            if not alive[i]:
                continue
            j = nxt[i]
            if j < 0:
                continue
            found = ranks.get(syms[i] * width + syms[j])
            if found is None or found[1] != new:
                continue
            syms[i] = new
            alive[j] = False
            if spans is not None:
                spans[i] = (spans[i][0], spans[j][1])
            k = nxt[j]
            nxt[i] = k
            if k >= 0:
                prv[k] = i
            p = prv[i]
            if p >= 0:
                found = ranks.get(syms[p] * width + new)
                if found is not None:
                    heapq.heappush(heap, (found[0], p, found[1]))
            if k >= 0:
                found = ranks.get(new * width + syms[k])
                if found is not None:
                    heapq.heappush(heap, (found[0], i, found[1]))
        if spans is not None:
            spans[:] = [s for s, a in zip(spans, alive, strict=True) if a]
        return [s for s, a in zip(syms, alive, strict=True) if a]
