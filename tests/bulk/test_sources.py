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
from app.bulk.sources import GoodRows, Rows, input_files, plan_chunks, read_chunk, read_good_rows


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


GOOD_TEXTS = ["plain", "caf\u00e9 \u65e5\u672c", "tab\tand\nnewline", "\ufeffinner mark", "\U0001f642 pair", "nul\x00",
              "quote \" back \\ slash", "", "  spaces  "]
BAD_LINES = [
    b'{"text": "a", "x": "\xff"}',  # invalid UTF-8 in a field the fast path ignores
    b'\xef\xbb\xbf{"text": "bom"}',  # a byte-order mark at the start of the line
    b'{"text": "a"}{"text": "b"}',  # two objects on one line
    b"   ",  # a blank line (not a row, but numbered)
    b"",
    b'{"text": null}',
    b'{"n": 1}',
    b'{"text": 5}',
    b'{"text": "\\ud800"}',
    b'{"text": "a", "text": "b"}',
    b'{"text": "a", "n": 123456789012345678901234}',  # past int64: JSON text in the reference
    b'{"text": "a", "meta": "2020-01-01"}',  # Arrow would infer a timestamp
    b'{"text": "a", "meta": {"k": [1]}}',
    b'{"text": "a", "meta": true}',  # a kept column of mixed types: JSON text in the reference
    b'{"text": "a", "n": NaN}',
    b"[1]",
    b'{"text": "a"} trailing',
]


def _good_line(rng: random.Random, i: int) -> bytes:
    record: dict[str, object] = {"text": rng.choice(GOOD_TEXTS) + str(i)}
    if rng.random() < 0.7:
        record["n"] = rng.choice([i, i + 0.5, None, -0])
    if rng.random() < 0.5:
        record["meta"] = rng.choice(["m", "d\u00e9j\u00e0", None])
    line = json.dumps(record, ensure_ascii=rng.random() < 0.5).encode()
    return line + (b"\r" if rng.random() < 0.1 else b"")


@pytest.mark.parametrize("seed", range(6))
def test_the_arrow_fast_path_reads_exactly_as_the_reference_or_declines(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    lines = [_good_line(rng, i) if rng.random() > 0.01 else rng.choice(BAD_LINES) for i in range(1500)]
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if seed % 2 else b""))
    answered = declined = 0
    for keep in (None, [], ["n", "meta", "absent"]):
        for chunk in plan_chunks(input_files([path]), rng.choice([300, 1000, 3000])):
            ref = read_chunk(chunk, "text", keep)
            good = read_good_rows(chunk, "text", keep)
            if good is None:
                declined += 1
                continue
            answered += 1
            assert all(e is None for e in ref.errors), chunk
            assert _same_rows(good, ref), chunk
    assert answered and declined  # both paths ran on this corpus


def _same_rows(good: GoodRows, ref: Rows) -> bool:
    return (good.keys.to_pylist() == ref.keys and good.texts.to_pylist() == ref.texts
            and list(good.kept) == list(ref.kept)
            and all(good.kept[k].type == v.type and str(good.kept[k].to_pylist()) == str(v.to_pylist())
                    for k, v in ref.kept.items()))


def test_the_fast_path_declines_each_kind_of_bad_line(tmp_path: Path) -> None:
    declined = 0
    for k, bad in enumerate(BAD_LINES):
        for lines in ([b'{"text": "fine", "n": 1, "meta": "m"}', bad, b'{"text": "also fine"}'], [bad]):
            path = tmp_path / f"bad{k}-{len(lines)}.jsonl"
            write_jsonl(path, lines)
            (chunk,) = plan_chunks(input_files([path]), 1 << 20)
            ref = read_chunk(chunk, "text", ["n", "meta"])
            good = read_good_rows(chunk, "text", ["n", "meta"])
            if any(e is not None for e in ref.errors) or len(ref.keys) != len(lines):
                assert good is None, bad  # a bad row, or a blank line (numbered, not a row)
                declined += 1
            else:  # no bad row: the fast path may answer, and then as the reference does
                assert good is None or _same_rows(good, ref), bad
    assert declined >= 20
    clean = tmp_path / "clean.jsonl"
    write_jsonl(clean, [b'{"text": "fine", "n": 1}', b'{"text": "\\ufeff\\u00e9"}'])
    (chunk,) = plan_chunks(input_files([clean]), 1 << 20)
    good = read_good_rows(chunk, "text", None)
    assert good is not None and good.texts.to_pylist() == ["fine", "\ufeff\u00e9"]
    assert good.keys.to_pylist() == [f"{clean}:1", f"{clean}:2"] and good.kept["n"].to_pylist() == [1, None]


def test_the_parquet_fast_path_equals_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": [f"row {i} \u00e9" for i in range(25)], "id": list(range(25))}), path,
                   row_group_size=10)
    for chunk in plan_chunks(input_files([path]), 1):
        for keep in (None, [], ["id", "absent"]):
            ref = read_chunk(chunk, "text", keep)
            good = read_good_rows(chunk, "text", keep)
            assert good is not None
            assert good.keys.to_pylist() == ref.keys and good.texts.to_pylist() == ref.texts
            assert {k: v.to_pylist() for k, v in good.kept.items()} == {k: v.to_pylist() for k, v in ref.kept.items()}
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"text": ["a", None]}), nulls)
    assert read_good_rows(plan_chunks(input_files([nulls]), 1)[0], "text", None) is None


def test_spread_chunks_shrink_towards_the_end_and_still_cover_every_line(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = json.dumps({"text": "y" * 200}).encode()
    write_jsonl(path, [line] * 40000)  # ~8 MB
    size = path.stat().st_size
    chunks = plan_chunks(input_files([path]), 2 << 20, spread=2)
    sizes = [c.size for c in chunks]
    assert chunks[0].start == 0 and chunks[-1].end == size
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:], strict=False))
    assert sizes[0] >= 2 << 20  # full-size chunks first
    assert all(a >= b for a, b in zip(sizes[:-2], sizes[1:-1], strict=True))  # then smaller (the last: what is left)
    assert max(sizes[-3:-1]) <= (1 << 20) + len(line) + 1  # the tail is cut to the floor
    assert [c.first_line for c in chunks] == [1 + c.start // (len(line) + 1) for c in chunks]


def test_a_line_nested_20000_deep_is_a_bad_row_and_never_reaches_arrow(tmp_path: Path) -> None:
    """Issue 30: Arrow's JSON reader crashed a worker on a line nested 20,000 deep, and the reference reader raised
    RecursionError; now the fast path declines the chunk and the reference reads the line as a bad row."""
    deep = b'{"text": "x", "k": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [b'{"text": "a"}', deep, b'{"text": "b"}'])
    [chunk] = plan_chunks(input_files([src]), 1 << 20)
    assert read_good_rows(chunk, "text", None) is None
    rows = read_chunk(chunk, "text", None)
    assert rows.keys == [f"{src}:1", f"{src}:2", f"{src}:3"]
    assert rows.texts == ["a", None, "b"]
    assert rows.errors[1] == "invalid JSON: nested too deeply" and rows.errors[0] is None is rows.errors[2]


def test_max_opens_per_line_bounds_the_nesting_of_every_line() -> None:
    from app.bulk.sources import MAX_FAST_OPENS, max_opens_per_line

    assert max_opens_per_line(b'{"a": [1]}\n{"b": 2}\n') == 3  # under the limit: the total
    many = b"\n".join(b'{"a": [[1]]}' for _ in range(MAX_FAST_OPENS))  # many brackets, none deep
    assert max_opens_per_line(many) == 3
    assert max_opens_per_line(b"{}\n" + b"[" * 600 + b"\n{}") == 600


def test_a_file_truncated_after_planning_fails_its_chunk_and_the_fingerprint(tmp_path: Path) -> None:
    """Issue 30: a file truncated while the job ran gave fewer rows and status 0."""
    from app.bulk.sources import check_unchanged, fingerprint

    src = tmp_path / "in.jsonl"
    write_jsonl(src, [json.dumps({"text": f"row {i}"}).encode() for i in range(200)])
    files = input_files([src])
    before = fingerprint(files)
    chunks = plan_chunks(files, 500)
    check_unchanged(before)
    with src.open("r+b") as f:
        f.truncate(src.stat().st_size // 2)
    with pytest.raises(BulkError, match="changed while the job ran"):
        check_unchanged(before)
    with pytest.raises(BulkError, match="changed while the job ran"):
        read_chunk(chunks[-1], "text", None)
    with pytest.raises(BulkError, match="changed while the job ran"):
        read_good_rows(chunks[-1], "text", None)
    src.unlink()
    with pytest.raises(BulkError, match="disappeared"):
        check_unchanged(before)
