"""``bench.peers``: the exactness check before timing, the ranking of exact peers only, and the quick mode.

No timing assertions. The quick run measures whichever peers are installed; for each installed library known to
load the tokenizer exactly, its exactness is asserted (a peer missing from the environment is reported as not
installed, never skipped silently).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import corpora
from bench.peers import libraries, workloads
from bench.peers.run import KEPT_SECTION, check, first_mismatch, kept_sections, peer_table, ranked

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Libraries that load these tokenizers and give the reference's ids on ordinary text (measured; see RESULTS.md).
KNOWN_EXACT = {
    "cl100k_base": {"tiktoken", "tokenizers", "fastokens", "toktok-rs", "gigatoken", "splintr-rs", "kitoken", "tokie",
                    "quicktok-v1"},
    "mistral-v1": {"sentencepiece", "tokenizers", "fastokens", "gigatoken", "splintr-rs", "kitoken", "tokie"},
}


def test_first_mismatch() -> None:
    assert first_mismatch([1, 2, 3], [1, 2, 3]) is None
    assert first_mismatch([1, 9, 3], [1, 2, 3]) == 1
    assert first_mismatch([1, 2], [1, 2, 3]) == 2
    assert first_mismatch([], [5]) == 0


def test_check_reports_the_first_mismatch_and_errors() -> None:
    wl = {"docs": ["ab", "cd"], "lines": ["ef"]}
    want = {"docs": [[1, 2], [3, 4]], "lines": [[5, 6]]}
    table = {"ab": [1, 2], "cd": [3, 4], "ef": [5, 6]}
    assert check(lambda t: table[t], wl, want) == {"exact": True, "texts": 3}
    wrong = {**table, "cd": [3, 7, 8]}
    got = check(lambda t: wrong[t], wl, want)
    assert got["exact"] is False
    m = got["mismatch"]
    assert (m["workload"], m["text"], m["token"], m["got"], m["want"]) == ("docs", 1, 1, [7, 8], [4])
    assert m["tokens"] == [3, 2]

    def boom(text: str) -> list[int]:
        raise ValueError("no")

    assert check(boom, wl, want) == {"exact": False, "error": "docs text 0: raised ValueError: no"}


def _timing(mb: float) -> dict[str, dict[str, float]]:
    return {k: {"mb_s": mb, "us_per_call": 1 / mb, "process_over_thread": 1.0}
            for k in ("docs_cold", "docs_warm", "lines")}


def test_only_exact_peers_are_ranked() -> None:
    result = {"tokenizer": "t", "reference": "ref", "libraries": {
        "ours": {"version": "w", "exact": True, "status": "exact", "timing": _timing(10.0)},
        "ref": {"version": "1", "exact": True, "status": "exact", "timing": _timing(2.0)},
        "fast": {"version": "2", "exact": True, "status": "exact", "timing": _timing(5.0)},
        "faster_but_wrong": {"version": "3", "exact": False, "status": "not exact",
                             "mismatch": {}, "timing": _timing(50.0)},
    }}
    assert [lib for lib, _ in ranked(result, "docs_cold")] == ["fast", "ref"]
    row = peer_table([result], "docs_cold")[-1]
    assert "fast 2: 5.0" in row and "2.00x" in row and "faster_but_wrong" not in row


def test_workloads_have_the_promised_sizes(tmp_path: Path) -> None:
    texts = {"a": ("word " * 20_000).encode(), "b": ("слово " * 20_000).encode()}
    docs = workloads.documents(texts, 2)
    assert len(docs) == 4 and all(9_990 <= len(d.encode()) <= workloads.DOC_BYTES for d in docs)
    lines = workloads.lines(texts, 50)
    assert len(lines) == 50
    assert all(workloads.LINE_MIN_BYTES <= len(x.encode()) <= workloads.LINE_MAX_BYTES for x in lines)
    assert not [d for d in workloads.documents({"c": b"<|endoftext|>" * 2000}, 1)]


def test_a_new_report_keeps_the_hand_written_section(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    assert kept_sections(path) == ""
    path.write_text(f"# old tables\n\n{KEPT_SECTION}\n\nperf says 45% in bpe_piece\n")
    assert kept_sections(path) == f"\n{KEPT_SECTION}\n\nperf says 45% in bpe_piece\n"
    path.write_text("# old tables only\n")
    assert kept_sections(path) == ""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bench-data")
    os.environ["BENCH_CORPORA_OFFLINE"] = "1"
    try:
        corpora.build(["english", "code", "multilingual"], d)
    finally:
        del os.environ["BENCH_CORPORA_OFFLINE"]
    return d


def test_quick_run_checks_every_installed_peer(data_dir: Path, tmp_path: Path) -> None:
    for ref in ("tiktoken", "sentencepiece"):
        pytest.importorskip(ref)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "bench.peers.run", "--quick", "--first-call",
                           "--tokenizers", "cl100k_base,mistral-v1", "--out-dir", str(out),
                           "--work-dir", str(tmp_path / "files"), "--data-dir", str(data_dir)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "results.json").read_text())
    report = (out / "RESULTS.md").read_text()
    assert summary["meta"]["quick"] is True and "load average" in summary["meta"]["uptime_before"]
    for result in summary["results"]:
        name, libs = result["tokenizer"], result["libraries"]
        assert libs["ours"]["exact"] is True and libs["ours"]["timing"]["docs_cold"]["mb_s"] > 0
        assert libs["ours"]["timing"]["first_call"]["us_per_call"] > 0
        assert libs[result["reference"]]["exact"] is True
        for lib in libraries.LIBRARIES:
            row = libs[lib]
            if not libraries.version(lib):
                assert row["status"] == "not measured" and "not installed" in row["reason"]
            elif lib in KNOWN_EXACT[name]:
                assert row["status"] == "exact", (name, lib, row)
                assert row["timing"]["docs_cold"]["mb_s"] > 0 and row["version"] == libraries.version(lib)
                assert f"| {name} | {lib} | `" in report  # its loading call is recorded
            if row.get("status") != "exact":
                assert "timing" not in row
        best = ranked(result, "docs_cold")
        assert best and all(libs[lib]["exact"] for lib, _ in best)
    assert "| tokenizer | reference, MB/s | fastest exact peer, MB/s | ours, MB/s | ours / fastest |" in report


def test_ab_builds_compares_two_builds_of_the_core(data_dir: Path) -> None:
    """bench.engine.ab_builds: the working tree against itself with a flag, one round (the harness, not a timing)."""
    import shutil

    from bench.engine import ab_builds

    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    builds = [ab_builds.Build.parse("a=WORK"), ab_builds.Build.parse("b=WORK:-O2")]
    assert builds[1].flags == ["-O2"]
    with pytest.raises(ValueError):
        ab_builds.Build.parse("nameonly")
    times = ab_builds.measure("cl100k_base", builds, 1, 1, data_dir)
    assert set(times) == {"a", "b"} and all(len(v) == 1 and v[0] > 0 for t in times.values() for v in t.values())
    text = ab_builds.report(times)
    assert "b / a (median per-round ratio of times): cold" in text


def test_batch_paths_compares_the_two_batch_paths(data_dir: Path) -> None:
    """bench.peers.batch_paths: one round on a few documents and lines (the harness, not a timing)."""
    from bench.peers import batch_paths, workloads

    texts = workloads.corpora_texts(data_dir, max_corpora=2)
    loads = {"docs": workloads.documents(texts, 1), "lines": workloads.lines(texts, 20)}
    times = batch_paths.measure("llama2", loads, 1)
    assert {p for t in times.values() for p in t} == {"1 thread", "2t pool", "2t compiled"}
    assert all(len(v) == 1 and v[0] > 0 for t in times.values() for v in t.values())
    text = batch_paths.report("llama2", times, {"docs": 1000, "lines": 100})
    assert "2t compiled:" in text and text.count("\n") == 1
    with pytest.raises(SystemExit):
        batch_paths.measure("o200k_base", loads, 1)
