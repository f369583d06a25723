"""Smoke tests of the benchmark harness: corpora builder and ``bench.engine.run --quick``.

No timing assertions: these check that the harness runs, checks identity before timing and writes its report.
Corpora are built offline (``$BENCH_CORPORA_OFFLINE``: no ``pip download``) into a temporary directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from bench import corpora
from bench.engine import peers

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bench-data")
    os.environ["BENCH_CORPORA_OFFLINE"] = "1"
    try:
        corpora.build(["english", "code", "multilingual", "chat"], d)
    finally:
        del os.environ["BENCH_CORPORA_OFFLINE"]
    return d


def _mo(pairs: list[tuple[bytes, bytes]]) -> bytes:
    """A little-endian GNU .mo file holding ``pairs`` (msgid, msgstr), sorted by msgid as msgfmt does."""
    pairs = sorted(pairs)
    n = len(pairs)
    header = 28
    orig_tab, trans_tab = header, header + 8 * n
    data_off = trans_tab + 8 * n
    blob = b""
    origs, transs = [], []
    for msgid, _ in pairs:
        origs.append((len(msgid), data_off + len(blob)))
        blob += msgid + b"\0"
    for _, msgstr in pairs:
        transs.append((len(msgstr), data_off + len(blob)))
        blob += msgstr + b"\0"
    out = struct.pack("<7I", 0x950412DE, 0, n, orig_tab, trans_tab, 0, 0)
    out += b"".join(struct.pack("<2I", *x) for x in origs) + b"".join(struct.pack("<2I", *x) for x in transs)
    return out + blob


def test_parse_mo_reads_translations_with_header_charset() -> None:
    header = b"Content-Type: text/plain; charset=KOI8-R\n"
    data = _mo([(b"", header), (b"File", "Файл".encode("koi8-r")), (b"%d file", b"a\0b")])
    assert corpora.parse_mo_msgstrs(data) == ["a", "b", "Файл"]
    with pytest.raises(ValueError):
        corpora.parse_mo_msgstrs(b"\x00" * 40)


def test_parse_po_joins_continuations_and_skips_header() -> None:
    po = '''msgid ""
msgstr ""
"Project-Id-Version: x\\n"
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "Hello"
msgstr "Привет, \\"мир\\""

msgid "two"
msgstr ""
"line one\\n"
"line two"

msgid "untranslated"
msgstr ""

msgid "%d apple"
msgid_plural "%d apples"
msgstr[0] "%d яблоко"
msgstr[1] "%d яблока"
'''
    assert corpora.parse_po_msgstrs(po) == ['Привет, "мир"', "line one\nline two", "%d яблоко", "%d яблока"]


def test_corpora_are_built_deterministically(data_dir: Path, tmp_path: Path) -> None:
    os.environ["BENCH_CORPORA_OFFLINE"] = "1"
    try:
        again = corpora.build(["english", "code", "multilingual", "chat"], tmp_path)
    finally:
        del os.environ["BENCH_CORPORA_OFFLINE"]
    first = json.loads((data_dir / "MANIFEST.json").read_text())
    for row in again:
        path = data_dir / str(row["file"])
        assert hashlib.sha256(path.read_bytes()).hexdigest() == row["sha256"], row["file"]
        assert any(r["sha256"] == row["sha256"] for r in first[str(row["corpus"])]["files"])
    sizes = {str(r["file"]): int(r["bytes"]) for r in again}  # type: ignore[call-overload]
    assert 100_000 < sizes["english.txt"] <= corpora.ENGLISH_BYTES
    assert 100_000 < sizes["code.txt"] <= corpora.CODE_BYTES


def test_chat_messages_are_short(data_dir: Path) -> None:
    msgs = corpora.load_chat(data_dir)
    assert len(msgs) == corpora.CHAT_MESSAGES
    assert all(corpora.CHAT_MIN_BYTES <= len(m.encode("utf-8")) <= corpora.CHAT_MAX_BYTES for m in msgs)
    assert len(set(msgs)) > len(msgs) * 0.9


def test_hostile_generators_have_requested_length() -> None:
    for name, gen in corpora.HOSTILE.items():
        for n in (0, 1, 7, 1000):
            assert len(gen(n)) == n, name
    assert corpora.HOSTILE["base64"](100) == corpora.HOSTILE["base64"](100)


def test_unknown_corpus_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        corpora.ensure("nope", tmp_path)


def test_byte_map_and_merges() -> None:
    m = peers.byte_to_unicode()
    assert len(m) == 256 and len(set(m.values())) == 256 and m[ord("a")] == "a" and m[ord(" ")] == "Ġ"
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257, b"bc": 258}
    assert peers.merges_from_ranks(ranks) == [(b"a", b"b"), (b"a", b"bc"), (b"ab", b"c"), (b"b", b"c")]
    assert peers.hf_pattern(r"\p{N}{1,3}+|x") == r"\p{N}{1,3}|x"


def test_quick_run_writes_report(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "BENCH_CORPORA_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.engine.run", "--quick", "--out-dir", str(out), "--data-dir", str(data_dir),
         "--max-bytes", "2048", "--hostile-n", "64"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (out / "RESULTS.md").read_text()
    summary = json.loads((out / "engine.json").read_text())
    assert summary["meta"]["quick"] is True
    tokenizer = summary["encodings"]["cl100k_base"]
    ours = tokenizer["engines"][0]
    assert ours.startswith("ours")
    assert all(v == "ok" for v in tokenizer["identity"][ours].values())
    tp = tokenizer["throughput"]
    assert set(tp) >= {"english", "code", "ml-ja", "ml-ru"}
    assert tp["english"]["engines"][f"{ours}|cold"]["mb_s"] > 0
    assert tp["english"]["tokens"] > 0
    for section in ("## cl100k_base", "Throughput, MB/s", "Chat messages", "doubling test", "Batch", "resident memory"):
        assert section in report, section
    if "tiktoken" in tokenizer["engines"]:
        # tiktoken is the reference: built from our artifacts it must agree on every input
        assert all(v == "ok" for v in tokenizer["identity"]["tiktoken"].values()), tokenizer["identity"]["tiktoken"]
    load = summary["load_memory"]
    assert load[ours]["rss_kib"] > load["python (bare)"]["rss_kib"]


def test_floor_bench_reports_ours_over_floor(data_dir: Path, tmp_path: Path) -> None:
    """``bench.service.floor`` starts this service, the floor app on the stock uvicorn CLI and the floor app with our
    uvicorn options, measures all three in the same run and writes one row per cell with ours over each floor."""
    out = tmp_path / "floor.md"
    proc = subprocess.run([sys.executable, "-m", "bench.service.floor", "--workers", "1", "--connections", "2",
                           "--seconds", "1", "--rounds", "1", "--client", "loadgen", "--data-dir", str(data_dir),
                           "--out", str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = out.read_text()
    for row in ("| /count | 200 B |", "| /count | 4 KB |", "| /encode | 200 B |"):
        line = next(x for x in table.splitlines() if x.startswith(row))
        cells = [c.strip() for c in line.strip("|").split("|")]
        ours, stock, ratio = float(cells[2]), float(cells[3]), float(cells[4].rstrip("x"))
        same, same_ratio = float(cells[5]), float(cells[6].rstrip("x"))
        assert ours > 0 and stock > 0 and same > 0
        assert abs(ratio - ours / stock) < 0.01 and abs(same_ratio - ours / same) < 0.01
        assert cells[-1] == "0"  # no failed request on any server


def test_stream_bench_checks_ids_and_writes_rows(data_dir: Path, tmp_path: Path) -> None:
    """``bench.families.stream``: ids checked against ``sentencepiece`` first, then one row per corpus and
    workload with both rates."""
    out = tmp_path / "stream.json"
    env = {**os.environ, "BENCH_CORPORA_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "bench.families.stream", "--tokenizers", "phi-3", "--rounds", "1",
                           "--kib", "4", "--data-dir", str(data_dir), "--json", str(out)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert {(r["corpus"], r["workload"]) for r in rows} == {
        (c, w) for c in ["english", *(k for k in corpora.BENCH_CORPORA if k.startswith("ml-"))]
        for w in ("10 KB docs", "50 B lines")}
    assert all(r["tokenizer"] == "phi-3" and r["ours_mb_s"] > 0 and r["sentencepiece_mb_s"] > 0 for r in rows)
    assert "phi-3 10 KB docs: ours / sentencepiece" in proc.stdout


def test_client_bench_quick(tmp_path: Path) -> None:
    """``bench.client.run --quick`` starts a server, runs every variant and writes its table (no timing checks)."""
    out = tmp_path / "client.md"
    subprocess.run([sys.executable, "-m", "bench.client.run", "--quick", "--out", str(out)], cwd=REPO_ROOT,
                   check=True, capture_output=True, timeout=300)
    rows = [line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("| ") and "µs" not in line]
    settings = {row.split("|")[1].strip() for row in rows}
    assert settings == {"work only", "in-process", "loopback"} and len(rows) == 8


def test_plain_call_bench_checks_ids_and_prints_rows(data_dir: Path) -> None:
    """``bench.families.plain_call``: ids checked (dispatched, method, reference) first, then one row per tokenizer
    with the rates (cold and warm), the warm gain and the nanoseconds saved a call."""
    env = {**os.environ, "BENCH_CORPORA_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "bench.families.plain_call", "--tokenizers", "mistral-v3,cl100k_base",
                           "--rounds", "1", "--bytes", "6000", "--data-dir", str(data_dir)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("| mistral-v3 |", "| cl100k_base |"))]
    assert len(rows) == 2
    for row in rows:
        cells = [c.strip().rstrip("x") for c in row.strip("|").split("|")]
        rates = [float(v) for c in cells[1:] for v in c.split(" / ")]
        assert len(rates) == 12 and all(v > 0 for i, v in enumerate(rates) if i != 6)  # the 7th: ns saved (+/-)


def test_ab_checkouts_alternates_processes_and_prints_ratios(data_dir: Path) -> None:
    """``bench.engine.ab_checkouts`` with this checkout on both sides: one process per side and pair, each printing
    its cold/warm/lines figures, then one ratio line per tokenizer (the same code, so near 1; not asserted)."""
    proc = subprocess.run([sys.executable, "-m", "bench.engine.ab_checkouts", "--a", str(REPO_ROOT), "--b",
                           str(REPO_ROOT), "--tokenizers", "gpt2,llama2", "--pairs", "1", "--rounds", "1",
                           "--docs-per-corpus", "1", "--lines", "20", "--max-corpora", "3", "--data-dir",
                           str(data_dir)],
                          cwd=REPO_ROOT, env={**os.environ, "BENCH_CORPORA_OFFLINE": "1"}, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [line.split() for line in proc.stdout.splitlines() if line.startswith("pair 1 ")]
    assert sorted((r[2], r[3]) for r in runs) == [("a", "gpt2"), ("a", "llama2"), ("b", "gpt2"), ("b", "llama2")]
    assert all(float(r[5]) > 0 and float(r[8]) > 0 and float(r[11]) > 0 for r in runs)
    ratios = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("  ")}
    assert set(ratios) == {"gpt2", "llama2"} and all(len(v) == 6 and float(v[1]) > 0 for v in ratios.values())


def test_per_corpus_times_each_corpus_against_a_peer(data_dir: Path) -> None:
    """``bench.peers.per_corpus``: one row per corpus with ours, the peer and their ratio; tiktoken (a test
    dependency) is exact on gpt2, so it is timed, not skipped."""
    proc = subprocess.run([sys.executable, "-m", "bench.peers.per_corpus", "--tokenizers", "gpt2", "--peers",
                           "tiktoken", "--rounds", "1", "--docs-per-corpus", "1", "--max-corpora", "3",
                           "--data-dir", str(data_dir)],
                          cwd=REPO_ROOT, env={**os.environ, "BENCH_CORPORA_OFFLINE": "1"}, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.strip("| ").split(" | ") for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == ["corpus", "bytes", "ours MB/s", "tiktoken MB/s", "ours / tiktoken"]
    assert [r[0] for r in rows[1:]] == ["english", "code", "ml-zh"]
    assert all(float(r[2]) > 0 and float(r[3]) > 0 and r[4].endswith("x") for r in rows[1:])
    assert "not timed" not in proc.stdout


def test_ab_checkouts_measures_only_the_named_corpora(data_dir: Path) -> None:
    """``--corpora``: the documents are those of the named corpora only (their bytes), and a name the data directory
    does not hold is refused with the names it does."""
    from bench.engine.ab_checkouts import measure
    from bench.peers import workloads

    texts = workloads.corpora_texts(data_dir, None)
    want = sum(len(d.encode("utf-8")) for d in workloads.documents({k: texts[k] for k in ("english", "code")}, 1))
    got = measure(["gpt2"], 1, 1, 5, data_dir, None, ["english", "code"])["gpt2"]
    everything = measure(["gpt2"], 1, 1, 5, data_dir, None)["gpt2"]
    assert got["docs_bytes"] == want < everything["docs_bytes"]
    assert got["cold"] > 0 and got["warm"] > 0 and got["lines"] > 0
    with pytest.raises(ValueError, match="unknown corpora.*known: english"):
        measure(["gpt2"], 1, 1, 5, data_dir, None, ["no-such-corpus"])
