"""Rank tables (``{token bytes: id}``) in the compiled artifact cache's raw form (:mod:`.artifact_cache`).

A table is stored as three sections, in id order: ``tokens`` (the token bytes, concatenated), ``offsets``
(little-endian u32, ``n + 1`` entries: token ``i`` is ``tokens[offsets[i]:offsets[i + 1]]``) and ``ids``
(little-endian u32, ``n`` entries). :func:`restore_ranks` checks the layout (lengths, monotone offsets, distinct
tokens) and raises ``ValueError`` on anything inconsistent, which the cache treats as a damaged file.

With the compiled core, a restored table stays in its mapped sections (:class:`RankSections`), and a fourth section,
``core``, holds the core's lookup tables built from those sections (:func:`app.engine.native.rank_table_image`): the
core copies them (checked) instead of hashing every token again (a table stored without it is built in one call),
and the ``{bytes: id}`` dict is built only if Python code asks for it (the python backend, BPE-dropout,
:attr:`RankBPETokenizer.ranks`). The compiled check (``_core.check_rank_sections``) makes
the same checks as the dict path (and that ids strictly increase, which :func:`dump_ranks`' id order gives).

Parts (the derivations stored this way):

* ``tiktoken-ranks``: the parsed ranks of a tiktoken-format file (no base64 decoding on a warm load);
* ``tekken-ranks``: a tekken file's ranks, with its pattern and special-token names in ``meta``;
* ``byte-level-ranks``: the proven rank table of a byte-level BPE ``tokenizer.json`` or GGUF vocabulary
  (:mod:`app.engine.pipeline.byte_level_ranks`), or, in ``meta``, why the file is not rank BPE.

``meta["core_image"]`` records whether the writer had the compiled core and so tried to store the image (a table
the core refuses is stored without one). A table written without that attempt (by a process without the core) is
refused by :func:`restore_ranks` in a process with the core, so the cache rebuilds it once, image included,
instead of building the core's tables on every later load.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from . import native
from .artifact_cache import Compiled, u32_bytes, u32_view

TIKTOKEN_RANKS = "tiktoken-ranks"
TEKKEN_RANKS = "tekken-ranks"
BYTE_LEVEL_RANKS = "byte-level-ranks"


def dump_ranks(ranks: Mapping[bytes, int] | RankSections, meta: dict[str, Any] | None = None) -> Compiled:
    """``ranks`` (ids in 0..2**32-1) as sections, in id order, with ``meta`` (JSON-able) alongside."""
    if isinstance(ranks, RankSections):
        ranks = ranks.as_dict()
    ordered = sorted(ranks.items(), key=lambda kv: kv[1])
    offsets = [0]
    total = 0
    for token, _ in ordered:
        total += len(token)
        offsets.append(total)
    sections = {
        "tokens": b"".join(token for token, _ in ordered),
        "offsets": u32_bytes(offsets),
        "ids": u32_bytes(token_id for _, token_id in ordered),
    }
    image_tried = native.available()
    if image_tried:  # built from the very sections a warm load restores (same order, same tables)
        try:
            plain = RankSections(sections["tokens"], sections["offsets"], sections["ids"])
            sections["core"] = native.rank_table_image(plain.buffers())
        except ValueError:  # ranks the core refuses: stored without, and refused again on use
            pass
    return Compiled(meta={**(meta or {}), "n": len(ordered), "core_image": image_tried}, sections=sections)


class RankSections:
    """A rank table in the cache's raw form (module docstring), checked by the compiled core: ``n`` tokens, ids
    strictly increasing up to ``max_id``. :meth:`buffers` is what :class:`app.engine.native.NativeCore` takes;
    :meth:`as_dict` builds (once) the ``{bytes: id}`` dict. ``image``: the compiled core's tables stored with the
    sections (the ``core`` section), or None once :meth:`drop_image` let it go. Immutable otherwise; thread-safe."""

    __slots__ = ("_dict", "_lock", "_release", "ids", "image", "max_id", "min_id", "n", "offsets", "tokens")

    def __init__(self, tokens: memoryview | bytes, offsets: memoryview | bytes, ids: memoryview | bytes,
                 image: memoryview | bytes | None = None, release: Callable[[], None] | None = None) -> None:
        """Raises ``ValueError`` on inconsistent sections (``_core.check_rank_sections``), ``RuntimeError`` without
        the compiled core. ``image`` is checked by the core that uses it; ``release`` frees its mapped pages (see
        :meth:`drop_image`)."""
        self.tokens, self.offsets, self.ids = memoryview(tokens).cast("B"), u32_view(offsets), u32_view(ids)
        self.image = image
        self._release = release
        self.n, self.max_id = native.check_rank_sections(self.buffers())
        self.min_id = self.ids[0] if self.n else 0
        self._dict: dict[bytes, int] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.n

    def drop_image(self) -> None:
        """Forget :attr:`image` once a core has copied it (or refused it), and drop its pages from this process's
        memory: a warm load would otherwise keep every table twice, once in the core and once in the mapping."""
        self.image = None
        release, self._release = self._release, None
        if release is not None:
            release()

    def buffers(self) -> tuple[memoryview | Sequence[int], ...]:
        """``(tokens, offsets, ids)``: the sections as the compiled core takes them."""
        return self.tokens, self.offsets, self.ids

    def has_id(self, token_id: int) -> bool:
        """Whether some token has ``token_id`` (a binary search: ids strictly increase)."""
        k = bisect_left(self.ids, token_id)
        return k < self.n and self.ids[k] == token_id

    def items(self) -> Iterable[tuple[bytes, int]]:
        """``(token bytes, id)`` in id order."""
        blob = bytes(self.tokens)
        bounds = list(self.offsets)
        return zip(map(blob.__getitem__, map(slice, bounds[:-1], bounds[1:])), list(self.ids), strict=True)

    def as_dict(self) -> dict[bytes, int]:
        """The ``{token bytes: id}`` dict (built on the first call, then shared: callers must not modify it)."""
        table = self._dict
        if table is None:
            with self._lock:
                table = self._dict
                if table is None:
                    table = self._dict = dict(self.items())
        return table

    def token_table(self, size: int) -> list[bytes | None]:
        """id -> token bytes for ids below ``size`` (>= :attr:`max_id` + 1); None where no token has the id."""
        table: list[bytes | None] = [None] * size
        for token, token_id in self.items():
            table[token_id] = token
        return table


#: A rank table as a loader hands it to :class:`app.engine.encoding.RankBPETokenizer`.
Ranks = dict[bytes, int] | RankSections


def restore_ranks(compiled: Compiled) -> Ranks:
    """The table :func:`dump_ranks` stored: as :class:`RankSections` with the compiled core, else as a dict. Raises
    ``ValueError``/``KeyError``/``TypeError`` on a layout that does not add up, and, with the compiled core,
    ``ValueError`` for a table whose writer did not try to store the core's image (module docstring): the cache
    then rebuilds it."""
    if native.available():
        sections = compiled.sections
        if type(compiled.meta["n"]) is not int:
            raise ValueError("rank table: bad meta")
        if compiled.meta.get("core_image") is not True:
            raise ValueError("rank table stored without the compiled core's image (written without the core)")
        restored = RankSections(sections["tokens"], sections["offsets"], sections["ids"], sections.get("core"),
                                partial(compiled.release, "core"))
        if restored.n != compiled.meta["n"]:
            raise ValueError("rank table: section sizes do not match")
        return restored
    n = compiled.meta["n"]
    blob = bytes(compiled.sections["tokens"])
    offsets = u32_view(compiled.sections["offsets"])
    ids = u32_view(compiled.sections["ids"])
    if type(n) is not int or len(offsets) != n + 1 or len(ids) != n or offsets[0] != 0 or offsets[n] != len(blob):
        raise ValueError("rank table: section sizes do not match")
    bounds = list(offsets)
    if bounds != sorted(bounds):
        raise ValueError("rank table: offsets are not monotone")
    tokens = map(blob.__getitem__, map(slice, bounds[:-1], bounds[1:]))
    ranks = dict(zip(tokens, list(ids), strict=True))
    if len(ranks) != n:
        raise ValueError("rank table: repeated token")
    return ranks


def id_extremes(ranks: Ranks) -> list[int]:
    """The smallest and largest id of ``ranks`` (empty for an empty table), for range checks."""
    if isinstance(ranks, RankSections):
        return [ranks.min_id, ranks.max_id] if ranks.n else []
    return [min(ranks.values()), max(ranks.values())] if ranks else []
