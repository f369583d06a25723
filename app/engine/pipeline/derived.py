"""Derivations of one artifact kept in the compiled artifact cache (:mod:`app.engine.artifact_cache`).

A loader that was given a cache hands its builders a :class:`Derive` for the artifact (the cache and the
artifact's sha256); each expensive step then goes through :func:`derive` under a ``part`` name that says what it
holds (``"charsmap"``, ``"metaspace-risk"``, ``"gguf-kv"``, ``"hf-doc"``, ``"merge-model"``). Without a cache
(``None``) the step is simply built, as it always was. A cached result is stored as raw sections plus JSON
``meta`` (never pickled); a ``restore`` that finds it inconsistent raises ``ValueError`` and the cache rebuilds it.

:func:`pack_strings` / :func:`unpack_strings` store a list of strings as one UTF-8 blob (``surrogatepass``, so
lone surrogates of a JSON file survive) and a count.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Mapping, Sequence
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
