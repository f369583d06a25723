"""Running one per-text function over a batch, optionally on a thread pool (shared by every tokenizer kind)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_in_threads(fn: Callable[[T], R], items: Sequence[T], num_threads: int) -> list[R]:
    """``[fn(x) for x in items]``, in order, over up to ``num_threads`` threads.

    Items go to the threads in contiguous chunks (a few per thread), so short texts do not pay one future each.
    Threads only run in parallel where ``fn`` releases the GIL (the compiled core does).
    """
    if num_threads <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    items = list(items)
    workers = min(num_threads, len(items))
    size = max(1, -(-len(items) // (workers * 4)))
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = pool.map(lambda chunk: [fn(x) for x in chunk], chunks)
        return [r for chunk_result in results for r in chunk_result]
