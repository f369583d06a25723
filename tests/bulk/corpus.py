"""Small, seeded, mixed corpora for the bulk tests (JSONL and Parquet), with a few bad rows."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

PIECES = [
    "Hello, world! ", "The quick brown fox jumps over the lazy dog. ", "  \n\n\t ", "1234567890 ", "déjà vu ",
    "日本語のテキスト。", "中文文本，", "Привет, мир! ", "مرحبا ", "🙂🚀 ", "def f(x):\n    return x ** 2\n",
    "<|endoftext|>", "    ", "'s 're 've ", "https://example.com/a?b=c ", "\u00a0\u2003", "e\u0301",
]


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.choice([0, 1, 2, 5, 20, 60])
        out.append("".join(rng.choice(PIECES) for _ in range(k)) + (f" #{i}" if i % 3 else ""))
    return out


def write_jsonl_corpus(path: Path, n: int, seed: int) -> dict[str, str | None]:
    """``n`` good rows and 3 bad ones; returns row key -> text (None for the bad rows)."""
    rows = texts(n, seed)
    expected: dict[str, str | None] = {}
    with path.open("wb") as f:
        for i, text in enumerate(rows):
            f.write(json.dumps({"id": i, "text": text, "lang": "mixed"}, ensure_ascii=bool(i % 2)).encode() + b"\n")
            expected[f"{path}:{i + 1}"] = text
        f.write(b'{"id": -1, "text": 42}\n')
        f.write(b'{"id": -2, "text": "\xc3\x28"}\n')
        f.write(b'{"id": -3}\n')
        for k in range(3):
            expected[f"{path}:{n + k + 1}"] = None
    return expected


def write_parquet_corpus(path: Path, n: int, seed: int, row_group_size: int) -> dict[str, str | None]:
    rows: list[str | None] = list(texts(n, seed))
    rows[n // 2] = None
    pq.write_table(pa.table({"id": list(range(n)), "text": rows, "lang": ["mixed"] * n}), path,
                   row_group_size=row_group_size)
    return {f"{path}#{i}": t for i, t in enumerate(rows)}
