"""BERT's text handling as Hugging Face ``tokenizers`` (Rust) does it: ``BertNormalizer``, ``BertPreTokenizer`` and
the ``WordPiece`` decoder.

Three WordPiece implementations disagree on details; this one follows the Rust one (the reference for
``tokenizer.json`` files and for GGUF ``bert`` vocabularies, whose expected ids come from it):

* clean text: drop NUL, U+FFFD and every control, format or private-use character (Cc, Cf, Co) except tab,
  newline and carriage return; map every whitespace character (Rust's ``char::is_whitespace`` plus tab/newline/CR) to a
  space;
* Chinese characters (the CJK ideograph blocks, the extension range starting at U+2B920) get a space on each side;
* strip accents (default: when lowercasing) = NFD, then drop nonspacing marks (Mn); *then* lowercase, one
  character at a time (no final-sigma rule). NFD runs over the whole text, so its canonical reordering can swap
  two kept characters of nonzero combining class that end up in one run of combining characters (only the few
  characters of :data:`~.bert_tables.REORDERING` keep one); text holding such a character is normalized as a
  whole, everything else one character at a time;
* character classes (and one NFD decomposition) as the Rust code's Unicode tables give them:
  :mod:`.bert_tables` lists the few code points where they differ from this interpreter's ``unicodedata``;
* pre-tokenizer: split on whitespace (dropped) and isolate every punctuation character (ASCII punctuation and the
  Unicode P* categories).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from ._hf_unicode import EXCEPTIONS as _HF_UNASSIGNED
from .base import Decoder, Piece
from .bert_tables import CONTROL_FLIP, LOWER, MARK_FLIP, NFD, PUNCT_FLIP, REORDERING
from .charsmap import chunks_to_piece

#: Rust's ``char::is_whitespace`` (the Unicode White_Space property).
WHITESPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_REORDERING = frozenset(map(chr, REORDERING))
_UNASSIGNED = re.compile(f"[{_HF_UNASSIGNED}]")


def is_chinese_char(ch: str) -> bool:
    cp = ord(ch)
    return cp >= 0x3400 and any(lo <= cp <= hi for lo, hi in _CJK)


def is_control(ch: str) -> bool:
    """An "other" character that clean-text drops (tab, newline and CR count as whitespace instead)."""
    if ch in "\t\n\r":
        return False
    return (unicodedata.category(ch) in ("Cc", "Cf", "Co")) != (ord(ch) in CONTROL_FLIP)


def is_punctuation(ch: str) -> bool:
    if ch in _ASCII_PUNCT:
        return True
    return (unicodedata.category(ch)[0] == "P") != (ord(ch) in PUNCT_FLIP)


def is_nonspacing_mark(ch: str) -> bool:
    return (unicodedata.category(ch) == "Mn") != (ord(ch) in MARK_FLIP)


def combining_class(ch: str) -> int:
    """The canonical combining class the reference's NFD uses (0 for characters its tables do not have)."""
    return 0 if _UNASSIGNED.match(ch) else unicodedata.combining(ch)


def needs_whole_text(text: str) -> bool:
    """True when stripping accents from ``text`` one character at a time could differ from doing it over the whole
    text (it holds a character of :data:`~.bert_tables.REORDERING`)."""
    return not text.isascii() and not _REORDERING.isdisjoint(text)


class BertNormalizer:
    """Hugging Face's ``BertNormalizer`` (see the module docstring for the order of the steps)."""

    def __init__(self, *, clean_text: bool = True, handle_chinese_chars: bool = True,
                 strip_accents: bool | None = None, lowercase: bool = True) -> None:
        self.clean_text = clean_text
        self.handle_chinese_chars = handle_chinese_chars
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.lowercase = lowercase
        #: every ASCII character's output, for a one-call fast path on ASCII text (same per-character rule)
        self._ascii = str.maketrans({chr(c): self._char(chr(c)) for c in range(128)})
        #: character -> output, filled as characters are met (bounded; the rule is per character)
        self._memo: dict[str, str] = {}

    @classmethod
    def from_hf(cls, config: Mapping[str, Any]) -> BertNormalizer:
        return cls(clean_text=bool(config.get("clean_text", True)),
                   handle_chinese_chars=bool(config.get("handle_chinese_chars", True)),
                   strip_accents=config.get("strip_accents"), lowercase=bool(config.get("lowercase", True)))

    def _char(self, ch: str) -> str:
        if self.clean_text:
            if ch == "\0" or ch == "\ufffd" or is_control(ch):
                return ""
            if ch in WHITESPACE:
                ch = " "
        if self.handle_chinese_chars and is_chinese_char(ch):
            ch = f" {ch} "
        if self.strip_accents:
            decomposed = NFD.get(ord(ch)) if len(ch) == 1 else None
            if decomposed is None:
                decomposed = unicodedata.normalize("NFD", ch)
            ch = "".join(c for c in decomposed if not is_nonspacing_mark(c))
        if self.lowercase:
            ch = "".join(LOWER.get(ord(c)) or c.lower() for c in ch)
        return ch

    def _whole_text(self, text: str) -> list[tuple[str, int]]:
        """Output characters of ``text`` with the index of the input character each is aligned to, NFD over the
        whole text (canonical reordering across characters included); for text :func:`needs_whole_text` flags.
        Alignment is positional, as the reference tracks it: the first character of each input character's output
        takes the next input position in order wherever reordering moved it, the others the one before them."""
        seq: list[tuple[str, int, bool]] = []  # (character, combining class, first of its input character)
        sources: list[int] = []  # input index of each output character that is first of its input character
        for i, ch in enumerate(text):
            if self.clean_text:
                if ch == "\0" or ch == "\ufffd" or is_control(ch):
                    continue
                if ch in WHITESPACE:
                    ch = " "
            first = True
            cjk = self.handle_chinese_chars and is_chinese_char(ch)
            for c in f" {ch} " if cjk else ch:
                for d in NFD.get(ord(c)) or unicodedata.normalize("NFD", c):
                    # the padding spaces of a Chinese character are insertions around it
                    lead = first and not (cjk and c == " ")
                    seq.append((d, combining_class(d), lead))
                    if lead:
                        sources.append(i)
                        first = False
        start = 0
        while start < len(seq):  # canonical ordering: a stable sort of each run of nonzero classes
            if seq[start][1] == 0:
                start += 1
                continue
            end = start
            while end < len(seq) and seq[end][1] != 0:
                end += 1
            seq[start:end] = sorted(seq[start:end], key=lambda item: item[1])
            start = end
        out: list[tuple[str, int]] = []
        taken = 0
        at = sources[0] if sources else 0
        for d, _, lead in seq:
            if lead:
                at = sources[taken]
                taken += 1
            if is_nonspacing_mark(d):
                continue
            for c in (LOWER.get(ord(d)) or d.lower()) if self.lowercase else d:
                out.append((c, at))
        return out

    def chunks(self, text: str) -> list[tuple[str, int, int]]:
        if self.strip_accents and needs_whole_text(text):
            return [(c, i, i + 1) for c, i in self._whole_text(text)]
        return [(self._char(ch), i, i + 1) for i, ch in enumerate(text)]

    def normalize(self, piece: Piece) -> Piece:
        if piece.spans is None:
            return piece.with_text(self.normalize_str(piece.text), None)
        return chunks_to_piece(piece, self.chunks(piece.text)) if piece.text else piece

    def normalize_str(self, text: str) -> str:
        if text.isascii():
            return text.translate(self._ascii)
        if self.strip_accents and needs_whole_text(text):
            return "".join(c for c, _ in self._whole_text(text))
        memo = self._memo
        out = []
        for ch in text:
            done = memo.get(ch)
            if done is None:
                done = self._char(ch)
                if len(memo) < 1 << 16:
                    memo[ch] = done
            out.append(done)
        return "".join(out)


class BertPreTokenizer:
    """Split on whitespace (removed) and around each punctuation character (kept as its own piece)."""

    @classmethod
    def from_hf(cls, config: Mapping[str, Any]) -> BertPreTokenizer:
        return cls()

    def pre_tokenize(self, pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        for piece in pieces:
            if piece.token_id is not None:
                out.append(piece)
                continue
            text = piece.text
            start = -1
            for i, ch in enumerate(text):
                if ch in WHITESPACE or is_punctuation(ch):
                    if start >= 0:
                        out.append(piece.slice(start, i))
                        start = -1
                    if ch not in WHITESPACE:
                        out.append(piece.slice(i, i + 1))
                elif start < 0:
                    start = i
            if start >= 0:
                out.append(piece.slice(start, len(text)))
        return out


_CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
            (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


class WordPieceDecoder(Decoder):
    """Hugging Face's ``WordPiece`` decoder: ``##`` pieces join the previous one, others get a space before them
    (not the first); ``cleanup`` undoes the spaces BERT's tokenization put before punctuation and contractions."""

    def __init__(self, prefix: str = "##", cleanup: bool = True) -> None:
        self.prefix = prefix
        self.cleanup = cleanup

    @classmethod
    def from_hf(cls, config: Mapping[str, Any]) -> WordPieceDecoder:
        return cls(str(config.get("prefix", "##")), bool(config.get("cleanup", True)))

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        for i, token in enumerate(tokens):
            if i:
                token = token[len(self.prefix):] if token.startswith(self.prefix) else " " + token
            if self.cleanup:
                for a, b in _CLEANUP:
                    token = token.replace(a, b)
            out.append(token)
        return out

    def surface(self, token: str) -> str | bytes:
        return token[len(self.prefix):] if token.startswith(self.prefix) else token
