"""Glue between :class:`~app.engine.encoding.RankBPETokenizer` and the compiled core (``app.engine._native._core``).

The compiled core holds an encoding's ranks in a C hash table and runs the hand-written pre-tokenizer of a bundled
pattern plus rank-based BPE with the GIL released. Pieces that are not themselves tokens go through a bounded piece
cache in C (four ways per set, shared by threads through per-slot sequence locks, so hits write nothing shared;
a piece when its bytes and ids fit a 64-byte slot). Its
ids are identical to the pure-Python reference engine (``pretokenize.py`` + ``bpe.py``);
``tests/engine/test_native*.py`` check that differentially.

Backend selection (:func:`resolve_backend`):

* ``backend=`` argument of ``get_tokenizer``/``load_encoding``/``RankBPETokenizer`` when given, else
* ``$TOKENIZER_ENGINE`` (``native`` or ``python``), else
* ``native`` when the extension imports, ``python`` otherwise.

When ``native`` is wanted but the extension is missing (no compiler at install time), the engine falls back to
``python`` and logs a warning once. ``$TOKENIZER_NATIVE_DISABLE=1`` makes the import fail on purpose, which is how
the tests simulate a machine without a compiler.
"""

from __future__ import annotations

import importlib
import threading
import unicodedata
from collections.abc import Callable
from types import ModuleType
from typing import Any

from . import defaults, patterns
from .artifact_cache import u32_view
from .defaults import DISABLE_ENV, ENGINE_ENV


def _warn(message: str, *args: object) -> None:
    """Log a warning on the ``app.engine`` logger (``logging`` is imported only then: it costs start-up time)."""
    import logging

    logging.getLogger("app.engine").warning(message, *args)


BACKENDS = ("native", "python")


class OptionalExtension:
    """One optional C extension of the package (the encoding core, the trainer): imported once; picks the backend.

    ``module`` is None when the import failed (no compiler at install time, or ``$TOKENIZER_NATIVE_DISABLE``);
    ``error`` then says why.
    """

    def __init__(self, name: str, what: str, fallback: str) -> None:
        self.what, self.fallback = what, fallback
        self.module: ModuleType | None
        self.error: BaseException | None
        try:
            if defaults.native_disabled():
                raise ImportError(f"{what} disabled by ${DISABLE_ENV}")
            self.module, self.error = importlib.import_module(name), None
        except ImportError as exc:
            self.module, self.error = None, exc
        self._warned = False
        self._lock = threading.Lock()

    def resolve_backend(self, requested: str | None = None) -> str:
        """The backend to use: ``"native"`` or ``"python"``.

        ``requested`` (or, when it is None, ``$TOKENIZER_ENGINE``) may be ``"native"``, ``"python"`` or empty/None
        (the default: native when available). Raises ``ValueError`` for any other value. A request for native on a
        machine without the extension resolves to ``"python"`` with a one-time warning.
        """
        explicit = requested is not None
        value = (requested or "").strip().lower() if explicit else defaults.engine()
        if value and value not in BACKENDS:
            source = "backend" if explicit else f"${ENGINE_ENV}"
            raise ValueError(f"{source} must be one of {', '.join(BACKENDS)}, not {value!r}")
        if value == "python":
            return "python"
        if self.module is not None:
            return "native"
        with self._lock:
            first, self._warned = not self._warned, True
        if first:
            _warn(
                "%s%s is not available (%s); using %s (slower). "
                "Reinstall with a C compiler and Python headers (pip install .) to build it.",
                "native backend requested but the " if value == "native" else "the ",
                self.what,
                self.error,
                self.fallback,
            )
        return "python"

    def scanner_id(self, pattern: str) -> int:
        """The extension's hand-written pre-tokenizer for ``pattern`` (a bundled pattern), or 0 when there is none."""
        m = self.module
        if m is None:
            return 0
        ids = {patterns.GPT2: m.SCAN_GPT2, patterns.CL100K: m.SCAN_CL100K, patterns.O200K: m.SCAN_O200K,
               patterns.LLAMA3: m.SCAN_LLAMA3, patterns.QWEN2: m.SCAN_QWEN2,
               patterns.TEKKEN: m.SCAN_TEKKEN}  # fmt: skip
        return int(ids.get(pattern, 0))

    def sequence_scanner_id(self, sources: tuple[str, ...]) -> int:
        """The extension's hand-written pre-tokenizer for a sequence of Split regexes
        (:data:`~app.engine.patterns.SPLIT_SEQUENCES`), or 0 when there is none."""
        m = self.module
        if m is None:
            return 0
        return int(m.SCAN_DEEPSEEK_V3) if tuple(sources) == patterns.DEEPSEEK_V3_SPLITS else 0


CORE = OptionalExtension("app.engine._native._core", "compiled core", "the pure-Python engine")
_core: Any = CORE.module
IMPORT_ERROR = CORE.error


def available() -> bool:
    """True if the compiled core imported."""
    return _core is not None


def utf8_size(text: str) -> int:
    """``len(text.encode("utf-8"))``; ``UnicodeEncodeError`` for a lone surrogate. With the compiled core the UTF-8
    copy is kept inside the str, so the native encode or count of the same text that follows does not encode it
    again."""
    if _core is not None:
        return int(_core.utf8_size(text))
    return len(text.encode("utf-8"))


def _is_nfc(text: str) -> bool:
    """``unicodedata.is_normalized("NFC", text)``."""
    return unicodedata.is_normalized("NFC", text)


def nfc_verify() -> Callable[[str], bool]:
    """A callable giving ``unicodedata.is_normalized("NFC", text)``: with the compiled core, its UAX #15 quick check
    answers whenever it is sure (most text, several times faster) and unicodedata the rest, so the answers are the
    same; without it, unicodedata alone."""
    return _core.nfc_verify if _core is not None else _is_nfc  # type: ignore[no-any-return]


def nfc_apply() -> Callable[[str, Callable[[str], str]], str] | None:
    """The compiled ``nfc_apply(text, normalize)``: ``normalize(text)`` for an NFC ``normalize``, handing it only the
    stretches of ``text`` (between characters before which NFC splits text) that are not NFC, ``text`` itself when it
    is NFC; None without the compiled core."""
    return _core.nfc_apply if _core is not None else None  # type: ignore[no-any-return]


def check_rank_sections(buffers: tuple[Any, ...]) -> tuple[int, int]:
    """``(number of tokens, largest id)`` of a rank table's ``(tokens, offsets, ids)`` sections
    (:class:`app.engine.rank_tables.RankSections`), checked by the compiled core; ``ValueError`` on an inconsistent
    layout, ``RuntimeError`` without the compiled core."""
    if _core is None:
        raise RuntimeError("rank sections need the compiled core")
    n, max_id = _core.check_rank_sections(buffers)
    return int(n), int(max_id)


def check_packed_vocab(keys: Any, ids: Any, count: int) -> tuple[int, int]:
    """``(smallest id, largest id)`` (``(0, -1)`` when empty) of a vocabulary stored as ``count`` packed strings
    (:func:`app.engine.pipeline.derived.pack_strings`) and ``count`` little-endian u32 ids, checked by the compiled
    core without building a dict; ``ValueError`` unless both hold ``count`` entries and no string repeats,
    ``RuntimeError`` without the compiled core."""
    if _core is None:
        raise RuntimeError("a packed vocabulary check needs the compiled core")
    low, high = _core.check_packed_vocab(keys, ids, count)
    return int(low), int(high)


def u32_range(ids: Any) -> tuple[int, int]:
    """``(smallest, largest)`` of a buffer of little-endian u32 ids (``(0, -1)`` when empty), in one pass of C with
    the compiled core (Python's ``min``/``max`` make an int of every item). ``ValueError`` when its length is not
    a multiple of 4."""
    if _core is not None:
        low, high = _core.u32_range(ids)
        return int(low), int(high)
    values = u32_view(ids)
    return (min(values), max(values)) if len(values) else (0, -1)


def rank_table_image(buffers: tuple[Any, ...]) -> bytes:
    """The compiled core's built lookup tables for a rank table's ``(tokens, offsets, ids)`` sections
    (``Core.image()``): what :class:`NativeCore` then restores for the same sections instead of building them.
    ``ValueError`` for sections the core refuses, ``RuntimeError`` without the compiled core."""
    if _core is None:
        raise RuntimeError("a rank table image needs the compiled core")
    return bytes(_core.Core(buffers).image())


def scanner_id(pattern: str) -> int:
    """The native pre-tokenizer for ``pattern`` (one of the bundled patterns), or 0 when there is none."""
    return CORE.scanner_id(pattern)


def sequence_scanner_id(sources: tuple[str, ...]) -> int:
    """The native pre-tokenizer for a sequence of Split regexes (``deepseek_v3``), or 0 when there is none."""
    return CORE.sequence_scanner_id(sources)


def resolve_backend(requested: str | None = None) -> str:
    """The encoding core's backend: ``"native"`` or ``"python"`` (:meth:`OptionalExtension.resolve_backend`)."""
    return CORE.resolve_backend(requested)


class NativeCore:
    """An encoding's compiled core: ranks in C, the native pre-tokenizer of its pattern when there is one.

    Immutable and thread-safe; :meth:`encode` and :meth:`count` release the GIL for texts of 512 bytes or more. Text
    must be valid Unicode (no lone surrogates) -- callers scrub it first or catch ``UnicodeEncodeError``.
    """

    __slots__ = (
        "_core",
        "scanner",
        "encode",
        "count",
        "encode_with_offsets",
        "encode_pieces",
        "count_pieces",
        "cache_stats",
        "clear_cache",
        "commit_cache",
        "encode_batch",
        "count_batch",
        "count_utf8",
        "encode_utf8",
        "count_framed",
        "last_merges",
    )

    def __init__(self, mergeable_ranks: Any, pattern: str, *, cache_size: int = 0,
                 scanner: int | None = None) -> None:
        """Build the C tables for ``mergeable_ranks`` (a ``dict[bytes, int]`` or a
        :class:`~app.engine.rank_tables.RankSections`, read in one call). ``cache_size``: slots of the piece cache
        (0 = off).
        ``scanner``: the native pre-tokenizer to use (default: ``pattern``'s, see :func:`scanner_id`).

        Raises ``RuntimeError`` without the extension, ``ValueError``/``TypeError`` for invalid ranks.
        """
        if _core is None:
            raise RuntimeError(f"compiled core not available: {IMPORT_ERROR}")
        self.scanner = scanner_id(pattern) if scanner is None else scanner
        if isinstance(mergeable_ranks, dict):
            self._core = _core.Core(mergeable_ranks, self.scanner, cache_size)
        else:
            self._core = self._restored(mergeable_ranks.buffers(), mergeable_ranks.image, cache_size)
            mergeable_ranks.drop_image()
        self.cache_stats = self._core.cache_stats  # () -> (hits, misses, size, max_size)
        self.clear_cache = self._core.clear_cache
        self.commit_cache = self._core.commit_cache  # () -> bytes of piece cache faulted in, contents unchanged
        self.encode_pieces = self._core.encode_pieces
        self.count_pieces = self._core.count_pieces
        # (tokens: list[bytes]) -> per token the left part's length at rank BPE's last merge on it alone (0: none)
        self.last_merges = self._core.last_merges
        if self.scanner:
            self.encode = self._core.encode
            self.count = self._core.count
            # (text) -> (ids, [(start, end) character offsets]); text must be surrogate-free
            self.encode_with_offsets = self._core.encode_with_offsets
            # (texts, num_threads) -> per text its ids / count, or None where it has lone surrogates
            self.encode_batch = self._core.encode_batch
            self.count_batch = self._core.count_batch
            # (data, offsets, wide) -> count of each UTF-8 text data[offsets[i]:offsets[i + 1]] (Arrow's layout)
            self.count_utf8 = self._core.count_utf8
            # (data, offsets, wide) -> (ids as native uint32 bytes, n + 1 int32 offsets as bytes)
            self.encode_utf8 = self._core.encode_utf8
            # (text, names: tuple[bytes, ...]) -> tokens with each name occurrence one token and a hard cut
            self.count_framed = self._core.count_framed
        else:
            self.encode = self.count = self.encode_with_offsets = self.encode_batch = self.count_batch = None
            self.count_utf8 = self.encode_utf8 = None
            self.count_framed = None

    def _restored(self, buffers: tuple[Any, ...], image: Any, cache_size: int) -> Any:
        """The core of restored rank sections: its tables copied from ``image`` (:func:`rank_table_image` of the
        same sections, kept next to them in the artifact cache) when there is one and the core accepts it, else
        built. An image the core refuses (written by another build of it) is logged and ignored."""
        if image is not None:
            try:
                return _core.Core(buffers, self.scanner, cache_size, image=image)
            except ValueError as exc:
                _warn("ignoring a cached rank table image (%s); building the tables", exc)
        return _core.Core(buffers, self.scanner, cache_size)

    @property
    def has_scanner(self) -> bool:
        """True if the pattern has a native pre-tokenizer (else pieces come from the ``regex`` module)."""
        return bool(self.scanner)

    def split(self, text: str) -> list[str]:
        """The native pre-tokenizer's pieces of ``text``; raises ``ValueError`` without a native scanner."""
        return self._core.split(text)  # type: ignore[no-any-return]

    def bpe(self, piece: bytes) -> list[int]:
        """Ids of one non-empty piece (whole-piece lookup, then merging)."""
        return self._core.bpe(piece)  # type: ignore[no-any-return]
