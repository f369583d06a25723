"""The pre-token cache: a bounded, thread-safe LRU from piece to token ids.

Built on :func:`functools.lru_cache` (C implementation, thread-safe, exact LRU). Only pieces of at most
:data:`MAX_CACHED_PIECE_CHARS` characters are cached, so the bound on entries is also a bound on memory: a
10 MB piece never sits in the cache. Output is identical with the cache on or off; ``size=0`` disables it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from . import defaults
from .defaults import CACHE_SIZE_ENV, DEFAULT_CACHE_SIZE  # noqa: F401 (names of this module before defaults.py)

#: Longer pieces bypass the cache (they are rare and would make the entry bound meaningless for memory).
MAX_CACHED_PIECE_CHARS = 64


def default_cache_size() -> int:
    """``$TOKENIZER_CACHE_SIZE`` if set (an integer >= 0), else :data:`DEFAULT_CACHE_SIZE` (see
    :mod:`app.engine.defaults`). Raises ``ValueError``."""
    return defaults.cache_size()


@dataclass(frozen=True)
class CacheStats:
    """A snapshot of one cache's counters: lookups answered from it, lookups that computed, entries held."""

    hits: int
    misses: int
    size: int
    max_size: int


class PieceCache:
    """Wraps a pure function ``piece -> ids`` with a bounded LRU."""

    def __init__(self, compute: Callable[[str], tuple[int, ...]], max_size: int) -> None:
        if max_size < 0:
            raise ValueError("cache size must be >= 0")
        self.max_size = max_size
        self._compute = compute
        self._cached = lru_cache(maxsize=max_size)(compute) if max_size > 0 else None

    def lookup(self, piece: str) -> tuple[int, ...]:
        """Ids of ``piece``: from the cache when it is on and the piece is short enough, else computed."""
        if self._cached is not None and len(piece) <= MAX_CACHED_PIECE_CHARS:
            return self._cached(piece)
        return self._compute(piece)

    def getter(self) -> Callable[[str], tuple[int, ...]]:
        """The fastest callable equivalent to :meth:`lookup`, for hot loops that have checked the length."""
        return self._cached if self._cached is not None else self._compute

    def stats(self) -> CacheStats:
        """Current hit, miss and size counters (all zero when the cache is off)."""
        if self._cached is None:
            return CacheStats(0, 0, 0, 0)
        info = self._cached.cache_info()
        return CacheStats(info.hits, info.misses, info.currsize, self.max_size)

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        if self._cached is not None:
            self._cached.cache_clear()
