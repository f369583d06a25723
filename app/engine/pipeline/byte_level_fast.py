"""The compiled fast path for byte-level BPE ``tokenizer.json`` files (Qwen2/2.5/3, DeepSeek-V3 …).

:func:`fast_byte_level` is registered with the loader (:func:`app.engine.pipeline.hf_json.register_fast_path`).
It is offered every byte-level BPE file and accepts one when

* the file's merge-list BPE provably equals rank BPE (:mod:`.byte_level_ranks`, checked per file at load);
* the normalizer is none, NFC, or a sequence of at most NFC;
* the pre-tokenizer is one or more ``Split`` (regex, ``Isolated``, not inverted) followed by
  ``ByteLevel(add_prefix_space=false, use_regex=false)``;
* the compiled core is available and ``$TOKENIZER_ENGINE`` does not ask for the python backend.

It then runs as :class:`ByteLevelFast`: added tokens are found in the text exactly as the reference pipeline
finds them (special ones never match; :class:`LiteralMatcher`, one compiled alternation, gives the pipeline's
:class:`~app.engine.pipeline.added.AddedMatcher` splits when no token needs word or space checks, else that matcher
runs), each stretch between them is NFC-normalized by the pipeline's normalizer (skipped for ASCII and when
``unicodedata.is_normalized`` says it already is; otherwise only the windows that need it), and an
:class:`~app.engine.encoding.Encoding` over the ranks encodes it: the native pre-tokenizer when the split is a
named pattern with a hand-written scanner (``qwen2``) or a split sequence with one (``deepseek_v3``), else the
splits in ``regex`` feeding the native BPE. Decoding, the template and the special tokens are the reference
pipeline's. Offsets of a text that NFC changes come from the reference pipeline (it carries alignment through
normalization); otherwise from the Encoding, shifted per stretch.
"""

from __future__ import annotations

import logging
import random
import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import Any

import regex

from .. import native
from ..artifact_regex import BoundedRegex
from ..cache import CacheStats
from ..encoding import Encoding, scrub_surrogates
from ..patterns import PATTERNS
from ..sampling import Sample
from ..tokenizer import Tokenizer
from .added import AddedMatcher, AddedToken
from .byte_level_ranks import NotRankOrdered, ranks_from_hf_model
from .pipeline import Pipeline

log = logging.getLogger("app.engine")

#: A character before which NFC splits text (canonical combining class 0 and NFC quick check Yes: it neither
#: reorders with nor composes with what precedes it), so NFC(a + b) == NFC(a) + NFC(b) when b starts with one.
#: ``regex``'s tables are newer than ``unicodedata``'s; a character stable in them was stable before (assigned
#: properties do not change, unassigned ones are stable), so a cut here is a cut for either.
_NFC_BOUNDARY = regex.compile(r"[\p{ccc=0}&&\p{NFC_QC=Yes}]", regex.V1)
#: Text NFC would change is normalized in windows of about this many characters, each window only if needed.
NFC_WINDOW = 256


class IsolatedSplits:
    """Hugging Face ``Split`` pre-tokenizers with ``Isolated`` behaviour, applied in sequence: each piece is cut into
    its matches and the unmatched stretches between them (empty pieces dropped). A :class:`PieceSplitter`."""

    def __init__(self, sources: Sequence[str]) -> None:
        self.sources = tuple(sources)
        self._compiled = [BoundedRegex(s) for s in self.sources]  # PatternRejected (a ValueError) at load

    def _cut(self, compiled: Any, text: str, start: int, out: list[tuple[str, int]]) -> None:
        pos = 0
        for m in compiled.finditer(text):
            s, e = m.span()
            if s > pos:
                out.append((text[pos:s], start + pos))
            if e > s:
                out.append((text[s:e], start + s))
            pos = max(pos, e)
        if pos < len(text):
            out.append((text[pos:], start + pos))

    def pieces_with_offsets(self, text: str) -> Iterator[tuple[str, int]]:
        current = [(text, 0)] if text else []
        for compiled in self._compiled:
            following: list[tuple[str, int]] = []
            for piece, start in current:
                self._cut(compiled, piece, start, following)
            current = following
        return iter(current)

    def pieces(self, text: str) -> list[str]:
        return [piece for piece, _ in self.pieces_with_offsets(text)]


class LiteralMatcher:
    """The splits of :class:`~app.engine.pipeline.added.AddedMatcher` (leftmost-longest over all patterns, special
    tokens' matches skipped) for token sets without ``single_word``/``lstrip``/``rstrip``, searched by one compiled
    alternation of the literal patterns, longest first (at the leftmost position where any pattern matches, the
    first alternative that matches is the longest). Python's ``re`` is exact for literals."""

    def __init__(self, entries: Sequence[tuple[str, AddedToken]]) -> None:
        self._by_pattern: dict[str, AddedToken] = {}
        for pattern, token in entries:
            if pattern:
                self._by_pattern.setdefault(pattern, token)
        self.has_matchable = any(not t.special for t in self._by_pattern.values())
        patterns = sorted(self._by_pattern, key=len, reverse=True)
        self._search = re.compile("|".join(map(re.escape, patterns))).finditer if patterns else None

    def split(self, text: str) -> list[tuple[int, int, AddedToken | None]]:
        """``text`` cut into ordinary stretches and matched tokens, covering it in order."""
        if not text:
            return [(0, 0, None)]
        if self._search is None or not self.has_matchable:
            return [(0, len(text), None)]
        out: list[tuple[int, int, AddedToken | None]] = []
        taken = 0
        by_pattern = self._by_pattern
        for m in self._search(text):
            token = by_pattern[m.group()]
            if token.special:
                continue
            start, stop = m.span()
            if taken < start:
                out.append((taken, start, None))
            out.append((start, stop, token))
            taken = stop
        if taken != len(text):
            out.append((taken, len(text), None))
        return out


def _matcher(entries: list[tuple[str, AddedToken]]) -> AddedMatcher | LiteralMatcher:
    """The fast literal matcher when no token needs word or whitespace checks, else the pipeline's own."""
    if any(t.single_word or t.lstrip or t.rstrip for _, t in entries):
        return AddedMatcher(entries)
    return LiteralMatcher(entries)


def _is_nfc_normalizer(config: Any) -> bool | None:
    """True for NFC, False for no normalization, None for anything else."""
    if config is None:
        return False
    if config.get("type") == "NFC" and set(config) == {"type"}:
        return True
    if config.get("type") == "Sequence" and set(config) == {"type", "normalizers"}:
        members = [_is_nfc_normalizer(m) for m in config["normalizers"]]
        if None in members or sum(bool(m) for m in members) > 1:
            return None
        return any(members)
    return None


def _split_sources(config: Any) -> list[str] | None:
    """The regexes of a ``Sequence[Split(Isolated)…, ByteLevel(no prefix space, no regex)]``, or None."""
    if not isinstance(config, dict) or config.get("type") != "Sequence":
        return None
    members = config.get("pretokenizers") or []
    if len(members) < 2:
        return None
    *splits, last = members
    if last.get("type") != "ByteLevel" or last.get("add_prefix_space") or last.get("use_regex", True):
        return None
    sources: list[str] = []
    for split in splits:
        pattern = split.get("pattern") or {}
        if (split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert")
                or set(pattern) != {"Regex"}):
            return None
        sources.append(pattern["Regex"])
    return sources


def fast_byte_level(doc: dict[str, Any], pipeline: Pipeline) -> Tokenizer | None:
    """The fast tokenizer for a parsed ``tokenizer.json`` (``pipeline``: the reference built from it), or None to
    keep the pipeline (the reason is logged)."""
    nfc = _is_nfc_normalizer(doc.get("normalizer"))
    sources = _split_sources(doc.get("pre_tokenizer"))
    why = ("compiled core not available" if not native.available() else
           f"${native.ENGINE_ENV} asks for the python backend" if native.resolve_backend(None) != "native" else
           "normalizer is not NFC or none" if nfc is None else
           "pre-tokenizer is not Split(Isolated)... + ByteLevel" if sources is None else None)
    if why is not None or sources is None or nfc is None:
        log.info("%s: no byte-level fast path (%s)", pipeline.name, why)
        return None
    added = pipeline.added_vocabulary
    built: list[Encoding] = []
    named = len(sources) == 1 and sources[0] in PATTERNS.values() and native.scanner_id(sources[0]) != 0
    sequence = 0 if named else native.sequence_scanner_id(tuple(sources))

    def encoding_for(ranks: dict[bytes, int]) -> Any:
        enc = Encoding(pipeline.name, pattern=sources[0] if named else " + ".join(sources), mergeable_ranks=ranks,
                       special_tokens={}, spec=pipeline.spec, backend="native",
                       pre_tokenizer=None if named else IsolatedSplits(sources), scanner=sequence or None)
        built.append(enc)
        assert enc._native is not None
        return enc._native.last_merges

    try:
        ranks_from_hf_model(doc["model"], {t.id: t.content for t in added}, last_merges=encoding_for)
    except NotRankOrdered as exc:
        log.info("%s: no byte-level fast path (%s)", pipeline.name, exc)
        return None
    return ByteLevelFast(pipeline, built[-1], added, nfc=nfc)


class ByteLevelFast(Tokenizer):
    """A byte-level BPE ``tokenizer.json`` on the compiled core; ids, offsets and decoding equal ``pipeline``'s.
    Thread-safe."""

    backend = "native"

    def __init__(self, pipeline: Pipeline, encoding: Encoding, added: Sequence[AddedToken], *, nfc: bool) -> None:
        self.name = pipeline.name
        self.spec = pipeline.spec
        self.pipeline = pipeline
        self.encoding = encoding
        self.pattern = encoding.pattern
        self.n_vocab = pipeline.n_vocab
        self._nfc = nfc
        self._raw = _matcher([(t.content, t) for t in added if not t.normalized])
        # The pipeline's own normalizer (NFC), so that both normalize alike; the unicodedata check in front is
        # only a shortcut: text that is NFC by the current Unicode tables is left alone by every NFC.
        normalizer = pipeline.normalizer
        normalize = normalizer.normalize_str if nfc and normalizer is not None else (lambda s: s)
        self._normalize = normalize
        self._normed = _matcher([(normalize(t.content), t) for t in added if t.normalized])
        # First characters of the non-special tokens' patterns: a (normalized) text holding none of them matches
        # no added token (special ones only ever block a match).
        self._first_chars = "".join(sorted({(normalize(t.content) if t.normalized else t.content)[:1]
                                            for t in added if not t.special} - {""}))
        self._added_by_id = {t.id: t.content for t in reversed(added)}
        self._added_tokens = {t.content: t.id for t in added if not t.special}
        self._init_special_tokens(pipeline.special_tokens, lambda _id: False)
        self._template = pipeline.template
        self._bind_plain_encode()

    def __repr__(self) -> str:
        native_core = self.encoding._native
        split = "native scanner" if native_core is not None and native_core.has_scanner else "regex splits"
        return f"<ByteLevelFast {self.name!r} ({split}, native BPE)>"

    @property
    def added_tokens(self) -> dict[str, int]:
        """Non-special added tokens (content -> id), matched in text before the model runs."""
        return dict(self._added_tokens)

    @property
    def unk_id(self) -> int | None:
        """The pipeline's (its model's) unknown id."""
        return self.pipeline.unk_id

    # ------------------------------------------------------------------ text -> stretches

    def _plain(self, text: str) -> bool:
        """True if ``text`` needs neither added-token matching nor normalization (the common case)."""
        for c in self._first_chars:
            if c in text:
                return False
        return not self._nfc or text.isascii() or unicodedata.is_normalized("NFC", text)  # isascii: O(1)

    def _stretches(self, text: str) -> tuple[list[tuple[int, int, str | int]], bool]:
        """``text`` as ``(start, end, normalized stretch or added-token id)`` in order, as the pipeline cuts it, and
        whether normalization left every stretch unchanged (then ``start, end`` index ``text`` exactly; otherwise
        a stretch found inside a normalized one carries the normalized one's bounds)."""
        out: list[tuple[int, int, str | int]] = []
        exact = True
        for start, end, token in self._raw.split(text):
            if token is not None:
                out.append((start, end, token.id))
                continue
            if start == end:
                continue
            chunk = text[start:end]
            if self._nfc and not chunk.isascii() and not unicodedata.is_normalized("NFC", chunk):
                chunk = self._nfc_windows(chunk)
                exact = False
            if not self._normed.has_matchable:
                out.append((start, end, chunk))
                continue
            same = chunk == text[start:end]
            for s2, e2, token2 in self._normed.split(chunk):
                if s2 < e2:
                    bounds = (start + s2, start + e2) if same else (start, end)
                    out.append((*bounds, token2.id if token2 is not None else chunk[s2:e2]))
        return out, exact

    def _nfc_windows(self, text: str) -> str:
        """The normalizer's NFC of ``text``, computed per window between NFC boundaries and only for windows that
        are not NFC already (a long text with a few non-NFC characters costs a scan, not a full normalization)."""
        n = len(text)
        if n <= NFC_WINDOW:
            return self._normalize(text)
        out: list[str] = []
        start = 0
        while start < n:
            cut = start + NFC_WINDOW
            found = _NFC_BOUNDARY.search(text, cut) if cut < n else None
            end = found.start() if found is not None else n
            window = text[start:end]
            out.append(window if unicodedata.is_normalized("NFC", window) else self._normalize(window))
            start = end
        return "".join(out)

    # ------------------------------------------------------------------ encoding

    def _encode_text(self, text: str) -> list[int]:
        if self._plain(text):  # (the Encoding scrubs lone surrogates itself)
            return self.encoding.encode(text)
        text = scrub_surrogates(text)
        ids: list[int] = []
        encode = self.encoding.encode
        for _, _, part in self._stretches(text)[0]:
            if isinstance(part, int):
                ids.append(part)
            else:
                ids.extend(encode(part))
        return ids

    def count(self, text: str, *, add_special_tokens: bool = False, prefix: Sequence[str] = (),
              suffix: Sequence[str] = (), sample: Sample | None = None) -> int:
        """Number of tokens :meth:`encode` would return, without building the id list (with ``sample``: the
        sampled ids' count)."""
        if sample is not None:
            return super().count(text, add_special_tokens=add_special_tokens, prefix=prefix, suffix=suffix,
                                 sample=sample)
        n = self._around_count(prefix, suffix, add_special_tokens) if prefix or suffix or add_special_tokens else 0
        if self._plain(text):
            return n + self.encoding.count(text)
        text = scrub_surrogates(text)
        count = self.encoding.count
        for _, _, part in self._stretches(text)[0]:
            n += 1 if isinstance(part, int) else count(part)
        return n

    def encode_batch(self, texts: Sequence[str], *, num_threads: int = 1,
                     sample: Sample | None = None) -> list[list[int]]:
        """:meth:`encode` of each text, in order; plain texts go to the core's batch (C threads, no GIL)."""
        if sample is not None:
            return super().encode_batch(texts, sample=sample)
        plain = [self._plain(t) for t in texts]
        done = iter(self.encoding.encode_batch([t for t, p in zip(texts, plain, strict=True) if p],
                                               num_threads=num_threads))
        return [next(done) if p else self._encode_text(t) for t, p in zip(texts, plain, strict=True)]

    def count_batch(self, texts: Sequence[str], *, num_threads: int = 1,
                    sample: Sample | None = None) -> list[int]:
        """:meth:`count` of each text, in order (threads as :meth:`encode_batch`)."""
        if sample is not None:
            return super().count_batch(texts, sample=sample)
        plain = [self._plain(t) for t in texts]
        done = iter(self.encoding.count_batch([t for t, p in zip(texts, plain, strict=True) if p],
                                              num_threads=num_threads))
        return [next(done) if p else self.count(t) for t, p in zip(texts, plain, strict=True)]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and per-id ``(start, end)`` character spans in ``text`` (the pipeline's when NFC changes it)."""
        text = scrub_surrogates(text)
        stretches, exact = self._stretches(text)
        if not exact:
            return self.pipeline.encode_with_offsets(text)
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        for start, end, part in stretches:
            if isinstance(part, int):
                ids.append(part)
                spans.append((start, end))
                continue
            piece_ids, piece_spans = self.encoding.encode_with_offsets(part)
            ids.extend(piece_ids)
            spans.extend((start + a, start + b) for a, b in piece_spans)
        processor = self.pipeline.post_processor
        if processor is not None and ids:
            added, model = self._added_by_id, self.pipeline.model
            strings = [added[i] if i in added else model.id_to_token(i) or "" for i in ids]
            spans = processor.adjust_offsets(strings, spans)
        return ids, spans

    # ------------------------------------------------------------------ sampling: the reference pipeline's

    def check_sample(self, sample: Sample) -> None:
        """BPE-dropout runs on the reference pipeline's merge-list BPE (Hugging Face's ``dropout``)."""
        self.pipeline.check_sample(sample)

    def _sample_text(self, text: str, sample: Sample, rng: random.Random) -> list[int]:
        return self.pipeline._sample_text(text, sample, rng)

    # ------------------------------------------------------------------ decoding: the reference pipeline's

    def decode(self, ids: Sequence[int], *, errors: str = "replace", skip_special: bool = False) -> str:
        """Text of ``ids`` through the file's decoder (as Hugging Face's ``decode``)."""
        return self.pipeline.decode(ids, errors=errors, skip_special=skip_special)

    def decode_tokens_bytes(self, ids: Sequence[int], *, skip_special: bool = False) -> list[bytes]:
        """Each token's surface bytes (special tokens as their UTF-8 name)."""
        return self.pipeline.decode_tokens_bytes(ids, skip_special=skip_special)

    # ------------------------------------------------------------------ introspection

    def cache_stats(self) -> CacheStats:
        """The compiled core's piece-cache counters."""
        return self.encoding.cache_stats()

    def clear_cache(self) -> None:
        """Empty the piece cache."""
        self.encoding.clear_cache()
