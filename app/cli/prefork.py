"""Serving the loaded service: in this process (one worker), or by a pre-fork supervisor whose workers share it.

``serve`` loads and verifies everything once, then calls :func:`serve_loaded` with the listening socket
(:func:`bind`, bound but not yet listening: until the state is loaded, connections are refused).

One worker: uvicorn's own :class:`uvicorn.Server` serves in this process.

Several workers: :class:`Supervisor`. The loaded state (tokenizers, model table, price data) and the application
object are built once in the supervisor and frozen out of the garbage collector (``gc.freeze``), then the supervisor
``fork()``\\ s the workers. Each worker runs ``uvicorn.Server(config).run(sockets=[sock])`` on the inherited socket (its
event loop is created after the fork) and runs the app's lifespan itself (per-process limiters, metric files and
series, readiness). The pages of the loaded state are shared copy-on-write: a worker costs only the pages it writes
(its caches, its interpreter's refcounts on touched objects, its metrics), not a copy of the store.

What is per process after the fork, and why forking is safe for it: no thread runs in the supervisor when it forks
(checked: :func:`assert_single_thread`; ``serve`` sets ``OPENBLAS_NUM_THREADS=1`` so that numpy's OpenBLAS, imported
by a GGUF loader, starts no thread pool), so no lock is held; the engine's pre-token LRU caches are copied and then
fill independently; the anyio capacity limiters, uvicorn's event loop and thread pool are created by each worker
after the fork; the Prometheus multiprocess files are per process: the supervisor removes its own before forking and
each worker reserves fresh files for its pid (:mod:`app.api.metrics` does it at the fork); ``random`` is reseeded at
fork by the standard library.

Supervision: SIGTERM or SIGINT makes the supervisor close its copy of the listening socket at once (each worker
closes its own as it starts shutting down, so new connections are refused), forward SIGTERM to the workers and wait
for them up to the graceful timeout; a worker still alive then is killed (SIGKILL). The supervisor then exits 0. A
worker that dies on its own is replaced by a fresh fork (one log line); a worker that keeps dying young is restarted
after a growing delay (0.5 s doubling up to 30 s) instead of in a tight loop. Workers get SIGTERM if the supervisor
itself dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import math
import os
import signal
import socket
import stat
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from app.core.config import Settings

log = logging.getLogger("uvicorn.error")

#: Pending connections the kernel queues on the listening socket (uvicorn's default).
BACKLOG = 2048
#: A worker that lived less than this (seconds) died young: its replacement waits (see :meth:`Supervisor.backoff`).
STABLE_SECONDS = 10.0
FIRST_DELAY = 0.5
MAX_DELAY = 30.0
_WATCHED = (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)
_PR_SET_PDEATHSIG = 1


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


def bind(settings: Settings) -> socket.socket:
    """The service's socket, bound to ``--uds`` or ``--host/--port`` (``SO_REUSEADDR``) but not listening yet, so a
    connection is refused until :func:`serve_loaded` starts listening. A stale socket file at the ``--uds`` path is
    replaced (as asyncio's Unix server does); the socket file is made world-writable (as uvicorn does). Raises
    OSError (port in use, bad address, ...)."""
    if settings.uds is not None:
        path = str(settings.uds)
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(path)
            os.chmod(path, 0o666)
        except OSError:
            sock.close()
            raise
        return sock
    infos = socket.getaddrinfo(settings.host, settings.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, type_, proto, _, address = infos[0]
    sock = socket.socket(family, type_, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def describe(sock: socket.socket) -> str:
    """Where ``sock`` listens, for the log: ``http://host:port`` or ``unix socket <path>``."""
    name = sock.getsockname()
    if sock.family == socket.AF_UNIX:
        return f"unix socket {name}"
    host = name[0] if sock.family == socket.AF_INET else f"[{name[0]}]"
    return f"http://{host}:{name[1]}"


def serve_loaded(settings: Settings, app: Any, sock: socket.socket) -> int:
    """Serve ``app`` (built from the loaded state) on the bound ``sock`` until SIGTERM/SIGINT: in this process with
    one worker, else through a :class:`Supervisor`. Returns the exit status: 0 after a clean shutdown, 3 if the single
    worker failed to start (as uvicorn does)."""
    config = uvicorn.Config(app, **{**uvicorn_options(settings), "workers": 1})
    grace = settings.graceful_timeout if settings.graceful_timeout > 0 else None
    sock.listen(BACKLOG)
    log.info("Listening on %s (%d worker%s)", describe(sock), settings.workers, "s" if settings.workers > 1 else "")
    if settings.workers == 1:
        return run_server(config, sock, grace)
    gc.collect()
    gc.freeze()  # the loaded state stays out of every worker's collections: fewer pages written after the fork
    return Supervisor(config, sock, settings.workers, grace).run()


class _Server(uvicorn.Server):
    """uvicorn's server, with the hard deadline (:func:`arm_deadline`) armed by the first stop signal, and the
    rehearsal through its HTTP protocol (:func:`app.api.rehearsal.rehearse_protocol`) between the app's start-up
    and the first accepted connection."""

    def __init__(self, config: uvicorn.Config, grace: float | None) -> None:
        super().__init__(config)
        self.grace = grace

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        app_startup = self.lifespan.startup

        async def startup_then_rehearse() -> None:
            from app.api.rehearsal import rehearse_protocol  # here: app.api.metrics is imported once serve set it up

            await app_startup()
            svc = getattr(getattr(self.config.app, "state", None), "service", None)
            if self.lifespan.should_exit or svc is None:
                return
            config, state, app_state = self.config, ServerState(), self.lifespan.state

            def protocol() -> asyncio.Protocol:
                return config.http_protocol_class(config=config, server_state=state,  # type: ignore[call-arg]
                                                  app_state=app_state)

            sent, failed = await rehearse_protocol(protocol, svc.tokenizers.loaded(), svc.settings.auth_token)
            if failed:
                log.warning("start-up rehearsal through the HTTP protocol: %d of %d requests were not answered 200",
                            failed, sent)
            else:
                log.debug("start-up rehearsal through the HTTP protocol: %d requests", sent)

        self.lifespan.startup = startup_then_rehearse  # type: ignore[method-assign]
        await super().startup(sockets)

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self.grace is not None:
            arm_deadline(self.grace)
        super().handle_exit(sig, frame)


def run_server(config: uvicorn.Config, sock: socket.socket, grace: float | None) -> int:
    """``uvicorn.Server(config).run(sockets=[sock])`` in this process; a drained SIGTERM exits 0 (uvicorn re-raises
    the signal after its graceful shutdown, which would end the process with status -15). Returns 0 after a clean
    shutdown, else uvicorn's status (3: the app failed to start)."""
    server = _Server(config, grace)
    previous = signal.signal(signal.SIGTERM, _exit_cleanly)  # uvicorn re-raises SIGTERM through this handler
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    except SystemExit as exc:
        if exc.code not in (0, None):
            return exc.code if isinstance(exc.code, int) else 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0 if server.started else 3


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def assert_single_thread() -> None:
    """Raise RuntimeError unless this process runs exactly one thread, Python's or native (``/proc/self/task``):
    a fork copies only the calling thread, so a lock held by another thread would stay locked in every worker."""
    names = [t.name for t in threading.enumerate()]
    try:
        tasks = len(os.listdir("/proc/self/task"))
    except OSError:
        tasks = 1
    if len(names) != 1 or tasks != 1:
        raise RuntimeError(f"cannot fork workers: {tasks} threads run in the supervisor (Python threads: {names})")


class Supervisor:
    """Forks and watches ``workers`` processes serving ``config``'s app on ``sock`` (see the module docstring)."""

    def __init__(self, config: uvicorn.Config, sock: socket.socket, workers: int, grace: float | None) -> None:
        self.config = config
        self.sock = sock
        self.count = workers
        self.grace = grace
        self.pid = os.getpid()
        self.workers: dict[int, int] = {}  # pid -> slot
        self.born: dict[int, float] = {}  # pid -> monotonic start time
        self.young_deaths = [0] * workers  # per slot: consecutive deaths of workers that died young
        self.due: dict[int, float] = {}  # slot -> monotonic time its replacement is due
        self._mask: set[Any] = set()

    # ------------------------------------------------------------------ the supervisor's loop

    def run(self) -> int:
        """Fork the workers, watch them until SIGTERM/SIGINT, stop them; returns 0."""
        assert_single_thread()
        from app.api import metrics

        metrics.release_process_files()  # the supervisor never serves: no values of its own in the directory
        # An ignored SIGCHLD inherited from the parent (dispositions survive exec) makes the kernel reap dead workers
        # itself: waitpid would never see them, and none would be replaced. The supervisor reaps its own children.
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
        try:
            for slot in range(self.count):
                self.spawn(slot)
            signum = self.watch()
            self.stop(signum)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)
        return 0

    def watch(self) -> int:
        """Replace workers that die until a stop signal arrives; returns it."""
        while True:
            now = time.monotonic()
            wait = min([max(0.0, t - now) for t in self.due.values()], default=1.0)
            info = signal.sigtimedwait(_WATCHED, min(wait, 1.0))
            if info is not None and info.si_signo in (signal.SIGTERM, signal.SIGINT):
                return info.si_signo
            for pid, slot, status in self.reap():
                self.died(pid, slot, status)
            now = time.monotonic()
            for slot, when in list(self.due.items()):
                if when <= now:
                    del self.due[slot]
                    self.spawn(slot)

    def stop(self, signum: int) -> None:
        """Stop listening at once, SIGTERM the workers, wait for them up to the graceful timeout, SIGKILL the rest."""
        self.sock.close()
        self.due.clear()
        log.info("Received %s: stopping %d worker(s)", signal.Signals(signum).name, len(self.workers))
        self.signal_workers(signal.SIGTERM)
        deadline = None if self.grace is None else time.monotonic() + self.grace
        while self.workers:
            remaining = 1.0 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                break
            info = signal.sigtimedwait(_WATCHED, min(remaining, 1.0))
            if info is not None and info.si_signo == signal.SIGINT:
                self.signal_workers(signal.SIGINT)  # a second Ctrl+C: uvicorn's workers quit without waiting
            for pid, _slot, _status in self.reap():
                self.forget(pid)
        for pid in list(self.workers):
            print(f"error: worker {pid} still busy after the graceful timeout ({self.grace:g} s); killed",
                  file=sys.stderr, flush=True)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            self.forget(pid)
        log.info("Stopped all workers")

    def signal_workers(self, signum: int) -> None:
        for pid in self.workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def reap(self) -> list[tuple[int, int, int]]:
        """The workers that have exited since the last call: (pid, slot, wait status)."""
        out = []
        while self.workers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            slot = self.workers.pop(pid, None)
            if slot is not None:
                out.append((pid, slot, status))
        return out

    def died(self, pid: int, slot: int, status: int) -> None:
        """A worker exited while the service runs: log it, forget its metrics, schedule its replacement."""
        lived = time.monotonic() - self.born.get(pid, 0.0)
        self.forget(pid)
        young = lived < STABLE_SECONDS
        self.young_deaths[slot] = self.young_deaths[slot] + 1 if young else 0
        delay = self.backoff(self.young_deaths[slot])
        how = (f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exit status {os.WEXITSTATUS(status)}")
        later = f" in {delay:g} s (it keeps dying young)" if delay else ""
        log.error("worker %d died (%s) after %.1f s; starting a new one%s", pid, how, lived, later)
        self.due[slot] = time.monotonic() + delay

    @staticmethod
    def backoff(young_deaths: int) -> float:
        """Seconds before replacing a worker after its slot's ``young_deaths``-th consecutive early death: the first
        at once, then 0.5 s doubling up to 30 s."""
        if young_deaths <= 1:
            return 0.0
        return float(min(MAX_DELAY, FIRST_DELAY * 2 ** (young_deaths - 2)))

    def forget(self, pid: int) -> None:
        """Drop what the supervisor knows of an exited worker, and its live metrics (a killed worker never removed
        its in-flight gauge; :func:`app.api.metrics.forget_process` does what its clean shutdown would have)."""
        self.born.pop(pid, None)
        from app.api import metrics

        metrics.forget_process(pid)

    # ------------------------------------------------------------------ a worker

    def spawn(self, slot: int) -> None:
        """Fork the worker of ``slot``; on failure (no memory, process limit) retry after a delay."""
        assert_single_thread()
        try:
            pid = os.fork()
        except OSError as exc:
            self.young_deaths[slot] += 1
            delay = max(FIRST_DELAY, self.backoff(self.young_deaths[slot]))
            log.error("cannot fork a worker (%s); retrying in %g s", exc, delay)
            self.due[slot] = time.monotonic() + delay
            return
        if pid == 0:
            self.worker()  # never returns
        self.workers[pid] = slot
        self.born[pid] = time.monotonic()

    def worker(self) -> None:
        """The forked worker: serve until stopped, then end the process (never return into the supervisor's code)."""
        code = 1
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)
            _die_with_parent(self.pid)
            code = run_server(self.config, self.sock, self.grace)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 -- whatever happens, this process must end here
            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to send this process SIGTERM when its parent dies (Linux); exit if it is already gone."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


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


def remove_socket_file(sock_path: Path | None) -> None:
    """Remove the ``--uds`` socket file (on exit)."""
    if sock_path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(sock_path)
