"""The metrics' in-place multiprocess writes (``app.api.metrics``) leave exactly the files prometheus-client's own
writer leaves: the same updates, done once through this service's metric functions and once through the library's
public API (each in a fresh interpreter, as the value class is chosen at import), read back equal, key by key, for
the parent process and for a forked child, across file growth (a value written after its file was re-mapped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.mmap_dict import MmapedDict

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, sys
mode = sys.argv[1]
from app.api import metrics as m

def observe_request(endpoint, tokenizer, status, seconds):
    if mode == "ours":
        m.request_started()
        m.request_done(endpoint, tokenizer, status, seconds)
        m.observe_request(endpoint, tokenizer, status, seconds / 2)
    else:
        m.IN_FLIGHT.inc()
        m.IN_FLIGHT.dec()
        m.REQUEST_SECONDS.labels(endpoint, tokenizer, str(status)).observe(seconds)
        m.REQUEST_SECONDS.labels(endpoint, tokenizer, str(status)).observe(seconds / 2)

def count(endpoint, tokenizer, tokens):
    if mode == "ours":
        m.observe_work(endpoint, tokenizer, 0.0003, tokens, 7)
    else:
        m.TOKENIZE_SECONDS.labels(endpoint, tokenizer).observe(0.0003)
        if tokens:  # as observe_work: no label set for nothing counted
            m.TOKENS.labels(endpoint, tokenizer).inc(tokens)
        m.INPUT_BYTES.labels(endpoint, tokenizer).inc(7)

def gauges(value):
    in_flight = m.in_flight if mode == "ours" else m.IN_FLIGHT
    in_flight.inc()
    in_flight.inc()
    in_flight.dec()
    entries = m._child(m.CACHE_ENTRIES, "cl100k_base") if mode == "ours" else m.CACHE_ENTRIES.labels("cl100k_base")
    entries.set(value)

def work(rounds):
    for i in range(rounds):
        observe_request("/count", "cl100k_base", 200, 0.0001 * (i % 40) + 1e-6)
        count("/count", "cl100k_base", i % 13)
        gauges(i * 3)
    for j in range(120):  # new label sets: every file grows (and is mapped anew) several times
        observe_request("/x%d" % j, "t%d" % j, 200 + j % 3, 0.5 * j)
        count("/x%d" % j, "t%d" % j, j)
        observe_request("/count", "cl100k_base", 200, 0.003)  # an old value, written after the re-mapping
        count("/count", "cl100k_base", 1)
    gauges(-2.5)

work(50)
if not m.multiprocess_enabled():
    from prometheus_client import REGISTRY, generate_latest
    print(json.dumps(generate_latest(REGISTRY).decode()))
    sys.exit(0)
pids = {"parent": os.getpid()}
child = os.fork()
if child == 0:
    work(30)  # a forked child: the library starts its own files from zero
    os._exit(0)
os.waitpid(child, 0)
pids["child"] = child
work(10)
print(json.dumps(pids))
"""


def _run(mode: str, directory: Path) -> dict[str, dict[str, dict[str, tuple[float, float]]]]:
    """Run the script in ``mode``; returns role -> file kind -> key -> (value, timestamp)."""
    directory.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENIZER_")}
    env.update(PROMETHEUS_MULTIPROC_DIR=str(directory), PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=REPO, env=env, capture_output=True, text=True,
                         check=True, timeout=120).stdout
    pids = json.loads(out.strip().splitlines()[-1])
    files: dict[str, dict[str, dict[str, tuple[float, float]]]] = {}
    for role, pid in pids.items():
        for path in directory.glob(f"*_{pid}.db"):
            kind = path.name.rsplit("_", 1)[0]
            files.setdefault(role, {})[kind] = {
                key: (value, ts) for key, value, ts, _ in MmapedDict.read_all_values_from_file(str(path))}
    return files


def test_in_place_writes_equal_the_librarys(tmp_path: Path) -> None:
    ours = _run("ours", tmp_path / "ours")
    library = _run("library", tmp_path / "library")
    assert set(ours) == set(library) == {"parent", "child"}
    for role in ("parent", "child"):
        assert set(ours[role]) == set(library[role])
        for kind, values in library[role].items():
            assert ours[role][kind] == values, (role, kind)
    # the comparison saw real traffic: the buckets of the parent's first label set hold every one of its observations
    def observations(role: str) -> float:
        total = 0.0
        for key, (value, _) in library[role]["histogram"].items():
            _, name, labels, _ = json.loads(key)
            if name == "tokenizer_http_request_duration_seconds_bucket" and labels["endpoint"] == "/count":
                total += value
        return total

    assert observations("parent") == 2 * ((50 + 120) + (10 + 120))
    assert observations("child") == 2 * (30 + 120)
    assert library["parent"]["gauge_livesum"]


def test_in_process_updates_equal_the_librarys() -> None:
    """Without ``PROMETHEUS_MULTIPROC_DIR`` (one worker) the same updates give the same exposition text."""

    def exposition(mode: str) -> list[str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("TOKENIZER_") and k != "PROMETHEUS_MULTIPROC_DIR"}
        env["PYTHONPATH"] = str(REPO)
        out = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=REPO, env=env, capture_output=True,
                             text=True, check=True, timeout=120).stdout
        text = json.loads(out.strip().splitlines()[-1])
        # this service's metrics only (the process and GC collectors differ per run), creation times aside
        return [line for line in text.splitlines() if "tokenizer_" in line and "_created" not in line]

    ours = exposition("ours")
    assert ours == exposition("library")
    assert 'tokenizer_http_request_duration_seconds_count{endpoint="/count",status="200",tokenizer="cl100k_base"} ' \
        "340.0" in ours
