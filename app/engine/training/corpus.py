"""Streaming a training corpus into pre-token frequencies.

Files are read in binary blocks and decoded as UTF-8 (invalid bytes become U+FFFD, as in the CLI). Memory grows
with the number of *distinct* pre-tokens, not with the corpus: each chunk of text is split, counted and dropped.

Chunk rule: a chunk ends right after a newline (``\\n``) that follows a non-whitespace character and precedes a
letter or digit (``\\p{L}``/``\\p{N}``). For every bundled pattern (gpt2, cl100k, o200k, llama3) no pre-token can
span such a point, and the pieces of the chunked text are exactly the pieces of the whole file; the test suite
checks this. Files are never joined: a pre-token never spans two files. A custom ``--pattern-regex`` may
in principle match across such a point; its pieces are then those of the chunks. If no such point occurs within
:data:`MAX_CHUNK_CHARS` characters, the chunk is cut after the last newline (or, with no newline at all, at
that length) — the only place where chunking can change pieces of a bundled pattern, noted in
:attr:`CorpusStats.forced_cuts`.

The classic (character) kind splits on whitespace (``str.split``); any newline is an exact cut point for it.
Counters keep insertion order, so words are in corpus order (first appearance), which the ``first-seen``
tie-break relies on.

For the bundled patterns training counts with the compiled counter instead
(:func:`.compiled.count_pretokens_native`: the same chunks, the encoder's hand-written scanners, a C hash table);
its counts and their order are those of :func:`count_pretokens`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

#: Bytes read per block.
BLOCK_BYTES = 1 << 20
#: A chunk longer than this (in characters) is cut at a newline even if it is not a clean cut point.
MAX_CHUNK_CHARS = 16 << 20


@cache
def _cut_point() -> Any:
    """The exact cut point as a reverse-searching ``regex`` pattern (compiled on first use: only the BPE kinds'
    pre-token counting needs it)."""
    import regex

    return regex.compile(r"(?r)(?<=\S)\n(?=[\p{L}\p{N}])")


@dataclass
class CorpusStats:
    """What reading the corpus saw: input bytes, chunks, forced (inexact) cuts, files."""

    files: int = 0
    bytes: int = 0
    chunks: int = 0
    forced_cuts: int = 0


def iter_chunks(
    paths: Iterable[str | Path],
    *,
    exact_cuts: bool = True,
    stats: CorpusStats | None = None,
    on_bytes: Callable[[int], None] | None = None,
    block_bytes: int = BLOCK_BYTES,
    max_chunk_chars: int = MAX_CHUNK_CHARS,
) -> Iterator[str]:
    """Yield the text of each file in chunks that end at cut points (see the module docstring).

    ``exact_cuts=False`` cuts after any newline (enough for whitespace splitting). ``on_bytes(n)`` reports
    progress in bytes read. Raises ``OSError`` if a file cannot be read.
    """
    return _chunks(paths, exact_cuts, stats, on_bytes, block_bytes, max_chunk_chars, False)  # type: ignore[return-value]


def iter_raw_chunks(
    paths: Iterable[str | Path],
    *,
    stats: CorpusStats | None = None,
    on_bytes: Callable[[int], None] | None = None,
    block_bytes: int = BLOCK_BYTES,
    max_chunk_chars: int = MAX_CHUNK_CHARS,
) -> Iterator[str | bytes]:
    """The chunks of :func:`iter_chunks` with ``exact_cuts=False``, each either as that text or as the raw bytes it
    was decoded from (``text == raw.decode("utf-8", errors="replace")``), so that a consumer that reads UTF-8
    itself skips decoding. A chunk comes as bytes whenever it is a run of whole lines of one block (the usual
    case), as text otherwise (the tail of a line longer than ``4 * max_chunk_chars`` bytes)."""
    return _chunks(paths, False, stats, on_bytes, block_bytes, max_chunk_chars, True)


def _chunks(paths: Iterable[str | Path], exact_cuts: bool, stats: CorpusStats | None,
            on_bytes: Callable[[int], None] | None, block_bytes: int, max_chunk_chars: int,
            raw: bool) -> Iterator[str | bytes]:
    """:func:`iter_chunks`, or with ``raw`` (and not ``exact_cuts``) :func:`iter_raw_chunks`."""
    stats = stats if stats is not None else CorpusStats()
    for path in paths:
        stats.files += 1
        pending = ""
        tail = b""
        with open(path, "rb") as f:
            while True:
                block = f.read(block_bytes)
                if on_bytes is not None and block:
                    on_bytes(len(block))
                stats.bytes += len(block)
                if not block:
                    break
                searched = 0
                data = tail + block
                nl = data.rfind(b"\n")
                if nl < 0:
                    tail = data
                    if len(tail) > max_chunk_chars * 4:  # no newline at all for very long: decode what we have
                        text = tail.decode("utf-8", errors="replace")
                        tail = b""
                        pending += text
                    else:
                        continue
                elif raw and not pending:  # whole lines, nothing held back: the bytes themselves
                    stats.chunks += 1
                    yield data[: nl + 1]
                    tail = data[nl + 1 :]
                    continue
                else:
                    searched = max(0, len(pending) - 2)  # cut points before this were looked for already
                    pending += data[: nl + 1].decode("utf-8", errors="replace")
                    tail = data[nl + 1 :]
                cut = _find_cut(pending, exact_cuts, searched)
                if cut > 0:
                    stats.chunks += 1
                    yield pending[:cut]
                    pending = pending[cut:]
                elif len(pending) > max_chunk_chars:
                    nl_at = pending.rfind("\n")
                    cut = nl_at + 1 if nl_at >= 0 else len(pending)
                    stats.chunks += 1
                    stats.forced_cuts += 1
                    yield pending[:cut]
                    pending = pending[cut:]
        if raw and not pending:
            if tail:
                stats.chunks += 1
                yield tail
            continue
        rest = pending + tail.decode("utf-8", errors="replace")
        if rest:
            stats.chunks += 1
            yield rest


def _find_cut(text: str, exact: bool, start: int = 0) -> int:
    """Index just after the last cut point of ``text`` at or after ``start`` (0 if none)."""
    if not exact:
        return text.rfind("\n", start) + 1
    m = _cut_point().search(text, start)
    return m.end() if m else 0


def count_pretokens(
    paths: Iterable[str | Path],
    pattern: str,
    *,
    stats: CorpusStats | None = None,
    on_bytes: Callable[[int], None] | None = None,
    block_bytes: int = BLOCK_BYTES,
    max_chunk_chars: int = MAX_CHUNK_CHARS,
) -> Counter[str]:
    """Frequencies of the pre-tokens of ``pattern`` over the files, in order of first appearance.

    Raises ``regex.error`` for an invalid pattern and ``OSError`` for an unreadable file.
    """
    from ..pretokenize import compile_pattern

    findall = compile_pattern(pattern).findall
    counts: Counter[str] = Counter()
    chunks = iter_chunks(
        paths, exact_cuts=True, stats=stats, on_bytes=on_bytes, block_bytes=block_bytes, max_chunk_chars=max_chunk_chars
    )
    for chunk in chunks:
        counts.update(findall(chunk))
    return counts


def count_words(
    paths: Iterable[str | Path],
    *,
    stats: CorpusStats | None = None,
    on_bytes: Callable[[int], None] | None = None,
    block_bytes: int = BLOCK_BYTES,
) -> Counter[str]:
    """Frequencies of whitespace-separated words (``str.split``) over the files, in order of first appearance."""
    counts: Counter[str] = Counter()
    for chunk in iter_chunks(paths, exact_cuts=False, stats=stats, on_bytes=on_bytes, block_bytes=block_bytes):
        counts.update(chunk.split())
    return counts
