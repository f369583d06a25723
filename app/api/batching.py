"""Threads for large ``texts`` batches of ``/count`` and ``/encode`` (``TOKENIZER_BATCH_THREADS``).

A request whose texts together reach ``TOKENIZER_BATCH_BYTES`` is tokenized by the engine's batch path
(``Tokenizer.encode_batch`` / ``count_batch``: for byte-level rank BPE one compiled call running its own threads with
the GIL released; for the other families a thread pool over compiled calls that release it). Such a request already
runs on a pool thread (it is above ``TOKENIZER_INLINE_BYTES``); :class:`BatchThreads` decides how many threads it
may use in all, so that concurrent large requests do not multiply them: the first gets up to the limit, a request
arriving while they are held gets what is left, and never less than its own thread. A worker's tokenizing threads
are thus at most ``TOKENIZER_THREADS + TOKENIZER_BULK_THREADS + batch threads - 1``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Most threads the automatic setting (``TOKENIZER_BATCH_THREADS=0``) gives one batch.
AUTO_LIMIT = 4


def batch_thread_limit(setting: int) -> int:
    """The thread limit of ``TOKENIZER_BATCH_THREADS``: the setting itself, or for 0 the CPUs this process may run
    on (its affinity, not the machine's count), at most :data:`AUTO_LIMIT`."""
    if setting > 0:
        return setting
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(AUTO_LIMIT, cpus))


class BatchThreads:
    """A worker's budget of batch threads (thread-safe): :meth:`take` grants a request up to ``limit`` threads,
    fewer while other requests hold some, at least 1."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._lock = threading.Lock()
        self._in_use = 0

    @property
    def in_use(self) -> int:
        """Threads granted to requests still running."""
        return self._in_use

    @contextmanager
    def take(self) -> Iterator[int]:
        """The number of threads this request may use, held until the block ends."""
        with self._lock:
            n = max(1, self.limit - self._in_use)
            self._in_use += n
        try:
            yield n
        finally:
            with self._lock:
                self._in_use -= n
