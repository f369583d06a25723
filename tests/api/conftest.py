"""Fixtures for the HTTP service: in-process clients (lifespan run, artifacts verified) and real uvicorn processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.core.config import Settings
from tests.conftest import REPO_ROOT

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    """A ``python -m app serve`` process. ``url`` is None when it listens on a Unix socket."""

    proc: subprocess.Popen[bytes]
    url: str | None
    uds: Path | None
    log_path: Path

    def client(self, **kwargs: object) -> httpx.Client:
        if self.uds is not None:
            return httpx.Client(transport=httpx.HTTPTransport(uds=str(self.uds)), base_url="http://sidecar",
                                timeout=60, **kwargs)  # type: ignore[arg-type]
        return httpx.Client(base_url=self.url or "", timeout=60, **kwargs)  # type: ignore[arg-type]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, wait, SIGKILL if it will not stop; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(10)


#: Outer variables a test server inherits (the engine backend choice); other TOKENIZER_* settings are dropped.
INHERITED = ("TOKENIZER_ENGINE", "TOKENIZER_NATIVE_DISABLE")


def serve_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a test server: defaults for every setting except :data:`INHERITED`, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("TOKENIZER_") or k in INHERITED) and k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def start_server(tmp_path: Path, *args: str, env: dict[str, str] | None = None, uds: Path | None = None,
                 ready_timeout: float = 180) -> LiveServer:
    """Start ``serve`` on a free loopback port (or ``uds``) and wait until /readyz answers 200."""
    log_path = tmp_path / f"server-{time.monotonic_ns()}.log"
    listen = ["--uds", str(uds)] if uds is not None else ["--host", "127.0.0.1", "--port", str(free_port())]
    cmd = [sys.executable, "-m", "app", "serve", *listen, "--no-access-log", *args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=serve_env(env), stdout=log, stderr=subprocess.STDOUT)
    url = None if uds is not None else f"http://127.0.0.1:{listen[-1]}"
    server = LiveServer(proc, url, uds, log_path)
    deadline = time.monotonic() + ready_timeout
    with server.client() as c:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}:\n{server.log()}")
            try:
                if c.get("/readyz", timeout=2).status_code == 200:
                    return server
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"server not ready after {ready_timeout}s:\n{server.log()}")
            time.sleep(0.2)


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
