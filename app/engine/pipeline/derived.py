"""Derivations of one artifact kept in the compiled artifact cache (:mod:`app.engine.artifact_cache`).

A loader that was given a cache hands its builders a :class:`Derive` for the artifact (the cache and the
artifact's sha256); each expensive step then goes through :func:`derive` under a ``part`` name that says what it
holds (``"charsmap"``, ``"metaspace-risk"``, ``"gguf-kv"``, ``"hf-doc"``, ``"merge-model"``,
``"sp-bpe-model"``). Without a cache (``None``) the step is simply built, as it always was. A cached result is
stored as raw sections plus JSON ``meta`` (never pickled); a ``restore`` that finds it inconsistent raises
``ValueError`` and the cache rebuilds it.

:func:`pack_strings` / :func:`unpack_strings` store a list of strings as one UTF-8 blob (``surrogatepass``, so
lone surrogates of a JSON file survive) and a count.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..artifact_cache import ArtifactCache, Compiled

T = TypeVar("T")

_SEP = "\0"


@dataclass(frozen=True)
class Derive:
    """The cache of one artifact's derivations: ``cache`` and the artifact's ``sha256`` (part of every key)."""

    cache: ArtifactCache
    sha256: str

    def __call__(self, part: str, build: Callable[[], T], dump: Callable[[T], Compiled],
                 restore: Callable[[Compiled], T]) -> T:
        return self.cache.load(self.sha256, part, build, dump, restore)


def derive(derived: Derive | None, part: str, build: Callable[[], T], dump: Callable[[T], Compiled],
           restore: Callable[[Compiled], T]) -> T:
    """``build()`` without a cache; with one, the cached result of ``part`` (built, dumped and stored once)."""
    return build() if derived is None else derived(part, build, dump, restore)


def derive_for(cache: ArtifactCache | None, sha256: str | None) -> Derive | None:
    """A :class:`Derive` for the artifact ``sha256`` in ``cache``; None when either is missing."""
    return None if cache is None or sha256 is None else Derive(cache, sha256)


def compiled(meta: dict[str, Any], sections: Mapping[str, bytes | memoryview]) -> Compiled:
    """A :class:`~app.engine.artifact_cache.Compiled` (one import for the derivations' modules)."""
    return Compiled(meta=meta, sections=sections)


def pack_strings(items: Sequence[str]) -> bytes | None:
    """``items`` as one blob for :func:`unpack_strings`, or None when some item holds a NUL (not packable)."""
    if any(_SEP in s for s in items):
        return None
    return _SEP.join(items).encode("utf-8", "surrogatepass")


def unpack_strings(blob: bytes | memoryview, count: int) -> list[str]:
    """The ``count`` strings :func:`pack_strings` packed into ``blob``. Raises ``ValueError`` if they are not
    ``count`` (a damaged section)."""
    if count == 0:
        if len(blob):
            raise ValueError("string section should be empty")
        return []
    items = str(blob, "utf-8", "surrogatepass").split(_SEP)
    if len(items) != count:
        raise ValueError(f"string section holds {len(items)} strings, not {count}")
    return items


class LazyMerges(Sequence[Any]):
    """A merge list restored from packed strings (:func:`pack_strings`): ``"a b"`` strings (form ``"str"``) or
    ``(a, b)`` pairs (form ``"pair"``), split into its items on first use (a warm load whose compiled model is
    restored never needs them). The packed text is checked when this is made (UTF-8, ``count`` items), so using it
    raises nothing. Equal to a list or tuple of the same items. Thread-safe."""

    __slots__ = ("_count", "_items", "_lock", "_texts")

    def __init__(self, texts: Sequence[str], count: int) -> None:
        """``texts``: one packed text (``"str"``) or two (``"pair"``: left and right). Raises ``ValueError`` when a
        text does not hold ``count`` items."""
        for text in texts:
            if (text.count(_SEP) + 1 if text or count else 0) != count:
                raise ValueError(f"merge section does not hold {count} strings")
        if len(texts) not in (1, 2):
            raise ValueError("a merge list is one or two packed texts")
        self._texts: tuple[str, ...] | None = tuple(texts)
        self._count = count
        self._items: list[Any] | None = None
        self._lock = threading.Lock()

    def _list(self) -> list[Any]:
        items = self._items
        if items is None:
            with self._lock:
                items = self._items
                if items is None:
                    assert self._texts is not None
                    parts = [text.split(_SEP) if self._count else [] for text in self._texts]
                    items = parts[0] if len(parts) == 1 else list(zip(parts[0], parts[1], strict=True))
                    self._items, self._texts = items, None
        return items

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        return self._list()[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._list())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, LazyMerges)):
            return self._list() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<LazyMerges of {self._count}>"


def array_bytes(items: array[Any]) -> bytes:
    """``items`` as a little-endian section."""
    if sys.byteorder == "little":
        return items.tobytes()
    swapped = array(items.typecode, items)
    swapped.byteswap()
    return swapped.tobytes()


def read_array(blob: bytes | memoryview, typecode: str, count: int) -> array[Any]:
    """The ``count`` items of ``typecode`` of the little-endian section ``blob`` (copied). Raises ``ValueError``
    for a section of another size."""
    out = array(typecode)
    if len(blob) != count * out.itemsize:
        raise ValueError(f"array section of {len(blob)} bytes does not hold {count} items of {typecode!r}")
    out.frombytes(blob)
    if sys.byteorder != "little":
        out.byteswap()
    return out
