"""Smoke test of ``bench.service.startup`` at its smallest size: one tokenizer, one worker, one repetition.

No timing assertions: it checks that the bench starts a real server, reads its memory, times requests and loads
the same tokenizer with the reference library, and that the report carries those figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_startup_bench_smallest(tmp_path: Path) -> None:
    out = tmp_path / "startup.json"
    p = subprocess.run([sys.executable, "-m", "bench.service.startup", "--reps", "1", "--sets", "one", "--one", "gpt2",
                        "--workers", "1", "--requests", "3", "--load-requests", "40",
                        "--work-dir", str(tmp_path / "refs"), "--json", str(out)],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    summary = json.loads(out.read_text())["summary"]
    assert set(summary) == {"floor|stock", "one|refs", "one|ours-lib", "one|serve1"}
    floor = summary["floor|stock"]
    assert floor["ready_s"] > 0 and 0 < floor["uss"] <= floor["pss"] <= floor["rss"]
    serve = summary["one|serve1"]
    assert serve["ready_s"] > 0
    proc = serve["processes"]["supervisor"]
    assert 0 < proc["uss"] <= proc["pss"] <= proc["rss"]
    assert serve["total_pss_kib"] == proc["pss"]
    assert set(serve["first_ms"]) == set(serve["last_ms"]) == {"gpt2"}
    assert serve["after_pause_ms"] > 0
    after = serve["after_load"]["processes"]["supervisor"]
    assert 0 < after["uss"] <= after["pss"] <= after["rss"]
    assert serve["after_load"]["total_pss_kib"] == after["pss"]
    assert summary["one|refs"]["tokenizers"] == summary["one|ours-lib"]["tokenizers"] == 1
    assert "| gpt2 |" in p.stdout and "reference libraries (1)" in p.stdout
    assert "after load: the one process" in p.stdout
    assert "in the warm process after 0.5 s idle" in p.stdout
    assert "the stock floor app (FastAPI, uvicorn CLI, 1 worker)" in p.stdout
    floor_line = f"one: ready (1 worker) {serve['ready_s']:.2f} s = the stock floor app's {floor['ready_s']:.2f} s"
    assert floor_line in p.stdout
