"""Bounds on the numbers an artifact states (token ids, vocabulary sizes, special-token counts), checked before
anything of that size is allocated.

A tokenizer's tables are as long as its largest id, so a 104-byte file naming id 300,000,000 would allocate
gigabytes. Every id or size an artifact states must be below :func:`id_bound` of the file's real size (its
decoded bytes: after xz decompression for a compressed store entry): ``max(MIN_ID_BOUND, IDS_PER_BYTE × size)``,
and never above :data:`MAX_IDS`. A real vocabulary spends several bytes per token, so a real file is far inside
the bound; memory at load stays proportional to the file. Checked at import and at every load (the same loaders
run both). See ``docs/limits-artifacts.md``.
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import ArtifactError

#: Absolute cap on ids (and so on table lengths): 2**24, 64 times the largest bundled vocabulary (262,144).
MAX_IDS = 1 << 24
#: Ids a file of any size may use (small hand-written files of tests and examples).
MIN_ID_BOUND = 1 << 16
#: Ids per byte of the file: a vocabulary entry takes at least a few bytes, so 4 leaves ample room for gaps.
IDS_PER_BYTE = 4


def id_bound(size: int | None) -> int:
    """The exclusive upper bound on ids and sizes for an artifact of ``size`` decoded bytes (None: unknown size,
    only :data:`MAX_IDS` applies)."""
    if size is None:
        return MAX_IDS
    return min(MAX_IDS, max(MIN_ID_BOUND, IDS_PER_BYTE * size))


def check_id(value: int, what: str, size: int | None, source: str) -> None:
    """Raise :class:`ArtifactError` naming ``what`` unless ``0 <= value < id_bound(size)``."""
    bound = id_bound(size)
    if not 0 <= value < bound:
        shown = str(value) if abs(value) < 10**30 else f"{str(value)[:12]}… ({len(str(value))} digits)"
        raise ArtifactError(source, f"{what} {shown} is out of range: ids and sizes of a file of "
                                    f"{size if size is not None else '?'} bytes must be in 0..{bound - 1} "
                                    f"(see docs/limits-artifacts.md)")


def check_ids(values: Iterable[int], what: str, size: int | None, source: str) -> None:
    """:func:`check_id` of the largest and smallest of ``values`` (nothing for an empty iterable)."""
    low = high = None
    for v in values:
        if low is None or v < low:
            low = v
        if high is None or v > high:
            high = v
    if low is not None and high is not None:
        check_id(low, what, size, source)
        check_id(high, what, size, source)
