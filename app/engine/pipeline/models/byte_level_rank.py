"""The compiled fast path for byte-level BPE ``tokenizer.json`` files (Qwen2/2.5/3, DeepSeek-V3 …) as a pipeline
model: :class:`ByteLevelRankBPE`.

:func:`byte_level_rank_bpe` is listed in the loader's :data:`~app.engine.pipeline.hf_json.FAST_MODELS`. It is
offered every file's model (not on the python backend) and wraps a byte-level merge-list BPE when

* the file is plain rank-ordered byte-level BPE (:func:`.byte_level_ranks.is_rank_ordered_byte_level_bpe`) and
  its merge-list BPE provably equals rank BPE (:mod:`..byte_level_ranks`, checked per file at load);
* the normalizer is none, NFC, or a sequence of at most NFC;
* the pre-tokenizer is one or more ``Split`` (regex, ``Isolated``, not inverted) followed by
  ``ByteLevel(add_prefix_space=false, use_regex=false)``;
* the compiled core is available and ``$TOKENIZER_ENGINE`` does not ask for the python backend.

The :class:`~app.engine.pipeline.pipeline.Pipeline` then encodes every ordinary text with the model's
:meth:`ByteLevelRankBPE.text_encoder`, a :class:`RankTextEncoder`: added tokens are found in the text exactly as
the pipeline finds them (special ones never match; :class:`LiteralMatcher`, one compiled alternation, gives the
pipeline's :class:`~app.engine.pipeline.added.AddedMatcher` splits when no token needs word or space checks, else
that matcher runs), each stretch between them is NFC-normalized by the pipeline's normalizer (skipped for ASCII and
when ``unicodedata.is_normalized`` says it already is; otherwise only the windows that need it), and an
:class:`~app.engine.encoding.RankBPETokenizer` over the ranks encodes it: the native pre-tokenizer when the split is a
named pattern with a hand-written scanner (``qwen2``) or a split sequence with one (``deepseek_v3``), else the
splits in ``regex`` feeding the native BPE. Everything else (pre-token BPE, offsets of a text that NFC changes,
BPE-dropout, the vocabulary) is the wrapped merge-list BPE's, so decoding, the template and the special tokens stay
the pipeline's.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any

import regex

from ... import native
from ...artifact_cache import ArtifactCache, Compiled
from ...artifact_regex import BoundedRegex
from ...cache import CacheStats
from ...encoding import RankBPETokenizer, scrub_surrogates
from ...patterns import PATTERNS
from ...rank_tables import BYTE_LEVEL_RANKS, Ranks, dump_ranks, restore_ranks
from ...sampling import Sample
from ...store import TokenizerSpec
from ...tokenizer import ValidTextCalls
from ..added import AddedMatcher, AddedToken
from ..base import ItemsSampler, Model, Normalizer, PreTokenizer, Span
from ..byte_level_ranks import NotRankOrdered, is_rank_ordered_byte_level_bpe, ranks_from_hf_model

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
    first alternative that matches is the longest). Python's ``re`` is exact for literals. The alternation is
    compiled on the first :meth:`split` that needs it (compiling a few hundred literals takes tens of milliseconds,
    and a set of special tokens only never needs it); thread-safe."""

    def __init__(self, entries: Sequence[tuple[str, AddedToken]]) -> None:
        self._by_pattern: dict[str, AddedToken] = {}
        for pattern, token in entries:
            if pattern:
                self._by_pattern.setdefault(pattern, token)
        self.has_matchable = any(not t.special for t in self._by_pattern.values())
        self._search: Callable[[str], Iterator[re.Match[str]]] | None = None
        self._lock = threading.Lock()

    @property
    def compiled(self) -> bool:
        """Whether the alternation has been compiled (by a :meth:`split` that needed it)."""
        return self._search is not None

    def _searcher(self) -> Callable[[str], Iterator[re.Match[str]]]:
        """The compiled alternation's ``finditer`` (compiled once, on first use)."""
        search = self._search
        if search is None:
            with self._lock:
                search = self._search
                if search is None:
                    patterns = sorted(self._by_pattern, key=len, reverse=True)
                    search = self._search = re.compile("|".join(map(re.escape, patterns))).finditer
        return search

    def split(self, text: str) -> list[tuple[int, int, AddedToken | None]]:
        """``text`` cut into ordinary stretches and matched tokens, covering it in order."""
        if not text:
            return [(0, 0, None)]
        if not self.has_matchable:  # (then some pattern exists: a matchable token has one)
            return [(0, len(text), None)]
        out: list[tuple[int, int, AddedToken | None]] = []
        taken = 0
        by_pattern = self._by_pattern
        for m in self._searcher()(text):
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



def byte_level_rank_bpe(doc: dict[str, Any], model: Model, name: str, spec: TokenizerSpec | None,
                        artifact_cache: ArtifactCache | None = None) -> Model | None:
    """``model`` (the merge-list BPE built from the parsed ``tokenizer.json`` ``doc``) wrapped as a
    :class:`ByteLevelRankBPE` when the file qualifies (module docstring), else None (the reason is logged).
    ``artifact_cache`` (with ``spec``): the proof's result, the rank table or why there is none, is stored under
    the artifact's sha256 (part ``byte-level-ranks``) and a warm load restores it instead of proving again."""
    runtime = ("compiled core not available" if not native.available() else
               f"${native.ENGINE_ENV} asks for the python backend" if native.resolve_backend(None) != "native"
               else None)
    if runtime is not None:
        if is_rank_ordered_byte_level_bpe(doc):
            log.info("%s: no byte-level fast path (%s)", name, runtime)
        return None
    nfc = _is_nfc_normalizer(doc.get("normalizer"))
    sources = _split_sources(doc.get("pre_tokenizer"))
    built: list[RankBPETokenizer] = []

    def encoding_for(ranks: Ranks) -> Any:
        assert sources is not None
        named = len(sources) == 1 and sources[0] in PATTERNS.values() and native.scanner_id(sources[0]) != 0
        sequence = 0 if named else native.sequence_scanner_id(tuple(sources))
        core = RankBPETokenizer(name, pattern=sources[0] if named else " + ".join(sources), mergeable_ranks=ranks,
                        special_tokens={}, spec=spec, backend="native",
                        pre_tokenizer=None if named else IsolatedSplits(sources), scanner=sequence or None)
        built.append(core)
        assert core.native_core is not None
        return core.native_core.last_merges

    added = doc.get("added_tokens") or []

    def prove() -> ProofResult:
        """Everything about the file alone (the same for every load of the same bytes): the cached part."""
        if not is_rank_ordered_byte_level_bpe(doc):
            return None, ""  # not this model's kind of file: declined silently
        if nfc is None:
            return None, "normalizer is not NFC or none"
        if sources is None:
            return None, "pre-tokenizer is not Split(Isolated)... + ByteLevel"
        try:
            return ranks_from_hf_model(doc["model"], {t["id"]: t["content"] for t in added},
                                       last_merges=encoding_for), ""
        except NotRankOrdered as exc:
            return None, str(exc)

    if artifact_cache is None or spec is None:
        ranks, reason = prove()
    else:
        ranks, reason = artifact_cache.load(spec.sha256, BYTE_LEVEL_RANKS, prove, _dump_proof, _restore_proof)
    if ranks is None or nfc is None or sources is None:
        if reason:
            log.info("%s: no byte-level fast path (%s)", name, reason)
        return None
    if not built:  # restored from the cache: the core was not built by the proof
        encoding_for(ranks)
    return ByteLevelRankBPE(model, built[-1], nfc=nfc)


#: The proof's outcome: the rank table, or None and why the file is not rank BPE.
ProofResult = tuple["Ranks | None", str]


def _dump_proof(result: ProofResult) -> Compiled:
    ranks, reason = result
    if ranks is None:
        return Compiled(meta={"rank_ordered": False, "reason": reason})
    return dump_ranks(ranks, {"rank_ordered": True})


def _restore_proof(compiled: Compiled) -> ProofResult:
    if compiled.meta["rank_ordered"] is False:
        return None, str(compiled.meta["reason"])
    if compiled.meta["rank_ordered"] is not True:
        raise ValueError("byte-level-ranks: bad meta")
    return restore_ranks(compiled), ""


class ByteLevelRankBPE(Model):
    """A byte-level merge-list BPE (``reference``) whose merges provably equal rank BPE over ``core``'s ranks
    (:mod:`..byte_level_ranks`), run on the compiled core: ids, offsets and samples equal ``reference``'s.
    ``nfc``: the file's normalizer is NFC (else none). Per-pre-token methods, the vocabulary and sampling are
    ``reference``'s; whole texts go through :meth:`text_encoder`. Thread-safe."""

    def __init__(self, reference: Model, core: RankBPETokenizer, *, nfc: bool) -> None:
        self.reference = reference
        self.core = core
        self.native = core.native_core
        self.unk_id = reference.unk_id
        self.nfc = nfc

    def __repr__(self) -> str:
        split = "native scanner" if self.has_scanner else "regex splits"
        return f"<ByteLevelRankBPE {self.core.name!r} ({split}, native BPE)>"

    @property
    def has_scanner(self) -> bool:
        """True when a hand-written native pre-tokenizer splits the text (else ``regex`` splits feed the core)."""
        return self.native is not None and bool(self.native.has_scanner)

    # -- the reference's vocabulary and per-pre-token methods ---------------------------------------------------

    def tokenize(self, text: str) -> list[int]:
        return self.reference.tokenize(text)

    def tokenize_with_spans(self, text: str) -> list[tuple[int, int, int]]:
        return self.reference.tokenize_with_spans(text)

    def token_to_id(self, token: str) -> int | None:
        return self.reference.token_to_id(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self.reference.id_to_token(token_id)

    @property
    def vocab_size(self) -> int:
        return self.reference.vocab_size

    def segments(self, text: str) -> Iterable[tuple[int, int]]:
        return self.reference.segments(text)

    def encode_pieces(self, texts: Sequence[str | int], segment_from: int) -> list[int]:
        """Pre-tokens through the rank core (equal to the merge-list BPE on every piece), matched ids as given."""
        encode = self.core.encode
        out: list[int] = []
        for item in texts:
            if isinstance(item, int):
                out.append(item)
            elif item:
                out.extend(encode(item))
        return out

    def sampler(self, sample: Sample, name: str) -> ItemsSampler | None:
        """The merge-list BPE's dropout (Hugging Face's ``dropout``), always on the pure-Python reference."""
        return self.reference.sampler(sample, name)

    def exclude_from_text(self, ids: Collection[int]) -> None:
        self.reference.exclude_from_text(ids)

    # -- the compiled whole-text path ---------------------------------------------------------------------------

    def text_encoder(self, normalizer: Normalizer | None, pre_tokenizer: PreTokenizer | None,
                     added: Sequence[AddedToken]) -> RankTextEncoder:
        """The compiled path for whole texts, with the file's normalizer (NFC or none) and added tokens; the
        file's pre-tokenizer is the core's split (checked by :func:`byte_level_rank_bpe`)."""
        normalize = normalizer.normalize_str if self.nfc and normalizer is not None else None
        return RankTextEncoder(self.core, added, normalize)

    def cache_stats(self) -> CacheStats:
        """The compiled core's piece-cache counters."""
        return self.core.cache_stats()

    def clear_cache(self) -> None:
        """Empty the compiled core's piece cache (and the reference's)."""
        self.core.clear_cache()
        self.reference.clear_cache()

    def commit_cache(self) -> int:
        """The compiled core's piece cache, faulted in."""
        return self.core.commit_cache()


class RankTextEncoder:
    """Whole ordinary texts on the rank core (a :class:`~app.engine.pipeline.base.TextEncoder`): added tokens
    matched as the pipeline matches them, stretches NFC-normalized with ``normalize`` (None: no normalizer), each
    stretch encoded by ``core``. Thread-safe."""

    def __init__(self, core: RankBPETokenizer, added: Sequence[AddedToken],
                 normalize: Callable[[str], str] | None) -> None:
        self.core = core
        self.pattern = core.pattern
        self._nfc = normalize is not None
        self._is_nfc = native.nfc_verify()  # unicodedata.is_normalized("NFC", ·), compiled where it can be
        self._nfc_apply = native.nfc_apply()  # NFC of only the stretches that need it, compiled (None: windows)
        self._raw = _matcher([(t.content, t) for t in added if not t.normalized])
        # The pipeline's own normalizer (NFC), so that both normalize alike; the unicodedata check in front is
        # only a shortcut: text that is NFC by the current Unicode tables is left alone by every NFC.
        self._normalize: Callable[[str], str] = normalize if normalize is not None else (lambda s: s)
        norm = self._normalize
        self._normed = _matcher([(norm(t.content), t) for t in added if t.normalized])
        # The non-special tokens' strings (normalized ones as normalized): a (normalized) text holding none of them
        # matches no added token (special ones only ever block a match); their first characters, looked for first.
        self._avoid = tuple(sorted({norm(t.content) if t.normalized else t.content
                                    for t in added if not t.special} - {""}))
        self._first_chars = "".join(sorted({s[0] for s in self._avoid}))

    # ------------------------------------------------------------------ text -> stretches

    def _plain(self, text: str) -> bool:
        """True if ``text`` needs neither added-token matching nor normalization (the common case): it holds none
        of the non-special added tokens' strings and is NFC (when the pipeline normalizes)."""
        for c in self._first_chars:
            if c in text:
                if any(s in text for s in self._avoid):
                    return False
                break
        return not self._nfc or text.isascii() or self._is_nfc(text)  # isascii: O(1)

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
            if self._nfc and not chunk.isascii() and not self._is_nfc(chunk):
                chunk = self.nfc_windows(chunk)
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

    def nfc_windows(self, text: str) -> str:
        """The normalizer's NFC of ``text``, computed per window between NFC boundaries and only for windows that
        are not NFC already (a long text with a few non-NFC characters costs a scan, not a full normalization).
        With the compiled core, the windows are the shortest stretches between boundaries that hold a character
        the quick check is not sure of (``native.nfc_apply``)."""
        if self._nfc_apply is not None:
            return self._nfc_apply(text, self._normalize)
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
            out.append(window if self._is_nfc(window) else self._normalize(window))
            start = end
        return "".join(out)

    # ------------------------------------------------------------------ the TextEncoder methods

    def valid_text_calls(self) -> ValidTextCalls | None:
        """The rank core's compiled calls (:meth:`RankBPETokenizer.valid_text_calls`) for the texts :meth:`encode`
        hands to it whole: none of the non-special added tokens' strings in them and, with NFC, already NFC (what
        :meth:`_plain` checks); None without them."""
        calls = self.core.valid_text_calls()
        if calls is None or calls.avoid or calls.verify is not None:
            return None
        verify = self._is_nfc if self._nfc else None
        return ValidTextCalls(calls.encode, calls.count, self._avoid, verify)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``."""
        if self._plain(text):  # (the RankBPETokenizer scrubs lone surrogates itself)
            return self.core.encode(text)
        ids: list[int] = []
        encode = self.core.encode
        for part in self._parts(text):
            if isinstance(part, int):
                ids.append(part)
            else:
                ids.extend(encode(part))
        return ids

    def count(self, text: str) -> int:
        """``len(encode(text))`` without building the list."""
        if self._plain(text):
            return self.core.count(text)
        count = self.core.count
        return sum(1 if isinstance(part, int) else count(part) for part in self._parts(text))

    def _parts(self, text: str) -> list[str | int]:
        """What :meth:`encode` encodes of a text that is not :meth:`_plain`, in order: stretches of ordinary text
        (normalized) and added-token ids."""
        return [part for _, _, part in self._stretches(scrub_surrogates(text))[0]]

    def _batch_parts(self, texts: Sequence[str]) -> list[list[str | int]]:
        """:meth:`_parts` of each text; a plain text is its one stretch."""
        return [[t] if self._plain(t) else self._parts(t) for t in texts]

    def encode_batch(self, texts: Sequence[str], num_threads: int) -> list[list[int]]:
        """:meth:`encode` of each text, in order. Every text is cut into its parts here (added tokens matched,
        stretches normalized: under the GIL, one pass each), and every stretch of the whole batch goes to one call
        of the core's batch (C threads, no GIL), so texts that hold an added token's string or need NFC run on
        the threads too."""
        parts = self._batch_parts(texts)
        done = iter(self.core.encode_batch([p for ps in parts for p in ps if isinstance(p, str)],
                                           num_threads=num_threads))
        out: list[list[int]] = []
        for ps in parts:
            if len(ps) == 1 and isinstance(ps[0], str):
                out.append(next(done))
                continue
            ids: list[int] = []
            for p in ps:
                if isinstance(p, int):
                    ids.append(p)
                else:
                    ids.extend(next(done))
            out.append(ids)
        return out

    def count_batch(self, texts: Sequence[str], num_threads: int) -> list[int]:
        """:meth:`count` of each text, in order (parts and threads as :meth:`encode_batch`)."""
        parts = self._batch_parts(texts)
        done = iter(self.core.count_batch([p for ps in parts for p in ps if isinstance(p, str)],
                                          num_threads=num_threads))
        return [sum(1 if isinstance(p, int) else next(done) for p in ps) for ps in parts]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[Span]] | None:
        """Ids and per-id ``(start, end)`` character spans in surrogate-free ``text``; None when NFC changes it."""
        stretches, exact = self._stretches(text)
        if not exact:
            return None
        ids: list[int] = []
        spans: list[Span] = []
        for start, end, part in stretches:
            if isinstance(part, int):
                ids.append(part)
                spans.append((start, end))
                continue
            piece_ids, piece_spans = self.core.encode_with_offsets(part)
            ids.extend(piece_ids)
            spans.extend((start + a, start + b) for a, b in piece_spans)
        return ids, spans
