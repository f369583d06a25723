"""Running one per-text function over a batch, optionally on a thread pool (shared by every tokenizer kind)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_chunks_in_threads(fn: Callable[[list[T]], list[R]], items: Sequence[T], num_threads: int) -> list[R]:
    """``fn`` -- a function of a list giving one result per item, in order -- over ``items``, joined in order, on up
    to ``num_threads`` threads: one call on all of them with one thread, else one call per contiguous chunk (a few
    chunks per thread, so uneven texts even out). Threads only run in parallel where ``fn`` releases the GIL."""
    items = items if isinstance(items, list) else list(items)
    if num_threads <= 1 or len(items) <= 1:
        return fn(items)
    workers = min(num_threads, len(items))
    size = max(1, -(-len(items) // (workers * 4)))
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return [r for chunk_result in pool.map(fn, chunks) for r in chunk_result]


def map_in_threads(fn: Callable[[T], R], items: Sequence[T], num_threads: int) -> list[R]:
    """``[fn(x) for x in items]``, in order, over up to ``num_threads`` threads.

    Items go to the threads in contiguous chunks (a few per thread), so short texts do not pay one future each.
    Threads only run in parallel where ``fn`` releases the GIL (the compiled core does).
    """
    return map_chunks_in_threads(lambda chunk: [fn(x) for x in chunk], items, num_threads)
