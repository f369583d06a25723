"""``serve --workers N``: one supervisor loads the store once and forks workers that share it (app/cli/prefork.py).

Real ``python -m app serve`` processes: both workers answer from one load, their memory is shared with the
supervisor, a killed worker is replaced and the service keeps answering, SIGTERM drains and exits 0 (also when the
graceful timeout cuts a request short), and a failing artifact or a busy port stops start-up with status 1 before
anything listens.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.cli.prefork import Supervisor
from app.engine import get_tokenizer
from tests.conftest import REPO_ROOT

from .conftest import LiveServer, free_port, serve_env

pytestmark = pytest.mark.timeout(300)

Start = Callable[..., LiveServer]


def _smaps(pid: int) -> dict[str, int]:
    """RSS and USS (private clean + dirty) in KiB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == "kB":
            fields[parts[0].rstrip(":")] = int(parts[1])
    return {"rss": fields["Rss"], "uss": fields["Private_Clean"] + fields["Private_Dirty"]}


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def _answered_by(mp_dir: Path) -> set[int]:
    """The pids with a request-latency file in the metrics directory (a process that answered a request)."""
    return {int(p.name.rsplit("_", 1)[1][:-3]) for p in mp_dir.glob("histogram_*.db")}


def _count_until_both_answer(server: LiveServer, mp_dir: Path, pids: set[int]) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    for i in range(400):
        with server.client() as c:  # a fresh connection each time: the kernel picks the worker
            text = f"which worker answers {i}?"
            r = c.post("/count", json={"tokenizer": "cl100k_base", "text": text})
            assert r.status_code == 200 and r.json()["count"] == tokenizer.count(text), r.text
        if pids <= _answered_by(mp_dir):
            return
    raise AssertionError(f"not every worker answered: {_answered_by(mp_dir)} vs {pids}")


def test_two_forked_workers_answer_from_one_load(live_server: Start, tmp_path: Path) -> None:
    mp_dir = tmp_path / "prom"
    server = live_server("--workers", "2", env={"PROMETHEUS_MULTIPROC_DIR": str(mp_dir)})
    workers = server.workers()
    assert len(workers) == 2 and server.pid not in workers
    assert all(_cmdline(pid) == _cmdline(server.pid) for pid in workers)  # forked, not spawned
    log = server.log()
    assert log.count("Started server process") == 2 and "(2 workers)" in log
    assert not [p for p in mp_dir.glob(f"*_{server.pid}.db")], "the supervisor has metrics files of its own"
    _count_until_both_answer(server, mp_dir, set(workers))
    # The loaded tokenizers are the supervisor's pages, shared: most of a worker's resident memory is not its own.
    for pid in workers:
        mem = _smaps(pid)
        assert mem["uss"] < 0.5 * mem["rss"], (pid, mem, _smaps(server.pid))
    with server.client() as c:
        text = c.get("/metrics").text
    assert "tokenizer_http_requests_in_flight 1.0" in text
    assert server.stop() == 0


def test_workers_fork_after_a_loader_that_imports_numpy(live_server: Start) -> None:
    """llama2 is read from GGUF with numpy, whose OpenBLAS starts a thread pool at import unless told not to: the
    supervisor must still be single-threaded when it forks."""
    server = live_server("--workers", "2", env={"TOKENIZER_TOKENIZERS": "llama2"})
    assert len(server.workers()) == 2
    with server.client() as c:
        r = c.post("/count", json={"tokenizer": "llama2", "text": "forked after numpy"})
        assert r.status_code == 200 and r.json()["count"] == get_tokenizer("llama2").count("forked after numpy")
    assert server.stop() == 0


@pytest.mark.parametrize("parent_sigchld", [signal.SIG_DFL, signal.SIG_IGN], ids=["default", "ignored"])
def test_killed_worker_is_replaced_by_a_fork(live_server: Start, tmp_path: Path,
                                             parent_sigchld: signal.Handlers) -> None:
    """Also when ``serve`` inherits an ignored SIGCHLD (a parent's disposition survives exec; some libraries in the
    suite's own process set it), which would let the kernel reap dead workers behind the supervisor's back."""
    mp_dir = tmp_path / "prom"
    previous = signal.signal(signal.SIGCHLD, parent_sigchld)
    try:
        server = live_server("--workers", "2", env={"PROMETHEUS_MULTIPROC_DIR": str(mp_dir)})
    finally:
        signal.signal(signal.SIGCHLD, previous)
    victim, survivor = server.workers()
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (len(server.workers()) != 2 or victim in server.workers()):
        time.sleep(0.1)
    now = server.workers()
    assert len(now) == 2 and victim not in now and survivor in now, (now, server.pid, server.log()[-4000:])
    replacement = (set(now) - {survivor}).pop()
    assert _cmdline(replacement) == _cmdline(server.pid)
    assert f"worker {victim} died (killed by signal 9)" in server.log()
    assert not list(mp_dir.glob(f"gauge_livesum_{victim}.db")), "the dead worker's live gauges were kept"
    _count_until_both_answer(server, mp_dir, {survivor, replacement})
    assert server.stop() == 0


def test_sigterm_with_a_stuck_request_exits_0_at_the_graceful_timeout(live_server: Start) -> None:
    server = live_server("--workers", "2", "--graceful-timeout", "2")
    assert server.port is not None
    stuck = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    stuck.sendall(b"POST /count HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    time.sleep(0.5)
    workers = server.workers()
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(30) == 0
    assert time.monotonic() - t0 < 10
    stuck.close()
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists() and b"app" in _cmdline(pid)]


def test_failing_artifact_exits_1_before_listening(store_copy: Path) -> None:
    artifact = store_copy / "cl100k_base.tiktoken"
    data = bytearray(artifact.read_bytes())
    data[len(data) // 2] ^= 0x01
    artifact.write_bytes(bytes(data))
    port = free_port()
    cmd = [sys.executable, "-m", "app", "serve", "--port", str(port), "--workers", "2", "--store", str(store_copy)]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=serve_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    refused = 0
    while proc.poll() is None:  # while it loads, the port is bound but nothing listens
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            raise AssertionError("a connection was accepted during a start-up that fails")
        except ConnectionRefusedError:
            refused += 1
        time.sleep(0.05)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert "cannot start" in err and "cl100k_base.tiktoken" in err
    assert "Listening on" not in out + err and "Started server process" not in out + err
    assert "Traceback" not in out + err


def test_busy_port_exits_1_before_loading(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "app", "serve", "--port", str(port), "--workers", "2"],
                              cwd=REPO_ROOT, env=serve_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "in use" in proc.stderr
    assert time.monotonic() - t0 < 10  # nothing was loaded


def test_unix_socket_with_two_workers(live_server: Start, tmp_path: Path) -> None:
    uds = tmp_path / "s.sock"
    server = live_server("--workers", "2", uds=uds)
    with server.client() as c:
        r = c.post("/count", json={"tokenizer": "gpt2", "text": "over a unix socket"})
        assert r.status_code == 200 and r.json()["count"] == get_tokenizer("gpt2").count("over a unix socket")
    assert server.stop() == 0
    assert not uds.exists()


def test_restart_backoff() -> None:
    assert [Supervisor.backoff(n) for n in range(1, 9)] == [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0]


def test_one_worker_serves_in_the_supervisor(live_server: Start) -> None:
    server = live_server("--workers", "1")
    assert server.workers() == [server.pid]
    with server.client() as c:
        assert c.get("/readyz").json()["status"] == "ready"
    assert server.stop() == 0


def test_first_connection_waits_for_the_workers(tmp_path: Path) -> None:
    """A client that connects as soon as the port answers gets served (the backlog holds it until a worker runs)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port), "--workers", "2",
                             "--no-access-log"], cwd=REPO_ROOT, env=serve_env({"TOKENIZER_TOKENIZERS": "gpt2"}),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None and time.monotonic() < deadline
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30)
                break
            except httpx.ConnectError:
                time.sleep(0.02)
        assert r.status_code == 200, r.text
        body = httpx.post(f"http://127.0.0.1:{port}/count", json={"tokenizer": "gpt2", "text": "hi"}, timeout=30)
        assert json.loads(body.text)["count"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


# ---------------------------------------------------------------------------- TOKENIZER_LOAD=lazy


def test_lazy_load_verifies_at_start_up_and_loads_on_first_use() -> None:
    from fastapi.testclient import TestClient

    from app.api.main import create_app
    from app.core.config import Settings

    app = create_app(Settings(load="lazy", tokenizers="gpt2,cl100k_base"))
    with TestClient(app) as c:
        table = app.state.service.tokenizers
        assert c.get("/readyz").json() == {"status": "ready", "tokenizers": ["gpt2", "cl100k_base"]}
        assert table.loaded() == []
        assert c.get("/metrics").status_code == 200 and table.loaded() == []  # a scrape loads nothing
        r = c.post("/count", json={"tokenizer": "gpt2", "text": "loaded on first use"})
        assert r.status_code == 200 and r.json()["count"] == get_tokenizer("gpt2").count("loaded on first use")
        assert [t.name for t in table.loaded()] == ["gpt2"]
        assert c.post("/count", json={"tokenizer": "o200k_base", "text": "x"}).status_code == 422  # not configured


def test_lazy_load_still_refuses_a_damaged_artifact_at_start_up(store_copy: Path) -> None:
    artifact = store_copy / "gpt2.tiktoken"
    data = bytearray(artifact.read_bytes())
    data[100] ^= 0x01
    artifact.write_bytes(bytes(data))
    proc = subprocess.run([sys.executable, "-m", "app", "serve", "--port", str(free_port()), "--workers", "2",
                           "--load", "lazy", "--store", str(store_copy)], cwd=REPO_ROOT, env=serve_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "cannot start" in proc.stderr and "gpt2.tiktoken" in proc.stderr and "sha256" in proc.stderr
    assert "Listening on" not in proc.stdout + proc.stderr


def test_lazy_load_verifies_through_the_artifact_cache(store_copy: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Lazy start-up checks an ``xz`` artifact through the compiled artifact cache: decompressed on a cold cache,
    only hashed on a warm one, and a damaged copy is still refused, naming the file."""
    import lzma

    from app.api.deps import ServiceState
    from app.core.config import Settings
    from app.engine.errors import ArtifactError

    settings = Settings(load="lazy", tokenizers="mistral-v1", store=store_copy, artifact_cache=str(tmp_path / "c"))
    assert ServiceState.load(settings).tokenizers.loaded() == []  # cold: decompressed and checked, recorded

    def refuse(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("decompressed")

    with monkeypatch.context() as patch:
        patch.setattr(lzma, "decompress", refuse)
        ServiceState.load(settings)  # warm: the compressed bytes' hash matches the record, no decompression

    artifact = store_copy / "mistral-v1.model.xz"
    data = bytearray(artifact.read_bytes())
    data[len(data) // 2] ^= 0x01
    artifact.write_bytes(bytes(data))
    with pytest.raises(ArtifactError) as caught:
        ServiceState.load(settings)
    assert "mistral-v1.model.xz" in str(caught.value)


def test_lazy_load_with_two_workers(live_server: Start, tmp_path: Path) -> None:
    mp_dir = tmp_path / "prom"
    server = live_server("--workers", "2", "--load", "lazy", env={"PROMETHEUS_MULTIPROC_DIR": str(mp_dir)})
    assert "ready (lazy" in server.log()
    with server.client() as c:
        assert c.get("/readyz").json()["tokenizers"][:2] == ["gpt2", "cl100k_base"]
        assert 'tokenizer_info{' not in c.get("/metrics").text  # nothing loaded yet
    _count_until_both_answer(server, mp_dir, set(server.workers()))  # cl100k_base, in both workers
    with server.client() as c:
        info = [line for line in c.get("/metrics").text.splitlines() if line.startswith("tokenizer_info{")]
    assert len(info) == 1 and 'tokenizer="cl100k_base"' in info[0], info  # published when loaded; gpt2 never was
    assert server.stop() == 0
