"""Cutting a SentencePiece BPE input where no merge can ever cross, so the pieces can be cached.

SentencePiece runs BPE on the whole normalized text. A merge joins two adjacent symbols into a vocabulary piece,
so if no mergeable piece contains ``▁`` right after a character other than ``▁``, no symbol ever spans a point
just before a ``▁`` that follows another character: the text falls apart there into stretches that are merged
independently, and encoding them one by one gives exactly the same ids (ties cannot interact either: a merge
only involves its own stretch). :func:`splits_exactly` checks the vocabulary; the loader uses
:class:`SpaceSymbolSplit` only when it holds (it does for Llama 2, Phi-3 and every Mistral ``.model``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .base import Piece

SPACE_SYMBOL = "\u2581"


_CROSSING = re.compile(f"[^{SPACE_SYMBOL}]{SPACE_SYMBOL}")
#: The same over the pieces joined by NUL and reversed (``▁`` then a character other than ``▁`` or NUL, the end of
#: a piece): a pattern that starts with a literal, which ``re`` finds fast.
_CROSSING_JOINED_REVERSED = re.compile(f"{SPACE_SYMBOL}[^\0{SPACE_SYMBOL}]")


def splits_exactly(pieces: Iterable[str]) -> bool:
    """True if no piece has ``▁`` after a character other than ``▁``. One search over the pieces joined by NUL
    (piece by piece when some piece holds a NUL)."""
    items = pieces if isinstance(pieces, list) else list(pieces)
    joined = "\0".join(items)
    if joined.count("\0") != max(len(items) - 1, 0):
        return not any(map(_CROSSING.search, items))
    return _CROSSING_JOINED_REVERSED.search(joined[::-1]) is None


class SpaceSymbolSplit:
    """Pre-tokenizer: cut before every ``▁`` that follows a character other than ``▁``."""

    def pre_tokenize(self, pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        for piece in pieces:
            text = piece.text
            if piece.token_id is not None or SPACE_SYMBOL not in text[1:]:
                out.append(piece)
                continue
            start = 0
            at = text.find(SPACE_SYMBOL, 1)
            while at > 0:
                if text[at - 1] != SPACE_SYMBOL:
                    out.append(piece.slice(start, at))
                    start = at
                at = text.find(SPACE_SYMBOL, at + 1)
            out.append(piece.slice(start, len(text)))
        return out
