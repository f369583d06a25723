"""``bench.peers.batch``: a tiny real run (both thread counts in fresh children, exactness before timing) and the
table, which reports a batch engine that is not exact instead of timing it. No timing assertions."""

from __future__ import annotations

import json
from pathlib import Path

from bench.peers import batch
from bench.peers.libraries import version


def test_tiny_run_writes_both_thread_counts(tmp_path: Path) -> None:
    assert batch.main(["--tokenizers", "cl100k_base", "--runs", "1", "--docs-per-corpus", "1", "--lines", "20",
                       "--max-corpora", "2", "--out-dir", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "batch.json").read_text())
    by_n = data["results"]["cl100k_base"]
    assert sorted(by_n) == ["1", "2"]
    engines = set(batch.ENGINES) if version("fastokens") else {"ours encode_batch", "ours count_batch"}
    for n, result in by_n.items():
        assert result["threads"] == int(n)
        assert set(result["engines"]) == engines
        for row in result["engines"].values():
            assert row["exact"] and row["timing"]["docs"]["mb_s"] > 0 and row["timing"]["lines"]["cores"] > 0
    report = (tmp_path / "BATCH.md").read_text()
    assert "| cl100k_base | ours encode_batch |" in report and "Load before:" in report


def test_table_reports_an_engine_that_is_not_exact() -> None:
    timing = {"docs": {"mb_s": 10.0, "cores": 1.0}, "lines": {"mb_s": 5.0, "cores": 1.0}}
    fast = {"mb_s": 20.0, "cores": 1.9}
    results = {"x": {
        1: {"engines": {"ours encode_batch": {"exact": True, "timing": timing},
                        "fastokens encode_batch": {"exact": False, "mismatch": {"workload": "docs", "text": 3}}}},
        2: {"engines": {"ours encode_batch": {"exact": True, "timing": {**timing, "docs": fast}},
                        "fastokens encode_batch": {"exact": False, "mismatch": {"workload": "docs", "text": 3}}}}}}
    rows = batch.table(results, "docs")  # type: ignore[arg-type]
    assert "| x | ours encode_batch | 10.0 | 20.0 | 2.00x | 1.00 / 1.90 | 1.05 |  |" in rows
    assert any(r.startswith("| x | fastokens encode_batch | not exact") for r in rows)
