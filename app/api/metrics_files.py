"""Disk space and dead processes in prometheus-client's multiprocess directory.

prometheus-client keeps each process's values in memory-mapped files ``<kind>_<pid>.db`` that start sparse and grow
by doubling (``truncate``). On a full disk, the first write to a page with no block behind it is a SIGBUS that
kills the worker. :class:`MetricFiles` prevents that: it reserves real blocks (``posix_fallocate``) for a process's
files when it starts, and before every new label set it makes sure the file has room, extending it exactly the way
prometheus-client will (one doubling at a time, so its own ``truncate`` never shrinks or re-sparsifies the file).
When no room can be reserved the caller drops that label set instead of crashing.

A worker killed without a clean shutdown leaves its ``livesum`` files behind; :func:`forget_dead_processes` removes
the live files of processes that no longer exist.
"""

from __future__ import annotations

import glob
import logging
import os
import struct
import threading
from dataclasses import dataclass, field

log = logging.getLogger("app.api")

#: First reservation per file, in bytes: small enough for a nearly full disk, enough for the usual label sets
#: (a request-latency label set takes about 5 KB); files then grow on demand, reserved ahead of use.
INITIAL = {"histogram": 64 * 2**10, "counter": 16 * 2**10, "gauge_livesum": 8 * 2**10, "gauge_max": 8 * 2**10}


@dataclass
class MetricFiles:
    """The multiprocess files of one process in ``directory``."""

    directory: str
    pid: int = field(default_factory=os.getpid)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def path(self, kind: str) -> str:
        return os.path.join(self.directory, f"{kind}_{self.pid}.db")

    def reserve_initial(self) -> bool:
        """Create and reserve every file at its :data:`INITIAL` size (more if it is bigger already). False if any
        reservation failed (the disk is full)."""
        ok = True
        for kind, size in INITIAL.items():
            ok = self._reserve(kind, size, create=True) and ok
        return ok

    def ensure_room(self, kind: str, nbytes: int) -> bool:
        """Make sure ``nbytes`` more can be written to the ``kind`` file without touching unreserved pages.

        Extends the file by doublings from its current size, as prometheus-client would. False if the disk has no
        room (nothing is changed then, except blocks of a partial doubling that stays within the old size).
        """
        with self._lock:
            try:
                fd = os.open(self.path(kind), os.O_RDWR)
            except FileNotFoundError:
                return self._reserve(kind, max(INITIAL.get(kind, 8 * 2**10), _pow2_at_least(nbytes + 8)), True)
            except OSError:
                return False
            try:
                size = os.fstat(fd).st_size
                head = os.pread(fd, 4, 0)
                used = struct.unpack("i", head)[0] if len(head) == 4 else 0
                used = max(used, 8)
                target = size or INITIAL.get(kind, 8 * 2**10)
                while used + nbytes > target:
                    target *= 2
                if target > size:
                    os.posix_fallocate(fd, 0, target)
                return True
            except OSError as exc:
                log.warning("metrics file %s cannot grow (%s); dropping a new label set", self.path(kind), exc)
                return False
            finally:
                os.close(fd)

    def remove(self) -> None:
        """Remove every file of this process (``*_<pid>.db``: the reserved ones and any prometheus-client made)."""
        for path in glob.glob(os.path.join(self.directory, f"*_{self.pid}.db")):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _reserve(self, kind: str, size: int, create: bool) -> bool:
        path = self.path(kind)
        try:
            fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        except OSError as exc:
            log.error("cannot create metrics file %s (%s)", path, exc)
            return False
        try:
            os.posix_fallocate(fd, 0, max(size, os.fstat(fd).st_size))
            return True
        except OSError as exc:
            log.error("cannot reserve %d bytes for metrics file %s (%s)", size, path, exc)
            return False
        finally:
            os.close(fd)


def _pow2_at_least(n: int) -> int:
    size = 1
    while size < n:
        size *= 2
    return size


def entry_bytes(key: str) -> int:
    """Bytes one value with this key takes in a prometheus-client file (length, padded key, value, timestamp)."""
    encoded = len(key.encode("utf-8"))
    return 4 + encoded + (8 - (encoded + 4) % 8) + 16


def forget_dead_processes(directory: str) -> list[int]:
    """Remove the live-gauge files of processes that no longer exist; returns their pids."""
    from prometheus_client import multiprocess

    me = os.getpid()
    dead: set[int] = set()
    for path in glob.glob(os.path.join(directory, "gauge_live*_*.db")):
        try:
            pid = int(os.path.basename(path).rsplit("_", 1)[1][:-3])
        except ValueError:
            continue
        if pid == me or pid in dead:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            dead.add(pid)
        except PermissionError:
            pass
    for pid in dead:
        multiprocess.mark_process_dead(pid, directory)
    return sorted(dead)
