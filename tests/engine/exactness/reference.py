"""The reference side of the exactness suite: tiktoken 0.14 encodings built locally from OUR artifact files
(:func:`harness.references.reference_encoding`, which says how, shared with the benchmarks), our engines, and the
comparison.

:class:`Tally` counts every string compared per tokenizer and every mismatch; the suite's terminal summary
prints it (see ``conftest.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.engine import RankBPETokenizer, get_tokenizer
from app.engine import native as native_module
from harness.references import (
    META_LLAMA3_PATTERN,
    META_LLAMA3_SPECIALS,
    ReferenceSpec,
    reference_encoding,
    reference_ranks,
    reference_spec,
)

__all__ = ["BACKENDS", "META_LLAMA3_PATTERN", "META_LLAMA3_SPECIALS", "PATTERN_TOKENIZERS", "TALLY", "TOKENIZERS",
           "Mismatch", "ReferenceSpec", "Tally", "assert_same", "chunked", "compare", "native_available", "ours",
           "reference_encoding", "reference_ranks", "reference_spec"]

#: Every bundled tokenizer, and the pattern family it uses.
TOKENIZERS: tuple[str, ...] = ("gpt2", "cl100k_base", "o200k_base", "o200k_harmony", "llama3")
#: One tokenizer per distinct pattern (o200k_harmony shares o200k_base's pattern and ranks).
PATTERN_TOKENIZERS: dict[str, str] = {
    "gpt2": "gpt2",
    "cl100k": "cl100k_base",
    "o200k": "o200k_base",
    "llama3": "llama3",
}

#: Our two engines: the compiled core and the pure-Python reference engine. Both must equal tiktoken.
BACKENDS: tuple[str, ...] = ("native", "python")


def native_available() -> bool:
    """True if the compiled core imported (else the ``native`` cases skip, naming the import error)."""
    return native_module.available()


def ours(name: str, backend: str = "python") -> RankBPETokenizer:
    """Our engine's encoding of ``name`` on ``backend`` (``"native"`` or ``"python"``).

    Raises ``RuntimeError`` if the native backend was asked for but the engine fell back to Python.
    """
    tokenizer = get_tokenizer(name, backend=backend)
    if tokenizer.backend != backend:
        raise RuntimeError(f"asked for the {backend} backend of {name}, got {tokenizer.backend}")
    return tokenizer


@dataclass
class Tally:
    """Strings compared and mismatches found, per tokenizer (thread-safe; process-wide in :data:`TALLY`)."""

    compared: dict[str, int] = field(default_factory=dict)
    mismatched: dict[str, int] = field(default_factory=dict)
    by_source: dict[tuple[str, str], int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, tokenizer: str, source: str, compared: int, mismatched: int) -> None:
        """Record ``compared`` strings (``mismatched`` of them wrong) for ``tokenizer`` from test ``source``."""
        with self._lock:
            self.compared[tokenizer] = self.compared.get(tokenizer, 0) + compared
            self.mismatched[tokenizer] = self.mismatched.get(tokenizer, 0) + mismatched
            key = (tokenizer, source)
            self.by_source[key] = self.by_source.get(key, 0) + compared

    def note(self, line: str) -> None:
        """Add a free-form line to the summary (e.g. how many code points a sweep covered)."""
        with self._lock:
            self.notes.append(line)

    def to_json(self) -> dict[str, Any]:
        """This tally as JSON values (a pytest-xdist worker sends it to the controller this way)."""
        with self._lock:
            return {"compared": dict(self.compared), "mismatched": dict(self.mismatched),
                    "by_source": [[tok, src, n] for (tok, src), n in self.by_source.items()],
                    "notes": list(self.notes)}

    def merge(self, doc: dict[str, Any]) -> None:
        """Add a tally written by :meth:`to_json` (another process's) to this one."""
        with self._lock:
            for name, n in doc["compared"].items():
                self.compared[name] = self.compared.get(name, 0) + n
            for name, n in doc["mismatched"].items():
                self.mismatched[name] = self.mismatched.get(name, 0) + n
            for tok, src, n in doc["by_source"]:
                self.by_source[(tok, src)] = self.by_source.get((tok, src), 0) + n
            self.notes.extend(line for line in doc["notes"] if line not in self.notes)  # each worker notes its corpus


TALLY = Tally()
#: The key under which a pytest-xdist worker sends its tally to the controller (``workeroutput``).
TALLY_KEY = "exactness_tally"


@dataclass(frozen=True)
class Mismatch:
    """One string on which our ids differ from the reference's."""

    text: str
    ours: list[int]
    reference: list[int]

    def describe(self, limit: int = 160) -> str:
        """A short human-readable account: the text and the first differing position."""
        first = next(
            (i for i, (a, b) in enumerate(zip(self.ours, self.reference, strict=False)) if a != b),
            min(len(self.ours), len(self.reference)),
        )
        return (
            f"text={self.text[:limit]!r}{'…' if len(self.text) > limit else ''} (len {len(self.text)}): "
            f"first difference at token {first}: ours {self.ours[first : first + 4]} "
            f"vs reference {self.reference[first : first + 4]} (lengths {len(self.ours)} / {len(self.reference)})"
        )


def compare(
    name: str,
    texts: Iterable[str],
    *,
    source: str,
    backend: str = "python",
    encode: Callable[[str], list[int]] | None = None,
) -> list[Mismatch]:
    """Encode every text with our engine (``encode``, default ``RankBPETokenizer.encode`` of ``backend``) and with
    tiktoken's ``encode_ordinary``; record the counts in :data:`TALLY` (under ``name/backend``) and return the
    mismatches."""
    tokenizer = ours(name, backend)
    ref = reference_encoding(name)
    ours_encode = encode or tokenizer.encode
    n = 0
    bad: list[Mismatch] = []
    for text in texts:
        n += 1
        got = ours_encode(text)
        want = ref.encode_ordinary(text)
        if got != want:
            bad.append(Mismatch(text, got, want))
    TALLY.add(f"{name}/{backend}", source, n, len(bad))
    return bad


def assert_same(name: str, texts: Iterable[str], *, source: str, backend: str = "python", show: int = 5) -> int:
    """:func:`compare`, then fail listing up to ``show`` mismatches. Returns the number of strings compared."""
    texts = list(texts)
    bad = compare(name, texts, source=source, backend=backend)
    if bad:
        lines = "\n".join(m.describe() for m in bad[:show])
        raise AssertionError(
            f"{name} ({backend} backend): {len(bad)} of {len(texts)} strings differ from tiktoken:\n{lines}"
        )
    return len(texts)


def chunked(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of ``items`` of at most ``size`` elements."""
    for i in range(0, len(items), size):
        yield items[i : i + size]
