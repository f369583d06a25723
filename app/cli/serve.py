"""``python -m app serve``: run the HTTP service under uvicorn.

Order of events:

1. Settings come from ``TOKENIZER_*`` variables, overridden by the command-line flags; they are exported back to
   the environment so every worker process sees the same values.
2. The port is checked first (a busy one: ``error: cannot start: cannot listen on …``, exit 1, before anything
   is loaded). Every artifact is loaded and sha256-verified and the model table validated *before* uvicorn
   starts. A failure prints ``error: cannot start: <reason naming the file>`` and exits with status 1; nothing
   listens.
3. With ``--workers`` > 1, Prometheus multiprocess mode is switched on: ``PROMETHEUS_MULTIPROC_DIR`` is set to a
   fresh temporary directory (removed on exit). If the operator set it (any worker count), that directory is
   emptied at start instead, so no value of an earlier run is merged into this one's.
4. uvicorn serves (uvloop and httptools when installed; with httptools, request headers have a deadline, see
   :mod:`app.api.protocol`) on ``--host/--port`` or ``--uds``. SIGTERM/SIGINT stop
   accepting connections at once (new ones are refused), let in-flight requests finish (up to
   ``--graceful-timeout`` seconds), then exit 0 (see :func:`run_uvicorn`). The graceful timeout is a hard
   deadline whatever a worker is doing: a worker process still alive when it expires is killed (SIGKILL), and a
   single-worker server still busy then exits (:func:`arm_deadline`). ``--graceful-timeout 0`` keeps its
   documented meaning: no limit, no deadline.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from app.core.config import Settings, SettingsError
from app.core.model_table import ModelTableError
from app.engine.errors import EngineError

APP_FACTORY = "app.api.main:create_app"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("serve", help="run the HTTP service (settings: TOKENIZER_* variables)")
    p.add_argument("--host", help="bind address (TOKENIZER_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="TCP port (TOKENIZER_PORT, default 8000)")
    p.add_argument("--uds", help="listen on this Unix domain socket instead of TCP (TOKENIZER_UDS)")
    p.add_argument("--workers", type=int, help="worker processes (TOKENIZER_WORKERS, default 1)")
    p.add_argument("--store", help="tokenizer store directory (TOKENIZER_STORE, default: bundled store)")
    p.add_argument("--models-file", help="model table JSON (TOKENIZER_MODELS_FILE, default <store>/models.json)")
    p.add_argument("--log-level", help="critical|error|warning|info|debug|trace (TOKENIZER_LOG_LEVEL)")
    p.add_argument("--no-access-log", action="store_true", help="no per-request log lines (TOKENIZER_ACCESS_LOG)")
    p.add_argument("--graceful-timeout", type=float, help="seconds to let in-flight requests finish on SIGTERM")
    p.set_defaults(handler=cmd_serve)


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {
        "host": args.host,
        "port": args.port,
        "uds": Path(args.uds) if args.uds else None,
        "workers": args.workers,
        "store": Path(args.store).expanduser().resolve() if args.store else None,
        "models_file": Path(args.models_file).expanduser().resolve() if args.models_file else None,
        "log_level": args.log_level,
        "access_log": False if args.no_access_log else None,
        "graceful_timeout": args.graceful_timeout,
    }
    return Settings.from_env(**overrides)


def _prepare_multiprocess_dir() -> str | None:
    """Point ``PROMETHEUS_MULTIPROC_DIR`` at an empty directory; returns the directory to remove on exit."""
    existing = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip()
    if existing:
        path = Path(existing)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()
        return None
    created = tempfile.mkdtemp(prefix="tokenizer-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = created
    return created


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The keyword arguments of ``uvicorn.run`` for ``settings`` (also used by the benchmark's floor app)."""
    try:
        from app.api.protocol import HeaderTimeoutProtocol

        http: Any = HeaderTimeoutProtocol  # httptools, with a deadline for request headers
    except ImportError:  # no httptools: uvicorn's h11 protocol, without the header deadline
        http = "auto"
    return dict(
        host=settings.host,
        port=settings.port,
        uds=str(settings.uds) if settings.uds else None,
        workers=settings.workers,
        log_level=settings.log_level.lower(),
        access_log=settings.access_log,
        timeout_graceful_shutdown=math.ceil(settings.graceful_timeout) if settings.graceful_timeout > 0 else None,
        loop="auto",
        http=http,
        server_header=False,
    )


def _port_busy(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on (e.g. "Address already in use"), or None if it can (checked by
    binding a socket the way uvicorn does, then closing it)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return str(exc.strerror or exc)
    family, type_, proto, _, address = infos[0]
    with socket.socket(family, type_, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return str(exc.strerror or exc)
    return None


def cmd_serve(args: argparse.Namespace) -> int:
    """Verify, then serve until stopped. Exit status: 0 after a clean shutdown, 1 if start-up verification failed,
    2 for invalid settings."""
    try:
        settings = _settings(args)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    os.environ.update(settings.env())
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip():
        _prepare_multiprocess_dir()  # the operator's directory: emptied before any metric of this run exists

    if settings.uds is None:
        busy = _port_busy(settings.host, settings.port)
        if busy is not None:  # before loading anything: a second `serve` on the same port fails at once
            print(f"error: cannot start: cannot listen on {settings.host}:{settings.port} ({busy})", file=sys.stderr)
            return 1

    from app.api.deps import ServiceState
    from app.engine import reset

    try:
        ServiceState.load(settings)
    except (EngineError, ModelTableError, OSError) as exc:
        print(f"error: cannot start: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError, MemoryError) as exc:
        # the last line of defence (the loaders name what they check): one line, before any worker starts
        print(f"error: cannot start: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
        return 1
    temp_dir = None
    if settings.workers > 1:
        reset()  # the workers load their own copies; free the parent's
        gc.collect()
        if not os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip():
            temp_dir = _prepare_multiprocess_dir()

    try:
        return run_uvicorn(uvicorn_options(settings))
    finally:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


def run_uvicorn(options: dict[str, Any]) -> int:
    """``uvicorn.run(APP_FACTORY, **options)``, except for two things on SIGTERM/SIGINT.

    With several workers, the supervisor closes its copy of the listening socket as soon as the signal arrives
    (each worker closes its own when it starts shutting down), so new connections are refused while in-flight
    requests drain; uvicorn's supervisor kept it open until every worker had exited, and the kernel kept accepting
    connections that nobody would ever serve. With one worker, a drained SIGTERM exits 0 (uvicorn re-raises the
    signal after its graceful shutdown, which would end the process with status -15).
    Returns the exit status (3 if a single worker failed to start, as uvicorn does).
    """
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    grace: float | None = options.get("timeout_graceful_shutdown")  # None: 0, no limit (documented)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if grace is not None:
                arm_deadline(grace)
            super().handle_exit(sig, frame)

    class Supervisor(Multiprocess):
        def join_all(self) -> None:  # uvicorn's waits for ever: a worker stuck in C code never exits
            if grace is None:
                super().join_all()
                return
            deadline = time.monotonic() + grace
            for process in self.processes:
                process.process.join(max(0.0, deadline - time.monotonic()))
            for process in self.processes:
                if process.process.is_alive():
                    print(f"error: worker {process.process.pid} still busy after the graceful timeout "
                          f"({grace:g} s); killed", file=sys.stderr)
                    process.kill()
                    process.process.join()

        def _stop_listening(self) -> None:
            for sock in self.sockets:
                sock.close()

        def handle_term(self) -> None:
            self._stop_listening()
            super().handle_term()

        def handle_int(self) -> None:
            self._stop_listening()
            super().handle_int()

    config = uvicorn.Config(APP_FACTORY, factory=True, **options)
    server = Server(config)
    try:
        if config.workers > 1:
            Supervisor(config, sockets=[config.bind_socket()]).run()
            return 0
        previous = signal.signal(signal.SIGTERM, _exit_cleanly)  # uvicorn re-raises SIGTERM through this handler
        try:
            server.run()
        finally:
            signal.signal(signal.SIGTERM, previous)
    except KeyboardInterrupt:
        pass
    finally:
        if config.uds and os.path.exists(config.uds):
            os.remove(config.uds)
    return 0 if server.started or config.workers > 1 else 3


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


_armed = threading.Event()


def arm_deadline(seconds: float) -> None:
    """Once per process: end it ``seconds`` from now (``os._exit(0)``, after flushing stdio) if it is still
    running. uvicorn's graceful shutdown stops waiting for connections at the timeout, but the interpreter then
    joins every non-daemon thread (a thread-pool thread stuck in a request holds it for ever) and shutdown hooks
    may hang; this daemon thread is the hard stop."""
    if _armed.is_set():
        return
    _armed.set()

    def stop() -> None:
        time.sleep(seconds)
        print(f"error: still busy {seconds:g} s after the stop signal (graceful timeout); exiting", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    threading.Thread(target=stop, name="serve-deadline", daemon=True).start()
