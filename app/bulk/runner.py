"""The engine side of a bulk job: one encoding, a chunk in, a Parquet part file and its statistics out.

:class:`ChunkWorker` is a stateful callable class: Ray Data builds one per actor (the encoding is loaded once, by
name from its store, sha256-verified) and calls it with batches of chunk descriptors. It knows nothing of Ray and
runs as well in a plain loop (``bench/bulk`` times it that way as the single-process baseline).

Each chunk's rows go to ``<output>/part-<chunk>.parquet``, written to a hidden temporary file and renamed into
place, so a chunk that is retried after its worker died replaces (never duplicates) whatever an earlier attempt
left, and a reader never sees half a file. Columns: the kept input columns (renamed ``input_<name>`` if they clash
with ours), then ``row_key`` (where the row came from, see :mod:`.sources`), ``tokens`` (null for a bad row),
``bytes`` (UTF-8 bytes of the text; for a messages column, of the messages as compact JSON), ``error`` (null for a
good row) and, for ``encode``, ``ids``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.engine import Tokenizer, get_tokenizer
from app.engine.encoding import scrub_surrogates
from app.engine.errors import EngineError
from app.engine.store import bundled_store_dir

from .errors import ChunkError
from .sources import Chunk, GoodRows, Rows, read_chunk, read_good_rows

MODES = ("count", "encode")
RESERVED = ("row_key", "tokens", "bytes", "error", "ids")
#: Bad rows listed (key and reason) per chunk; every bad row is counted.
MAX_BAD_SAMPLES = 100


@dataclass
class ChunkResult:
    """What one chunk produced (rows, good/bad, tokens, bytes of text) and where it was written."""

    index: int
    rows: int
    good: int
    bad: int
    tokens: int
    bytes: int
    part: str
    seconds: float  # wall time of the chunk in its worker
    cpu_seconds: float  # CPU time the worker process spent on it (threads included)
    bad_samples: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ChunkResult:
        d = json.loads(text)
        d["bad_samples"] = [tuple(x) for x in d["bad_samples"]]
        return cls(**d)


def part_name(index: int) -> str:
    return f"part-{index:06d}.parquet"


def utf8_len(text: str) -> int:
    """UTF-8 bytes of ``text`` as the engine tokenizes it (lone surrogates become U+FFFD)."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return len(scrub_surrogates(text).encode("utf-8"))


def _buffers(texts: Any) -> tuple[Any, Any, bool]:
    """``(data, offsets, wide)`` of an Arrow string array without nulls; the offsets of a slice are its own."""
    import pyarrow as pa

    wide = pa.types.is_large_string(texts.type)
    _, offsets, data = texts.buffers()
    width = 8 if wide else 4
    view = memoryview(offsets)[texts.offset * width:(texts.offset + len(texts) + 1) * width]
    return (b"" if data is None else data), view, wide


def count_arrow(encoding: Tokenizer, texts: Any) -> list[int]:
    """The engine's count of each text of an Arrow string array without nulls, straight from its buffers
    (:meth:`~app.engine.Tokenizer.count_utf8_buffers`: no ``str`` per row and the GIL released where the tokenizer
    has a compiled core)."""
    data, offsets, wide = _buffers(texts)
    return encoding.count_utf8_buffers(data, offsets, wide=wide)


def encode_arrow(encoding: Tokenizer, texts: Any) -> Any:
    """The engine's ids of each text of an Arrow string array without nulls, as an Arrow ``list<int32>`` array
    built from the engine's own buffers (:meth:`~app.engine.Tokenizer.encode_utf8_buffers`: no Python list per row
    or int per id); through Python lists past 2**31 - 1 ids in one chunk, where int32 offsets do not reach."""
    import pyarrow as pa

    data, offsets, wide = _buffers(texts)
    try:
        ids, bounds = encoding.encode_utf8_buffers(data, offsets, wide=wide)
    except OverflowError:  # over 2**31 ids in one chunk: the offsets need not be int32 there
        pass
    else:
        n = len(texts)
        values = pa.Array.from_buffers(pa.int32(), len(ids) // 4, [None, pa.py_buffer(ids)])
        starts = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(bounds)])
        return pa.ListArray.from_arrays(starts, values)
    return pa.array(encoding.encode_batch(texts.to_pylist()), pa.list_(pa.int32()))


class ChunkWorker:
    """Tokenize chunks with one encoding (``mode``: ``count`` or ``encode``) and write their part files."""

    def __init__(self, *, tokenizer: str, store: str | None, mode: str, column: str, keep: Sequence[str] | None,
                 output: str, chat: Mapping[str, Any] | None = None) -> None:
        """Load and verify the encoding ``tokenizer`` from ``store`` (None: the bundled store of this
        installation). With ``chat`` (a model's chat framing spec, already checked), ``column`` holds lists of
        messages, counted as the model's framing renders them (``count`` only). Raises the engine's errors for an
        unknown name or a damaged artifact."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        store_dir = bundled_store_dir() if store is None else Path(store)
        self.encoding = get_tokenizer(tokenizer, store_dir)
        self.framing = None
        if chat is not None:
            if mode != "count":
                raise ValueError("a messages column can only be counted")
            from app.engine.chat import ChatFramings

            self.framing = ChatFramings.from_store(store_dir).framing(chat, self.encoding)
        self.mode = mode
        self.column = column
        self.keep = None if keep is None else list(keep)
        self.output = Path(output)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        """Ray Data entry point: a batch of chunk descriptors (columns of :class:`~.sources.Chunk`) in, one JSON
        :class:`ChunkResult` per chunk out (column ``result``)."""
        n = len(batch["index"])
        out = []
        for chunk in (Chunk.from_dict({k: batch[k][i] for k in batch}) for i in range(n)):
            try:
                out.append(self.process(chunk).to_json())
            except Exception as exc:  # a bad *row* never gets here; this is a chunk that cannot be read or written
                raise ChunkError(f"{chunk.describe()}: {type(exc).__name__}: {exc}") from exc
        return {"result": out}

    def process(self, chunk: Chunk) -> ChunkResult:
        """Read, tokenize (the engine's ``count_batch``/``encode_batch``: the GIL is released in the compiled
        core) and write one chunk. Bad rows are written too, with their error, and never raise. A chunk without
        bad rows is read by Arrow's readers (:func:`~.sources.read_good_rows`) and never becomes Python rows but
        for the texts handed to the engine; any other goes through the reference reader."""
        import pyarrow as pa

        t0, c0 = time.perf_counter(), time.process_time()
        fast = None if self.framing is not None else read_good_rows(chunk, self.column, self.keep)
        if fast is not None:
            return self._process_good(chunk, fast, t0, c0)
        rows = read_chunk(chunk, self.column, self.keep, messages=self.framing is not None)
        n = len(rows.keys)
        tokens: list[int | None] = [None] * n
        ids: list[list[int] | None] = [None] * n
        sizes: list[int | None] = [None] * n
        if self.framing is not None:
            for i, (count, size) in self._count_messages(rows).items():
                tokens[i], sizes[i] = count, size
        else:
            good = [i for i, text in enumerate(rows.texts) if text is not None]
            texts: list[str] = [rows.texts[i] for i in good]
            if self.mode == "count":
                for i, c in zip(good, self.encoding.count_batch(texts), strict=True):
                    tokens[i] = c
            else:
                for i, row_ids in zip(good, self.encoding.encode_batch(texts), strict=True):
                    ids[i] = row_ids
                    tokens[i] = len(row_ids)
            for i, text in zip(good, texts, strict=True):
                sizes[i] = utf8_len(text)
        n_good = sum(1 for c in tokens if c is not None)
        columns: dict[str, Any] = {}
        for name, values in rows.kept.items():
            columns[f"input_{name}" if name in RESERVED else name] = values
        columns["row_key"] = pa.array(rows.keys, pa.string())
        columns["tokens"] = pa.array(tokens, pa.int64())
        columns["bytes"] = pa.array([0 if s is None else s for s in sizes], pa.int64())
        columns["error"] = pa.array(rows.errors, pa.string())
        if self.mode == "encode":
            columns["ids"] = pa.array(ids, pa.list_(pa.int32()))
        self._write(chunk.index, pa.table(columns))
        bad = [(rows.keys[i], rows.errors[i] or "") for i in range(n) if rows.errors[i] is not None]
        return ChunkResult(
            index=chunk.index,
            rows=n,
            good=n_good,
            bad=len(bad),
            tokens=sum(t for t in tokens if t is not None),
            bytes=sum(s for s in sizes if s is not None),
            part=part_name(chunk.index),
            seconds=time.perf_counter() - t0,
            cpu_seconds=time.process_time() - c0,
            bad_samples=bad[:MAX_BAD_SAMPLES],
        )

    def _process_good(self, chunk: Chunk, rows: GoodRows, t0: float, c0: float) -> ChunkResult:
        """:meth:`process` for a chunk read by Arrow with no bad row: the same part file, built from Arrow arrays."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(rows)
        columns: dict[str, Any] = {}
        for name, values in rows.kept.items():
            columns[f"input_{name}" if name in RESERVED else name] = values
        columns["row_key"] = rows.keys
        ids = None
        if self.mode == "count":
            tokens = pa.array(count_arrow(self.encoding, rows.texts), pa.int64())
        else:
            ids = encode_arrow(self.encoding, rows.texts)
            tokens = pc.list_value_length(ids).cast(pa.int64())
        sizes = pc.binary_length(rows.texts).cast(pa.int64())  # valid UTF-8: its bytes are what the engine sees
        columns["tokens"] = tokens
        columns["bytes"] = sizes
        columns["error"] = pa.nulls(n, pa.string())
        if ids is not None:
            columns["ids"] = ids
        self._write(chunk.index, pa.table(columns))
        return ChunkResult(
            index=chunk.index,
            rows=n,
            good=n,
            bad=0,
            tokens=pc.sum(tokens).as_py() or 0,
            bytes=pc.sum(sizes).as_py() or 0,
            part=part_name(chunk.index),
            seconds=time.perf_counter() - t0,
            cpu_seconds=time.process_time() - c0,
        )

    def _count_messages(self, rows: Rows) -> dict[int, tuple[int, int]]:
        """Row index -> (tokens under the model's framing, UTF-8 bytes of its messages as compact JSON) for each
        good row; a conversation the framing rejects becomes a bad row (in ``rows``) with the reason."""
        from app.engine.chat import ChatInputError, parse_conversation

        assert self.framing is not None
        out: dict[int, tuple[int, int]] = {}
        for i, value in enumerate(rows.texts):
            if value is None:
                continue
            try:
                count = self.framing.count(self.encoding, parse_conversation(value))
                size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))
            except ChatInputError as exc:
                rows.texts[i] = None
                rows.errors[i] = str(exc) if str(exc).startswith(exc.path) else f"{exc.path}: {exc}"
                continue
            except (EngineError, RecursionError, OverflowError, ValueError, TypeError, MemoryError) as exc:
                # a conversation the framing cannot handle (nested too deeply …) is this row's error, never the
                # job's end
                rows.texts[i] = None
                rows.errors[i] = f"conversation cannot be counted: {type(exc).__name__}: {str(exc)[:200]}"
                continue
            out[i] = (count, size)
        return out

    def _write(self, index: int, table: Any) -> None:
        import pyarrow.parquet as pq

        final = self.output / part_name(index)
        temp = self.output / f".{final.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        try:
            pq.write_table(table, temp)
            os.replace(temp, final)
        finally:
            temp.unlink(missing_ok=True)
