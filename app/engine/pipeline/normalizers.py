"""Normalizers: NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Replace, Prepend, Strip, Sequence.

Each keeps one original-text span per output character, as Hugging Face's ``NormalizedString`` aligns them: a
character that replaces others takes the span of the first one it replaces, an inserted character the span of the
character before it (of the first character when inserted at the very start), a ``Replace`` result the span of
the last character of what it replaces. :meth:`normalize_str` is the same rewrite without spans.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, Literal, cast

import regex

from ._hf_unicode import CUT_BEFORE, EXCEPTIONS, UNIDATA_VERSION
from .base import Normalizer, Piece, Span
from .pattern import HFPattern

Form = Literal["NFC", "NFD", "NFKC", "NFKD"]

#: Characters after which text normalizes independently of what comes before (a starter that nothing before it
#: can combine with or be reordered around).
_BOUNDARY = {
    "NFC": regex.compile(r"[\p{ccc=0}&&\p{NFC_QC=Yes}]", regex.V1),
    "NFKC": regex.compile(r"[\p{ccc=0}&&\p{NFKC_QC=Yes}]", regex.V1),
    "NFD": regex.compile(r"[\p{ccc=0}&&\p{NFD_QC=Yes}]", regex.V1),
    "NFKD": regex.compile(r"[\p{ccc=0}&&\p{NFKD_QC=Yes}]", regex.V1),
}
#: Code points Hugging Face's (older) Unicode tables leave unassigned while ``unicodedata`` gives them a combining
#: class or a decomposition (``_hf_unicode``, generated for this ``unicodedata`` version), and the starters that
#: compose in ``unicodedata`` only into such code points. Hugging Face treats an unassigned code point as a starter
#: with no decomposition that composes with nothing: no mark is reordered across it and nothing composes across it
#: (reordering stops at a starter, a mark after it is blocked from any earlier starter, and it pairs with no
#: neighbour). So Hugging Face's result is the concatenation of the normalized stretches between such code points,
#: each kept as is; every stretch, holding no new code point, normalizes alike in both tables. A ``CUT_BEFORE``
#: starter composes backwards only into a new code point, which Hugging Face does not do: cutting before it
#: reproduces that. (Checked per code point in contexts by the generator and by the tests.)
_HF_CUT = regex.compile(f"([{EXCEPTIONS}])|[{CUT_BEFORE}]") if unicodedata.unidata_version == UNIDATA_VERSION \
    else None
_DECOMPOSE: dict[str, Form] = {"NFC": "NFD", "NFKC": "NFKD", "NFD": "NFD", "NFKD": "NFKD"}


def _compose(items: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Canonical composition of canonically ordered ``(char, change)`` items; a composite's change absorbs the
    characters it swallows (each contributes its change minus one)."""
    out: list[tuple[str, int]] = []
    starter = -1  # index in ``out`` of the last starter
    last_ccc: int | None = None  # combining class of the last character kept after that starter
    for ch, change in items:
        ccc = unicodedata.combining(ch)
        blocked = last_ccc is not None and (last_ccc == 0 or last_ccc >= ccc)
        if starter >= 0 and not blocked:
            base, base_change = out[starter]
            composed = unicodedata.normalize("NFC", base + ch)
            if len(composed) == 1:
                out[starter] = (composed, base_change + change - 1)
                continue
        out.append((ch, change))
        if ccc == 0:
            starter, last_ccc = len(out) - 1, None
        else:
            last_ccc = ccc
    return out


def _labels_for_segment(form: Form, seg: str, out: str) -> list[int] | None:
    """Per character of ``out`` (the normalization of ``seg``), the index in ``seg`` whose span it takes (-1: an
    insertion before the first character); None when the reconstruction does not give ``out``.

    As Hugging Face's alignment does: each source character decomposes into its first character (replacing it)
    and inserted ones; canonical reordering moves them; composition merges; then the output consumes the source
    characters in order (a character replacing ``1 + n`` of them takes the first one's span, an inserted one the
    span of the character before it)."""
    if len(out) == len(seg) and all(unicodedata.normalize(form, c) == o for c, o in zip(seg, out, strict=True)):
        return list(range(len(seg)))
    items: list[tuple[str, int]] = []
    for c in seg:
        parts = unicodedata.normalize(_DECOMPOSE[form], c)
        items.extend((d, 0 if k == 0 else 1) for k, d in enumerate(parts))
    ordered: list[tuple[str, int]] = []
    run: list[tuple[str, int]] = []
    for item in items:
        if unicodedata.combining(item[0]):
            run.append(item)
            continue
        ordered.extend(sorted(run, key=lambda x: unicodedata.combining(x[0])))
        run = []
        ordered.append(item)
    ordered.extend(sorted(run, key=lambda x: unicodedata.combining(x[0])))
    if form in ("NFC", "NFKC"):
        ordered = _compose(ordered)
    if "".join(c for c, _ in ordered) != out:
        return None
    labels: list[int] = []
    at = 0
    for _, change in ordered:
        if change > 0:
            labels.append(at - 1)
        else:
            labels.append(at)
            at += 1 - change
    return labels


def _hf_cuts(text: str) -> list[tuple[int, bool]]:
    """Cut positions in ``text`` for Hugging Face's tables, each with whether the character after it up to the next
    cut is kept as is (an unassigned code point for Hugging Face); empty for ASCII or text without them."""
    if _HF_CUT is None or text.isascii():
        return []
    cuts: list[tuple[int, bool]] = []
    for m in _HF_CUT.finditer(text):
        if m.group(1) is not None:
            cuts.append((m.start(), True))
            cuts.append((m.end(), False))
        else:
            cuts.append((m.start(), False))
    return cuts


def hf_normalize(form: Form, text: str) -> str:
    """``unicodedata.normalize`` with Hugging Face's (older) tables: code points they leave unassigned kept as is
    and cut around (see ``_HF_CUT``)."""
    cuts = _hf_cuts(text)
    if not cuts:
        return unicodedata.normalize(form, text)
    out: list[str] = []
    at = 0
    keep = False
    for pos, k in [*cuts, (len(text), False)]:
        seg = text[at:pos]
        out.append(seg if keep else unicodedata.normalize(form, seg))
        at, keep = pos, k
    return "".join(out)


class Unicode:
    """NFC, NFD, NFKC or NFKD, as Hugging Face's tables normalize (see ``hf_normalize``)."""

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Unicode:
        return cls(config["type"])

    def __init__(self, form: str) -> None:
        if form not in _BOUNDARY:
            raise ValueError(f"unknown normalization form {form!r}")
        self.form: Form = cast(Form, form)

    def normalize_str(self, text: str) -> str:
        return hf_normalize(self.form, text)

    def normalize(self, piece: Piece) -> Piece:
        # Text normalized by the newer tables is normalized by Hugging Face's too: each stretch between cuts is a
        # substring of a normalized text, hence normalized, and the kept code points are unchanged.
        text = piece.text
        if unicodedata.is_normalized(self.form, text):
            return piece
        if piece.spans is None:
            return piece.with_text(hf_normalize(self.form, text), None)
        spans = piece.spans
        hf_cuts = _hf_cuts(text)
        kept = {pos for pos, k in hf_cuts if k}
        cuts = sorted({m.start() for m in _BOUNDARY[self.form].finditer(text) if m.start() > 0}
                      | {pos for pos, _ in hf_cuts if 0 < pos < len(text)})
        out_text: list[str] = []
        out_spans: list[Span] = []
        for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
            seg = text[start:end]
            if start in kept:
                out_text.append(seg)
                out_spans.extend(spans[start:end])
                continue
            out = unicodedata.normalize(self.form, seg)
            out_text.append(out)
            labels = _labels_for_segment(self.form, seg, out)
            if labels is None:  # not reconstructed: every character takes the segment's first span
                labels = [0] * len(out)
            first = spans[start]
            out_spans.extend(spans[start + i] if i >= 0 else (first[0], first[0]) for i in labels)
        joined = "".join(out_text)
        if joined != hf_normalize(self.form, text):  # a segmentation the tables did not foresee
            joined = hf_normalize(self.form, text)
            out_spans = [spans[0]] * len(joined)
        return piece.with_text(joined, out_spans)


def _map_chars(piece: Piece, fn: Callable[[str], str]) -> Piece:
    """Apply a per-character rewrite (1 -> 0..n characters); extra characters take their source's span."""
    if piece.spans is None:
        return piece.with_text("".join(fn(c) for c in piece.text), None)
    text: list[str] = []
    spans: list[Span] = []
    for c, span in zip(piece.text, piece.spans, strict=True):
        out = fn(c)
        text.append(out)
        spans.extend([span] * len(out))
    return piece.with_text("".join(text), spans)


class Lowercase:
    """Each character lowercased on its own (no final-sigma rule, as Rust's per-character lowercase)."""

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Lowercase:
        return cls()

    @staticmethod
    def _lower(text: str) -> str:
        return text.lower() if "Σ" not in text else "".join(c.lower() for c in text)

    def normalize_str(self, text: str) -> str:
        return self._lower(text)

    def normalize(self, piece: Piece) -> Piece:
        if piece.spans is None:
            return piece.with_text(self._lower(piece.text), None)
        return _map_chars(piece, str.lower)


class StripAccents:
    """Drops combining marks (general category Mn), as Hugging Face's StripAccents (run it after NFD/NFKD)."""

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> StripAccents:
        return cls()

    @staticmethod
    def _keep(c: str) -> str:
        return "" if unicodedata.category(c) == "Mn" else c

    def normalize_str(self, text: str) -> str:
        return "".join(self._keep(c) for c in text)

    def normalize(self, piece: Piece) -> Piece:
        return _map_chars(piece, self._keep)


class Replace:
    """Every match of a string or regex pattern replaced by ``content``."""

    def __init__(self, pattern: HFPattern, content: str) -> None:
        self.pattern = pattern
        self.content = content

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Replace:
        return cls(HFPattern.from_hf(config["pattern"]), str(config["content"]))

    def normalize_str(self, text: str) -> str:
        return self.pattern.replace(text, self.content)

    def normalize(self, piece: Piece) -> Piece:
        if piece.spans is None:
            return piece.with_text(self.normalize_str(piece.text), None)
        spans = piece.spans
        text: list[str] = []
        out_spans: list[Span] = []
        at = 0
        for start, end in self.pattern.matches(piece.text):
            text.append(piece.text[at:start])
            out_spans.extend(spans[at:start])
            text.append(self.content)
            # the inserted characters share the span of the last replaced character (of the one before, for an
            # empty match)
            anchor = spans[end - 1] if end > 0 else (spans[0][0], spans[0][0]) if spans else (0, 0)
            out_spans.extend([anchor] * len(self.content))
            at = end
        text.append(piece.text[at:])
        out_spans.extend(spans[at:])
        return piece.with_text("".join(text), out_spans)


class Prepend:
    """``prepend`` put before a non-empty text."""

    def __init__(self, prepend: str) -> None:
        self.prepend = prepend

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Prepend:
        return cls(str(config["prepend"]))

    def normalize_str(self, text: str) -> str:
        return self.prepend + text if text else text

    def normalize(self, piece: Piece) -> Piece:
        if not piece.text:
            return piece
        spans = None if piece.spans is None else [piece.spans[0]] * len(self.prepend) + piece.spans
        return piece.with_text(self.prepend + piece.text, spans)


class Strip:
    """Leading (``left``) and trailing (``right``) whitespace removed."""

    def __init__(self, left: bool = True, right: bool = True) -> None:
        self.left = left
        self.right = right

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Strip:
        return cls(bool(config.get("strip_left", True)), bool(config.get("strip_right", True)))

    def _bounds(self, text: str) -> tuple[int, int]:
        start, end = 0, len(text)
        if self.left:
            while start < end and _rust_whitespace(text[start]):
                start += 1
        if self.right:
            while end > start and _rust_whitespace(text[end - 1]):
                end -= 1
        return start, end

    def normalize_str(self, text: str) -> str:
        start, end = self._bounds(text)
        return text[start:end]

    def normalize(self, piece: Piece) -> Piece:
        start, end = self._bounds(piece.text)
        return piece.with_text(piece.text[start:end], None if piece.spans is None else piece.spans[start:end])


_RUST_WS = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
                     "\u2028\u2029\u202f\u205f\u3000")


def _rust_whitespace(c: str) -> bool:
    """Rust's ``char::is_whitespace`` (the Unicode White_Space property)."""
    return c in _RUST_WS


class NormalizerSequence:
    """Normalizers applied in order (``Sequence``; the loader builds the members)."""

    def __init__(self, normalizers: Sequence[Normalizer]) -> None:
        self.normalizers = list(normalizers)

    def normalize_str(self, text: str) -> str:
        for n in self.normalizers:
            text = n.normalize_str(text)
        return text

    def normalize(self, piece: Piece) -> Piece:
        for n in self.normalizers:
            piece = n.normalize(piece)
        return piece
