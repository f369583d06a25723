"""Fixtures for the HTTP service: in-process clients (lifespan run, artifacts verified) and real uvicorn processes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.core.config import Settings
from harness.server import INHERITED, free_port, serve_env, start
from harness.server import Server as LiveServer

__all__ = ["INHERITED", "LiveServer", "free_port", "serve_env", "start_server"]

#: Small limits for the limit tests (the default app uses the documented defaults).
SMALL_LIMITS = dict(max_body_bytes=2000, max_batch_size=4, max_decode_ids=10, max_text_chars=300)


@pytest.fixture(scope="session")
def client() -> Iterator[TestClient]:
    """The app with default settings (bundled store), started: every artifact loaded and verified."""
    with TestClient(create_app(Settings()), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="session")
def small_client() -> Iterator[TestClient]:
    """The app with :data:`SMALL_LIMITS`."""
    with TestClient(create_app(Settings(**SMALL_LIMITS)), raise_server_exceptions=False) as c:  # type: ignore[arg-type]
        yield c


def start_server(tmp_path: Path, *args: str, env: dict[str, str] | None = None, uds: Path | None = None,
                 ready_timeout: float = 180) -> LiveServer:
    """Start ``serve`` on a free loopback port (or ``uds``) and wait until it is ready (every worker started)."""
    log_path = tmp_path / f"server-{time.monotonic_ns()}.log"
    return start(log_path, *args, env=env, uds=uds, ready_timeout=ready_timeout)


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[Callable[..., LiveServer]]:
    """Factory fixture: ``live_server(*serve_args, env=..., uds=...)``; every server is stopped on teardown."""
    started: list[LiveServer] = []

    def start(*args: str, env: dict[str, str] | None = None, uds: Path | None = None) -> LiveServer:
        server = start_server(tmp_path, *args, env=env, uds=uds)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
