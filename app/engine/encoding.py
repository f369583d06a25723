"""The :class:`RankBPETokenizer`: one byte-level BPE tokenizer, shaped like ``tiktoken.Encoding``.

Special-token rules (the one place we deliberately differ from tiktoken's ``encode``):

* Text is always ordinary text. A special token's string inside text (``"<|endoftext|>"``) is encoded as the
  plain characters it consists of, never as the special id, and never raises. This is tiktoken's
  ``encode_ordinary``, and it holds for every text argument of every method here.
* Special tokens enter only by name, through their own arguments: ``prefix``/``suffix`` of
  :meth:`RankBPETokenizer.encode`, or :class:`Special` items in :meth:`RankBPETokenizer.encode_parts`. An unknown
  name raises
  :class:`~app.engine.errors.UnknownSpecialTokenError`, which lists the allowed names.
* Decoding renders a special id as its string (the first string the manifest maps to that id; for o200k_harmony
  200018 that is ``<|endofprompt|>``, as tiktoken decodes it),
  unless ``skip_special=True``.

Example::

    >>> tokenizer = get_tokenizer("cl100k_base")
    >>> tokenizer.encode("hello world")
    [15339, 1917]
    >>> tokenizer.encode("<|endoftext|>") == tokenizer.encode("<|endoftext|>", prefix=["<|endoftext|>"])[1:]
    True
    >>> tokenizer.encode("hi", suffix=["<|endoftext|>"])
    [6151, 100257]

Lone surrogates in text (not valid Unicode scalar values) are replaced by U+FFFD before encoding, as tiktoken
does; offsets then refer to that replaced text, which has the same length unless a high and a low surrogate
stood next to each other (they become one character).

Backends (``RankBPETokenizer.backend``): ``"native"`` runs the compiled core (:mod:`app.engine.native`: hand-written
pre-tokenizers for the bundled patterns, BPE in C, GIL released; custom patterns are split by ``regex`` and merged
in C); ``"python"`` runs the pure-Python reference (``pretokenize.py`` + ``bpe.py`` + the LRU of ``cache.py``).
Both give identical ids. Each backend has its own bounded pre-token cache (``$TOKENIZER_CACHE_SIZE`` entries); the
native one lives in C and only holds pieces that are not themselves tokens (at most 40 bytes, 12 ids).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property, lru_cache
from typing import Any

from ._batch import map_in_threads
from .artifact_cache import ArtifactCache
from .artifact_limits import MAX_IDS, check_ids
from .artifacts import parse_tiktoken
from .bpe import byte_pair_encode, byte_pair_split
from .cache import MAX_CACHED_PIECE_CHARS, CacheStats, PieceCache, default_cache_size
from .dropout import merge_with_dropout
from .errors import InvalidTokenIdError
from .native import NativeCore, resolve_backend
from .pretokenize import PatternSplitter, PieceSplitter
from .rank_tables import TIKTOKEN_RANKS, Ranks, RankSections, dump_ranks, id_extremes, restore_ranks
from .sampling import Sample
from .specials import Special
from .store import TokenizerSpec
from .tokenizer import Tokenizer, ValidTextCalls

log = logging.getLogger("app.engine")


Part = str | Special


@lru_cache(maxsize=256)
def _utf8_names(names: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(n.encode("utf-8") for n in names)


def scrub_surrogates(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (tiktoken's rule); unchanged if it is valid UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


class RankBPETokenizer(Tokenizer):
    """A byte-level BPE tokenizer: ranks, a pre-tokenizer pattern and named special tokens. Thread-safe."""

    def __init__(
        self,
        name: str,
        *,
        pattern: str,
        mergeable_ranks: Ranks,
        special_tokens: Mapping[str, int],
        cache_size: int | None = None,
        spec: TokenizerSpec | None = None,
        backend: str | None = None,
        template: tuple[Sequence[str], Sequence[str]] = ((), ()),
        pre_tokenizer: PieceSplitter | None = None,
        scanner: int | None = None,
    ) -> None:
        """Build an encoding. ``template``: the special-token names that ``add_special_tokens=True`` puts before and
        after a text (Llama 3: ``(["<|begin_of_text|>"], [])``). ``backend``: ``"native"``, ``"python"`` or None
        (``$TOKENIZER_ENGINE``, else native when the compiled core is available; see
        :func:`app.engine.native.resolve_backend`). ``pre_tokenizer``: splits text instead of ``pattern`` (which
        then only describes it), e.g. a ``tokenizer.json``'s sequence of splits; its pieces go to the native BPE,
        unless ``scanner`` names a native pre-tokenizer that splits exactly as it does
        (:func:`app.engine.native.sequence_scanner_id`).

        Raises ``ValueError`` if a byte value is missing from the ranks, a special id collides with an ordinary
        token, or ``backend`` is not a known backend."""
        self.name = name
        self.spec = spec
        self.pattern = pattern
        sections = self._sections = mergeable_ranks if isinstance(mergeable_ranks, RankSections) else None
        if sections is None:
            assert isinstance(mergeable_ranks, dict)
            self._ranks = mergeable_ranks
        # (sections: the compiled check proved every single byte there; the dict and the id table are built on
        # first use, by _ranks and _token_bytes)
        missing = [] if sections is not None else [b for b in range(256) if bytes([b]) not in self._ranks]
        if missing:
            raise ValueError(f"{name}: byte-level vocabulary lacks single bytes {missing[:8]}")
        self.max_token_value = max([*id_extremes(mergeable_ranks), *special_tokens.values()])
        if not 0 <= self.max_token_value < MAX_IDS:  # the table below is this long
            raise ValueError(f"{name}: largest id {self.max_token_value} is outside 0..{MAX_IDS - 1}")
        self.n_vocab = self.max_token_value + 1
        if sections is None:
            # id -> bytes for ordinary tokens; None marks ids that are special or unassigned.
            table: list[bytes | None] = [None] * self.n_vocab
            for token, rank in mergeable_ranks.items():
                table[rank] = token
            self._token_bytes = table
            self._init_special_tokens(special_tokens, lambda token_id: table[token_id] is not None, template)
        else:
            self._init_special_tokens(special_tokens, sections.has_id, template)
        self._pretokenizer: PieceSplitter = PatternSplitter(pattern) if pre_tokenizer is None else pre_tokenizer
        self.backend = resolve_backend(backend)
        self._native: NativeCore | None = None
        # text -> ids / count on the native backend (None on the python backend); raise UnicodeEncodeError on
        # lone surrogates, which the callers scrub and retry.
        self._native_encode: Callable[[str], list[int]] | None = None
        self._native_count: Callable[[str], int] | None = None
        if self.backend == "native":
            size = default_cache_size() if cache_size is None else cache_size
            if scanner is None and pre_tokenizer is not None:
                scanner = 0  # a custom splitter runs in Python unless a native scanner is named for it
            native = self._native = NativeCore(mergeable_ranks, pattern, cache_size=size, scanner=scanner)
            if native.encode is not None and native.count is not None:
                self._native_encode, self._native_count = native.encode, native.count
                self._valid_text_calls = ValidTextCalls(native.encode, native.count)
            else:  # custom pattern: regex pre-tokenizer, native BPE
                pieces, encode_pieces, count_pieces = (
                    self._pretokenizer.pieces,
                    native.encode_pieces,
                    native.count_pieces,
                )
                self._native_encode = lambda text: encode_pieces(pieces(text))  # type: ignore[no-any-return]
                self._native_count = lambda text: count_pieces(pieces(text))  # type: ignore[no-any-return]
            self._cache = PieceCache(self._encode_piece, 0)
            how = "native pre-tokenizer" if self._native.has_scanner else "regex pre-tokenizer (custom pattern)"
            log.info("encoding %s: native backend (compiled core, %s, BPE in C)", name, how)
        else:
            self._cache = PieceCache(self._encode_piece, default_cache_size() if cache_size is None else cache_size)
            self._text_ranks = self._build_text_ranks()  # at load, not on the first request
            log.info("encoding %s: python backend (pure-Python reference engine)", name)
        self._bind_plain_encode()

    @cached_property
    def _ranks(self) -> dict[bytes, int]:
        """token bytes -> id (set by the constructor for a dict; built on first use from restored sections)."""
        assert self._sections is not None
        return self._sections.as_dict()

    @cached_property
    def _token_bytes(self) -> list[bytes | None]:
        """id -> bytes for ordinary tokens; None marks ids that are special or unassigned (set by the constructor
        for a dict; built on first use from restored sections)."""
        assert self._sections is not None
        return self._sections.token_table(self.n_vocab)

    def _build_text_ranks(self) -> dict[str, int]:
        """Whole-piece lookup without encoding the piece: every token that is valid UTF-8, keyed by its text (the
        python backend's fast path, built by its constructor as ``_text_ranks``; the native backend has none)."""
        text_ranks: dict[str, int] = {}
        for token, rank in self._ranks.items():
            try:
                text_ranks[token.decode("utf-8")] = rank
            except UnicodeDecodeError:
                pass
        return text_ranks

    @classmethod
    def from_spec(cls, spec: TokenizerSpec, *, cache_size: int | None = None, backend: str | None = None,
                  artifact_cache: ArtifactCache | None = None) -> RankBPETokenizer:
        """Load and verify the artifact of ``spec``. Raises :class:`ArtifactError` (missing, corrupted, truncated
        or mismatched files, naming the file and both hashes) or ``ValueError`` for an inconsistent manifest.
        ``artifact_cache``: where the parsed ranks are stored and mapped from (part ``tiktoken-ranks``); the
        artifact's sha256 is checked either way."""
        data = spec.read_artifact()
        source = str(spec.artifact_path)
        def parse() -> Ranks:
            return parse_tiktoken(data, source=source)

        ranks = parse() if artifact_cache is None else artifact_cache.load(spec.sha256, TIKTOKEN_RANKS, parse,
                                                                           dump_ranks, restore_ranks)
        check_ids([*id_extremes(ranks), *spec.special_tokens.values()], "token id", len(data), str(spec.artifact_path))
        tokenizer = cls(
            spec.name,
            pattern=spec.pattern,
            mergeable_ranks=ranks,
            special_tokens=spec.special_tokens,
            cache_size=cache_size,
            spec=spec,
            backend=backend,
            template=spec.template,
        )
        spec.check_vocab_size(tokenizer.n_vocab)
        return tokenizer

    def __repr__(self) -> str:
        return f"<RankBPETokenizer {self.name!r} backend={self.backend!r}>"

    @property
    def ranks(self) -> dict[bytes, int]:
        """The mergeable ranks (token bytes -> id) this encoding was built from: the engine's own table, shared,
        not copied (a read-only property; callers must not modify the table)."""
        return self._ranks

    @property
    def native_core(self) -> NativeCore | None:
        """The compiled core running this encoding (None on the python backend)."""
        return self._native

    # ------------------------------------------------------------------ encoding

    def _encode_piece(self, piece: str) -> tuple[int, ...]:
        """Ids of one piece that is not itself a token (the cache's compute function)."""
        return tuple(byte_pair_encode(piece.encode("utf-8"), self._ranks))

    def _encode_text(self, text: str) -> list[int]:
        fast = self._native_encode
        if fast is not None:
            try:
                return fast(text)
            except UnicodeEncodeError:  # lone surrogates (rare): scrub, then encode
                return fast(scrub_surrogates(text))
        text = scrub_surrogates(text)
        out: list[int] = []
        append, extend = out.append, out.extend
        whole = self._text_ranks.get
        cached = self._cache.getter()
        compute = self._encode_piece
        limit = MAX_CACHED_PIECE_CHARS
        for piece in self._pretokenizer.pieces(text):
            token = whole(piece)
            if token is not None:
                append(token)
            elif len(piece) <= limit:
                extend(cached(piece))
            else:
                extend(compute(piece))
        return out

    def count(self, text: str, *, add_special_tokens: bool = False, prefix: Sequence[str] = (),
              suffix: Sequence[str] = (), sample: Sample | None = None) -> int:
        """Number of tokens :meth:`encode` would return, without building the id list (with ``sample``: the
        sampled ids' count)."""
        if sample is not None:
            return super().count(text, add_special_tokens=add_special_tokens, prefix=prefix, suffix=suffix,
                                 sample=sample)
        n = self._around_count(prefix, suffix, add_special_tokens) if prefix or suffix or add_special_tokens else 0
        fast = self._native_count
        if fast is not None:
            try:
                return n + fast(text)
            except UnicodeEncodeError:
                return n + fast(scrub_surrogates(text))
        text = scrub_surrogates(text)
        whole = self._text_ranks
        cached = self._cache.getter()
        compute = self._encode_piece
        limit = MAX_CACHED_PIECE_CHARS
        for piece in self._pretokenizer.pieces(text):
            if piece in whole:
                n += 1
            elif len(piece) <= limit:
                n += len(cached(piece))
            else:
                n += len(compute(piece))
        return n

    def count_framed(self, text: str, names: Sequence[str]) -> int:
        """:meth:`Tokenizer.count_framed` in one call into the compiled core when there is one (same cuts, same
        counts; text with lone surrogates and more than 64 names take the general path)."""
        native = self._native.count_framed if self._native is not None else None
        names = tuple(names)
        if native is None or not names or len(names) > 64:
            return super().count_framed(text, names)
        for name in names:
            if name not in self._special_tokens:
                self.special_token_id(name)  # raises, naming the allowed ones
        try:
            return native(text, _utf8_names(names))  # type: ignore[no-any-return]
        except UnicodeEncodeError:
            return super().count_framed(text, names)

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids of ``text`` and, per token, its ``(start, end)`` offsets in characters (code points) of ``text``.

        A token that starts or ends inside a multi-byte character covers that whole character, so neighbouring
        tokens that split one character overlap on it. Offsets index the surrogate-scrubbed text.
        """
        text = scrub_surrogates(text)
        if self._native is not None and self._native.encode_with_offsets is not None:
            return self._native.encode_with_offsets(text)  # type: ignore[no-any-return]
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        native = self._native
        no_whole: dict[str, int] = {}  # the native BPE looks whole pieces up itself
        whole = (self._text_ranks if native is None else no_whole).get
        table = self._token_bytes
        for piece, start in self._pretokenizer.pieces_with_offsets(text):
            token = whole(piece)
            if token is not None:
                ids.append(token)
                spans.append((start, start + len(piece)))
                continue
            raw = piece.encode("utf-8")
            if native is not None:
                piece_ids = native.bpe(raw)
                parts: list[bytes] = [table[i] or b"" for i in piece_ids]  # ordinary ids: never None
                ids.extend(piece_ids)
            else:
                parts = byte_pair_split(raw, self._ranks)
                ids.extend(self._ranks[p] for p in parts)
            if len(raw) == len(piece):  # ASCII: bytes are characters
                pos = start
                for p in parts:
                    spans.append((pos, pos + len(p)))
                    pos += len(p)
                continue
            char_of_byte = [i for i, ch in enumerate(piece) for _ in range(len(ch.encode("utf-8")))]
            b = 0
            for p in parts:
                spans.append((start + char_of_byte[b], start + char_of_byte[b + len(p) - 1] + 1))
                b += len(p)
        return ids, spans

    def encode_batch(self, texts: Sequence[str], *, num_threads: int = 1,
                     sample: Sample | None = None) -> list[list[int]]:
        """:meth:`encode` of each text, in order, over up to ``num_threads`` threads.

        The native backend (bundled patterns) runs the whole batch in C: its own threads, no GIL while encoding,
        and a thread only per ~32 KiB of text. Otherwise a Python thread pool (parallel only where the GIL is
        released).
        """
        if sample is not None:
            return super().encode_batch(texts, sample=sample)
        if self._native is not None and self._native.encode_batch is not None:
            texts = texts if isinstance(texts, list | tuple) else list(texts)
            done = self._native.encode_batch(texts, num_threads)
            return [self._encode_text(t) if ids is None else ids for t, ids in zip(texts, done, strict=True)]
        return map_in_threads(self._encode_text, texts, num_threads)

    def count_batch(self, texts: Sequence[str], *, num_threads: int = 1,
                    sample: Sample | None = None) -> list[int]:
        """:meth:`count` of each text, in order (threads as :meth:`encode_batch`)."""
        if sample is not None:
            return super().count_batch(texts, sample=sample)
        if self._native is not None and self._native.count_batch is not None:
            texts = texts if isinstance(texts, list | tuple) else list(texts)
            done = self._native.count_batch(texts, num_threads)
            return [self.count(t) if n is None else n for t, n in zip(texts, done, strict=True)]
        return map_in_threads(self.count, texts, num_threads)

    def count_utf8_buffers(self, data: Any, offsets: Any, *, wide: bool = True) -> list[int]:
        """:meth:`count` of each text of a batch in Arrow's string layout (see the base class); the compiled core
        counts the bytes in place, with the GIL released and no ``str`` objects, when it has a native scanner."""
        native = self._native.count_utf8 if self._native is not None else None
        if native is None:
            return super().count_utf8_buffers(data, offsets, wide=wide)
        return native(data, offsets, wide)  # type: ignore[no-any-return]

    def encode_utf8_buffers(self, data: Any, offsets: Any, *, wide: bool = True) -> tuple[bytes, bytes]:
        """:meth:`encode` of each text of a batch in Arrow's string layout (see the base class); in place in the
        compiled core when it has a native scanner."""
        native = self._native.encode_utf8 if self._native is not None else None
        if native is None:
            return super().encode_utf8_buffers(data, offsets, wide=wide)
        return native(data, offsets, wide)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ sampling

    def check_sample(self, sample: Sample) -> None:
        """Byte-level BPE samples with BPE-dropout over its ranks (``dropout``)."""
        sample.for_bpe(self.name)

    def _sample_text(self, text: str, sample: Sample, rng: random.Random) -> list[int]:
        """BPE-dropout over the ranks (:func:`app.engine.dropout.merge_with_dropout`, Hugging Face's semantics;
        a pair merges when its bytes joined are a token, at that token's rank): ``dropout=0`` is the
        deterministic encoding; otherwise every pre-token is merged from its bytes, whole-token pre-tokens
        included (as Hugging Face skips ``ignore_merges`` under dropout), always in Python."""
        p = sample.for_bpe(self.name)
        if p <= 0.0:
            return self._encode_text(text)
        ranks, table = self._ranks, self._token_bytes
        byte_ids = [ranks[bytes([b])] for b in range(256)]
        pairs: dict[tuple[int, int], tuple[int, int] | None] = {}

        def pair(a: int, b: int) -> tuple[int, int] | None:
            key = (a, b)
            found = pairs.get(key, False)
            if found is False:
                rank = ranks.get((table[a] or b"") + (table[b] or b""))
                found = pairs[key] = None if rank is None else (rank, rank)
            return found  # type: ignore[return-value]

        out: list[int] = []
        for piece in self._pretokenizer.pieces(scrub_surrogates(text)):
            ids, _ = merge_with_dropout([byte_ids[b] for b in piece.encode("utf-8")], None, pair, rng, p)
            out.extend(ids)
        return out

    # ------------------------------------------------------------------ decoding

    def decode_tokens_bytes(self, ids: Sequence[int], *, skip_special: bool = False) -> list[bytes]:
        """The bytes of each token, in order (special tokens omitted when ``skip_special``).

        Raises :class:`InvalidTokenIdError` naming the first id (and its position) that is not in the vocabulary.
        """
        table = self._token_bytes
        out: list[bytes] = []
        for index, token_id in enumerate(ids):
            chunk = table[token_id] if type(token_id) is int and 0 <= token_id < self.n_vocab else None
            if chunk is None:
                special = self._special_by_id.get(token_id) if type(token_id) is int else None
                if special is None:
                    raise InvalidTokenIdError(token_id, self.name, self.n_vocab, index=index)
                if skip_special:
                    continue
                chunk = special.encode("utf-8")
            out.append(chunk)
        return out

    # ------------------------------------------------------------------ introspection

    def cache_stats(self) -> CacheStats:
        """Hit, miss and size counters of this encoding's pre-token cache. On the native backend, lookups happen
        only for pieces that are not themselves tokens."""
        if self._native is not None:
            return CacheStats(*self._native.cache_stats())
        return self._cache.stats()

    def clear_cache(self) -> None:
        """Empty the pre-token cache and reset its counters."""
        if self._native is not None:
            self._native.clear_cache()
        self._cache.clear()

    def commit_cache(self) -> int:
        """The compiled core's piece cache, faulted in (see :meth:`Tokenizer.commit_cache`); 0 without it."""
        return self._native.commit_cache() if self._native is not None else 0
