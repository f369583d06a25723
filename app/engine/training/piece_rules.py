"""Which multi-character pieces a trainer may learn: SentencePiece's piece validity, as one predicate.

A candidate of two or more characters is refused when (each rule is SentencePiece's trainer's, with its
defaults where it has them; :class:`PieceRules` turns them on or off):

* it is longer than ``max_length`` characters;
* it holds U+0000, U+001F (the trainer's boundary mark in ``sentencepiece`` 0.2.3: never a piece, no piece
  spans it), a space, U+2585 (the trainer's unknown stand-in) or a surrogate;
* the whitespace marker ``▁`` is not its first character (``split_by_whitespace``), or, without that rule, the
  marker is its last character;
* with ``split_digits``, it holds a decimal digit (``0``-``9`` and the full-width ``０``-``９``);
* with ``split_by_unicode_script``, it mixes scripts: each character's Unicode 9.0.0 script (:mod:`.sp_scripts`;
  Hiragana, Katakana and U+30FC count as Han) must equal the last one seen, where an ``Inherited`` character
  (a combining mark) takes the script of the one before it and the marker has none. A digit is ``Common`` with
  ``split_by_number``; without it, a digit matches any script and the next character starts afresh.

Every rule but "the marker is the last character" is *prefix-closed*: once a string breaks it, every extension to
the right does too, so a substring scan may stop at the first break (:meth:`PieceRules.extends`). The tests check
the rules against ``sentencepiece``'s trainer on mixed-script text.

The compiled learners (``sp_rules.h``) apply the same rules from :meth:`PieceRules.native`.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

from .sp_scripts import NAMES, RUN_SCRIPTS, RUN_STARTS

SPACE = "\u2581"
COMMON = NAMES.index("Common")
INHERITED = NAMES.index("Inherited")
HAN = NAMES.index("Han")
_TO_HAN = {NAMES.index("Hiragana"), NAMES.index("Katakana")}
#: A script value that matches every script (a digit without ``split_by_number``, or nothing seen yet).
ANY = -1
#: Characters no learned piece holds (besides surrogates).
FORBIDDEN = frozenset("\0\x1f \u2585")

#: Bits of :meth:`PieceRules.native`'s flags (the compiled learners' ``SP_RULE_*``).
FLAG_SPLIT_DIGITS = 1
FLAG_SPLIT_SCRIPT = 2
FLAG_SPLIT_NUMBER = 4
FLAG_SPLIT_WHITESPACE = 8
FLAG_FORBIDDEN = 16


def script_of(ch: str) -> int:
    """The Unicode 9.0.0 script id of ``ch`` (an index into :data:`.sp_scripts.NAMES`)."""
    return RUN_SCRIPTS[bisect_right(RUN_STARTS, ord(ch)) - 1]


@lru_cache(maxsize=65536)
def sp_script(ch: str) -> int:
    """The script SentencePiece's rule compares: :func:`script_of`, with Hiragana, Katakana and U+30FC as Han."""
    s = script_of(ch)
    return HAN if s in _TO_HAN or ch == "\u30fc" else s


def is_decimal_digit(ch: str) -> bool:
    """A decimal digit as SentencePiece's trainer counts one: ASCII or full-width."""
    return "0" <= ch <= "9" or "\uff10" <= ch <= "\uff19"


@dataclass(frozen=True)
class PieceRules:
    """The rules of the module docstring. The defaults are the mildest (only "the marker comes first", used by the
    ``unigram`` kind); :meth:`sentencepiece` gives SentencePiece's trainer defaults."""

    marker: str | None = SPACE
    split_digits: bool = False
    split_by_unicode_script: bool = False
    split_by_number: bool = True
    split_by_whitespace: bool = True
    max_length: int | None = None
    forbid_controls: bool = False

    @classmethod
    def sentencepiece(cls, *, split_digits: bool = False, split_by_unicode_script: bool = True,
                      split_by_number: bool = True, split_by_whitespace: bool = True,
                      max_length: int = 16) -> PieceRules:
        """SentencePiece's ``IsValidSentencePiece`` with these trainer options (its defaults)."""
        return cls(SPACE, split_digits, split_by_unicode_script, split_by_number, split_by_whitespace, max_length,
                   True)

    def __call__(self, piece: str) -> bool:
        """May ``piece`` (two or more characters) be learned?"""
        return self._scan(piece) == len(piece) and not self._bad_end(piece)

    def extends(self, piece: str) -> bool:
        """False when no extension of ``piece`` to the right can be learned (the prefix-closed rules fail)."""
        return self._scan(piece) == len(piece)

    def end_ok(self, piece: str) -> bool:
        """The rule that is not prefix-closed: without ``split_by_whitespace`` no piece ends with the marker."""
        return not self._bad_end(piece)

    def _bad_end(self, piece: str) -> bool:
        return (not self.split_by_whitespace and self.marker is not None and len(piece) > 1
                and piece[-1] == self.marker)

    def prefix_limit(self, text: str) -> int:
        """The length of the longest prefix of ``text`` that the prefix-closed rules allow (the length bound
        included): ``text[:k]`` may be learned, for ``2 <= k <= prefix_limit(text)``, if :meth:`end_ok`."""
        return self._scan(text)

    def _scan(self, piece: str) -> int:
        """How many leading characters pass the prefix-closed rules (at most ``max_length``)."""
        if self.max_length is not None and len(piece) > self.max_length:
            piece = piece[: self.max_length]
        prev = ANY
        marker = self.marker
        for pos, ch in enumerate(piece):
            if ch == marker:
                if pos > 0 and self.split_by_whitespace:
                    return pos
                continue
            if self.forbid_controls and (ch in FORBIDDEN or "\ud800" <= ch <= "\udfff"):
                return pos
            digit = is_decimal_digit(ch)
            if digit and self.split_digits and len(piece) > 1:
                return pos
            if not self.split_by_unicode_script:
                continue
            if digit and not self.split_by_number:
                s = ANY
            else:
                s = sp_script(ch)
                if s == INHERITED:
                    s = prev
            if s != ANY and prev != ANY and s != prev:
                return pos
            prev = s
        return len(piece)

    def native(self) -> tuple[int, int, int]:
        """``(marker code point or -1, flags, max length or -1)`` for the compiled learners."""
        flags = ((FLAG_SPLIT_DIGITS if self.split_digits else 0) | (FLAG_SPLIT_SCRIPT if self.split_by_unicode_script
                 else 0) | (FLAG_SPLIT_NUMBER if self.split_by_number else 0)
                 | (FLAG_SPLIT_WHITESPACE if self.split_by_whitespace else 0)
                 | (FLAG_FORBIDDEN if self.forbid_controls else 0))
        return (ord(self.marker) if self.marker else -1, flags, -1 if self.max_length is None else self.max_length)
