"""Bulk input: file discovery, chunk planning (every line in exactly one chunk, with its line number) and reading
rows, bad ones included, without Ray."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.bulk import BulkError
from app.bulk.sources import input_files, plan_chunks, read_chunk


def write_jsonl(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


@pytest.mark.parametrize("chunk_bytes", [1, 7, 64, 1000, 10**9])
def test_jsonl_chunks_cover_every_line_once_with_its_number(tmp_path: Path, chunk_bytes: int) -> None:
    rng = random.Random(chunk_bytes)
    lines = [json.dumps({"text": "x" * rng.randrange(0, 90), "n": i}).encode() for i in range(300)]
    lines[17] = b""  # a blank line is not a row, but it still counts for line numbers
    path = tmp_path / "data.jsonl"
    write_jsonl(path, lines)
    chunks = plan_chunks(input_files([path]), chunk_bytes)
    assert chunks[0].start == 0 and chunks[-1].end == path.stat().st_size
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:], strict=False))
    keys, numbers = [], []
    for chunk in chunks:
        rows = read_chunk(chunk, "text", None)
        keys += rows.keys
        numbers += rows.kept["n"].to_pylist()
        assert all(e is None for e in rows.errors)
    expected = [i for i in range(300) if i != 17]
    assert numbers == expected
    assert keys == [f"{path}:{i + 1}" for i in expected]


def test_jsonl_without_final_newline_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "d.ndjson"
    path.write_bytes(b'{"text": "a"}\r\n{"text": "b"}')
    (chunk,) = plan_chunks(input_files([path]), 1 << 20)
    rows = read_chunk(chunk, "text", [])
    assert rows.texts == ["a", "b"] and rows.errors == [None, None] and rows.kept == {}


def test_jsonl_bad_rows_are_rows_with_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    write_jsonl(path, [
        b'{"text": "fine", "id": 1}',
        b'{"id": 2}',
        b'{"text": 3, "id": 3}',
        b'{"text": null, "id": 4}',
        b'{"text": "caf\xe9", "id": 5}',
        b"[1, 2]",
        b'{"text": "unterminated',
        b'{"text": "\\ud800 lone surrogate", "id": 8}',
    ])
    (chunk,) = plan_chunks(input_files([path]), 1 << 20)
    rows = read_chunk(chunk, "text", None)
    assert rows.keys == [f"{path}:{i}" for i in range(1, 9)]
    assert rows.texts[0] == "fine" and rows.texts[7] == "\ud800 lone surrogate"
    errors = rows.errors
    assert errors[0] is None and errors[7] is None
    assert errors[1] == "missing column 'text'"
    assert errors[2] == "column 'text' holds a number, not a string"
    assert errors[3] == "column 'text' holds null, not a string"
    assert errors[4] is not None and errors[4].startswith("invalid UTF-8 at byte")
    assert errors[5] == "not a JSON object but list"
    assert errors[6] is not None and errors[6].startswith("invalid JSON")
    assert all(rows.texts[i] is None for i in range(1, 7))
    assert rows.kept["id"].to_pylist() == [1, 2, 3, 4, None, None, None, 8]


def test_jsonl_kept_column_of_mixed_types_becomes_json_text(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    write_jsonl(path, [b'{"text": "a", "meta": 1}', b'{"text": "b", "meta": {"k": [1]}}', b'{"text": "c"}'])
    (chunk,) = plan_chunks(input_files([path]), 1 << 20)
    rows = read_chunk(chunk, "text", ["meta"])
    assert rows.kept["meta"].type == pa.string()
    assert rows.kept["meta"].to_pylist() == ["1", '{"k": [1]}', None]


def test_parquet_chunks_are_row_groups_and_bad_values_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    texts = [f"row {i}" for i in range(25)]
    texts[3] = None  # type: ignore[call-overload]
    pq.write_table(pa.table({"text": texts, "id": list(range(25))}), path, row_group_size=10)
    chunks = plan_chunks(input_files([path]), 1)
    assert [(c.row_group, c.first_row) for c in chunks] == [(0, 0), (1, 10), (2, 20)]
    keys, ids, errors = [], [], []
    for chunk in chunks:
        rows = read_chunk(chunk, "text", None)
        keys += rows.keys
        ids += rows.kept["id"].to_pylist()
        errors += rows.errors
    assert keys == [f"{path}#{i}" for i in range(25)] and ids == list(range(25))
    assert errors[3] == "column 'text' is null" and errors.count(None) == 24


def test_parquet_binary_text_column_and_wrong_types(tmp_path: Path) -> None:
    binary = tmp_path / "bin.parquet"
    pq.write_table(pa.table({"text": pa.array([b"ok", b"\xff\xfe", "é".encode()], pa.binary())}), binary)
    (chunk,) = plan_chunks(input_files([binary]), 1)
    rows = read_chunk(chunk, "text", None)
    assert rows.texts == ["ok", None, "é"] and rows.errors[1] == "invalid UTF-8 at byte 0"
    ints = tmp_path / "ints.parquet"
    pq.write_table(pa.table({"text": [1, 2]}), ints)
    rows = read_chunk(plan_chunks(input_files([ints]), 1)[0], "text", None)
    assert rows.texts == [None, None] and rows.errors == ["column 'text' has type int64, not a string"] * 2
    rows = read_chunk(plan_chunks(input_files([ints]), 1)[0], "body", ["text", "absent"])
    assert rows.errors == ["missing column 'body'"] * 2
    assert rows.kept["text"].to_pylist() == [1, 2] and rows.kept["absent"].to_pylist() == [None, None]


def test_input_discovery(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write_jsonl(tmp_path / "sub" / "b.jsonl", [b'{"text": "x"}'])
    write_jsonl(tmp_path / "a.ndjson", [b'{"text": "y"}'])
    pq.write_table(pa.table({"text": ["z"]}), tmp_path / "c.parquet")
    (tmp_path / "notes.txt").write_text("ignored")
    found = input_files([tmp_path])
    assert [(p.name, f) for p, f in found] == [("a.ndjson", "jsonl"), ("c.parquet", "parquet"), ("b.jsonl", "jsonl")]
    with pytest.raises(BulkError, match="no such file"):
        input_files([tmp_path / "missing.jsonl"])
    with pytest.raises(BulkError, match="unknown input format"):
        input_files([tmp_path / "notes.txt"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(BulkError, match="no \\*.jsonl"):
        input_files([tmp_path / "empty"])
    (tmp_path / "broken.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(BulkError, match="not a readable Parquet file"):
        plan_chunks(input_files([tmp_path / "broken.parquet"]), 1)
