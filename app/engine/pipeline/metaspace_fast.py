"""The compiled whole-text path of Unigram ``tokenizer.json`` files shaped like XLM-R's: normalizer ``Precompiled``
(then any ``Replace`` steps), pre-tokenizer ``Metaspace`` that prepends and splits, a compiled Unigram model.

Hugging Face applies the charsmap per extended grapheme cluster (:meth:`CharsMap.chunks_hf`); the compiled
SentencePiece normalizer (``unigram.c``, every SentencePiece option off) applies it by longest match over code
points. The two give the same text whenever every grapheme of the text is one code point and no key of several
code points can match. A text is sent the compiled way only when it has none of the *flagged* characters, which
rule both out:

* characters that join a grapheme cluster to the one before or after them (grapheme break classes Extend, ZWJ,
  SpacingMark, Prepend, Hangul L/V/T/LV/LVT, Regional_Indicator; every mark; unassigned code points, in case the
  reference knows them as joining). Without them the only cluster of two code points is CR LF, which both
  semantics map identically when CR and LF are both keys mapped to one space (checked; CR is flagged otherwise);
* every character of a multi-code-point key that contains no joining character (for ``nmt_nfkc``: the Hangul
  compatibility and half-width jamo that SentencePiece composes), so no such key can match.

Any other text takes the exact Python normalizer (:class:`~app.engine.pipeline.charsmap.Precompiled`). After
normalization both ways share the same steps, as Hugging Face's ``Metaspace`` does them on one piece of text: spaces
to the replacement character, the replacement prepended unless the text starts with it, a cut before every
replacement character; the pieces go to the compiled model in one call (each piece searched on its own, as the
reference searches each pre-token).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import regex

from ..encoding import scrub_surrogates
from .charsmap import CharsMap, Precompiled
from .compiled import UNIGRAM
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


def flagged_class(charsmap: CharsMap) -> regex.Pattern[str]:
    """The pattern of one character that sends a text to the exact normalizer for ``charsmap``."""
    joining = regex.compile(f"[{_JOINING}]")
    extra = {c for key in charsmap.table if len(key) > 1 and not joining.search(key) for c in key}
    table = charsmap.table
    if not (table.get("\r") == " " and table.get("\n") == " " and "\r\n" not in table):
        extra.add("\r")
    return regex.compile(f"[{_JOINING}{_ranges(extra)}]")


def _front(normalizer: object, pre_tokenizer: object) -> tuple[Precompiled, list[Replace], Metaspace] | None:
    if not isinstance(pre_tokenizer, Metaspace) or not pre_tokenizer.split:
        return None
    if pre_tokenizer.prepend_scheme not in ("always", "first"):
        return None
    steps = normalizer.normalizers if type(normalizer) is NormalizerSequence else [normalizer]
    if not steps or type(steps[0]) is not Precompiled or any(type(s) is not Replace for s in steps[1:]):
        return None
    return steps[0], list(steps[1:]), pre_tokenizer  # type: ignore[return-value]


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
    flagged = flagged_class(charsmap)
    first = regex.compile(f"[{_ranges({k[0] for k in charsmap.table})}]")
    islands = regex.compile(f"(?s).?{flagged.pattern}+(?:.{flagged.pattern}+)*.?").finditer
    compiled = module.Normalizer(charsmap.blob, False, False, False, False, [])
    exact = precompiled.normalize_str
    fast = compiled.normalize
    after = [r.normalize_str for r in replaces]
    rep = metaspace.replacement
    encode_split = native.encode_split if rep == "\u2581" else None
    words = regex.compile(f"{regex.escape(rep)}[^{regex.escape(rep)}]*").findall
    encode = native.encode
    search = flagged.search
    ascii_safe = flagged.search("".join(map(chr, range(128)))) is None  # no ASCII character is flagged

    def _by_islands(text: str) -> str:
        parts: list[str] = []
        at = 0
        for m in islands(text):
            start, end = m.span()
            if at < start:
                parts.append(fast(text[at:start]))
            island = m.group()
            parts.append(island if first_search(island) is None else exact(island))
            at = end
        if at < len(text):
            parts.append(fast(text[at:]))
        return "".join(parts)

    first_search = first.search

    def encoder(text: str) -> list[int]:
        if (ascii_safe and text.isascii()) or search(text) is None:
            norm = fast(text)  # the compiled normalizer turns lone surrogates into U+FFFD itself
        else:
            norm = _by_islands(scrub_surrogates(text))
        for step in after:
            norm = step(norm)
        if not norm:
            return []
        norm = norm.replace(" ", rep)
        if norm[0] != rep:
            norm = rep + norm
        if encode_split is not None:
            return encode_split(norm)  # type: ignore[no-any-return]
        return encode(words(norm))  # type: ignore[no-any-return]

    return encoder
