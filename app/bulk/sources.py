"""Input of a bulk job: find the files, cut them into chunks, read one chunk into rows.

Formats, by file name: ``*.jsonl`` / ``*.ndjson`` (one JSON object per line; blank lines are skipped) and
``*.parquet``. A directory stands for every such file below it, in sorted order.

A chunk is the unit of work (and of retry): whole lines of one JSONL file (about ``chunk_bytes`` of them; the
driver finds line boundaries and line numbers in one fast pass) or one row group of one Parquet file. Every row
has a *row key* naming where it came from: ``<path>:<line>`` (1-based) for JSONL, ``<path>#<row>`` (0-based) for
Parquet.

Reading never raises for a bad row: a line that is not valid UTF-8 or not a JSON object, a row without the text
column, or a value that is not a string becomes a row with an ``error`` and no text.

Two readers give the same rows. :func:`read_chunk` is the reference, row by row in Python (every bad row with its
reason). :func:`read_good_rows` is the fast path a worker tries first: Arrow's C++ JSON and Parquet readers, the
rows kept as Arrow arrays (never Python objects per row); it answers only for a chunk it can prove holds no bad row
and reads exactly as the reference would (else None, and the caller uses :func:`read_chunk`).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import BulkError

JSONL_SUFFIXES = (".jsonl", ".ndjson")
PARQUET_SUFFIXES = (".parquet",)
_SCAN_BLOCK = 1 << 20
#: The smallest JSONL chunk :func:`plan_chunks` cuts while spreading the end of the input over the workers.
TAPER_MIN_BYTES = 1 << 20
_BOM = b"\xef\xbb\xbf"
_WS = rb"[ \t\r\x0b\x0c]*"  # what bytes.strip() removes, newline aside
_BLANK_LINE = re.compile(rb"\n" + _WS + rb"\n")


@dataclass(frozen=True)
class Chunk:
    """One unit of work. JSONL: bytes ``[start, end)`` of ``path``, whose first line is ``first_line``;
    Parquet: row group ``row_group`` of ``path``, whose first row is ``first_row``."""

    index: int
    path: str
    format: str  # "jsonl" or "parquet"
    start: int = 0
    end: int = 0
    first_line: int = 1
    row_group: int = 0
    first_row: int = 0
    size: int = 0  # bytes of input (JSONL: end - start; Parquet: the row group's uncompressed size)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Chunk:
        return cls(**{k: (v.item() if hasattr(v, "item") else v) for k, v in d.items()})

    def describe(self) -> str:
        if self.format == "jsonl":
            return f"{self.path} from line {self.first_line}"
        return f"{self.path} row group {self.row_group}"


@dataclass
class Rows:
    """The rows of one chunk: key, text (None for a bad row; for a messages column, the list of messages), error
    (None for a good row), kept columns."""

    keys: list[str]
    texts: list[Any]
    errors: list[str | None]
    kept: dict[str, Any]  # kept column name -> pyarrow array, one value per key


@dataclass
class GoodRows:
    """The rows of a chunk none of which is bad, as Arrow arrays: ``keys`` and ``texts`` (a string array without
    nulls), and the kept columns (name -> array), as :func:`read_chunk` would give them."""

    keys: Any
    texts: Any
    kept: dict[str, Any]

    def __len__(self) -> int:
        return len(self.keys)


def input_files(paths: Sequence[str | Path]) -> list[tuple[Path, str]]:
    """``(file, format)`` for every input; raises :class:`BulkError` for a missing path, an unknown suffix or an
    empty directory."""
    out: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and _format_of(p) is not None)
            if not found:
                raise BulkError(f"{path}: no *.jsonl, *.ndjson or *.parquet file in this directory")
            out.extend((p, _format_of(p) or "") for p in found)
        elif path.is_file():
            fmt = _format_of(path)
            if fmt is None:
                raise BulkError(f"{path}: unknown input format (expected *.jsonl, *.ndjson or *.parquet)")
            out.append((path, fmt))
        else:
            raise BulkError(f"{path}: no such file or directory")
    return out


def _format_of(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    return None


def plan_chunks(files: Sequence[tuple[Path, str]], chunk_bytes: int, *, spread: int = 0) -> list[Chunk]:
    """Cut every file into chunks of about ``chunk_bytes`` (JSONL, at line boundaries) or per row group (Parquet).

    With ``spread`` (the number of workers), JSONL chunks shrink towards the end of the input — each at most
    1/(2 x ``spread``) of the bytes still to come, but not under :data:`TAPER_MIN_BYTES` — so that the workers,
    taking chunks in order, finish at about the same time: large chunks where they are cheap (fewer tasks), small
    ones where an uneven finish would leave a worker idle."""
    total = sum(path.stat().st_size for path, _ in files) if spread else 0
    floor = min(chunk_bytes, TAPER_MIN_BYTES)
    chunks: list[Chunk] = []
    before = 0  # bytes of the files planned so far
    for path, fmt in files:
        if fmt == "jsonl":
            def size_for(start: int, before: int = before) -> int:
                if not spread:
                    return chunk_bytes
                return max(floor, min(chunk_bytes, (total - before - start) // (2 * spread)))

            for start, end, first_line in _jsonl_ranges(path, size_for):
                chunks.append(Chunk(len(chunks), str(path), fmt, start=start, end=end, first_line=first_line,
                                    size=end - start))
        else:
            import pyarrow.parquet as pq

            try:
                meta = pq.ParquetFile(path).metadata
            except (OSError, ValueError) as exc:  # pyarrow raises ArrowInvalid (a ValueError) for a bad file
                raise BulkError(f"{path}: not a readable Parquet file: {exc}") from None
            first = 0
            for rg in range(meta.num_row_groups):
                group = meta.row_group(rg)
                chunks.append(Chunk(len(chunks), str(path), fmt, row_group=rg, first_row=first,
                                    size=group.total_byte_size))
                first += group.num_rows
        if spread:
            before += path.stat().st_size
    return chunks


def _jsonl_ranges(path: Path, size_for: Callable[[int], int]) -> Iterator[tuple[int, int, int]]:
    """``(start, end, first_line)`` byte ranges of whole lines: each ends just after the first newline at or past
    ``size_for(start)`` bytes from its start (the last one at the end of the file)."""
    import numpy as np

    def count(block: bytes, i: int, j: int) -> int:  # newlines in block[i:j], vectorised (bytes.count is serial)
        return int(np.count_nonzero(np.frombuffer(block, np.uint8, j - i, i) == 10)) if j > i else 0

    start, line, newlines, pos = 0, 1, 0, 0  # chunk start, its first line, newlines in it so far, block offset
    with path.open("rb") as f:
        while block := f.read(_SCAN_BLOCK):
            i = 0
            while True:
                target = start + size_for(start) - pos  # where in this block the chunk reaches its size
                nl = block.find(b"\n", max(target, i)) if target < len(block) else -1
                if nl < 0:
                    newlines += count(block, i, len(block))
                    break
                newlines += count(block, i, nl + 1)
                yield start, pos + nl + 1, line
                start, line, newlines, i = pos + nl + 1, line + newlines, 0, nl + 1
            pos += len(block)
    if pos > start:
        yield start, pos, line


def _read_range(chunk: Chunk) -> bytes:
    """The bytes of a JSONL chunk; raises :class:`BulkError` when the file no longer holds them (it shrank after
    the job planned its chunks: silently fewer rows otherwise)."""
    with open(chunk.path, "rb") as f:
        f.seek(chunk.start)
        data = f.read(chunk.end - chunk.start)
    if len(data) != chunk.end - chunk.start:
        raise BulkError(f"{chunk.path}: the file changed while the job ran (bytes {chunk.start}..{chunk.end} were "
                        f"planned, {len(data)} could be read)")
    return data


def fingerprint(files: Sequence[tuple[Path, str]]) -> dict[str, tuple[int, int]]:
    """``path -> (size, mtime_ns)`` of every input file, taken when the job starts."""
    out = {}
    for path, _ in files:
        st = path.stat()
        out[str(path)] = (st.st_size, st.st_mtime_ns)
    return out


def check_unchanged(before: dict[str, tuple[int, int]]) -> None:
    """Raise :class:`BulkError` naming the first input file whose size or modification time differs from
    ``before`` (:func:`fingerprint` at the start), or that is gone: its rows would be partly old, partly new."""
    for path, (size, mtime) in before.items():
        try:
            st = Path(path).stat()
        except OSError as exc:
            raise BulkError(f"{path}: input file disappeared while the job ran ({exc.strerror or exc})") from None
        if (st.st_size, st.st_mtime_ns) != (size, mtime):
            raise BulkError(f"{path}: input file changed while the job ran (size {size} -> {st.st_size} bytes, "
                            "modification time changed too)" if st.st_size != size else
                            f"{path}: input file changed while the job ran (same size, new modification time)")


def read_chunk(chunk: Chunk, column: str, keep: Sequence[str] | None, *, messages: bool = False) -> Rows:
    """The rows of ``chunk``: text from ``column`` (with ``messages``, a list of chat messages instead: a JSON
    array, or a Parquet list of structs), and the ``keep`` columns (None: every column but ``column``; for JSONL,
    the keys of the chunk's first good row)."""
    if chunk.format == "jsonl":
        return _read_jsonl(chunk, column, keep, messages)
    return _read_parquet(chunk, column, keep, messages)


def _read_jsonl(chunk: Chunk, column: str, keep: Sequence[str] | None, messages: bool) -> Rows:
    data = _read_range(chunk)
    keys: list[str] = []
    texts: list[str | None] = []
    errors: list[str | None] = []
    records: list[dict[str, Any] | None] = []
    for number, raw in enumerate(data.split(b"\n"), chunk.first_line):
        if not raw.strip():
            continue  # blank line (or the empty tail after the last newline): not a row
        keys.append(f"{chunk.path}:{number}")
        text, error, record = _parse_line(raw, column, messages)
        texts.append(text)
        errors.append(error)
        records.append(record)
    if keep is None:
        first = next((r for r in records if r is not None), {})
        keep = [k for k in first if k != column]
    kept = {name: _arrow_column([None if r is None else r.get(name) for r in records]) for name in keep}
    return Rows(keys, texts, errors, kept)


def _parse_line(raw: bytes, column: str, messages: bool) -> tuple[Any, str | None, dict[str, Any] | None]:
    """``(text, error, record)`` of one JSONL line."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"invalid UTF-8 at byte {exc.start} of the line", None
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} at column {exc.colno}", None
    except RecursionError:
        return None, "invalid JSON: nested too deeply", None
    if not isinstance(record, dict):
        return None, f"not a JSON object but {type(record).__name__}", None
    if column not in record:
        return None, f"missing column {column!r}", record
    value = record[column]
    if messages:
        if not isinstance(value, list):
            return None, f"column {column!r} holds {_json_type(value)}, not a list of messages", record
    elif not isinstance(value, str):
        return None, f"column {column!r} holds {_json_type(value)}, not a string", record
    return value, None, record


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
             dict: "an object"}
    return names.get(type(value), "null")


def _arrow_column(values: list[Any]) -> Any:
    """A pyarrow array of ``values``, as their own type when they have one; mixed types become JSON text."""
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, RecursionError):
        return pa.array([None if v is None else _json_text(v) for v in values], pa.string())


def _json_text(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError):  # nested too deeply to write back: the kept value is null
        return None


def _read_parquet(chunk: Chunk, column: str, keep: Sequence[str] | None, messages: bool) -> Rows:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(chunk.path)
    names = pf.schema_arrow.names
    wanted = [n for n in names if n != column] if keep is None else [n for n in keep if n in names]
    table = pf.read_row_group(chunk.row_group, columns=[*wanted, *([column] if column in names else [])])
    n = table.num_rows
    keys = [f"{chunk.path}#{chunk.first_row + i}" for i in range(n)]
    # a kept column this file lacks is all nulls
    kept = {name: table.column(name) if name in names else pa.nulls(n) for name in (wanted if keep is None else keep)}
    if column not in names:
        return Rows(keys, [None] * n, [f"missing column {column!r}"] * n, kept)
    values = table.column(column)
    texts: list[Any]
    errors: list[str | None] = [None] * n
    if messages:
        if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)):
            return Rows(keys, [None] * n, [f"column {column!r} has type {values.type}, not a list of messages"] * n,
                        kept)
        texts = [None if v is None else [_drop_nulls(m) for m in v] for v in values.to_pylist()]
    elif pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        texts = values.to_pylist()
    elif pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
        texts = []
        for i, raw in enumerate(values.to_pylist()):
            if raw is None:
                texts.append(None)
                continue
            try:
                texts.append(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                texts.append(None)
                errors[i] = f"invalid UTF-8 at byte {exc.start}"
    else:
        return Rows(keys, [None] * n, [f"column {column!r} has type {values.type}, not a string"] * n, kept)
    for i, text in enumerate(texts):
        if text is None and errors[i] is None:
            errors[i] = f"column {column!r} is null"
    return Rows(keys, texts, errors, kept)


def _drop_nulls(value: Any) -> Any:
    """A Parquet struct as the JSON object it stands for: fields that are null in this row are absent."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def read_good_rows(chunk: Chunk, column: str, keep: Sequence[str] | None) -> GoodRows | None:
    """The rows of ``chunk`` through Arrow's readers when every row is good and the result is provably the one
    :func:`read_chunk` gives (same rows, keys, texts, kept columns and their types); None otherwise (a bad row, a
    blank line, a byte-order mark, a kept column whose type Arrow infers differently from the reference…)."""
    if chunk.format == "jsonl":
        return _good_jsonl(chunk, column, keep)
    return _good_parquet(chunk, column, keep)


#: Kept-column types on which Arrow's JSON inference and the reference's ``pa.array`` agree (doubles checked too).
_SIMPLE = ("null", "bool", "int64", "double", "string")


def _good_jsonl(chunk: Chunk, column: str, keep: Sequence[str] | None) -> GoodRows | None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    data = _read_range(chunk)
    # The reference skips blank lines but numbers every line, and rejects a line that starts with a byte-order
    # mark; Arrow skips both (a mark only at the start of its buffer, which is where a chunk's first line starts).
    if not data or data.startswith(_BOM) or _BLANK_LINE.search(data):
        return None
    first_nl = data.find(b"\n")
    first = data if first_nl < 0 else data[:first_nl]
    last = data[data.rfind(b"\n", 0, len(data) - 1) + 1:]
    if not first.strip() or not last.strip():
        return None
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if max_opens_per_line(data) >= MAX_FAST_OPENS:
        return None  # Arrow's JSON reader overflows its stack on deep nesting (>= 20,000 crashed a worker)
    try:
        # Arrow's JSON reader checks no UTF-8 (the reference rejects a line with any invalid byte): check the
        # whole chunk, in place, as Python's strict decoder would
        whole = pa.py_buffer(data)
        bounds = pa.array([0, len(data)], pa.int64()).buffers()[1]
        pa.Array.from_buffers(pa.large_string(), 1, [None, bounds, whole]).validate(full=True)
        if keep is None:
            record = json.loads(first.decode("utf-8"))
            if not isinstance(record, dict):
                return None
            keep = [k for k in record if k != column]
        wanted = list(keep)
        table = pj.read_json(
            io.BytesIO(data),
            read_options=pj.ReadOptions(use_threads=False, block_size=len(data) + 1),
            parse_options=pj.ParseOptions(explicit_schema=pa.schema([(column, pa.string())]),
                                          unexpected_field_behavior="infer" if wanted else "ignore"),
        )
    except (pa.ArrowInvalid, ValueError):  # UnicodeDecodeError and json's errors are ValueErrors too
        return None
    n = table.num_rows
    if n != n_lines:  # one line held two objects: the reference reads it as invalid JSON
        return None
    texts = table.column(column).combine_chunks()
    if texts.null_count:
        return None
    kept: dict[str, Any] = {}
    for name in wanted:
        if name not in table.column_names:
            kept[name] = pa.nulls(n)
            continue
        values = table.column(name).combine_chunks()
        if str(values.type) not in _SIMPLE:
            return None  # timestamps inferred from strings, structs, lists: the reference's types may differ
        if pa.types.is_floating(values.type) and values.null_count < n:
            # a number past int64 is a double here and JSON text in the reference
            top = pc.max(pc.abs(values)).as_py()
            if top is not None and top >= 2.0**63:
                return None
        kept[name] = values
    keys = _keys(f"{chunk.path}:", chunk.first_line, n)
    return GoodRows(keys, texts, kept)


#: A chunk with a line holding this many ``[`` or ``{`` bytes (an upper bound of its nesting depth, strings
#: included) is read by the reference reader, never by Arrow's.
MAX_FAST_OPENS = 512


def max_opens_per_line(data: bytes) -> int:
    """An upper bound of the nesting depth of every line of ``data``: the largest number of ``[``/``{`` bytes on
    one line (vectorised), or their total in ``data`` when that is under :data:`MAX_FAST_OPENS`."""
    import numpy as np

    arr = np.frombuffer(data, np.uint8)
    opens = np.flatnonzero((arr == 0x5B) | (arr == 0x7B))
    if len(opens) < MAX_FAST_OPENS:
        return int(len(opens))
    lines = np.searchsorted(np.flatnonzero(arr == 10), opens)
    return int(np.bincount(lines).max())


def _keys(prefix: str, first: int, n: int) -> Any:
    """``prefix + str(first + i)`` for ``i < n``, as an Arrow string array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    numbers = pa.array(range(first, first + n), pa.int64()).cast(pa.string())
    return pc.binary_join_element_wise(pa.scalar(prefix), numbers, "")


def _good_parquet(chunk: Chunk, column: str, keep: Sequence[str] | None) -> GoodRows | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(chunk.path)
    names = pf.schema_arrow.names
    if column not in names:
        return None
    wanted = [n for n in names if n != column] if keep is None else [n for n in keep if n in names]
    table = pf.read_row_group(chunk.row_group, columns=[*wanted, column])
    texts = table.column(column).combine_chunks()
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)) or texts.null_count:
        return None
    try:
        texts.validate(full=True)  # UTF-8 (the reference would fail on it: let it)
    except pa.ArrowInvalid:
        return None
    n = table.num_rows
    kept = {name: table.column(name) if name in names else pa.nulls(n) for name in (wanted if keep is None else keep)}
    return GoodRows(_keys(f"{chunk.path}#", chunk.first_row, n), texts, kept)
