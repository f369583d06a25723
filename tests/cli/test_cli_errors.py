"""Found trying the CLI as a new user would: every error is one line on stderr and exit status 2 (missing file,
directory, binary input, bad ``TOKENIZER_ENGINE``, empty corpus, ``--store`` naming a file); ``serve`` checks its
port before loading anything; an added store joins the bundled one and may not shadow its names."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from harness.server import free_port, start

from ..conftest import REPO_ROOT


def run(*args: str, env: dict[str, str] | None = None, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "app", *args], input=stdin, capture_output=True, cwd=REPO_ROOT,
                          env={**os.environ, **(env or {})}, timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(errors="replace"),
                                       proc.stderr.decode(errors="replace"))


def one_line_error(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
    assert "Traceback" not in out.stderr
    for needle in needles:
        assert needle in out.stderr, out.stderr


@pytest.mark.parametrize("command", [["count"], ["encode"], ["decode"], ["evaluate", "-t", "gpt2"]])
def test_missing_file_and_directory_are_one_line_errors(command: list[str], tmp_path: Path) -> None:
    one_line_error(run(*command, str(tmp_path / "missing.txt")), "missing.txt", "No such file")
    one_line_error(run(*command, str(tmp_path)), str(tmp_path), "is a directory")


def test_invalid_engine_variable_is_a_one_line_error(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("hello")
    one_line_error(run("count", str(f), env={"TOKENIZER_ENGINE": "bogus"}), "TOKENIZER_ENGINE", "bogus")


def test_binary_input_is_refused_unless_asked_for(tmp_path: Path) -> None:
    binary = tmp_path / "prog"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("café".encode("latin-1"))
    for command in (["count"], ["encode"], ["evaluate", "-t", "gpt2"]):
        one_line_error(run(*command, str(binary)), "binary", "NUL byte at offset 7", "--errors=replace")
        one_line_error(run(*command, str(latin1)), "not UTF-8", "0xe9 at offset 3", "--errors=replace")
    one_line_error(run("count", stdin=b"\xff\xfe"), "<stdin>", "not UTF-8")
    forced = run("count", "--errors=replace", str(latin1))
    assert forced.returncode == 0 and int(forced.stdout) > 0
    assert run("count", stdin="naïve".encode()).stdout.strip() == "3"


def test_train_refuses_an_empty_corpus_and_a_file_as_store(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    store = tmp_path / "store"
    one_line_error(run("train", str(empty), "--vocab-size", "300", "--name", "t", "--store", str(store)),
                   "corpus is empty")
    assert not store.exists()
    text = tmp_path / "t.txt"
    text.write_text("some text to learn from " * 50)
    one_line_error(run("train", str(text), "--vocab-size", "300", "--name", "t", "--store", str(text)),
                   "exists and is not a directory")


def test_serve_checks_the_port_before_loading_anything(store_copy: Path) -> None:
    """A busy port is reported at once: with a damaged store, the port error comes first (nothing was loaded)."""
    (store_copy / "gpt2.tiktoken").write_bytes(b"damaged")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = run("serve", "--host", "127.0.0.1", "--port", str(port), "--store", str(store_copy))
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip() == f"error: cannot start: cannot listen on 127.0.0.1:{port} (Address already in use)"


def _train(store: Path, name: str, tmp_path: Path) -> None:
    text = tmp_path / "corpus.txt"
    text.write_text("the service counts tokens of chat messages " * 200)
    out = run("train", str(text), "--vocab-size", "300", "--name", name, "--store", str(store), "--quiet")
    assert out.returncode == 0, out.stderr


def test_serving_a_trained_tokenizer_keeps_the_bundled_ones(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _train(store, "mine", tmp_path)
    server = start(tmp_path / "server.log", "--store", str(store),
                   env={"TOKENIZER_TOKENIZERS": "mine,cl100k_base,o200k_base,gpt2,llama3"})
    try:
        with httpx.Client(base_url=server.url or "", timeout=60) as c:
            names = {t["name"] for t in c.get("/tokenizers").json()["tokenizers"]}
            assert {"mine", "cl100k_base", "o200k_base", "gpt2", "llama3"} <= names
            assert c.post("/count", json={"tokenizer": "mine", "text": "the service"}).status_code == 200
            r = c.post("/count", json={"model": "gpt-4o", "text": "hello"})  # the bundled model table still applies
            assert r.status_code == 200 and r.json()["model"]["name"] == "gpt-4o"
    finally:
        server.stop()


def test_a_trained_tokenizer_cannot_shadow_a_bundled_name(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _train(store, "cl100k_base", tmp_path)
    out = run("serve", "--port", str(free_port()), "--store", str(store))
    assert out.returncode == 1, out.stderr
    assert "would shadow 'cl100k_base'" in out.stderr and "TOKENIZER_STORE_OVERRIDE" in out.stderr
    assert "Traceback" not in out.stderr
    count = run("count", "--store", str(store), "-t", "cl100k_base", stdin=b"hello",
                env={"TOKENIZER_STORE_OVERRIDE": "true"})
    assert count.returncode == 0, count.stderr
    assert json.loads(run("tokenizers", "--json", "--store", str(store),
                          env={"TOKENIZER_STORE_OVERRIDE": "true"}).stdout)["tokenizers"]
