"""Pre-tokenization: splitting text into the pieces that BPE encodes one at a time.

Uses the third-party ``regex`` module, pinned to the release whose Unicode tables (Unicode 16) match tiktoken's
(the Unicode version decides which class a code point is in); the test suite sweeps every code point so an
upgrade cannot drift silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Protocol

from .artifact_regex import BoundedRegex

#: The ``regex`` release this engine is verified against (:func:`unicode_version_ok`; the test suite's code-point
#: sweep is the real check).
VERIFIED_REGEX_VERSION = "2025.9.18"


@lru_cache(maxsize=64)
def compile_pattern(pattern: str) -> BoundedRegex:
    """Compile (once) a pre-tokenizer pattern, checked and bounded in time unless vetted
    (:mod:`app.engine.artifact_regex`). Raises :class:`~app.engine.artifact_regex.PatternRejected` (a
    ``ValueError``) for a pattern over the limits or that does not compile."""
    return BoundedRegex(pattern)


class PieceSplitter(Protocol):
    """What a :class:`~app.engine.encoding.RankBPETokenizer` splits text with: :class:`PatternSplitter` or another
    splitter (a ``tokenizer.json``'s sequence of splits). Pieces cover the text in order."""

    def pieces(self, text: str) -> list[str]: ...

    def pieces_with_offsets(self, text: str) -> Iterator[tuple[str, int]]: ...


class PatternSplitter:
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
    """Release of the installed ``regex`` distribution (e.g. ``"2025.9.18"``; ``regex.__version__`` is an internal
    number such as ``"2.5.162"``), or ``"unknown"`` if the package metadata is missing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("regex")
    except PackageNotFoundError:
        return "unknown"


def unicode_version_ok() -> bool:
    """True if the installed ``regex`` is the release whose Unicode tables were verified against tiktoken."""
    return regex_version() == VERIFIED_REGEX_VERSION
