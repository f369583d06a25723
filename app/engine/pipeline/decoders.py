"""Decoders: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, BPEDecoder, Sequence.

:meth:`decode_chain` is Hugging Face's (token strings in, strings out; the pipeline joins them).
:meth:`surface` is one token on its own in the middle of a text (no first-token rules, no stripping at the
edges), for :meth:`~app.engine.tokenizer.Tokenizer.decode_tokens_bytes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from .base import Decoder
from .pattern import HFPattern
from .pre_tokenizers import PREPEND_SCHEMES, byte_chars


@lru_cache(maxsize=1)
def _char_bytes() -> dict[str, int]:
    return {c: b for b, c in enumerate(byte_chars())}


def _byte_level_bytes(token: str) -> bytes:
    """A byte-level token's bytes; a token with a character outside the table stands for its own UTF-8."""
    table = _char_bytes()
    try:
        return bytes(table[c] for c in token)
    except KeyError:
        return token.encode("utf-8")


class ByteLevelDecoder(Decoder):
    """Byte-level characters back to bytes, then UTF-8 (invalid sequences as U+FFFD)."""

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> ByteLevelDecoder:
        return cls()

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return [b"".join(_byte_level_bytes(t) for t in tokens).decode("utf-8", errors="replace")]

    def surface(self, token: str) -> str | bytes:
        return _byte_level_bytes(token)


class MetaspaceDecoder(Decoder):
    """``replacement`` back to spaces; in the first token it is dropped unless ``prepend_scheme`` is never."""

    def __init__(self, replacement: str = "▁", prepend_scheme: str = "always") -> None:
        if prepend_scheme not in PREPEND_SCHEMES:
            raise ValueError(f"unknown prepend_scheme {prepend_scheme!r}")
        self.replacement = replacement
        self.prepend_scheme = prepend_scheme

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> MetaspaceDecoder:
        scheme = config.get("prepend_scheme")
        if scheme is None:
            scheme = "always" if config.get("add_prefix_space", True) else "never"
        return cls(str(config.get("replacement", "▁")), str(scheme))

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for i, token in enumerate(tokens):
            if i == 0 and self.prepend_scheme != "never":
                out.append(token.replace(self.replacement, ""))
            else:
                out.append(token.replace(self.replacement, " "))
        return out

    def surface(self, token: str) -> str | bytes:
        return token.replace(self.replacement, " ")


def _fallback_byte(token: str) -> int | None:
    """The byte of a ``<0xNN>`` token (as Rust's ``u8::from_str_radix`` reads ``NN``), else None."""
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        digits = token[3:5]
        if digits[0] == "+":
            digits = digits[1:]
        if digits and all(c in "0123456789abcdefABCDEF" for c in digits):
            return int(digits, 16)
    return None


class ByteFallback(Decoder):
    """Runs of ``<0xNN>`` tokens become their bytes' text (one U+FFFD per token when not valid UTF-8)."""

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> ByteFallback:
        return cls()

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        pending = bytearray()

        def flush() -> None:
            if pending:
                try:
                    out.append(pending.decode("utf-8"))
                except UnicodeDecodeError:
                    out.extend(["\ufffd"] * len(pending))
                pending.clear()

        for token in tokens:
            byte = _fallback_byte(token)
            if byte is not None:
                pending.append(byte)
                continue
            flush()
            out.append(token)
        flush()
        return out

    def surface(self, token: str) -> str | bytes:
        byte = _fallback_byte(token)
        return token if byte is None else bytes([byte])


class Fuse(Decoder):
    """All tokens joined into one."""

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Fuse:
        return cls()

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return ["".join(tokens)]

    def surface(self, token: str) -> str | bytes:
        return token


class StripDecoder(Decoder):
    """Up to ``start`` leading and ``stop`` trailing ``content`` characters removed from each token."""

    def __init__(self, content: str, start: int, stop: int) -> None:
        self.content = content
        self.start = start
        self.stop = stop

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> StripDecoder:
        return cls(str(config["content"]), int(config["start"]), int(config["stop"]))

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for token in tokens:
            begin = 0
            for i, c in enumerate(token[: self.start]):
                if c != self.content:
                    break
                begin = i + 1
            end = len(token)
            for i in range(min(self.stop, len(token))):
                index = len(token) - i - 1
                if token[index] != self.content:
                    break
                end = index
            out.append(token[begin:end] if begin <= end else "")
        return out

    def surface(self, token: str) -> str | bytes:
        return token  # stripping acts at the edges of a decoded text, not on a token in the middle of one


class ReplaceDecoder(Decoder):
    """Every match of the pattern in each token replaced by ``content``."""

    def __init__(self, pattern: HFPattern, content: str) -> None:
        self.pattern = pattern
        self.content = content

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> ReplaceDecoder:
        return cls(HFPattern.from_hf(config["pattern"]), str(config["content"]))

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return [self.pattern.replace(t, self.content) for t in tokens]

    def surface(self, token: str) -> str | bytes:
        return self.pattern.replace(token, self.content)


class BPEDecoder(Decoder):
    """``suffix`` (end of word) becomes a space, except in the last token where it is dropped."""

    def __init__(self, suffix: str = "</w>") -> None:
        self.suffix = suffix

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> BPEDecoder:
        return cls(str(config.get("suffix", "</w>")))

    def decode_chain(self, tokens: list[str]) -> list[str]:
        last = len(tokens) - 1
        return [t.replace(self.suffix, "" if i == last else " ") for i, t in enumerate(tokens)]

    def surface(self, token: str) -> str | bytes:
        return token.replace(self.suffix, " ")


class DecoderSequence(Decoder):
    """Decoders applied in order (``Sequence``; the loader builds the members)."""

    def __init__(self, members: Sequence[Decoder]) -> None:
        self.members = list(members)

    def decode_chain(self, tokens: list[str]) -> list[str]:
        for member in self.members:
            tokens = member.decode_chain(tokens)
        return tokens

    def surface(self, token: str) -> str | bytes:
        value: str | bytes = token
        for member in self.members:
            if isinstance(value, bytes):
                break
            value = member.surface(value)
        return value
