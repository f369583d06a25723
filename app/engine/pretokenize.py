"""Pre-tokenization: splitting text into the pieces that BPE encodes one at a time.

Uses the third-party ``regex`` module, pinned to the release whose Unicode tables (Unicode 16) match tiktoken's
(DESIGN.md §4.7); the test suite sweeps every code point so an upgrade cannot drift silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import regex

#: The ``regex`` release this engine is verified against; :func:`unicode_version_ok` checks it at load.
VERIFIED_REGEX_VERSION = "2025.9.18"


@lru_cache(maxsize=64)
def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """Compile (once) a pre-tokenizer pattern. Raises ``regex.error`` for an invalid expression."""
    return regex.compile(pattern)


class PreTokenizer:
    """Splits text into pieces with one compiled pattern. Thread-safe (compiled patterns are immutable)."""

    __slots__ = ("pattern", "_compiled")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled = compile_pattern(pattern)

    def pieces(self, text: str) -> list[str]:
        """The pieces of ``text`` in order; their concatenation is ``text`` for every bundled pattern."""
        return self._compiled.findall(text)

    def pieces_with_offsets(self, text: str) -> Iterator[tuple[str, int]]:
        """Each piece with its start offset in ``text``, in characters (code points)."""
        for match in self._compiled.finditer(text):
            yield match.group(), match.start()


def regex_version() -> str:
    """Version of the installed ``regex`` module."""
    return str(getattr(regex, "__version__", "unknown"))
