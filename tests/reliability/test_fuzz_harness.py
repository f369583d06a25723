"""The fuzz harness (fuzz/fuzz_engine.py) as a test: its seed corpus and hypothesis-generated inputs through
:func:`check`, and a short real atheris run when atheris is installed (the long runs: fuzz/build_asan.sh)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine.native import available
from harness.server import REPO_ROOT, serve_env

FUZZ_DIR = REPO_ROOT / "fuzz"
sys.path.insert(0, str(FUZZ_DIR))
fuzz_engine = pytest.importorskip("fuzz_engine")

pytestmark = pytest.mark.skipif(not available(), reason="compiled core not built")


@pytest.mark.parametrize("seed", sorted(p.name for p in (FUZZ_DIR / "corpus").iterdir()))
def test_seed_corpus(seed: str) -> None:
    fuzz_engine.check((FUZZ_DIR / "corpus" / seed).read_bytes())


@settings(max_examples=400, deadline=None)
@given(op=st.integers(0, 3), name=st.integers(0, 4), payload=st.binary(max_size=600))
def test_random_inputs(op: int, name: int, payload: bytes) -> None:
    fuzz_engine.check(bytes([op, name]) + payload)


@settings(max_examples=200, deadline=None)
@given(name=st.integers(0, 4), text=st.text(max_size=200))
def test_text_inputs(name: int, text: str) -> None:
    fuzz_engine.check(bytes([0, name]) + text.encode("utf-8"))
    fuzz_engine.check(bytes([1, name]) + text.encode("utf-16-le", "surrogatepass"))


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None, reason="atheris not installed (pip install atheris)")
def test_atheris_runs_the_harness(tmp_path: Path) -> None:
    # libFuzzer's RSS limit (2 GiB) reads the process's peak RSS, and Linux carries the peak of the process that
    # execs into the new one: run straight from this test process, the fuzzer would start at pytest's own peak.
    # A shell in between (not exec'ing, hence "; exit") gives it a peak of its own.
    fuzzer = [sys.executable, str(FUZZ_DIR / "fuzz_engine.py"), "-runs=1500", "-max_len=1024", "-rss_limit_mb=2048",
              f"-artifact_prefix={tmp_path}/",
              str(tmp_path), str(FUZZ_DIR / "corpus")]
    proc = subprocess.run(["sh", "-c", '"$@"; exit $?', "sh", *fuzzer], cwd=REPO_ROOT, env=serve_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Done 1500 runs" in proc.stderr, proc.stderr[-2000:]


def test_chat_json_harness_short_run() -> None:
    """fuzz/fuzz_chat.py's seeded run (a few seconds): hostile chat JSON through every framing is counted or
    refused with a short ChatInputError, never another exception."""
    fuzz_chat = pytest.importorskip("fuzz_chat")
    assert fuzz_chat.run(seed=1, seconds=4.0) >= 20


@settings(max_examples=150, deadline=None)
@given(payload=st.binary(max_size=64))
def test_chat_json_harness_on_fuzzer_bytes(payload: bytes) -> None:
    """The harness's atheris entry point on arbitrary bytes (each byte picks one feature of the conversation)."""
    fuzz_chat = pytest.importorskip("fuzz_chat")
    fuzz_chat.check(payload)
