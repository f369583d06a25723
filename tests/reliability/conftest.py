"""Fixtures for the reliability suite: real ``python -m app serve`` processes on loopback, and mounts (a tiny tmpfs,
a read-only bind mount) for the disk-fault tests. Server helpers live in :mod:`harness.server` so the
long documented runs (``bench/reliability``) use exactly the same start-up path."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.server import Server, start

Serve = Callable[..., Server]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Factory: ``serve(*serve_args, env=..., access_log=False, log_path=None)`` -> a ready :class:`Server`; all are
    stopped (and, if they will not stop, killed) on teardown."""
    started: list[Server] = []

    def factory(*args: str, env: dict[str, str] | None = None, access_log: bool = False,
                log_path: Path | None = None) -> Server:
        server = start(log_path or tmp_path / f"server-{len(started)}.log", *args, env=env, access_log=access_log)
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop(timeout=30)


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (needs root / CAP_SYS_ADMIN; skips otherwise) that tests fill up to simulate a full disk."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", "size=2M", "tmpfs", str(mnt)):
        pytest.skip("cannot mount a tmpfs here (not root or no CAP_SYS_ADMIN)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.fixture
def read_only_copy(store_copy: Path, tmp_path: Path) -> Iterator[Path]:
    """The store copy behind a read-only bind mount (root), or with every write bit removed (non-root: root ignores
    permission bits, so chmod alone would prove nothing)."""
    mnt = tmp_path / "ro-store"
    mnt.mkdir()
    if os.geteuid() == 0:
        if not (_mount("--bind", str(store_copy), str(mnt)) and _mount("-o", "remount,ro,bind", str(mnt))):
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
            pytest.skip("cannot make a read-only bind mount here")
        yield mnt
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    else:
        for path in [store_copy, *store_copy.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
        yield store_copy
        for path in [store_copy, *store_copy.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


def fill(directory: Path) -> int:
    """Write to ``directory`` until the file system is full (ENOSPC); returns the bytes written."""
    written = 0
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 16, 1 << 12, 1):
            while True:
                try:
                    written += os.write(fd, b"\0" * size)
                except OSError:
                    break
    finally:
        os.close(fd)
    return written
