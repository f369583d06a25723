"""The engine side of bulk jobs, in-process (no Ray): exact counts and ids against the engine row by row, the part
file's columns, and an idempotent rewrite when a chunk runs twice."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from app.bulk.runner import ChunkWorker, part_name, utf8_len
from app.bulk.sources import input_files, plan_chunks
from app.engine import get_encoding

from .corpus import write_jsonl_corpus, write_parquet_corpus


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "o200k_base", "llama3", "gpt2"])
def test_encode_equals_the_engine_row_by_row(tmp_path: Path, tokenizer: str) -> None:
    expected = write_jsonl_corpus(tmp_path / "in.jsonl", 150, seed=7)
    out = tmp_path / "out"
    out.mkdir()
    worker = ChunkWorker(tokenizer=tokenizer, store=None, mode="encode", column="text", keep=None, output=str(out))
    chunks = plan_chunks(input_files([tmp_path / "in.jsonl"]), 2000)
    assert len(chunks) > 3
    results = [worker.process(c) for c in chunks]
    enc = get_encoding(tokenizer)
    table = pq.read_table(out)
    assert table.column_names == ["id", "lang", "row_key", "tokens", "bytes", "error", "ids"]
    got = {r["row_key"]: r for r in table.to_pylist()}
    assert set(got) == set(expected)
    for key, text in expected.items():
        row = got[key]
        if text is None:
            assert row["error"] and row["tokens"] is None and row["ids"] is None and row["bytes"] == 0
        else:
            assert row["error"] is None
            assert row["ids"] == enc.encode(text), key
            assert row["tokens"] == enc.count(text) == len(row["ids"])
            assert row["bytes"] == len(text.encode("utf-8"))
    assert sum(r.rows for r in results) == len(expected)
    assert sum(r.bad for r in results) == 3
    assert sum(r.tokens for r in results) == sum(enc.count(t) for t in expected.values() if t is not None)


def test_count_on_parquet_keeps_the_named_columns(tmp_path: Path) -> None:
    expected = write_parquet_corpus(tmp_path / "in.parquet", 120, seed=3, row_group_size=50)
    out = tmp_path / "out"
    out.mkdir()
    worker = ChunkWorker(tokenizer="cl100k_base", store=None, mode="count", column="text", keep=["id"],
                         output=str(out))
    for chunk in plan_chunks(input_files([tmp_path / "in.parquet"]), 1):
        worker.process(chunk)
    enc = get_encoding("cl100k_base")
    table = pq.read_table(out)
    assert table.column_names == ["id", "row_key", "tokens", "bytes", "error"]
    assert table.schema.field("id").type == pq.read_schema(tmp_path / "in.parquet").field("id").type
    for row in table.to_pylist():
        text = expected[row["row_key"]]
        assert row["tokens"] == (None if text is None else enc.count(text))
        assert int(row["row_key"].rsplit("#", 1)[1]) == row["id"]


def test_a_rerun_chunk_replaces_its_part_file(tmp_path: Path) -> None:
    write_jsonl_corpus(tmp_path / "in.jsonl", 40, seed=1)
    out = tmp_path / "out"
    out.mkdir()
    worker = ChunkWorker(tokenizer="gpt2", store=None, mode="count", column="text", keep=[], output=str(out))
    (chunk,) = plan_chunks(input_files([tmp_path / "in.jsonl"]), 1 << 20)
    first = worker.process(chunk)
    before = pq.read_table(out / part_name(chunk.index))
    second = worker.process(chunk)
    assert [p.name for p in out.iterdir()] == [part_name(chunk.index)], "no temporary or duplicate file left"
    assert pq.read_table(out / part_name(chunk.index)).equals(before)
    assert (first.rows, first.tokens) == (second.rows, second.tokens)


def test_kept_columns_that_clash_with_ours_are_renamed(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"text": "hello", "tokens": "theirs", "error": 1}\n', encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    worker = ChunkWorker(tokenizer="gpt2", store=None, mode="count", column="text", keep=None, output=str(out))
    worker.process(plan_chunks(input_files([path]), 1 << 20)[0])
    (row,) = pq.read_table(out).to_pylist()
    assert row["input_tokens"] == "theirs" and row["input_error"] == 1
    assert row["tokens"] == 1 and row["error"] is None


def test_utf8_len_counts_what_the_engine_sees() -> None:
    assert utf8_len("héllo") == 6
    assert utf8_len("a\ud800b") == len("a\ufffdb".encode())
