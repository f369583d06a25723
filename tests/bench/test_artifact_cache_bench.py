"""Smoke test of ``bench.engine.artifact_cache`` at its smallest size (one small tokenizer, one repetition): it runs,
the warm run is served from the cache alone, and the table names the tokenizer. No timing assertions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_artifact_cache_bench_smallest(tmp_path: Path) -> None:
    out = tmp_path / "samples.json"
    p = subprocess.run([sys.executable, "-m", "bench.engine.artifact_cache", "--reps", "1", "--names", "gpt2",
                        "--json", str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "| gpt2 |" in p.stdout and "**all loads**" in p.stdout
    samples = json.loads(out.read_text())
    assert samples["off"][0]["hits"] == samples["off"][0]["misses"] == 0
    assert samples["cold"][0]["misses"] == 1 and samples["warm"][0]["hits"] == 1
    assert samples["warm"][0]["misses"] == samples["warm"][0]["rebuilt"] == 0
