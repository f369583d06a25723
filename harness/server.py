"""Start and stop a real ``python -m app serve`` process on loopback (TCP or a Unix socket).

The one launcher for every real-process test and benchmark: ``tests/api``, ``tests/reliability`` and the scripts in
``bench/reliability``.
"""

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

REPO_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Outer variables a started server inherits (the engine backend choice, and where its compiled artifact cache is:
#: the test suite's private directory, or what a benchmark chooses); other TOKENIZER_* settings are dropped.
INHERITED = ("TOKENIZER_ENGINE", "TOKENIZER_NATIVE_DISABLE", "TOKENIZER_ARTIFACT_CACHE")
#: What a started server loads unless ``extra`` says otherwise: the tiktoken-format tokenizers (the HTTP behaviour
#: under test is the same for every family, and loading the whole store costs seconds and ~1 GiB per worker; the
#: in-process ``client`` fixtures and tests/engine cover every tokenizer). ``TOKENIZER_TOKENIZERS=""`` in ``extra``
#: loads the whole store.
DEFAULT_TOKENIZERS = "gpt2,cl100k_base,o200k_base,o200k_harmony,llama3,p50k_base,p50k_edit"


def serve_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a started server: defaults for every setting except :data:`INHERITED`, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("TOKENIZER_") or k in INHERITED) and k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["TOKENIZER_TOKENIZERS"] = DEFAULT_TOKENIZERS
    env.update(extra or {})
    if not env["TOKENIZER_TOKENIZERS"]:
        del env["TOKENIZER_TOKENIZERS"]
    return env


@dataclass
class Server:
    """A running ``serve`` process; its stdout and stderr go to ``log_path``. ``url`` and ``port`` are None when it
    listens on the Unix socket ``uds``."""

    proc: subprocess.Popen[bytes]
    url: str | None
    port: int | None
    log_path: Path
    uds: Path | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def workers(self) -> list[int]:
        """Current worker pids (see :func:`harness.load.worker_pids`)."""
        return worker_pids(self.proc.pid)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def client(self, **kwargs: object) -> httpx.Client:
        """A client for this server (over the Unix socket when it listens on one); default timeout 60 s."""
        kwargs.setdefault("timeout", 60)
        if self.uds is not None:
            return httpx.Client(transport=httpx.HTTPTransport(uds=str(self.uds)), base_url="http://sidecar",
                                **kwargs)  # type: ignore[arg-type]
        return httpx.Client(base_url=self.url or "", **kwargs)  # type: ignore[arg-type]

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(30)


def start(log_path: Path, *args: str, env: dict[str, str] | None = None, uds: Path | None = None,
          access_log: bool = False, ready_timeout: float = 180, poll: float = 0.2) -> Server:
    """``python -m app serve --host 127.0.0.1 --port <free> *args`` (or ``--uds uds``); returns once /readyz is 200
    and, with several workers, every worker has logged that its start-up is complete (so keep the log level at info
    or below), polling every ``poll`` s. Raises RuntimeError (with the log) if it exits or is not ready in time."""
    port = None if uds is not None else free_port()
    listen = ["--uds", str(uds)] if uds is not None else ["--host", "127.0.0.1", "--port", str(port)]
    cmd = [sys.executable, "-m", "app", "serve", *listen, *args]
    if not access_log:
        cmd.append("--no-access-log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=serve_env(env), stdout=log, stderr=subprocess.STDOUT)
    server = Server(proc, None if port is None else f"http://127.0.0.1:{port}", port, log_path, uds)
    want = int(args[args.index("--workers") + 1]) if "--workers" in args else 1
    deadline = time.monotonic() + ready_timeout
    with server.client(timeout=5) as c:
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
            time.sleep(poll)
