"""``python -m app serve``: run the HTTP service under uvicorn.

Order of events:

1. Settings come from ``TOKENIZER_*`` variables, overridden by the command-line flags; they are exported back to
   the environment (what a worker's protocol reads, :mod:`app.api.protocol`).
2. With ``--workers`` > 1, Prometheus multiprocess mode is switched on: ``PROMETHEUS_MULTIPROC_DIR`` is set to a
   fresh temporary directory (removed on exit). If the operator set it (any worker count), that directory is
   emptied at start instead, so no value of an earlier run is merged into this one's.
3. The socket is bound first (``--host/--port`` with ``SO_REUSEADDR``, or ``--uds``), not listening yet: a busy
   port gives ``error: cannot start: cannot listen on …``, exit 1, before anything is loaded. Every artifact is
   then loaded and sha256-verified, the model table and price data validated and every tokenizer warmed, once, in
   this process (``--load lazy``: every artifact's sha256 is verified, but each process loads a tokenizer on its
   first use, see ``TOKENIZER_LOAD``). A failure prints ``error: cannot start: <reason naming the file>`` and
   exits with status 1; nothing ever listened.
4. The socket listens and uvicorn serves (uvloop and httptools when installed; with httptools, request headers
   have a deadline, see :mod:`app.api.protocol`): with one worker in this process, with several in workers forked
   from this process after the load, so they share the loaded store's memory (:mod:`app.cli.prefork`: a worker
   that dies is replaced). SIGTERM/SIGINT stop accepting connections at once (new ones are refused), let in-flight
   requests finish (up to ``--graceful-timeout`` seconds), then exit 0. The graceful timeout is a hard deadline
   whatever a worker is doing: a worker process still alive when it expires is killed (SIGKILL), and a
   single-worker server still busy then exits (:func:`app.cli.prefork.arm_deadline`). ``--graceful-timeout 0``
   keeps its documented meaning: no limit, no deadline.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from app.core.config import Settings, SettingsError
from app.core.model_table import ModelTableError
from app.engine.errors import EngineError


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
    p.add_argument("--load", choices=("eager", "lazy"),
                   help="eager: load every tokenizer at start-up (shared by the workers); lazy: verify them at "
                        "start-up, load each on first use (TOKENIZER_LOAD, default eager)")
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
        "load": args.load,
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


def cmd_serve(args: argparse.Namespace) -> int:
    """Verify, then serve until stopped. Exit status: 0 after a clean shutdown, 1 if start-up verification failed
    (or the socket cannot be bound), 2 for invalid settings."""
    try:
        settings = _settings(args)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    os.environ.update(settings.env())
    if settings.workers > 1:
        # numpy's bundled OpenBLAS starts a thread pool when numpy is imported (a GGUF loader imports it; the engine
        # uses no BLAS routine): one thread, so nothing but the main thread runs when the supervisor forks
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    temp_dir = None
    if settings.workers > 1 or os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip():
        # before app.api.metrics is imported (its value class is chosen then); the operator's directory is emptied
        # before any metric of this run exists
        temp_dir = _prepare_multiprocess_dir()
    try:
        return _serve(settings)
    finally:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


def _serve(settings: Settings) -> int:
    from app.cli import prefork

    where = str(settings.uds) if settings.uds is not None else f"{settings.host}:{settings.port}"
    try:
        sock = prefork.bind(settings)  # before loading anything: a second `serve` on the same port fails at once
    except OSError as exc:
        print(f"error: cannot start: cannot listen on {where} ({exc.strerror or exc})", file=sys.stderr)
        return 1
    try:
        from app.api.deps import ServiceState
        from app.api.main import create_app

        try:
            state = ServiceState.load(settings)
            state.warm()  # what first use builds, built once here (shared by forked workers); lazy: nothing loaded
        except (EngineError, ModelTableError, OSError) as exc:
            print(f"error: cannot start: {exc}", file=sys.stderr)
            return 1
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError, MemoryError) as exc:
            # the last line of defence (the loaders name what they check): one line, before anything listens
            print(f"error: cannot start: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
            return 1
        return prefork.serve_loaded(settings, create_app(settings, state), sock)
    finally:
        sock.close()
        if settings.uds is not None:
            prefork.remove_socket_file(settings.uds)
