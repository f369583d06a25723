"""The compiled whole-text path of Unigram ``tokenizer.json`` files shaped like XLM-R's: normalizer ``Precompiled``
(then any ``Replace`` steps), pre-tokenizer ``Metaspace`` that prepends and splits, a compiled Unigram model.

Hugging Face applies the charsmap per extended grapheme cluster (:meth:`CharsMap.chunks_hf`); the compiled
SentencePiece normalizer (``unigram.c``, every SentencePiece option off) applies it by longest match over code
points. The two give the same text whenever every grapheme of the text is one code point and no key of several
code points can match. The *flagged* characters rule both out:

* characters that join a grapheme cluster to the one before or after them (grapheme break classes Extend, ZWJ,
  SpacingMark, Prepend, Hangul L/V/T, Regional_Indicator; every mark; unassigned code points, in case the
  reference knows them as joining). Without them the only cluster of two code points is CR LF, which both
  semantics map alike when CR and LF are both keys mapped to one space and runs of spaces are made one afterwards
  (checked; CR is flagged otherwise);
* every character of a multi-code-point key that contains no joining character (for ``nmt_nfkc``: the Hangul
  compatibility and half-width jamo that SentencePiece composes), so no such key can match.

For XLM-R's normalizer (``Precompiled`` then ``Replace(Regex(" {2,}"), " ")``) most texts are encoded in one
compiled call (``Model.encode_metaspace`` in ``unigram.c``: a check, the charsmap, runs of spaces to one,
``Metaspace``, the search). The check is finer than the flagged characters: the two semantics can only part where a
grapheme cluster of several code points starts with a key (a key followed by a flagged character, or a Prepend
key, whose cluster takes the next character) or where a key of several code points can match (whose second code
point is always flagged: checked, by pairs). A text with no such position (nor a surrogate) is normalized alike
both ways (:func:`risk_tables`). Any other text is cut into stretches around its flagged characters (each with the
character before and after it, so every cut falls between two unflagged characters, where a grapheme cluster
always ends): the stretches in which no charsmap key occurs are kept as they are, the others go through the exact
Python normalizer (:class:`~app.engine.pipeline.charsmap.Precompiled`), the rest through the compiled one. After
normalization the steps are Hugging Face's ``Metaspace`` on one piece of text: spaces to the replacement
character, the replacement prepended unless the text starts with it, a cut before every replacement character;
each piece is searched on its own by the compiled model, as the reference searches each pre-token.
"""

from __future__ import annotations

import functools
import sys
from array import array
from collections.abc import Callable
from typing import Any, NamedTuple

import regex

from ..encoding import scrub_surrogates
from .charsmap import CharsMap, Precompiled, blob_digest
from .compiled import UNIGRAM
from .derived import compiled as cache_entry
from .derived import derive
from .normalizers import NormalizerSequence, Replace
from .pre_tokenizers import Metaspace

#: Characters that may join a grapheme cluster to a neighbour (see the module docstring).
_JOINING = (r"\p{Grapheme_Cluster_Break=Extend}\p{Grapheme_Cluster_Break=ZWJ}\p{Grapheme_Cluster_Break=SpacingMark}"
            r"\p{Grapheme_Cluster_Break=Prepend}\p{Grapheme_Cluster_Break=L}\p{Grapheme_Cluster_Break=V}"
            r"\p{Grapheme_Cluster_Break=T}\p{Grapheme_Cluster_Break=Regional_Indicator}\p{M}\p{Cn}")


def _ranges(chars: set[str]) -> str:
    """A regex character-class body for ``chars``, consecutive code points as ranges."""
    points = sorted(ord(c) for c in chars)
    out: list[str] = []
    i = 0
    while i < len(points):
        j = i
        while j + 1 < len(points) and points[j + 1] == points[j] + 1:
            j += 1
        out.append(f"\\U{points[i]:08x}" + (f"-\\U{points[j]:08x}" if j > i else ""))
        i = j + 1
    return "".join(out)


def flagged_class(charsmap: CharsMap, collapse: bool) -> regex.Pattern[str]:
    """The pattern of one character that sends a text to the exact normalizer for ``charsmap``; ``collapse``: runs
    of spaces become one space afterwards (so CR LF may come out as one space or two)."""
    joining = regex.compile(f"[{_JOINING}]")
    extra = {c for key in charsmap.table if len(key) > 1 and not joining.search(key) for c in key}
    table = charsmap.table
    if not (collapse and table.get("\r") == " " and table.get("\n") == " " and "\r\n" not in table):
        extra.add("\r")
    return regex.compile(f"[{_JOINING}{_ranges(extra)}]")


def _front(normalizer: object, pre_tokenizer: object) -> tuple[Precompiled, list[Replace], Metaspace] | None:
    if not isinstance(pre_tokenizer, Metaspace) or not pre_tokenizer.split:
        return None
    if pre_tokenizer.prepend_scheme not in ("always", "first"):
        return None
    steps: list[object] = list(normalizer.normalizers) if type(normalizer) is NormalizerSequence else [normalizer]
    first = steps[0] if steps else None
    replaces = [s for s in steps[1:] if type(s) is Replace]
    if type(first) is not Precompiled or len(replaces) != len(steps) - 1:
        return None
    return first, replaces, pre_tokenizer


def risk_tables(charsmap: CharsMap, flagged: regex.Pattern[str]) -> tuple[bytes, bytes]:
    """``(classes, pairs)`` for ``Model.encode_metaspace``: one byte of flags per code point (1: a key of its own,
    2: flagged, 4: Prepend, 8: first character of a key of several characters) and the sorted ``first << 21 |
    second`` of every key of several characters (little-endian uint64). A text where no key is followed by a
    flagged character, no Prepend character is a key and no pair begins a longer key is normalized alike both ways
    (see the module docstring), whatever else it holds. Raises ValueError if some key of several characters has an
    unflagged second character (then the pairs would not be enough)."""
    classes = bytearray(0x110000)
    text = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))
    for bit, pattern in ((2, f"(?:{flagged.pattern})+"), (4, r"\p{Grapheme_Cluster_Break=Prepend}+")):
        for m in regex.finditer(pattern, text):
            for ch in m.group():
                classes[ord(ch)] |= bit
    pairs = set()
    for key in charsmap.table:
        classes[ord(key[0])] |= 1 if len(key) == 1 else 8
        if len(key) > 1:
            if not classes[ord(key[1])] & 2:
                raise ValueError(f"charsmap key {key!r} has an unflagged second character")
            pairs.add(ord(key[0]) << 21 | ord(key[1]))
    return bytes(classes), array("Q", sorted(pairs)).tobytes()


class MetaspaceRisk(NamedTuple):
    """What :func:`metaspace_encoder` derives from a charsmap (cached as part ``"metaspace-risk"``)."""

    flagged: str  #: the pattern of :func:`flagged_class`
    identity_keys: bool  #: some key is mapped to itself
    tables: tuple[bytes, bytes] | None  #: :func:`risk_tables`, when asked for and they exist


def metaspace_risk(charsmap: CharsMap, collapse: bool, want_tables: bool) -> MetaspaceRisk:
    """The :class:`MetaspaceRisk` of ``charsmap`` (``collapse``: as for :func:`flagged_class`; ``want_tables``:
    compute :func:`risk_tables` too), from the artifact cache when the charsmap has one (``charsmap.derived``;
    refused there for another blob, ``collapse`` or ``want_tables``)."""
    digest = blob_digest(charsmap.blob)
    key = {"blob_sha256": digest, "collapse": collapse, "want_tables": want_tables}

    def build() -> MetaspaceRisk:
        flagged = flagged_class(charsmap, collapse)
        tables = None
        if want_tables:
            try:
                tables = risk_tables(charsmap, flagged)
            except ValueError:
                tables = None
        return MetaspaceRisk(flagged.pattern, any(k == v for k, v in charsmap.table.items()), tables)

    def dump(risk: MetaspaceRisk) -> Any:
        sections = {} if risk.tables is None else {"classes": risk.tables[0], "pairs": risk.tables[1]}
        return cache_entry({**key, "flagged": risk.flagged, "identity_keys": risk.identity_keys,
                         "tables": risk.tables is not None}, sections)

    def restore(data: Any) -> MetaspaceRisk:
        meta = data.meta
        if any(meta[k] != v for k, v in key.items()):
            raise ValueError("cached metaspace risk tables are of another charsmap or configuration")
        flagged, identity = meta["flagged"], meta["identity_keys"]
        if type(flagged) is not str or type(identity) is not bool:
            raise TypeError("cached metaspace risk meta has the wrong types")
        tables = None
        if meta["tables"]:
            classes, pairs = bytes(data.sections["classes"]), bytes(data.sections["pairs"])
            if len(classes) != 0x110000 or len(pairs) % 8:
                raise ValueError("cached metaspace risk tables have the wrong sizes")
            tables = (classes, pairs)
        return MetaspaceRisk(flagged, identity, tables)

    return derive(charsmap.derived, "metaspace-risk", build, dump, restore)


def _collapses_spaces(replaces: list[Replace]) -> bool:
    """True for exactly ``Replace(Regex(" {2,}"), " ")`` (XLM-R's), which the compiled call does itself."""
    return (len(replaces) == 1 and replaces[0].pattern.regex_source == " {2,}" and replaces[0].pattern.string is None
            and replaces[0].content == " ")


def metaspace_encoder(normalizer: object, pre_tokenizer: object, native: Any) -> Callable[[str], list[int]] | None:
    """For a pipeline without added tokens matched in text whose normalizer is ``Precompiled`` then ``Replace``
    steps and whose pre-tokenizer is a splitting ``Metaspace`` that prepends (``always``; ``first``, which is the
    same on a whole text): a call that encodes one raw text with ``native`` (a compiled Unigram model that has an
    unknown token), the ids the pipeline gives. None for any other pipeline or without the compiled extension."""
    front = _front(normalizer, pre_tokenizer)
    module = UNIGRAM.module
    if front is None or native is None or module is None:
        return None
    precompiled, replaces, metaspace = front
    charsmap = precompiled.charsmap
    collapse = _collapses_spaces(replaces)
    rep = metaspace.replacement
    risk = metaspace_risk(charsmap, collapse, rep == "\u2581" and collapse and sys.byteorder == "little")
    flagged = regex.compile(risk.flagged)
    # a stretch holding flagged characters, with the character before and after it (see the module docstring)
    islands = regex.compile(f"(?s).?{flagged.pattern}+(?:.{flagged.pattern}+)*.?").finditer
    compiled = module.Normalizer(charsmap.blob, False, False, False, False, [])
    exact = precompiled.normalize_str
    fast = compiled.normalize
    after = [r.normalize_str for r in replaces]
    words = regex.compile(f"{regex.escape(rep)}[^{regex.escape(rep)}]*").findall
    encode = native.encode
    split = native.encode_split if rep == "\u2581" else None
    whole = None
    if risk.tables is not None:
        whole = functools.partial(native.encode_metaspace, compiled, *risk.tables)
    # a key mapped to itself would let a stretch come out unchanged though Hugging Face rewrites its grapheme
    identity_keys = risk.identity_keys

    def by_islands(text: str) -> str:
        """Hugging Face's charsmap on ``text``: stretches around flagged characters the exact way unless no key
        occurs in them, the rest compiled."""
        parts: list[str] = []
        at = 0
        for m in islands(text):
            start, end = m.span()
            if at < start:
                parts.append(fast(text[at:start]))
            island = m.group()
            parts.append(island if not identity_keys and fast(island) == island else exact(island))
            at = end
        if at < len(text):
            parts.append(fast(text[at:]))
        return "".join(parts)

    def encoder(text: str) -> list[int]:
        if whole is not None:
            ids = whole(text)
            if ids is not None:
                return ids  # type: ignore[no-any-return]
        norm = by_islands(scrub_surrogates(text))
        for step in after:
            norm = step(norm)
        if not norm:
            return []
        norm = norm.replace(" ", rep)
        if norm[0] != rep:
            norm = rep + norm
        return split(norm) if split is not None else encode(words(norm))  # type: ignore[no-any-return]

    return encoder
