"""Counting the whitespace words of the Unigram and SentencePiece trainers, compiled when the extension is built.

Two splittings are covered: SentencePiece's (:func:`.sentencepiece.sp_words` with ``remove_extra_whitespaces``)
and Hugging Face's ``Metaspace`` (:func:`.unigram.metaspace_words`). The compiled counter (the byte-level trainer's
``PretokenCounter`` with a whitespace scanner of ``trainer.c``) counts raw pieces of the UTF-8 text — ``word`` for
the first word of a line, ``" word"`` after a space, runs of spaces, line ends — in order of first appearance;
:meth:`WordCounter.words` turns them into the words the Python splitter gives (``▁`` for the space, the dummy
prefix on first words), summing the pieces that become the same word (in C too: ``PretokenCounter.words``).
The result is the Python path's ``Counter``: the same words, counts and first-appearance order (the tests compare
them), so training gives the same artifact either way.

Text holding ``▁`` itself (which both splitters also cut before) is counted in Python: from the first such chunk
on, the words counted so far move into the Python ``Counter`` and the rest goes there too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from .compiled import resolve_backend, trainer_module
from .trainer import lines_of

SPACE = "\u2581"
SPLITTINGS = ("sentencepiece", "metaspace")


class WordCounter:
    """``feed`` chunks of whole lines, then read :meth:`words` (``{word: count}`` in first-appearance order)."""

    def __init__(self, splitting: str, split_line: Callable[[str], list[str]], *, dummy_prefix: bool = True,
                 backend: str | None = None) -> None:
        """``splitting``: one of :data:`SPLITTINGS`, with ``split_line`` its Python splitter (the reference, and the
        path for text the scanner does not cover). ``dummy_prefix``: whether first words get ``▁`` (always for
        Metaspace)."""
        if splitting not in SPLITTINGS:
            raise ValueError(f"splitting must be one of {SPLITTINGS}, not {splitting!r}")
        self.split_line = split_line
        self.collapse = splitting == "sentencepiece"
        self.dummy = dummy_prefix or splitting == "metaspace"
        self._counter: Any = None
        if resolve_backend(backend) == "native":
            scanner = (trainer_module.SCAN_SP_WORDS if splitting == "sentencepiece"
                       else trainer_module.SCAN_METASPACE_WORDS)
            self._counter = trainer_module.PretokenCounter(scanner)
        self._words: Counter[str] = Counter()

    @property
    def native(self) -> bool:
        """True while the compiled counter counts."""
        return self._counter is not None

    def feed(self, text: str) -> None:
        """Count one chunk of whole lines."""
        if self._counter is not None and SPACE in text:
            self._words = Counter(self._native_words())
            self._counter = None
        if self._counter is not None:
            self._counter.feed(text[:-1] if text.endswith("\r") else text)  # lines_of drops a final "\r"
            return
        for line in lines_of(text):
            self._words.update(self.split_line(line))

    def feed_utf8(self, data: bytes) -> None:
        """:meth:`feed` of ``data.decode("utf-8", errors="replace")``; the compiled counter takes well-formed UTF-8
        without ``▁`` as it is (no decoding)."""
        if self._counter is not None and self._counter.feed_utf8(data[:-1] if data.endswith(b"\r") else data):
            return  # (as feed: without a final "\r")
        self.feed(data.decode("utf-8", errors="replace"))

    @property
    def counter(self) -> Any:
        """The compiled ``PretokenCounter`` while it counts (else ``None``); its words are those of
        ``counter.words(*self.word_rules)``."""
        return self._counter

    @property
    def word_rules(self) -> tuple[bool, bool]:
        """``(dummy_prefix, collapse)`` for the compiled counter's ``words`` / ``char_counts``."""
        return self.dummy, self.collapse

    def _native_words(self) -> dict[str, int]:
        words: dict[str, int] = self._counter.words(self.dummy, self.collapse)
        return words

    def words(self) -> dict[str, int]:
        """Every word counted so far with its count, in order of first appearance."""
        if self._counter is not None:
            return self._native_words()
        return dict(self._words)

    def clear(self) -> None:
        """Forget every word (frees the memory)."""
        self._words.clear()
        if self._counter is not None:
            self._counter.clear()
