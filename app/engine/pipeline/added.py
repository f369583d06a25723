"""Added tokens of a pipeline and how they are found in text, as Hugging Face ``tokenizers`` finds them.

Two matchers run before the model: one over the caller's text for tokens with ``normalized: false``, then one over
each normalized stretch between those matches for tokens with ``normalized: true`` (their patterns normalized by
the same normalizer). Each is leftmost-longest over *all* added tokens of its kind, special ones included, and a
match of a special token is then skipped: the text under it stays ordinary text and is not searched again for a
shorter token (Hugging Face with ``encode_special_tokens = True``). So special tokens never come out of text.

``single_word``: the match is dropped when a word character touches it on either side. ``lstrip``/``rstrip``:
the token swallows the whitespace before/after it (never what an earlier match already took).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import regex

from .compiled import MERGE_BPE

_ENDS_WITH_WORD = regex.compile(r"\w\Z")
_STARTS_WITH_WORD = regex.compile(r"\w")
_SPACES_AT_END = regex.compile(r"\s*\Z")
_SPACES_AT_START = regex.compile(r"\s*")


@dataclass(frozen=True)
class AddedToken:
    """One entry of ``added_tokens`` in a ``tokenizer.json``."""

    content: str
    id: int
    special: bool = False
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False


#: A stretch of text: ``(start, end, token)``; ``token`` is the matched added token or None for ordinary text.
Split = tuple[int, int, AddedToken | None]


class AddedMatcher:
    """Leftmost-longest search for a fixed set of token patterns (``pattern`` may differ from ``token.content``
    for normalized tokens). Of equal patterns the first listed wins."""

    def __init__(self, entries: Sequence[tuple[str, AddedToken]]) -> None:
        self._by_pattern: dict[str, AddedToken] = {}
        for pattern, token in entries:
            if pattern:
                self._by_pattern.setdefault(pattern, token)
        self.has_matchable = any(not t.special for t in self._by_pattern.values())
        # Per first character, the pattern lengths that start with it, longest first: at the leftmost position
        # where a pattern starts, the longest one that matches wins.
        lengths: dict[str, set[int]] = {}
        for p in self._by_pattern:
            lengths.setdefault(p[0], set()).add(len(p))
        self._lengths = {c: sorted(ls, reverse=True) for c, ls in lengths.items()}
        self._first_chars = frozenset(lengths)
        self._starts = (regex.compile("[" + "".join(regex.escape(c) for c in sorted(lengths)) + "]")
                        if lengths else None)
        # the same search compiled, when the extension is built and the backend is native
        self._tokens = list(self._by_pattern.values())
        self._native: Any = None
        if lengths and MERGE_BPE.module is not None and MERGE_BPE.resolve_backend(None) == "native":
            self._native = MERGE_BPE.module.Matcher(list(self._by_pattern))

    def entries(self) -> list[tuple[str, AddedToken]]:
        """``(pattern, token)`` per distinct pattern, in the order the matcher prefers them (first listed)."""
        return list(self._by_pattern.items())

    def split(self, text: str) -> list[Split]:
        """``text`` cut into ordinary stretches and matched tokens, covering it in order (no empty stretches,
        except ``[(0, 0, None)]`` for an empty text)."""
        if not text:
            return [(0, 0, None)]
        if self._starts is None or not self.has_matchable or self._first_chars.isdisjoint(text):
            return [(0, len(text), None)]
        splits: list[Split] = []
        taken = 0
        for start, stop, token in self._find(text):
            if token.special:
                continue
            if token.single_word:
                if (start > 0 and _ENDS_WITH_WORD.search(text, 0, start)) or (
                    stop < len(text) and _STARTS_WITH_WORD.match(text, stop)
                ):
                    continue
            if token.lstrip:
                found = _SPACES_AT_END.search(text, 0, start)
                start = max(found.start() if found else start, taken)
            if token.rstrip:
                found = _SPACES_AT_START.match(text, stop)
                stop = found.end() if found else stop
            if taken < start:
                splits.append((taken, start, None))
            splits.append((start, stop, token))
            taken = stop
        if taken != len(text):
            splits.append((taken, len(text), None))
        return splits

    def _find(self, text: str) -> list[tuple[int, int, AddedToken]]:
        """Non-overlapping leftmost-longest matches, scanning on after each match's end."""
        assert self._starts is not None
        if self._native is not None:
            tokens = self._tokens
            return [(i, j, tokens[k]) for i, j, k in self._native.find(text)]
        by_pattern = self._by_pattern
        lengths = self._lengths
        search = self._starts.search
        out: list[tuple[int, int, AddedToken]] = []
        n = len(text)
        at = 0
        while at < n:
            m = search(text, at)
            if m is None:
                break
            i = m.start()
            for length in lengths[text[i]]:
                if i + length <= n:
                    token = by_pattern.get(text[i:i + length])
                    if token is not None:
                        out.append((i, i + length, token))
                        at = i + length
                        break
            else:
                at = i + 1
        return out
