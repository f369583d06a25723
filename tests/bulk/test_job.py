"""Bulk jobs through a real local Ray (2 CPUs): the CLI end to end on JSONL and Parquet with exact results row by
row, the bad-row report and summary, a worker killed mid-job (every row exactly once), and the usage errors.

One Ray instance serves the whole module (starting Ray costs seconds); each job starts its own actor pool.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import ray  # the bulk extra: without it this module fails to import (loudly), it is never skipped

from app.bulk.job import SUMMARY_FILE, BulkOptions, run_bulk
from app.bulk.runner import ChunkResult, ChunkWorker
from app.bulk.sources import Chunk
from app.cli import main
from app.core.model_table import ModelTable
from app.engine import get_store, get_tokenizer

from .corpus import write_jsonl_corpus, write_parquet_corpus

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers get this module's classes by value

TOKENIZER = "cl100k_base"


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")  # never a running cluster
    yield
    ray.shutdown()


def rows_by_key(output: Path) -> dict[str, dict[str, Any]]:
    rows = pq.read_table(output).to_pylist()
    by_key = {r["row_key"]: r for r in rows}
    assert len(by_key) == len(rows), "a row key appears twice in the output"
    return by_key


def check_counts(rows: dict[str, dict[str, Any]], expected: dict[str, str | None], tokenizer: str) -> None:
    enc = get_tokenizer(tokenizer)
    assert set(rows) == set(expected)
    for key, text in expected.items():
        if text is None:
            assert rows[key]["tokens"] is None and rows[key]["error"], key
        else:
            assert rows[key]["tokens"] == enc.count(text) and rows[key]["error"] is None, key


def test_cli_counts_jsonl_and_parquet_exactly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "corpus"
    data.mkdir()
    expected = write_jsonl_corpus(data / "a.jsonl", 400, seed=11)
    expected |= write_parquet_corpus(data / "b.parquet", 300, seed=12, row_group_size=100)
    out = tmp_path / "out"
    model = "gpt-4o"
    code = main(["bulk", "count", str(data), "--model", model, "--output", str(out), "--chunk-mb", "0.01",
                 "--no-progress"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    info = ModelTable.load(get_store().directory / "models.json").get(model)
    assert info is not None
    rows = rows_by_key(out)
    check_counts(rows, expected, info.tokenizer)
    assert {"id", "lang"} <= set(pq.read_schema(next(out.glob("part-*.parquet"))).names)
    summary = json.loads((out / SUMMARY_FILE).read_text())
    good = [t for t in expected.values() if t is not None]
    tokens = sum(get_tokenizer(info.tokenizer).count(t) for t in good)
    n_bytes = sum(len(t.encode()) for t in good)
    assert summary["rows"] == len(expected) and summary["bad_rows"] == 4 and summary["good_rows"] == len(good)
    assert summary["tokens"] == tokens and summary["bytes"] == n_bytes
    assert summary["tokens_per_byte"] == pytest.approx(tokens / n_bytes)
    assert summary["chunks"] > 4 and summary["workers"] == 2 and summary["tokenizer"] == info.tokenizer
    assert 0 < summary["worker_cpu_seconds"]
    # genai-prices' gpt-4o input rate, $2.5 per million tokens, as an exact decimal string
    assert summary["cost"]["input_per_million"] == "2.5"
    assert summary["cost"]["price_source"] == "genai-prices: openai gpt-4o"
    assert Decimal(summary["cost"]["input_cost"]) == tokens * Decimal("2.5") / 1_000_000
    bad = {b["key"]: b["error"] for b in summary["bad_row_samples"]}
    assert bad == {k: rows[k]["error"] for k, t in expected.items() if t is None}
    assert bad[f"{data / 'a.jsonl'}:401"] == "column 'text' holds a number, not a string"
    assert bad[f"{data / 'a.jsonl'}:402"].startswith("invalid UTF-8")
    assert bad[f"{data / 'a.jsonl'}:403"] == "missing column 'text'"
    assert bad[f"{data / 'b.parquet'}#150"] == "column 'text' is null"
    assert f"tokens: {tokens}" in printed.out and "USD" in printed.out and "a.jsonl:401" in printed.out


def test_encode_with_keep_writes_the_engines_ids(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    expected = write_jsonl_corpus(src, 200, seed=5)
    out = tmp_path / "out"
    summary = run_bulk(BulkOptions(inputs=[str(src)], output=str(out), mode="encode", tokenizer="llama3",
                                   keep=["id"], chunk_bytes=4000, progress=False))
    tokenizer = get_tokenizer("llama3")
    table = pq.read_table(out)
    assert table.column_names == ["id", "row_key", "tokens", "bytes", "error", "ids"]
    for row in table.to_pylist():
        text = expected[row["row_key"]]
        assert row["ids"] == (None if text is None else tokenizer.encode(text))
    assert summary["rows"] == len(expected) and summary["cost"] is None


class KillOnce(ChunkWorker):
    """Kills its own worker process (SIGKILL, as the OOM killer would) on chunk 2, the first time only: the
    marker file, written before dying, tells the retried attempt to proceed."""

    def process(self, chunk: Chunk) -> ChunkResult:
        marker = self.output.parent / "killed"
        if chunk.index == 2 and not marker.exists():
            # leave a half-written temporary file behind, as a worker dying mid-write would
            (self.output / f".part-{chunk.index:06d}.parquet.{os.getpid()}.dead.tmp").write_bytes(b"PAR1 half")
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return super().process(chunk)


def test_a_killed_worker_is_retried_and_every_row_appears_once(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    expected = write_jsonl_corpus(src, 300, seed=9)
    out = tmp_path / "out"
    summary = run_bulk(BulkOptions(inputs=[str(src)], output=str(out), mode="count", tokenizer=TOKENIZER,
                                   chunk_bytes=3000, progress=False, worker_class=KillOnce))
    killed_pid = int((tmp_path / "killed").read_text())
    assert killed_pid != os.getpid()
    assert summary["chunks"] > 5
    rows = rows_by_key(out)  # fails on a duplicated key
    check_counts(rows, expected, TOKENIZER)
    assert summary["rows"] == len(expected) and summary["bad_rows"] == 3
    assert sorted(p.name for p in out.iterdir()) == [SUMMARY_FILE, *(f"part-{i:06d}.parquet"
                                                                  for i in range(summary["chunks"]))]


def test_usage_errors_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.jsonl"
    write_jsonl_corpus(src, 5, seed=1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    cases = [
        (["bulk", "count", str(src), "--tokenizer", "nope", "--output", str(tmp_path / "o1")], "nope"),
        (["bulk", "count", str(src), "--model", "no-such-model", "--output", str(tmp_path / "o2")], "unknown model"),
        (["bulk", "count", str(tmp_path / "missing.jsonl"), "--tokenizer", "gpt2", "--output", str(tmp_path / "o3")],
         "no such file"),
        (["bulk", "count", str(src), "--tokenizer", "gpt2", "--output", str(out)], "not empty"),
        (["bulk", "count", str(src), "--tokenizer", "gpt2", "--output", str(out), "--overwrite"], "not a bulk output"),
        (["bulk", "count", str(src), "--tokenizer", "gpt2", "--output", str(tmp_path / "o4"), "--keep", "tokens"],
         "output columns"),
        (["bulk", "count", str(src), "--tokenizer", "gpt2", "--output", str(tmp_path / "o5"), "--workers", "0"],
         ">= 1"),
        (["bulk", "count", str(src), "--tokenizer", "gpt2", "--messages-column", "m", "--output",
          str(tmp_path / "o6")], "needs --model"),
        (["bulk", "encode", str(src), "--model", "gpt-4o", "--messages-column", "m", "--output",
          str(tmp_path / "o7")], "bulk count"),
        (["bulk", "count", str(src), "--model", "text-embedding-3-small", "--messages-column", "m", "--output",
          str(tmp_path / "o8")], "no chat framing"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert (out / "precious.txt").read_text() == "keep me"
    assert not any((tmp_path / f"o{i}").exists() for i in range(1, 9))


class FailOnChunk1(ChunkWorker):
    """A chunk that cannot be processed (as a corrupt Parquet page would make it)."""

    def process(self, chunk: Chunk) -> ChunkResult:
        if chunk.index == 1:
            raise OSError("corrupt page")
        return super().process(chunk)


def test_a_failing_chunk_stops_the_job_with_one_line_naming_it(tmp_path: Path) -> None:
    from app.bulk.job import failure_message

    src = tmp_path / "in.jsonl"
    write_jsonl_corpus(src, 100, seed=2)
    with pytest.raises(Exception) as caught:  # noqa: PT011 -- Ray's own error type wraps ours
        run_bulk(BulkOptions(inputs=[str(src)], output=str(tmp_path / "out"), tokenizer="gpt2", chunk_bytes=2000,
                             progress=False, worker_class=FailOnChunk1))
    message = failure_message(caught.value)
    assert message is not None and "\n" not in message
    assert message.startswith(f"{src} from line ") and message.endswith("OSError: corrupt page")
    assert failure_message(ValueError("not Ray's")) is None



class TruncateOnChunk0(ChunkWorker):
    """Cuts the input file to half its size while the job runs (as a writer replacing it would)."""

    def process(self, chunk: Chunk) -> ChunkResult:
        result = super().process(chunk)
        if chunk.index == 0:
            with open(chunk.path, "r+b") as f:
                f.truncate(os.path.getsize(chunk.path) // 2)
        return result


def test_an_input_file_changed_while_the_job_runs_fails_it_naming_the_file(tmp_path: Path) -> None:
    """Issue 30: a file truncated while the job ran gave status 0 and fewer rows, silently."""
    from app.bulk.job import failure_message

    src = tmp_path / "in.jsonl"
    write_jsonl_corpus(src, 200, seed=4)
    with pytest.raises(Exception) as caught:  # noqa: PT011 -- Ray's error (a chunk read the cut file) or ours
        run_bulk(BulkOptions(inputs=[str(src)], output=str(tmp_path / "out"), tokenizer=TOKENIZER,
                             chunk_bytes=2000, progress=False, workers=1, worker_class=TruncateOnChunk0))
    message = failure_message(caught.value) or str(caught.value)
    assert "\n" not in message and str(src) in message and "changed while the job ran" in message


def test_a_row_nested_20000_deep_is_a_bad_row_not_the_jobs_end(tmp_path: Path) -> None:
    """Issue 30: Arrow's JSON reader crashed the actor on such a row and the whole job failed."""
    src = tmp_path / "in.jsonl"
    expected = write_jsonl_corpus(src, 50, seed=5)
    with src.open("ab") as f:
        f.write(b'{"text": "x", "deep": ' + b"[" * 20_000 + b"]" * 20_000 + b"}\n")
    out = tmp_path / "out"
    summary = run_bulk(BulkOptions(inputs=[str(src)], output=str(out), tokenizer=TOKENIZER, progress=False))
    rows = rows_by_key(out)
    deep_key = f"{src}:{len(src.read_bytes().splitlines())}"
    assert rows[deep_key]["tokens"] is None and rows[deep_key]["error"] == "invalid JSON: nested too deeply"
    check_counts({k: v for k, v in rows.items() if k != deep_key}, expected, TOKENIZER)
    assert summary["rows"] == len(expected) + 1
