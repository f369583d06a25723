"""Rank tables (``{token bytes: id}``) in the compiled artifact cache's raw form (:mod:`.artifact_cache`).

A table is stored as three sections, in id order: ``tokens`` (the token bytes, concatenated), ``offsets``
(little-endian u32, ``n + 1`` entries: token ``i`` is ``tokens[offsets[i]:offsets[i + 1]]``) and ``ids``
(little-endian u32, ``n`` entries). :func:`restore_ranks` checks the layout (lengths, monotone offsets, distinct
tokens) and raises ``ValueError`` on anything inconsistent, which the cache treats as a damaged file.

Parts (the derivations stored this way):

* ``tiktoken-ranks``: the parsed ranks of a tiktoken-format file (no base64 decoding on a warm load);
* ``tekken-ranks``: a tekken file's ranks, with its pattern and special-token names in ``meta``;
* ``byte-level-ranks``: the proven rank table of a byte-level BPE ``tokenizer.json`` or GGUF vocabulary
  (:mod:`app.engine.pipeline.byte_level_ranks`), or, in ``meta``, why the file is not rank BPE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .artifact_cache import Compiled, u32_bytes, u32_view

TIKTOKEN_RANKS = "tiktoken-ranks"
TEKKEN_RANKS = "tekken-ranks"
BYTE_LEVEL_RANKS = "byte-level-ranks"


def dump_ranks(ranks: Mapping[bytes, int], meta: dict[str, Any] | None = None) -> Compiled:
    """``ranks`` (ids in 0..2**32-1) as sections, in id order, with ``meta`` (JSON-able) alongside."""
    ordered = sorted(ranks.items(), key=lambda kv: kv[1])
    offsets = [0]
    total = 0
    for token, _ in ordered:
        total += len(token)
        offsets.append(total)
    return Compiled(
        meta={**(meta or {}), "n": len(ordered)},
        sections={
            "tokens": b"".join(token for token, _ in ordered),
            "offsets": u32_bytes(offsets),
            "ids": u32_bytes(token_id for _, token_id in ordered),
        },
    )


def restore_ranks(compiled: Compiled) -> dict[bytes, int]:
    """The table :func:`dump_ranks` stored. Raises ``ValueError``/``KeyError``/``TypeError`` on a layout that does
    not add up (the cache then rebuilds)."""
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
