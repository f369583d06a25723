"""Faults: a damaged store stops start-up naming the file; a killed worker is replaced while the others answer;
SIGTERM drains in-flight requests; a read-only store and a full disk do not matter at run time."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from app.engine import get_tokenizer
from harness.load import build_pool, run_load
from harness.server import REPO_ROOT, free_port, serve_env

from .conftest import Serve, fill

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


# ---------------------------------------------------------------------------- start-up


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x20
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


DAMAGE = {
    "corrupt-artifact": ("cl100k_base.tiktoken", _flip),
    "truncated-artifact": ("o200k_base.tiktoken", _truncate),
    "missing-artifact": ("llama3.tiktoken", Path.unlink),
    "empty-artifact": ("gpt2.tiktoken", lambda p: p.write_bytes(b"")),
    "corrupt-manifest": ("manifest.json", _truncate),
    "missing-manifest": ("manifest.json", Path.unlink),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_store_refuses_to_start_and_names_the_file(case: str, store_copy: Path) -> None:
    name, damage = DAMAGE[case]
    damage(store_copy / name)
    cmd = [sys.executable, "-m", "app", "serve", "--port", str(free_port()), "--workers", "2",
           "--store", str(store_copy)]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=serve_env(), capture_output=True, text=True, timeout=180)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert name in proc.stderr, proc.stderr
    assert "Traceback" not in output, output
    assert "Uvicorn running" not in output and "Started parent process" not in output, output


# ---------------------------------------------------------------------------- worker death


def test_killed_worker_is_replaced_and_the_others_keep_answering(serve: Serve, tmp_path: Path) -> None:
    mp_dir = tmp_path / "prom"
    server = serve("--workers", "2", env={"PROMETHEUS_MULTIPROC_DIR": str(mp_dir)})
    workers = server.workers()
    assert len(workers) == 2
    victim = workers[0]
    pool = build_pool(per_class=8)
    concurrency = 8
    result: dict[str, object] = {}
    kill_at = [0.0]

    def load() -> None:
        result["report"] = asyncio.run(run_load(server.url, pool, concurrency=concurrency, duration=16))

    thread = threading.Thread(target=load)
    thread.start()
    time.sleep(4)
    kill_at[0] = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = server.workers()
        if len(now) == 2 and victim not in now:
            break
        time.sleep(0.2)
    replaced_at = time.monotonic()
    thread.join(120)
    now = server.workers()
    assert len(now) == 2 and victim not in now, f"worker {victim} was not replaced: {now}\n{server.log()[-2000:]}"
    assert f"worker {victim} died (killed by signal 9)" in server.log()
    report = result["report"]
    samples = report.samples  # type: ignore[attr-defined]
    errors = [s for s in samples if s.error is not None]
    # Only requests in flight on the killed worker may fail (at most one per client connection), none later.
    assert len(errors) <= concurrency, [s.error for s in errors]
    assert all(s.start < kill_at[0] + 1.0 for s in errors), [(s.start - kill_at[0], s.error) for s in errors]
    served_after_kill = [s for s in samples if s.error is None and s.start > kill_at[0] + 1.0]
    assert len(served_after_kill) >= 10, "the surviving worker stopped answering"
    # The replacement serves too: fresh connections until its metrics file shows a request it answered.
    new_pid = (set(now) - set(workers)).pop()
    tokenizer = get_tokenizer("cl100k_base")
    for i in range(400):
        with httpx.Client(base_url=server.url, timeout=60) as c:
            r = c.post("/count", json={"tokenizer": "cl100k_base", "text": f"after the kill {i}"})
            assert r.status_code == 200 and r.json()["count"] == tokenizer.count(f"after the kill {i}")
        if (mp_dir / f"histogram_{new_pid}.db").exists() and i >= 20:
            break
    assert (mp_dir / f"histogram_{new_pid}.db").exists(), "the replacement worker never answered a request"
    print(json.dumps({"kill_to_replaced_s": round(replaced_at - kill_at[0], 2), "errors": len(errors),
                      "requests": len(samples)}))


def _slow_connections(port: int, n: int) -> list[socket.socket]:
    """``n`` requests whose headers and half a body are sent: each is in flight in some worker."""
    socks = []
    body = json.dumps({"tokenizer": "cl100k_base", "text": "in flight " * 50}).encode()
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(f"POST /count HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:20])
        socks.append(s)
    return socks


def _in_flight(text: str) -> float:
    m = re.search(r"^tokenizer_http_requests_in_flight(?:\{\})? (\S+)$", text, re.M)
    assert m, text[:2000]
    return float(m.group(1))


def test_in_flight_gauge_forgets_a_killed_worker(serve: Serve, tmp_path: Path) -> None:
    """Requests that were in flight on a SIGKILLed worker must not stay in ``tokenizer_http_requests_in_flight``
    for ever (prometheus-client keeps a dead process's ``livesum`` file until ``mark_process_dead(pid)``)."""
    server = serve("--workers", "2", env={"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom")})
    socks = _slow_connections(server.port, 8)
    time.sleep(1.0)
    with server.client() as c:
        assert _in_flight(c.get("/metrics").text) == 9  # eight slow requests and this scrape
    victim = server.workers()[0]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (len(server.workers()) != 2 or victim in server.workers()):
        time.sleep(0.2)
    for s in socks:
        s.close()
    time.sleep(1.0)
    with server.client() as c:
        values = [_in_flight(c.get("/metrics").text) for _ in range(4)]
    assert values == [1, 1, 1, 1], f"in-flight gauge still counts the dead worker's requests: {values}"


def test_sigterm_drains_in_flight_requests(serve: Serve) -> None:
    server = serve("--workers", "2", "--graceful-timeout", "60")
    tokenizer = get_tokenizer("o200k_base")
    texts = [f"drain request {k} " * 2000 for k in range(6)]
    bodies = [json.dumps({"tokenizer": "o200k_base", "text": t}).encode() for t in texts]
    socks = []
    for body in bodies:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        s.sendall(f"POST /count HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body[: len(body) // 2])
        socks.append(s)
    time.sleep(1.0)
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(2.0)
    assert server.proc.poll() is None, "the server quit with requests in flight"
    for s, body in zip(socks, bodies, strict=True):
        s.sendall(body[len(body) // 2:])
    for s, text in zip(socks, texts, strict=True):
        raw = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            raw += chunk
            if b"\r\n\r\n" in raw and raw.split(b"\r\n\r\n", 1)[1].endswith(b"}"):
                break
        s.close()
        assert raw.startswith(b"HTTP/1.1 200"), raw[:300]
        assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["count"] == tokenizer.count(text)
    assert server.proc.wait(60) == 0


# ---------------------------------------------------------------------------- disks


def _exercise(server_url: str) -> None:
    """Requests over every tokenizer, endpoint and status class (new metric label sets each time)."""
    with httpx.Client(base_url=server_url, timeout=60) as c:
        for name in ("gpt2", "cl100k_base", "o200k_base", "o200k_harmony", "llama3"):
            tokenizer = get_tokenizer(name)
            text = f"disk fault check for {name}: naïve 日本語"
            r = c.post("/encode", json={"tokenizer": name, "text": text})
            assert r.status_code == 200 and r.json()["ids"] == tokenizer.encode(text), r.text
            r = c.post("/count", json={"tokenizer": name, "texts": [text, text]})
            assert r.status_code == 200 and r.json()["counts"] == [tokenizer.count(text)] * 2, r.text
            r = c.post("/decode", json={"tokenizer": name, "ids": tokenizer.encode(text)})
            assert r.status_code == 200 and r.json()["text"] == text, r.text
            r = c.post("/decode", json={"tokenizer": name, "ids": [10**9]})
            assert r.status_code == 422, r.text
            assert c.get(f"/tokenizers/{name}").status_code == 200
        assert c.post("/count", content=b"{", headers={"content-type": "application/json"}).status_code == 400
        assert c.get("/metrics").status_code == 200


def test_read_only_store_does_not_matter_at_run_time(serve: Serve, read_only_copy: Path) -> None:
    with pytest.raises(OSError):
        (read_only_copy / "probe").write_text("x")
    server = serve("--workers", "2", "--store", str(read_only_copy))
    workers = server.workers()
    for _ in range(3):
        _exercise(server.url)
    assert server.workers() == workers
    assert server.stop() == 0


def test_full_disk_does_not_matter_at_run_time(tiny_tmpfs: Path, serve: Serve, tmp_path: Path) -> None:
    """``TMPDIR`` and the server's log (access log on) on a file system that is then filled up: requests still get
    correct answers and no worker dies. (The Prometheus directory is elsewhere here; see the next test.)"""
    tmp = tiny_tmpfs / "tmp"
    tmp.mkdir()
    server = serve("--workers", "2", env={"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom"), "TMPDIR": str(tmp)},
                   access_log=True, log_path=tiny_tmpfs / "server.log")
    workers = server.workers()
    fill(tiny_tmpfs)
    with pytest.raises(OSError):
        (tiny_tmpfs / "probe").write_bytes(b"x" * 8192)
    for _ in range(3):
        _exercise(server.url)
    assert server.workers() == workers, f"a worker died on a full disk:\n{server.log()[-3000:]}"
    assert server.stop() == 0


def test_full_disk_under_the_metrics_directory_does_not_kill_workers(tiny_tmpfs: Path, serve: Serve) -> None:
    """With several workers ``serve`` keeps Prometheus' multiprocess files in ``$TMPDIR`` (or
    ``$PROMETHEUS_MULTIPROC_DIR``): memory-mapped, sparse files that grow as new label sets appear. If that disk
    fills up, a write to a page without a block behind it is a SIGBUS that kills the worker. Requests with label
    sets never seen before must still be answered, by the same workers."""
    tmp = tiny_tmpfs / "tmp"
    tmp.mkdir()
    server = serve("--workers", "2", env={"TMPDIR": str(tmp)})
    workers = server.workers()
    assert list(tmp.glob("tokenizer-metrics-*")), "serve did not put its metrics directory in $TMPDIR"
    fill(tiny_tmpfs)
    for _ in range(3):
        _exercise(server.url)
    assert server.workers() == workers, f"a worker died on a full disk:\n{server.log()[-3000:]}"
    assert server.stop() == 0
