"""Pre-tokenizers: ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit, Punctuation, Digits, Sequence.

They split pieces as Hugging Face's ``NormalizedString.split`` does: a pattern cuts a piece into matched and
unmatched stretches, a *behaviour* decides what becomes of the matches (``Removed``, ``Isolated``,
``MergedWithPrevious``, ``MergedWithNext``, ``Contiguous``; ``invert`` swaps matched and unmatched first), and
empty pieces are dropped. Pieces that are matched added tokens pass through untouched.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import regex

from .base import Piece, PreTokenizer, Span
from .pattern import HFPattern

BEHAVIOURS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")

#: GPT-2's pre-tokenizer, as Hugging Face's ByteLevel applies it with ``use_regex``.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_GPT2 = regex.compile(GPT2_PATTERN)

Match = tuple[int, int, bool]


def _cover(text: str, spans: Sequence[tuple[int, int]]) -> list[Match]:
    """Matches plus the unmatched stretches between them, covering ``text`` (as Hugging Face's find_matches)."""
    if not text:
        return [(0, 0, False)]
    out: list[Match] = []
    prev = 0
    for start, end in spans:
        if prev != start:
            out.append((prev, start, False))
        out.append((start, end, True))
        prev = end
    if prev != len(text):
        out.append((prev, len(text), False))
    return out


def _apply_behaviour(matches: list[Match], behaviour: str) -> list[tuple[int, int]]:
    """The stretches to keep, in order, for one behaviour."""
    if behaviour == "Isolated":
        return [(s, e) for s, e, _ in matches]
    if behaviour == "Removed":
        return [(s, e) for s, e, m in matches if not m]
    acc: list[list[int]] = []
    previous = False
    if behaviour == "Contiguous":
        for s, e, m in matches:
            if m == previous and acc:
                acc[-1][1] = e
            else:
                acc.append([s, e])
            previous = m
    elif behaviour == "MergedWithPrevious":
        for s, e, m in matches:
            if m and not previous and acc:
                acc[-1][1] = e
            else:
                acc.append([s, e])
            previous = m
    elif behaviour == "MergedWithNext":
        for s, e, m in reversed(matches):
            if m and not previous and acc:
                acc[-1][0] = s
            else:
                acc.append([s, e])
            previous = m
        acc.reverse()
    else:
        raise ValueError(f"unknown split behaviour {behaviour!r}")
    return [(s, e) for s, e in acc]


def split_pieces(pieces: list[Piece], find: Callable[[str], Sequence[tuple[int, int]]], behaviour: str,
                 invert: bool = False) -> list[Piece]:
    """Split every free piece at the matches ``find`` returns, with ``behaviour``; drop empty pieces."""
    out: list[Piece] = []
    for piece in pieces:
        if piece.token_id is not None:
            out.append(piece)
            continue
        matches = _cover(piece.text, find(piece.text))
        if invert:
            matches = [(s, e, not m) for s, e, m in matches]
        for s, e in _apply_behaviour(matches, behaviour):
            if s < e:
                out.append(piece if (s == 0 and e == len(piece.text)) else piece.slice(s, e))
    return out


def _behaviour(config: dict[str, Any], default: str | None = None) -> str:
    value = config.get("behavior", default)
    if value not in BEHAVIOURS:
        raise ValueError(f"unsupported split behavior {value!r}")
    return str(value)


class Split:
    """Split on a string or regex pattern."""

    def __init__(self, pattern: HFPattern, behaviour: str, invert: bool = False) -> None:
        self.pattern = pattern
        self.behaviour = behaviour
        self.invert = invert

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Split:
        return cls(HFPattern.from_hf(config["pattern"]), _behaviour(config), bool(config.get("invert", False)))

    def pre_tokenize(self, pieces: list[Piece]) -> list[Piece]:
        return split_pieces(pieces, self.pattern.matches, self.behaviour, self.invert)

    def split_str(self, text: str) -> list[str]:
        """The texts of :meth:`pre_tokenize` of one free piece ``text`` (no spans), the same cut."""
        literal = self.pattern.string
        if text and not self.invert and literal is not None and (not literal or literal not in text):
            return [text]  # no match: every behaviour keeps the whole text
        matches = _cover(text, self.pattern.matches(text))
        if self.invert:
            matches = [(s, e, not m) for s, e, m in matches]
        return [text[s:e] for s, e in _apply_behaviour(matches, self.behaviour) if s < e]


@lru_cache(maxsize=1)
def byte_chars() -> list[str]:
    """GPT-2's byte -> printable character table."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


class _ByteMap(dict[int, str]):
    """``str.translate`` table: any code point -> the byte-level characters of its UTF-8 encoding."""

    def __missing__(self, cp: int) -> str:
        chars = byte_chars()
        value = "".join(chars[b] for b in chr(cp).encode("utf-8", "surrogatepass"))
        self[cp] = value
        return value


_BYTE_MAP = _ByteMap()


def to_byte_level(text: str) -> str:
    """``text``'s UTF-8 bytes as byte-level characters."""
    return text.translate(_BYTE_MAP)


class ByteLevel:
    """Optionally a leading space and GPT-2's split, then every byte as its printable character."""

    def __init__(self, add_prefix_space: bool = True, use_regex: bool = True) -> None:
        self.add_prefix_space = add_prefix_space
        self.use_regex = use_regex

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> ByteLevel:
        return cls(bool(config.get("add_prefix_space", True)), bool(config.get("use_regex", True)))

    def pre_tokenize(self, pieces: list[Piece]) -> list[Piece]:
        if self.add_prefix_space:
            pieces = [p if p.token_id is not None or not p.text or p.text.startswith(" ") else p.with_text(
                " " + p.text, None if p.spans is None else [p.spans[0], *p.spans]) for p in pieces]
        if self.use_regex:
            pieces = split_pieces(pieces, lambda t: [m.span() for m in _GPT2.finditer(t)], "Isolated")
        out: list[Piece] = []
        for p in pieces:
            if p.token_id is not None:
                out.append(p)
                continue
            if not p.text:
                continue
            text = to_byte_level(p.text)
            if p.spans is None:
                out.append(p.with_text(text, None))
                continue
            if len(text) == len(p.text):
                out.append(p.with_text(text, p.spans))
                continue
            spans: list[Span] = []
            for c, span in zip(p.text, p.spans, strict=True):
                spans.extend([span] * len(c.encode("utf-8", "surrogatepass")))
            out.append(p.with_text(text, spans))
        return out


PREPEND_SCHEMES = ("always", "first", "never")


class Metaspace:
    """Spaces become ``replacement``; ``replacement`` prepended (``always``, ``first``: only at the start of the
    caller's text, ``never``); with ``split``, a cut before every ``replacement``."""

    def __init__(self, replacement: str = "▁", prepend_scheme: str = "always", split: bool = True) -> None:
        if len(replacement) != 1 or prepend_scheme not in PREPEND_SCHEMES:
            raise ValueError("Metaspace needs a one-character replacement and a known prepend_scheme")
        self.replacement = replacement
        self.prepend_scheme = prepend_scheme
        self.split = split

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Metaspace:
        scheme = config.get("prepend_scheme")
        if scheme is None:  # files from before prepend_scheme: add_prefix_space true meant always
            scheme = "always" if config.get("add_prefix_space", True) else "never"
        return cls(str(config.get("replacement", "▁")), str(scheme), bool(config.get("split", True)))

    def pre_tokenize(self, pieces: list[Piece]) -> list[Piece]:
        rep = self.replacement
        out: list[Piece] = []
        for p in pieces:
            if p.token_id is not None:
                out.append(p)
                continue
            if not p.text:
                continue
            text = p.text.replace(" ", rep)
            spans = p.spans
            prepend = self.prepend_scheme == "always" or (self.prepend_scheme == "first" and p.first)
            if prepend and text and not text.startswith(rep):
                text = rep + text
                spans = None if spans is None else [spans[0], *spans]
            out.append(p.with_text(text, spans))
        if self.split:
            out = split_pieces(out, lambda t: [(i, i + 1) for i, c in enumerate(t) if c == rep], "MergedWithNext")
        return out


_WHITESPACE = regex.compile(r"\w+|[^\w\s]+")


def _rust_whitespace(c: str) -> bool:
    return c in "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" or "\u2000" <= c <= "\u200a"


class Whitespace:
    """Runs of word characters and runs of other non-space characters (``\\w+|[^\\w\\s]+``)."""

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Whitespace:
        return cls()

    def pre_tokenize(self, pieces: list[Piece]) -> list[Piece]:
        return split_pieces(pieces, lambda t: [m.span() for m in _WHITESPACE.finditer(t)], "Removed", invert=True)


class WhitespaceSplit:
    """Split on whitespace, which is removed."""

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> WhitespaceSplit:
        return cls()

    def pre_tokenize(self, pieces: list[Piece]) -> list[Piece]:
        return split_pieces(pieces, lambda t: [(i, i + 1) for i, c in enumerate(t) if _rust_whitespace(c)],
                            "Removed")


def is_punctuation(c: str) -> bool:
    """ASCII punctuation or a Unicode ``P*`` character (Hugging Face's test)."""
    return ("!" <= c <= "/") or (":" <= c <= "@") or ("[" <= c <= "`") or ("{" <= c <= "~") or \
        unicodedata.category(c).startswith("P")


class Punctuation:
    """Every punctuation character is a match; ``behavior`` (default ``Isolated``) decides the rest."""

    def __init__(self, behaviour: str = "Isolated") -> None:
        self.behaviour = behaviour

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Punctuation:
        return cls(_behaviour(config, "Isolated"))

    def pre_tokenize(self, pieces: list[Piece]) -> list[Piece]:
        return split_pieces(pieces, lambda t: [(i, i + 1) for i, c in enumerate(t) if is_punctuation(c)],
                            self.behaviour)


def is_numeric(c: str) -> bool:
    """Rust's ``char::is_numeric``: general category Nd, Nl or No."""
    return unicodedata.category(c) in ("Nd", "Nl", "No")


class Digits:
    """Digits isolated one by one (``individual_digits``) or in runs."""

    def __init__(self, individual_digits: bool = False) -> None:
        self.individual_digits = individual_digits

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Digits:
        return cls(bool(config.get("individual_digits", False)))

    def pre_tokenize(self, pieces: list[Piece]) -> list[Piece]:
        return split_pieces(pieces, lambda t: [(i, i + 1) for i, c in enumerate(t) if is_numeric(c)],
                            "Isolated" if self.individual_digits else "Contiguous")


class PreTokenizerSequence:
    """Pre-tokenizers applied in order (``Sequence``; the loader builds the members)."""

    def __init__(self, members: Sequence[PreTokenizer]) -> None:
        self.members = list(members)

    def pre_tokenize(self, pieces: list[Piece]) -> list[Piece]:
        for member in self.members:
            pieces = member.pre_tokenize(pieces)
        return pieces
