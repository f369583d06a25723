"""SentencePiece's normalizer (its ``NormalizerSpec``), as the ``sentencepiece`` library applies it to text.

In order, over the input:

1. with ``remove_extra_whitespaces``, leading input that normalizes to spaces is dropped;
2. ``▁`` (or a space without ``escape_whitespaces``) is put first when ``add_dummy_prefix`` (last instead with
   ``treat_whitespace_as_suffix``);
3. each position is rewritten by the longest match among the user-defined pieces (copied as they are), else the
   longest key of the precompiled charsmap (SentencePiece's semantics, see
   :meth:`~app.engine.pipeline.charsmap.CharsMap.longest_at`), else one character is copied;
   with ``remove_extra_whitespaces`` spaces that follow a space are dropped, and with ``escape_whitespaces`` every
   ASCII space becomes ``▁``;
4. with ``remove_extra_whitespaces``, trailing spaces are dropped.

An input that is empty, or only whitespace under ``remove_extra_whitespaces``, normalizes to the empty string (no
dummy prefix). Inserted ``▁`` get an empty span at their position; replacements inherit the span they replace.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from .base import Piece
from .charsmap import CharsMap, chunks_to_piece

SPACE_SYMBOL = "\u2581"


class SentencePieceNormalizer:
    """The ``NormalizerSpec`` of a SentencePiece model plus the model's user-defined pieces (never rewritten)."""

    def __init__(self, charsmap: CharsMap | None = None, *, add_dummy_prefix: bool = True,
                 remove_extra_whitespaces: bool = True, escape_whitespaces: bool = True,
                 treat_whitespace_as_suffix: bool = False, user_defined: Iterable[str] = ()) -> None:
        self.charsmap = charsmap if charsmap is not None and len(charsmap) else None
        self.add_dummy_prefix = add_dummy_prefix
        self.remove_extra_whitespaces = remove_extra_whitespaces
        self.escape_whitespaces = escape_whitespaces
        self.treat_whitespace_as_suffix = treat_whitespace_as_suffix
        lengths: dict[str, set[int]] = {}
        self._user = frozenset(s for s in user_defined if s)
        for s in self._user:
            lengths.setdefault(s[0], set()).add(len(s))
        self._user_lengths = {c: sorted(v, reverse=True) for c, v in lengths.items()}
        self._compiled: Any = None
        self._compiled_lock = threading.Lock()

    def compiled(self) -> Any:
        """This normalizer in C (``app.engine._native._unigram.Normalizer``: the same text, lone surrogates as
        U+FFFD first), built on first use; None without the extension."""
        from .compiled import UNIGRAM

        if self._compiled is None and UNIGRAM.module is not None:
            with self._compiled_lock:
                if self._compiled is None:
                    self._compiled = UNIGRAM.module.Normalizer(
                        self.charsmap.blob if self.charsmap is not None else b"", self.add_dummy_prefix,
                        self.remove_extra_whitespaces, self.escape_whitespaces, self.treat_whitespace_as_suffix,
                        sorted(self._user))
        return self._compiled

    @property
    def user_defined(self) -> frozenset[str]:
        """The user-defined pieces (copied as they are)."""
        return self._user

    def _prefix(self, text: str, i: int) -> tuple[str, int]:
        """SentencePiece's ``NormalizePrefix``: (replacement, characters consumed) at ``text[i:]``."""
        ch = text[i]
        lengths = self._user_lengths.get(ch)
        if lengths is not None:
            for n in lengths:
                if text[i:i + n] in self._user:
                    return text[i:i + n], n
        if self.charsmap is not None:
            hit = self.charsmap.longest_at(text, i)
            if hit is not None:
                return hit[1], hit[0]
        return ch, 1

    def chunks(self, text: str) -> list[tuple[str, int, int]]:
        """The normalized text as ``(output, start, end)`` chunks over ``text`` (characters)."""
        n = len(text)
        i = 0
        remove = self.remove_extra_whitespaces
        ws = SPACE_SYMBOL if self.escape_whitespaces else " "
        if remove:
            while i < n:
                out, used = self._prefix(text, i)
                if out != " ":
                    break
                i += used
        if i >= n:
            return []
        chunks: list[tuple[str, int, int]] = []
        if self.add_dummy_prefix and not self.treat_whitespace_as_suffix:
            chunks.append((ws, i, i))
        prev_space = remove
        plain = self.charsmap is None and not self._user_lengths
        while i < n:
            if plain:
                out, used = text[i], 1
            else:
                out, used = self._prefix(text, i)
            if prev_space:
                out = out.lstrip(" ")
            if out:
                prev_space = out.endswith(" ")
                if self.escape_whitespaces and " " in out:
                    out = out.replace(" ", SPACE_SYMBOL)
            chunks.append((out, i, i + used))
            i += used
            if not remove:
                prev_space = False
        if remove:  # drop trailing whitespace symbols (chunks whose output is empty are dropped on the way)
            while chunks:
                out, start, end = chunks[-1]
                kept = out.rstrip(ws)
                if kept == out and out:
                    break
                chunks.pop()
                if kept:
                    chunks.append((kept, start, end))
                    break
        if self.add_dummy_prefix and self.treat_whitespace_as_suffix:
            chunks.append((ws, n, n))
        return chunks

    def normalize(self, piece: Piece) -> Piece:
        if not piece.text:
            return piece
        return chunks_to_piece(piece, self.chunks(piece.text))

    def normalize_str(self, text: str) -> str:
        if not text:
            return text
        return "".join(c[0] for c in self.chunks(text))
