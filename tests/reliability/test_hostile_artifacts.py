"""A hostile artifact served by a real ``python -m app serve`` on loopback (issue 30): a ``tokenizer.json`` whose
Split regex backtracks exponentially (``(a|a)+$``) no longer stops the service, SIGTERM ends ``serve`` within
its graceful timeout whatever a worker is doing, and a bad store is refused before any worker starts."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from app.cli.import_ import import_file
from harness.server import free_port
from tests.conftest import REPO_ROOT

from .conftest import Serve

pytestmark = pytest.mark.timeout(300)

HOSTILE = "a" * 33 + "!"
#: Serve only the two tokenizers of the test store (it is added to the bundled one; loading that takes long).
EVERY_TOKENIZER = {"TOKENIZER_TOKENIZERS": "redos,plain"}


def _word_level(pre: dict[str, object] | None) -> bytes:
    return json.dumps({"model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1, "b": 2}, "unk_token": "[UNK]"},
                       "pre_tokenizer": pre}).encode()


@pytest.fixture
def hostile_store(tmp_path: Path) -> Path:
    """A store with ``redos`` (Split on ``(a|a)+$``) and ``plain`` (WhitespaceSplit), both imported."""
    store = tmp_path / "store"
    for name, pre in (("redos", {"type": "Split", "pattern": {"Regex": "(a|a)+$"}, "behavior": "Isolated",
                                 "invert": False}),
                      ("plain", {"type": "WhitespaceSplit"})):
        src = tmp_path / f"{name}.json"
        src.write_bytes(_word_level(pre))
        import_file(src, name, store)
    return store


def _hammer(url: str, stop: threading.Event, statuses: list[int]) -> None:
    with httpx.Client(base_url=url, timeout=60) as c:
        while not stop.is_set():
            statuses.append(c.post("/count", json={"tokenizer": "redos", "text": HOSTILE}).status_code)


def test_healthz_and_other_tokenizers_answer_within_1s_beside_hostile_requests(serve: Serve,
                                                                                 hostile_store: Path) -> None:
    """Before: small requests ran on the event loop, so two 33-character requests left 0 of 20 probes answered."""
    server = serve("--store", str(hostile_store), "--graceful-timeout", "5", env=EVERY_TOKENIZER)
    assert server.url is not None
    stop = threading.Event()
    statuses: list[int] = []
    hammers = [threading.Thread(target=_hammer, args=(server.url, stop, statuses), daemon=True) for _ in range(4)]
    for t in hammers:
        t.start()
    time.sleep(0.5)  # the hostile requests are running
    slow: list[tuple[str, float]] = []
    try:
        with httpx.Client(base_url=server.url, timeout=1.0) as c:  # a probe slower than 1 s raises
            for i in range(20):
                t0 = time.monotonic()
                if i % 2:
                    r = c.get("/healthz")
                    assert r.status_code == 200
                else:
                    r = c.post("/count", json={"tokenizer": "plain", "text": "a b a"})
                    assert r.status_code == 200 and r.json()["count"] == 3, r.text
                slow += [(r.url.path, time.monotonic() - t0)] if time.monotonic() - t0 > 1.0 else []
                time.sleep(0.05)
    finally:
        stop.set()
        for t in hammers:
            t.join(60)
    assert not slow
    assert statuses and set(statuses) == {422}, sorted(set(statuses))  # the pattern's time bound, never a 500
    assert "Traceback" not in server.log()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_ends_serve_within_its_graceful_timeout_while_a_request_runs(serve: Serve, hostile_store: Path,
                                                                             workers: str) -> None:
    """A request still working when SIGTERM arrives (a 4 MB text the hostile pattern backtracks on: its budget
    is about 8 s) must not keep ``serve`` alive past ``--graceful-timeout`` (1 s here)."""
    server = serve("--store", str(hostile_store), "--graceful-timeout", "1", "--workers", workers,
                   env=EVERY_TOKENIZER)
    assert server.url is not None
    body = {"tokenizer": "redos", "text": "a" * 4_000_000 + "!"}

    def busy() -> None:
        try:
            with httpx.Client(base_url=server.url or "", timeout=60) as c:
                c.post("/count", json=body)
        except httpx.HTTPError:
            pass  # the connection is cut at the deadline

    threading.Thread(target=busy, daemon=True).start()
    time.sleep(1.5)  # the body is sent and the work has started
    assert server.proc.poll() is None
    t0 = time.monotonic()
    server.proc.terminate()
    try:
        server.proc.wait(20)
    except subprocess.TimeoutExpired:
        pytest.fail("serve outlived SIGTERM by 20 s")
    elapsed = time.monotonic() - t0
    assert elapsed < 1 + 1.5, f"serve took {elapsed:.1f} s to stop with a 1 s graceful timeout"


def _serve_once(store: Path, names: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "app", "serve", "--store", str(store), "--host", "127.0.0.1",
           "--port", str(free_port()), "--workers", "2"]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TOKENIZER_TOKENIZERS": names})


def test_serve_refuses_a_bad_store_in_one_line_before_starting_workers(tmp_path: Path, hostile_store: Path) -> None:
    """Before: tracebacks (TypeError for ``"vocab_size": null``; a 16.8 GB table for an id of 2**31)."""
    manifest_path = hostile_store / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    good = json.dumps(manifest)
    manifest["tokenizers"][0]["vocab_size"] = None
    manifest_path.write_text(json.dumps(manifest))
    out = _serve_once(hostile_store, "redos,plain")
    assert out.returncode == 1 and out.stderr.startswith("error: cannot start: ")
    assert "vocab_size must be an integer" in out.stderr and len(out.stderr.splitlines()) == 1, out.stderr
    assert "Started" not in out.stderr  # no worker (uvicorn logs its processes)

    bomb = json.dumps({"model": {"type": "WordLevel", "vocab": {"a": 2**31}, "unk_token": "a"}}).encode()
    entry = json.loads(good)["tokenizers"][1]
    (hostile_store / entry["artifact"]).write_bytes(bomb)
    entry["sha256"] = hashlib.sha256(bomb).hexdigest()
    entry["vocab_size"] = 0
    manifest_path.write_text(json.dumps({**json.loads(good), "tokenizers": [entry]}))
    t0 = time.monotonic()
    out = _serve_once(hostile_store, "plain")
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 1, out.stderr[-2000:]
    assert "model.vocab id 2147483648 is out of range" in out.stderr and time.monotonic() - t0 < 60

    manifest_path.write_text('{"format_version": 1, "tokenizers": ' + "[" * 100_000 + "]" * 100_000 + "}")
    out = _serve_once(hostile_store, "plain")
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 1 and "cannot read manifest" in out.stderr
