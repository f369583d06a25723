"""app.api.metrics_files: reserved (non-sparse) multiprocess files, growth by doubling, dead-process cleanup."""

from __future__ import annotations

import errno
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from app.api import metrics_files
from app.api.metrics_files import INITIAL, MetricFiles, entry_bytes, forget_dead_processes


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def test_initial_files_are_reserved_not_sparse(tmp_path: Path) -> None:
    files = MetricFiles(str(tmp_path), pid=12345)
    assert files.reserve_initial()
    for kind, size in INITIAL.items():
        path = tmp_path / f"{kind}_12345.db"
        assert path.stat().st_size == size
        assert _allocated(path) >= size
        assert path.read_bytes() == b"\0" * size  # a fresh prometheus-client file (used == 0)


def test_growth_doubles_like_prometheus_client(tmp_path: Path) -> None:
    files = MetricFiles(str(tmp_path), pid=1)
    assert files.reserve_initial()
    path = tmp_path / "histogram_1.db"
    size = INITIAL["histogram"]
    assert files.ensure_room("histogram", 1000) and path.stat().st_size == size  # fits: unchanged
    with open(path, "r+b") as f:  # pretend prometheus-client has used almost all of it
        f.write(struct.pack("i", size - 100))
    assert files.ensure_room("histogram", 1000)
    assert path.stat().st_size == 2 * size and _allocated(path) >= 2 * size


def test_no_room_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = MetricFiles(str(tmp_path), pid=2)
    assert files.reserve_initial()
    path = tmp_path / "counter_2.db"
    with open(path, "r+b") as f:
        f.write(struct.pack("i", INITIAL["counter"] - 8))

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(metrics_files.os, "posix_fallocate", full)
    assert not files.ensure_room("counter", 500)
    assert path.stat().st_size == INITIAL["counter"]
    assert not MetricFiles(str(tmp_path), pid=3).reserve_initial()


def test_entry_bytes_matches_prometheus_layout(tmp_path: Path) -> None:
    from prometheus_client.mmap_dict import MmapedDict, mmap_key

    d = MmapedDict(str(tmp_path / "x.db"))
    used = 8
    for labels in ("", "a", "ab", "abc", "abcd", "日本", "x" * 100):
        key = mmap_key("m", "m_total", ["l"], [labels], "help text")
        d.write_value(key, 1.0, 0.0)
        used += entry_bytes(key)
        assert struct.unpack("i", (tmp_path / "x.db").read_bytes()[:4])[0] == used
    d.close()


def test_dead_processes_lose_their_live_gauges(tmp_path: Path) -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(child.stdout)
    for name in (f"gauge_livesum_{dead_pid}.db", f"gauge_liveall_{dead_pid}.db", f"counter_{dead_pid}.db",
                 f"gauge_livesum_{os.getpid()}.db", "gauge_livesum_1.db"):
        (tmp_path / name).write_bytes(b"\0" * 16)
    removed = forget_dead_processes(str(tmp_path))
    assert dead_pid in removed
    left = {p.name for p in tmp_path.iterdir()}
    assert f"gauge_livesum_{dead_pid}.db" not in left and f"gauge_liveall_{dead_pid}.db" not in left
    assert f"counter_{dead_pid}.db" in left  # counters keep a dead worker's counts
    assert f"gauge_livesum_{os.getpid()}.db" in left and "gauge_livesum_1.db" in left  # alive (pid 1 exists)
