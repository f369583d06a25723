"""Decoding SentencePiece pieces back to text, as ``sentencepiece`` does.

``▁`` is a space; consecutive byte pieces (``<0xNN>``) are joined and read as UTF-8 (each byte of an invalid
sequence becomes U+FFFD); the unknown piece reads as the model's ``unk_surface`` (`` ⁇ ``); the ``▁`` that the
dummy prefix put before the first piece is dropped (the last one's, with ``treat_whitespace_as_suffix``). Control
and special tokens reach this decoder only when the caller keeps them (``skip_special=False``): they stay their
names, and do not count as the first piece.
"""

from __future__ import annotations

from collections.abc import Collection

SPACE_SYMBOL = "\u2581"


class SentencePieceDecoder:
    """The inverse of :class:`~app.engine.pipeline.sp_normalizer.SentencePieceNormalizer` plus byte fallback."""

    def __init__(self, *, byte_pieces: Collection[str], control: Collection[str] = (), unk_piece: str | None = None,
                 unk_surface: str = " \u2047 ", add_dummy_prefix: bool = True,
                 treat_whitespace_as_suffix: bool = False) -> None:
        self._bytes = {p: int(p[3:5], 16) for p in byte_pieces if len(p) == 6 and p.startswith("<0x")}
        self._control = frozenset(control)
        self.unk_piece = unk_piece
        self.unk_surface = unk_surface
        self.add_dummy_prefix = add_dummy_prefix
        self.suffix = treat_whitespace_as_suffix

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        pending = bytearray()
        first = True
        control = self._control
        byte_of = self._bytes
        first_index = -1
        last_index = -1
        for token in tokens:
            b = byte_of.get(token)
            if b is not None:
                pending.append(b)
                continue
            if pending:
                out.append(_bytes_text(bytes(pending)))
                pending.clear()
                first = False
            if token in control:
                out.append(token)
                continue
            if token == self.unk_piece:
                out.append(self.unk_surface)
                first = False
                continue
            if first:
                first_index = len(out)
                first = False
            last_index = len(out)
            out.append(token.replace(SPACE_SYMBOL, " "))
        if pending:
            out.append(_bytes_text(bytes(pending)))
            last_index = -1
        if self.add_dummy_prefix:
            if not self.suffix and first_index >= 0 and out[first_index].startswith(" "):
                out[first_index] = out[first_index][1:]
            if self.suffix and last_index >= 0 and out[last_index].endswith(" "):
                out[last_index] = out[last_index][:-1]
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
