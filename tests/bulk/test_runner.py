"""The engine side of bulk jobs, in-process (no Ray): exact counts and ids against the engine row by row, the part
file's columns, and an idempotent rewrite when a chunk runs twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from app.bulk.runner import ChunkWorker, part_name, utf8_len
from app.bulk.sources import input_files, plan_chunks
from app.engine import get_tokenizer

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
    enc = get_tokenizer(tokenizer)
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
    tokenizer = get_tokenizer("cl100k_base")
    table = pq.read_table(out)
    assert table.column_names == ["id", "row_key", "tokens", "bytes", "error"]
    assert table.schema.field("id").type == pq.read_schema(tmp_path / "in.parquet").field("id").type
    for row in table.to_pylist():
        text = expected[row["row_key"]]
        assert row["tokens"] == (None if text is None else tokenizer.count(text))
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


def _framing(model: str) -> tuple[object, object]:
    from app.core.model_table import ModelTable
    from app.engine import get_store
    from app.engine.chat import ChatFramings

    store = get_store().directory
    info = ModelTable.load(store / "models.json").get(model)
    assert info is not None and info.chat is not None
    tokenizer = get_tokenizer(info.tokenizer)
    return tokenizer, ChatFramings.from_store(store).framing(info.chat, tokenizer)


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])
def test_messages_column_counts_each_conversation_as_the_models_framing(tmp_path: Path, model: str) -> None:
    import json

    import pyarrow as pa

    from app.engine.chat import parse_conversation

    conversations = [
        [{"role": "user", "content": "Hello <|endoftext|> there"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "日本語で答えて"},
         {"role": "assistant", "content": "はい。"}, {"role": "user", "content": "ok " * 50}],
        [{"role": "user", "name": "alice", "content": "hi"}],
    ]
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(json.dumps({"id": i, "messages": c}) + "\n" for i, c in enumerate(conversations))
                   + '{"id": 3, "messages": "not a list"}\n{"id": 4, "messages": [{"content": "no role"}]}\n',
                   encoding="utf-8")
    pq.write_table(pa.table({"id": [10, 11, 12], "messages": conversations}), tmp_path / "chats.parquet")
    tokenizer, framing = _framing(model)
    out = tmp_path / "out"
    out.mkdir()
    from app.core.model_table import ModelTable
    from app.engine import get_store

    chat = ModelTable.load(get_store().directory / "models.json").get(model).chat  # type: ignore[union-attr]
    worker = ChunkWorker(tokenizer=tokenizer.name, store=None, mode="count", column="messages", keep=["id"],  # type: ignore[attr-defined]
                         output=str(out), chat=chat)
    for chunk in plan_chunks(input_files([src, tmp_path / "chats.parquet"]), 1 << 20):
        worker.process(chunk)
    rows = {r["id"]: r for r in pq.read_table(out).to_pylist()}
    for i, conv in enumerate(conversations):
        want = framing.count(tokenizer, parse_conversation(conv))  # type: ignore[attr-defined]
        assert rows[i]["tokens"] == want and rows[10 + i]["tokens"] == want, (i, rows[i])
        assert rows[i]["error"] is None and rows[i]["bytes"] > 0
    assert rows[3]["error"] == "column 'messages' holds a string, not a list of messages"
    assert rows[4]["error"] and "role" in rows[4]["error"] and rows[4]["tokens"] is None


@pytest.mark.parametrize("mode", ["count", "encode"])
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_the_arrow_fast_path_writes_the_same_part_files_as_the_reference(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, fmt: str) -> None:
    import app.bulk.runner as runner

    source = tmp_path / f"in.{fmt}"
    if fmt == "jsonl":
        write_jsonl_corpus(source, 200, seed=5)
    else:
        write_parquet_corpus(source, 200, seed=5, row_group_size=40)
    chunks = plan_chunks(input_files([source]), 3000)
    tables = {}
    answered = []
    real = runner.read_good_rows

    def counted(*args: Any) -> Any:
        rows = real(*args)
        answered.append(rows is not None)
        return rows

    for path in ("fast", "reference"):
        out = tmp_path / path
        out.mkdir()
        monkeypatch.setattr(runner, "read_good_rows", counted if path == "fast" else lambda *args: None)
        worker = ChunkWorker(tokenizer="cl100k_base", store=None, mode=mode, column="text", keep=None,
                             output=str(out))
        results = [worker.process(c) for c in chunks]
        tables[path] = ([pq.read_table(out / r.part) for r in results], [(r.rows, r.good, r.bad, r.tokens, r.bytes)
                                                                          for r in results])
    fast, ref = tables["fast"], tables["reference"]
    assert fast[1] == ref[1]
    for a, b in zip(fast[0], ref[0], strict=True):
        assert a.schema == b.schema and a.to_pylist() == b.to_pylist()
    assert len(chunks) > 4 and any(answered) and not all(answered)  # both paths ran


@pytest.mark.parametrize("tokenizer", ["gpt2", "qwen3"])
def test_count_arrow_equals_count_batch_on_slices_and_both_offset_widths(tokenizer: str) -> None:
    import pyarrow as pa

    from app.bulk.runner import count_arrow
    from tests.bulk.corpus import texts

    enc = get_tokenizer(tokenizer)  # gpt2: the compiled byte-level core; qwen3: a pipeline (the generic path)
    rows = texts(120, seed=9)
    for kind in (pa.string(), pa.large_string()):
        array = pa.array(rows, kind)
        assert count_arrow(enc, array) == enc.count_batch(rows)
        assert count_arrow(enc, array.slice(7, 50)) == enc.count_batch(rows[7:57])


def test_a_conversation_the_framing_cannot_handle_is_a_bad_row(tmp_path: Path) -> None:
    """Issue 30: one hostile conversation row (tool-call arguments nested 900 deep: JSON reads it, qwen3's template
    recursed past the limit) failed the whole job with RecursionError; it is now that row's error, with its key,
    and the rows around it are counted. The chat JSON depth limit now refuses it before the framing runs."""
    import json

    from app.core.model_table import ModelTable
    from app.engine import get_store

    nested: object = "x"
    for _ in range(900):
        nested = [nested]
    good = [{"role": "user", "content": "hello"}]
    hostile = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": {"a": nested}}}]}]
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(json.dumps({"id": i, "messages": c}) + "\n" for i, c in enumerate([good, hostile, good])),
                   encoding="utf-8")
    info = ModelTable.load(get_store().directory / "models.json").get("qwen3-8b")
    assert info is not None
    out = tmp_path / "out"
    out.mkdir()
    worker = ChunkWorker(tokenizer=info.tokenizer, store=None, mode="count", column="messages", keep=["id"],  # type: ignore[attr-defined]
                         output=str(out), chat=info.chat)
    [chunk] = plan_chunks(input_files([src]), 1 << 20)
    result = worker.process(chunk)
    rows = {r["id"]: r for r in pq.read_table(out).to_pylist()}
    assert result.rows == 3 and result.good == 2 and result.bad == 1
    assert rows[0]["tokens"] == rows[2]["tokens"] > 0
    assert rows[1]["tokens"] is None and rows[1]["row_key"] == f"{src}:2"
    assert "MAX_JSON_DEPTH" in rows[1]["error"] and "Traceback" not in rows[1]["error"]
