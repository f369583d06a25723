"""Start and stop a real ``python -m app serve`` process on loopback for the reliability runs and tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from .load import worker_pids

REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The current environment without ``TOKENIZER_*``/``PROMETHEUS_MULTIPROC_DIR``, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENIZER_") and k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


@dataclass
class Server:
    """A running ``serve`` process; its stdout and stderr go to ``log_path``."""

    proc: subprocess.Popen[bytes]
    url: str
    port: int
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def workers(self) -> list[int]:
        """Current worker pids (see :func:`bench.reliability.load.worker_pids`)."""
        return worker_pids(self.proc.pid)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, **kwargs)  # type: ignore[arg-type]

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(30)


def start(log_path: Path, *args: str, env: dict[str, str] | None = None, access_log: bool = False,
          ready_timeout: float = 180) -> Server:
    """``python -m app serve --host 127.0.0.1 --port <free> *args``; returns once /readyz is 200 and, with several
    workers, every worker has logged that its start-up is complete (so keep the log level at info or below).
    Raises RuntimeError (with the log) if it exits or is not ready in time."""
    port = free_port()
    cmd = [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port), *args]
    if not access_log:
        cmd.append("--no-access-log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=serve_env(env), stdout=log, stderr=subprocess.STDOUT)
    server = Server(proc, f"http://127.0.0.1:{port}", port, log_path)
    want = int(args[args.index("--workers") + 1]) if "--workers" in args else 1
    deadline = time.monotonic() + ready_timeout
    with httpx.Client(base_url=server.url, timeout=5) as c:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}:\n{server.log()}")
            try:
                if c.get("/readyz").status_code == 200 and (
                        want == 1 or server.log().count("Application startup complete.") >= want):
                    return server
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"server not ready after {ready_timeout}s:\n{server.log()}")
            time.sleep(0.2)
