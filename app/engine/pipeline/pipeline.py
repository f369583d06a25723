""":class:`Pipeline`: a tokenizer built from components, as Hugging Face ``tokenizers`` models one.

Encoding one text (ordinary text only; special tokens enter by name, see :mod:`app.engine.tokenizer`):

1. added tokens with ``normalized: false`` are found in the caller's text (:mod:`.added`);
2. each stretch between them is normalized on its own, then added tokens with ``normalized: true`` are found in it;
3. the pre-tokenizer splits the remaining stretches into pre-tokens;
4. the model turns each pre-token into ids, through a bounded per-pipeline cache keyed by the pre-token.

Added tokens marked special are never matched (step 1 and 2 skip them); their ids come only from ``prefix``,
``suffix``, :class:`~app.engine.specials.Special` parts or the post-processor's template
(``add_special_tokens=True``). Offsets are character spans in the caller's text, carried through every stage
(:class:`~app.engine.pipeline.base.Piece`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import cast

from ..cache import CacheStats, PieceCache, default_cache_size
from ..encoding import scrub_surrogates
from ..errors import InvalidTokenIdError
from ..sampling import Sample
from ..specials import EMPTY_TEMPLATE, Template
from ..store import TokenizerSpec
from ..tokenizer import Tokenizer
from .added import AddedMatcher, AddedToken
from .base import Decoder, Model, Normalizer, Piece, PostProcessor, PreTokenizer, Span, TextEncoder
from .normalizers import Replace
from .pre_tokenizers import Split
from .text_plan import TextPlan

#: How a pipeline encodes an ordinary text (``Pipeline.text_path``), in the order they are tried:
#:
#: - ``text-encoder``: the model's ``text_encoder`` runs everything, added tokens included, on the compiled core
#:   (byte-level rank BPE, :mod:`.models.byte_level_rank`); it also counts, batches and gives offsets;
#: - ``whole-text``: the model's ``fused_encoder`` runs normalizer, pre-tokenizer and model on the whole text in
#:   one compiled call (SentencePiece BPE, Unigram; only without added tokens);
#: - ``fused``: the model's ``fuse`` does the same for the stretches between raw added tokens (WordPiece behind
#:   BERT's normalizer, Unigram with added tokens; not with normalized added tokens, which need the pipeline);
#: - ``text-plan``: the model's ``plan_encoder`` runs a :class:`~app.engine.pipeline.text_plan.TextPlan` (raw added
#:   tokens, a one-character Replace normalizer, a Split that never cuts, the model and a segment cache) on the whole
#:   text in one compiled call (Gemma-style merge-list BPE files);
#: - ``strings``: a compiled model behind at most a Replace normalizer and a Split pre-tokenizer (Gemma-style
#:   files): the pipeline's steps on plain strings, the model in one call;
#: - ``native-items``: the pipeline's steps (:meth:`Pipeline.pre_token_pieces`), the compiled model in one call;
#: - ``python``: the pure-Python reference, the model per pre-token through the piece cache.
TEXT_PATHS = ("text-encoder", "whole-text", "fused", "text-plan", "strings", "native-items", "python")


def _surrogate_spans(text: str, clean: str) -> list[Span]:
    """Per character of ``clean`` (:func:`scrub_surrogates` of ``text``), its span in ``text``."""
    spans: list[Span] = []
    i = 0
    for c in clean:
        width = 2 if len(c.encode("utf-16-le")) == 4 and text[i:i + 1] != c else 1
        spans.append((i, i + width))
        i += width
    return spans


#: Pre-tokens longer than this are cut where the model says they merge independently (``Model.segments``).
SEGMENT_FROM = 16


class Pipeline(Tokenizer):
    """Normalizer -> pre-tokenizer -> model -> post-processor, a decoder back, and an added vocabulary.

    Every component but the model is optional. ``added_tokens`` are the file's added tokens (special and not);
    an added token's id takes precedence over the model's for the same id when decoding. Thread-safe: components
    are immutable after construction and the cache is thread-safe."""

    def __init__(self, *, name: str, model: Model, normalizer: Normalizer | None = None,
                 pre_tokenizer: PreTokenizer | None = None, post_processor: PostProcessor | None = None,
                 decoder: Decoder | None = None, added_tokens: Iterable[AddedToken] = (),
                 cache_size: int | None = None, spec: TokenizerSpec | None = None, backend: str = "python") -> None:
        self.name = name
        self.spec = spec
        # a model with a compiled core (``native`` set) makes the pipeline native
        self.backend = "native" if model.native is not None else backend
        self.model = model
        self.normalizer = normalizer
        self.pre_tokenizer = pre_tokenizer
        self.post_processor = post_processor
        self.decoder = decoder
        added = list(added_tokens)
        self._added = added
        self._added_by_id: dict[int, AddedToken] = {}
        for token in added:
            self._added_by_id.setdefault(token.id, token)
        self._raw_matcher = AddedMatcher([(t.content, t) for t in added if not t.normalized])
        self._norm_matcher = AddedMatcher(
            [(normalizer.normalize_str(t.content) if normalizer else t.content, t) for t in added if t.normalized]
        )
        self._has_added = self._raw_matcher.has_matchable or self._norm_matcher.has_matchable
        template = post_processor.template() if post_processor is not None else EMPTY_TEMPLATE
        specials: dict[str, int] = {}
        for token in added:
            if token.special:
                specials.setdefault(token.content, token.id)
        for special_name, special_id in (*template.prefix, *template.suffix):
            specials.setdefault(special_name, special_id)
        # An added token owns its id even when the model also has it (several files do this), so no special id
        # counts as ordinary here.
        self._init_special_tokens(specials, lambda _id: False)
        self._template = template
        top = max((t.id for t in added), default=-1)
        self.n_vocab = max(model.vocab_size, top + 1)
        size = default_cache_size() if cache_size is None else cache_size
        self._cache_size = size
        self._cache = PieceCache(self._tokenize_piece, size)
        self._lookup = self._cache.lookup
        # optional: (start, end) stretches of a long pre-token that the model tokenizes independently (exactly)
        self._segments: Callable[[str], Iterable[tuple[int, int]]] = model.segments
        self._fused: Callable[[list[str | int]], list[int]] | None = None
        self.text_path: str
        """How :meth:`encode` runs an ordinary text, decided once here: one of :data:`TEXT_PATHS`."""
        self._text_encoder: TextEncoder | None = model.text_encoder(normalizer, pre_tokenizer, added)
        if self._text_encoder is not None:
            self.text_path, self._encode_text = "text-encoder", self._text_encoder.encode
            self._count_text = self._text_encoder.count
            self._valid_text_calls = self._text_encoder.valid_text_calls()
            self.pattern = self._text_encoder.pattern
        else:
            self.text_path, self._encode_text = self._choose_text_path(normalizer, pre_tokenizer)
        # the batch form of the whole-text encoder (one compiled call per chunk of texts, GIL released once)
        self._batch_text = model.text_batch_encoder() if self.text_path in ("text-plan", "whole-text") else None
        self._bind_plain_encode()

    def __repr__(self) -> str:
        return f"<Pipeline {self.name!r} ({type(self.model).__name__}, {self.text_path})>"

    # -- encoding -------------------------------------------------------------------------------------------------

    @property
    def added_tokens(self) -> dict[str, int]:
        """Non-special added tokens (content -> id), matched in text before the model runs."""
        return {t.content: t.id for t in self._added if not t.special}

    @property
    def unk_id(self) -> int | None:
        """The model's unknown id (None without one)."""
        return self.model.unk_id

    @property
    def added_vocabulary(self) -> list[AddedToken]:
        """Every added token of the file (special or not, with its matching options), in file order."""
        return list(self._added)

    def _tokenize_piece(self, text: str) -> tuple[int, ...]:
        return tuple(self.model.tokenize(text))

    def _pieces(self, text: str, offsets: bool) -> list[Piece]:
        """Steps 1–3: the text as pre-tokens and matched added tokens, in order. Lone surrogates become U+FFFD
        first (the service's rule for every tokenizer); spans still index the caller's text."""
        clean = scrub_surrogates(text)
        root = Piece.of(clean, offsets)
        if offsets and len(clean) != len(text):  # a surrogate pair written as two code units became one character
            root.spans = _surrogate_spans(text, clean)
        text = clean
        normalizer = self.normalizer
        out: list[Piece] = []
        for start, end, token in self._raw_matcher.split(text):
            if token is not None:
                piece = root.slice(start, end)
                piece.token_id = token.id
                out.append(piece)
                continue
            if start == end:
                continue
            chunk = root.slice(start, end)
            if normalizer is not None:
                chunk = normalizer.normalize(chunk)
                if not chunk.text:
                    continue
            if not self._norm_matcher.has_matchable:
                out.append(chunk)
                continue
            for s2, e2, token2 in self._norm_matcher.split(chunk.text):
                if s2 == e2:
                    continue
                piece = chunk.slice(s2, e2)
                if token2 is not None:
                    piece.token_id = token2.id
                out.append(piece)
        if self.pre_tokenizer is not None:
            out = self.pre_tokenizer.pre_tokenize(out)
        return out

    def pre_token_pieces(self, text: str) -> list[Piece]:
        """Steps 1–3 for ``text``, without offsets: what the model is run on, in order (added tokens carry their
        ``token_id``). For callers that run the model themselves (subword sampling)."""
        return self._pieces(text, False)

    def _choose_text_path(self, normalizer: Normalizer | None,
                          pre_tokenizer: PreTokenizer | None) -> tuple[str, Callable[[str], list[int]]]:
        """The first path of :data:`TEXT_PATHS` that the model and this pipeline allow, and its encoder."""
        model = self.model
        no_normalized_added = not self._norm_matcher.has_matchable
        if not self._has_added:
            call = model.fused_encoder(normalizer, pre_tokenizer)
            if call is not None:
                return "whole-text", call
        if no_normalized_added:
            self._fused = model.fuse(normalizer, pre_tokenizer)
            if self._fused is not None:
                return "fused", self._encode_text_fused
        if model.native is not None and no_normalized_added:
            plan = TextPlan.of(self._raw_matcher.entries(), normalizer, pre_tokenizer)
            encode_text = model.plan_encoder(plan, self._cache_size) if plan is not None else None
            if encode_text is not None:
                return "text-plan", encode_text
        if model.native is not None:
            if (no_normalized_added and (normalizer is None or type(normalizer) is Replace)
                    and (pre_tokenizer is None or type(pre_tokenizer) is Split)):
                return "strings", self._encode_text_str
            return "native-items", self._encode_text_native
        return "python", self._encode_text_python

    def _encode_text_python(self, text: str) -> list[int]:
        """The reference path: :meth:`_pieces`, then the model per pre-token through the piece cache."""
        ids: list[int] = []
        lookup = self._lookup
        segments = self._segments
        for piece in self._pieces(text, False):
            if piece.token_id is not None:
                ids.append(piece.token_id)
                continue
            t = piece.text
            if len(t) > SEGMENT_FROM:
                for start, end in segments(t):
                    ids.extend(lookup(t[start:end]))
            elif t:
                ids.extend(lookup(t))
        return ids

    def _encode_text_native(self, text: str) -> list[int]:
        """:meth:`_encode_text` for a model with a compiled core: the pre-tokens and matched added tokens go to
        the model in one call (cut as ``segments`` cuts them, no piece cache)."""
        items: list[str | int] = [p.text if p.token_id is None else p.token_id
                                  for p in self._pieces(text, False) if p.token_id is not None or p.text]
        return self.model.encode_pieces(items, SEGMENT_FROM)

    def _encode_text_fused(self, text: str) -> list[int]:
        """:meth:`_encode_text` when the model runs the whole path: the stretches between raw added tokens (and
        their ids) in one call."""
        if self._raw_matcher.has_matchable:
            text = scrub_surrogates(text)
            items: list[str | int] = [text[s:e] if token is None else token.id
                                      for s, e, token in self._raw_matcher.split(text) if token is not None or s < e]
        else:
            items = [text]  # the compiled path scrubs surrogates itself
        return self._fused(items)  # type: ignore[misc, no-any-return]

    def _encode_text_str(self, text: str) -> list[int]:
        """:meth:`_encode_text_native` on strings, for a Replace normalizer and a Split pre-tokenizer: the same
        steps as :meth:`_pieces` (added tokens, normalizer per stretch, split), without spans."""
        text = scrub_surrogates(text)
        normalize = self.normalizer.normalize_str if self.normalizer is not None else None
        split = cast("Split", self.pre_tokenizer).split_str if self.pre_tokenizer is not None else None
        encode_pieces = self.model.encode_pieces  # type: ignore[attr-defined]
        items: list[str | int] = []  # pre-tokens and matched added tokens' ids, in order: one call
        for start, end, token in self._raw_matcher.split(text):
            if token is not None:
                items.append(token.id)
                continue
            if start == end:
                continue
            chunk = text[start:end]
            if normalize is not None:
                chunk = normalize(chunk)
                if not chunk:
                    continue
            if split is not None:
                items.extend(split(chunk))
            else:
                items.append(chunk)
        return encode_pieces(items, SEGMENT_FROM)

    def encode_batch(self, texts: Sequence[str], *, num_threads: int = 1,
                     sample: Sample | None = None) -> list[list[int]]:
        """:meth:`encode` of each text, in order (the model's text encoder batches them when it has one; the
        text-plan and whole-text paths, where the model has a batch form, through it: see
        :meth:`~app.engine.pipeline.base.Model.text_batch_encoder`)."""
        if sample is None and self._batch_text is not None:
            return self._batch_text(texts if type(texts) is list else list(texts), False, num_threads)
        if self._text_encoder is None or sample is not None:
            return super().encode_batch(texts, num_threads=num_threads, sample=sample)
        return self._text_encoder.encode_batch(texts, num_threads)

    def count_batch(self, texts: Sequence[str], *, num_threads: int = 1, sample: Sample | None = None) -> list[int]:
        """:meth:`count` of each text, in order (batched as :meth:`encode_batch`)."""
        if sample is None and self._batch_text is not None:
            return self._batch_text(texts if type(texts) is list else list(texts), True, num_threads)
        if self._text_encoder is None or sample is not None:
            return super().count_batch(texts, num_threads=num_threads, sample=sample)
        return self._text_encoder.count_batch(texts, num_threads)

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids of ``text`` and, per id, its ``(start, end)`` character span in ``text`` (with the model's text
        encoder: in ``text`` with lone surrogates replaced, as :class:`~app.engine.encoding.RankBPETokenizer`
        counts)."""
        if self._text_encoder is not None:
            text = scrub_surrogates(text)
            found = self._text_encoder.encode_with_offsets(text)
            if found is not None:
                if self.post_processor is not None and found[0]:
                    strings = [self._token_string(i) or "" for i in found[0]]
                    return found[0], self.post_processor.adjust_offsets(strings, found[1])
                return found
        ids: list[int] = []
        spans: list[Span] = []
        tokens: list[str] = []
        for piece in self._pieces(text, True):
            if piece.token_id is not None:
                ids.append(piece.token_id)
                spans.append(piece.span(0, len(piece.text)))
                tokens.append(self._token_string(piece.token_id) or piece.text)
                continue
            if not piece.text:
                continue
            t = piece.text
            stretches = self._segments(t) if len(t) > SEGMENT_FROM else [(0, len(t))]
            for base, stop in stretches:
                for token_id, start, end in self.model.tokenize_with_spans(t[base:stop]):
                    ids.append(token_id)
                    spans.append(piece.span(base + start, base + end))
                    tokens.append(self.model.id_to_token(token_id) or "")
        if self.post_processor is not None:
            spans = self.post_processor.adjust_offsets(tokens, spans)
        return ids, spans

    # -- sampling: the model's (:meth:`~app.engine.pipeline.base.Model.sampler`) ----------------------------------

    def check_sample(self, sample: Sample) -> None:
        """Raise :class:`~app.engine.sampling.SamplingError` unless the model can sample as ``sample`` asks
        (Unigram: ``alpha``/``nbest``; BPE: ``dropout``)."""
        self.model.sampler(sample, self.name)

    def pre_token_items(self, text: str) -> list[str | int]:
        """:meth:`pre_token_pieces` as the model takes them: pre-token texts and matched added tokens' ids, in
        order (empty pre-tokens dropped)."""
        return [p.token_id if p.token_id is not None else p.text
                for p in self._pieces(text, False) if p.token_id is not None or p.text]

    def _sample_text(self, text: str, sample: Sample, rng: random.Random) -> list[int]:
        """The pipeline's own steps unchanged (added tokens, normalizer, pre-tokenizer), then the model's draw
        over the pre-tokens, always on the pure-Python model (a compiled core serves the deterministic path)."""
        draw = self.model.sampler(sample, self.name)
        if draw is None:
            return self._encode_text(text)
        return draw(self.pre_token_items(text), rng)

    # -- decoding -------------------------------------------------------------------------------------------------

    def _token_string(self, token_id: int) -> str | None:
        added = self._added_by_id.get(token_id)
        if added is not None:
            return added.content
        return self.model.id_to_token(token_id)

    def _token_strings(self, ids: Sequence[int], skip_special: bool) -> list[str]:
        out: list[str] = []
        # what a dropped special token leaves in the chain (None: nothing, as Hugging Face's decode)
        placeholder = self.decoder.skipped_special if self.decoder is not None else None
        for index, token_id in enumerate(ids):
            token = self._token_string(token_id) if isinstance(token_id, int) and token_id >= 0 else None
            if token is None:
                raise InvalidTokenIdError(token_id, self.name, self.n_vocab, index=index)
            if skip_special and self.is_special(token_id):
                if placeholder is not None:
                    out.append(placeholder)
                continue
            out.append(token)
        return out

    def decode(self, ids: Sequence[int], *, errors: str = "replace", skip_special: bool = False) -> str:
        """Text of ``ids`` through the decoder chain, as Hugging Face's ``decode`` (``skip_special`` drops the
        special tokens first). With ``errors`` other than ``"replace"`` the surface bytes are decoded with it
        instead. Raises :class:`~app.engine.errors.InvalidTokenIdError` for an id outside the vocabulary."""
        if errors != "replace":
            return self.decode_bytes(ids, skip_special=skip_special).decode("utf-8", errors=errors)
        tokens = self._token_strings(ids, skip_special)
        if self.decoder is None:
            return " ".join(tokens)
        return "".join(self.decoder.decode_chain(tokens))

    def decode_tokens_bytes(self, ids: Sequence[int], *, skip_special: bool = False) -> list[bytes]:
        """Each token's surface bytes (the decoder's :meth:`~app.engine.pipeline.base.Decoder.surface`); special
        tokens as their UTF-8 name."""
        out: list[bytes] = []
        decoder = self.decoder
        for index, token_id in enumerate(ids):
            token = self._token_string(token_id) if isinstance(token_id, int) and token_id >= 0 else None
            if token is None:
                raise InvalidTokenIdError(token_id, self.name, self.n_vocab, index=index)
            if self.is_special(token_id):
                if not skip_special:
                    out.append(token.encode("utf-8"))
                continue
            surface = decoder.surface(token) if decoder is not None else token
            out.append(surface.encode("utf-8") if isinstance(surface, str) else surface)
        return out

    # -- cache ----------------------------------------------------------------------------------------------------

    def cache_stats(self) -> CacheStats:
        """Counters of this pipeline's pre-token cache (the compiled model's own cache when it has one)."""
        stats = self.model.cache_stats() if self.model.native is not None else None
        return self._cache.stats() if stats is None else stats

    def clear_cache(self) -> None:
        """Empty the pre-token cache (and the compiled model's)."""
        self._cache.clear()
        self.model.clear_cache()

    def commit_cache(self) -> int:
        """The compiled model's cache, faulted in (see :meth:`Tokenizer.commit_cache`)."""
        return self.model.commit_cache()

    @property
    def template(self) -> Template:
        """The post-processor's single-sequence template (what ``add_special_tokens=True`` adds)."""
        return self._template
