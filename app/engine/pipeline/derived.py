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
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
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


class LazyVocab(Mapping[str, int]):
    """A token -> id vocabulary restored from packed strings (:func:`pack_strings`) and an id array, made a dict on
    first use (a warm load whose compiled model is restored never needs it). Checked when made: ``count`` strings,
    ``count`` ids; :attr:`min_id` and :attr:`max_id` come from the id array (or ``id_range``, the extremes a caller
    already read from it), so range checks need no dict. A repeated token keeps its last id, as ``json.loads``
    does for a repeated key (a caller that must refuse repeats checks first:
    :func:`app.engine.native.check_packed_vocab`). Every lookup of the mapping builds the dict; :meth:`find`
    answers one lookup without it. Thread-safe."""

    __slots__ = ("_count", "_dict", "_ids", "_lock", "_text", "max_id", "min_id")

    def __init__(self, text: str, ids: array[int], count: int, id_range: tuple[int, int] | None = None) -> None:
        """``text``: the packed keys; ``ids``: their ids, in the same order; ``id_range``: their smallest and
        largest (computed when None). Raises ``ValueError`` when ``text`` or ``ids`` does not hold ``count``
        items."""
        if len(ids) != count or (text.count(_SEP) + 1 if text or count else 0) != count:
            raise ValueError(f"vocabulary sections do not hold {count} entries")
        self._text: str | None = text
        self._ids: array[int] | None = ids
        self._count = count
        if id_range is None:
            id_range = (min(ids), max(ids)) if count else (0, -1)
        #: smallest and largest id (0 and -1 for an empty vocabulary)
        self.min_id, self.max_id = id_range
        self._dict: dict[str, int] | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        """Whether the dict has been built."""
        return self._dict is not None

    def as_dict(self) -> dict[str, int]:
        """The vocabulary as a dict (built on the first call, then shared: callers must not modify it)."""
        table = self._dict
        if table is None:
            with self._lock:
                table = self._dict
                if table is None:
                    assert self._text is not None and self._ids is not None
                    keys = self._text.split(_SEP) if self._count else []
                    table = self._dict = dict(zip(keys, self._ids.tolist(), strict=True))
                    self._text = self._ids = None
        return table

    def find(self, key: str) -> int | None:
        """The id of ``key`` (None when absent) without building the dict: a scan of the packed text, for the few
        lookups a load makes."""
        table = self._dict
        if table is not None:
            return table.get(key)
        text, ids, count = self._text, self._ids, self._count
        if text is None or ids is None:  # built meanwhile
            return self.as_dict().get(key)
        if count == 0 or _SEP in key:
            return None
        if count == 1:
            return ids[0] if text == key else None
        if text.endswith(_SEP + key):  # the last entry (the last of repeated ones wins)
            return ids[count - 1]
        at = text.rfind(_SEP + key + _SEP)
        if at >= 0:
            return ids[text.count(_SEP, 0, at) + 1]
        return ids[0] if text.startswith(key + _SEP) else None

    def __getitem__(self, key: str) -> int:
        return self.as_dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.as_dict()

    def get(self, key: str, default: Any = None) -> Any:
        return self.as_dict().get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())

    def keys(self) -> KeysView[str]:
        return self.as_dict().keys()

    def values(self) -> ValuesView[int]:
        return self.as_dict().values()

    def items(self) -> ItemsView[str, int]:
        return self.as_dict().items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyVocab):
            return self.as_dict() == other.as_dict()
        if isinstance(other, Mapping):
            return self.as_dict() == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<LazyVocab of {self._count}>"


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
