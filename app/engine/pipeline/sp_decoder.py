"""Decoding SentencePiece pieces back to text, as ``sentencepiece`` does.

``▁`` is a space; consecutive byte pieces (``<0xNN>``) are joined and read as UTF-8 (each byte of an invalid
sequence becomes U+FFFD); the unknown piece reads as the model's ``unk_surface`` (`` ⁇ ``). At the start of the
text (nothing written yet), a piece's leading ``▁`` is dropped when the model adds a dummy prefix or removes extra
whitespace; with ``remove_extra_whitespaces`` every such piece at the start loses it (``▁`` ``▁a`` reads ``a``),
otherwise only the first. ``sentencepiece`` 0.2.3 does exactly this, also for models that treat whitespace as a
suffix (no trailing ``▁`` is dropped). Control and special tokens reach this decoder only when the caller keeps them
(``skip_special=False``): they stay their names, and, as ``sentencepiece``'s invisible ones, do not end the start.
"""

from __future__ import annotations

from collections.abc import Collection

from .base import Decoder

SPACE_SYMBOL = "\u2581"


class SentencePieceDecoder(Decoder):
    """The inverse of :class:`~app.engine.pipeline.sp_normalizer.SentencePieceNormalizer` plus byte fallback."""

    #: What a special token dropped by ``skip_special`` leaves in the chain: ``sentencepiece`` decodes a control
    #: piece as an empty string, which still ends a run of byte pieces (``<0xD1>`` ``</s>`` ``<0xB9>`` is two
    #: invalid sequences, not ``ѹ``).
    skipped_special: str | None = ""

    def __init__(self, *, byte_pieces: Collection[str], control: Collection[str] = (), unk_piece: str | None = None,
                 unk_surface: str = " \u2047 ", add_dummy_prefix: bool = True,
                 remove_extra_whitespaces: bool = True) -> None:
        self._bytes = {p: int(p[3:5], 16) for p in byte_pieces if len(p) == 6 and p.startswith("<0x")}
        self._control = frozenset(control)
        self.unk_piece = unk_piece
        self.unk_surface = unk_surface
        self.strip_start = add_dummy_prefix or remove_extra_whitespaces
        self.strip_every_start = remove_extra_whitespaces

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        pending = bytearray()
        at_start = self.strip_start  # nothing visible written yet, and a leading ``▁`` may still be dropped
        control = self._control
        byte_of = self._bytes
        for token in tokens:
            b = byte_of.get(token)
            if b is not None:
                pending.append(b)
                continue
            if pending:
                out.append(_bytes_text(bytes(pending)))
                pending.clear()
                at_start = False
            if token in control:
                out.append(token)
                continue
            if token == self.unk_piece:
                out.append(self.unk_surface)
                at_start = at_start and not self.unk_surface
                continue
            if at_start:
                stripped = token.startswith(SPACE_SYMBOL)
                if stripped:
                    token = token[1:]
                at_start = not token and (self.strip_every_start or not stripped)
            out.append(token.replace(SPACE_SYMBOL, " "))
        if pending:
            out.append(_bytes_text(bytes(pending)))
        return out

    def surface(self, token: str) -> str | bytes:
        b = self._bytes.get(token)
        if b is not None:
            return bytes([b])
        if token == self.unk_piece:
            return self.unk_surface
        return token.replace(SPACE_SYMBOL, " ")


def _bytes_text(data: bytes) -> str:
    """UTF-8 text of byte pieces; every byte of an invalid sequence becomes U+FFFD."""
    out: list[str] = []
    i, n = 0, len(data)
    while i < n:
        for k in (1, 2, 3, 4):
            try:
                out.append(data[i:i + k].decode("utf-8"))
            except UnicodeDecodeError:
                continue
            i += k
            break
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)
