"""A framed prompt as parts: ordinary texts and :class:`~app.engine.specials.Special` tokens, in order.

Any tokenizer's ``encode_parts`` turns the parts into ids; each text part is encoded on its own (pre-tokenization
never runs across a part boundary), so a framing chooses its text boundaries to match its reference.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..specials import Special

Part = str | Special
_SPECIALS: dict[str, Special] = {}  # Special is immutable: one instance per name


def special_part(name: str) -> Special:
    """The :class:`Special` for ``name`` (one shared instance per name; it is immutable)."""
    special = _SPECIALS.get(name)
    if special is None:
        special = _SPECIALS.setdefault(name, Special(name)) if len(_SPECIALS) < 65536 else Special(name)
    return special


class Parts:
    """An append-only list of parts."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Part] = []

    def text(self, text: str) -> None:
        """Append ordinary text (empty text adds nothing)."""
        if text:
            self.items.append(text)

    def special(self, name: str) -> None:
        self.items.append(special_part(name))

    def __iter__(self) -> Iterator[Part]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def rendered(self) -> str:
        """The prompt as one string (special tokens written by name), for display and comparison only."""
        return "".join(p.name if isinstance(p, Special) else p for p in self.items)
