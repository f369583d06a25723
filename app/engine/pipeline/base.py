"""The component model of a pipeline tokenizer, after Hugging Face ``tokenizers``:

    text -> normalizer -> pre-tokenizer -> model -> post-processor (template)      ids -> decoder -> text

Every stage works on :class:`Piece` objects: a string plus, when offsets are wanted, the span in the caller's
original text of each of its characters. A component that rewrites characters keeps those spans aligned (a
replacement inherits the span of what it replaces; an insertion takes an empty span at its position), so offsets
stay offsets into the original text through normalizers that change length.

Components are small classes, one concept per module (``normalizers.py``, ``pre_tokenizers.py``, ``models/``,
``processors.py``, ``decoders.py``); each has a ``from_hf(config)`` constructor used by the ``tokenizer.json``
loader (:mod:`app.engine.pipeline.hf_json`) and may be built directly by other loaders (SentencePiece, GGUF).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..cache import CacheStats
from ..sampling import Sample, cannot_sample
from ..specials import Template
from ..tokenizer import ValidTextCalls
from .added import AddedToken

#: ``(start, end)`` in characters (code points) of the original text.
Span = tuple[int, int]


@dataclass(slots=True)
class Piece:
    """A slice of text on its way through the pipeline.

    ``spans``: one :data:`Span` per character of ``text`` (None when offsets are not tracked: every component must
    then skip alignment work). ``token_id``: set when the piece is an added token matched in the text; later
    stages pass it through untouched and the model is not run on it. ``first``: the piece starts at the very
    beginning of the caller's text (Metaspace's ``prepend_scheme: first`` asks this)."""

    text: str
    spans: list[Span] | None = None
    token_id: int | None = None
    first: bool = False

    @staticmethod
    def of(text: str, offsets: bool) -> Piece:
        """The whole input as one piece, with identity spans when ``offsets``."""
        return Piece(text, [(i, i + 1) for i in range(len(text))] if offsets else None, first=True)

    def slice(self, start: int, end: int) -> Piece:
        """Characters ``start:end`` of this piece, spans included (``first`` kept only from position 0)."""
        return Piece(self.text[start:end], None if self.spans is None else self.spans[start:end],
                     first=self.first and start == 0)

    def with_text(self, text: str, spans: list[Span] | None) -> Piece:
        """The same piece rewritten (a normalizer's or pre-tokenizer's output), ``first`` kept."""
        return Piece(text, spans, self.token_id, self.first)

    def span(self, start: int, end: int) -> Span:
        """The original-text span of characters ``start:end`` (an empty span at the right place when empty)."""
        assert self.spans is not None
        if start >= end:
            at = self.spans[start][0] if start < len(self.spans) else (self.spans[-1][1] if self.spans else 0)
            return (at, at)
        return (self.spans[start][0], self.spans[end - 1][1])


class Normalizer(Protocol):
    """Rewrites text (NFC, lowercase, replace …), keeping ``spans`` aligned."""

    def normalize(self, piece: Piece) -> Piece: ...

    def normalize_str(self, text: str) -> str:
        """The same as :meth:`normalize` on a piece without spans (the fast path)."""
        ...


class PreTokenizer(Protocol):
    """Splits pieces into smaller pieces (and may rewrite them: ByteLevel, Metaspace). Pieces with a
    ``token_id`` pass through unchanged."""

    def pre_tokenize(self, pieces: list[Piece]) -> list[Piece]: ...


#: One sampled segmentation of pre-tokens (``str``) and already-matched ids (``int``), in order, drawing from the
#: generator: what :meth:`Model.sampler` returns.
ItemsSampler = Callable[[Sequence[str | int], random.Random], list[int]]


def each_pre_token(run: Callable[[str, random.Random], list[tuple[int, int, int]]]) -> ItemsSampler:
    """An :data:`ItemsSampler` that samples each pre-token on its own with ``run`` (``(id, start, end)`` per token,
    as :meth:`Model.tokenize_with_spans`) and keeps matched ids as they are (the pre-tokens are independent)."""

    def draw(items: Sequence[str | int], rng: random.Random) -> list[int]:
        ids: list[int] = []
        for item in items:
            if isinstance(item, int):
                ids.append(item)
            else:
                ids.extend(i for i, _, _ in run(item, rng))
        return ids

    return draw


def bpe_dropout_sampler(dropout: Callable[[str, random.Random, float], list[tuple[int, int, int]]], sample: Sample,
                        name: str) -> ItemsSampler | None:
    """What a BPE model's :meth:`Model.sampler` returns: ``dropout`` (``(id, start, end)`` of one pre-token under
    BPE-dropout ``p``) per pre-token at ``sample``'s ``dropout``; None for ``dropout=0`` (the deterministic ids).
    Raises :class:`~app.engine.sampling.SamplingError` (naming tokenizer ``name``) for Unigram options."""
    p = sample.for_bpe(name)
    if p <= 0.0:
        return None
    return each_pre_token(lambda text, rng: dropout(text, rng, p))


class TextEncoder(Protocol):
    """A model's compiled path for whole ordinary texts (:meth:`Model.text_encoder`): added tokens, normalizer,
    pre-tokenizer and model in one, with the pipeline's ids. Thread-safe."""

    #: The pre-tokenizer regex it splits with (for introspection; "" when it has none to show).
    pattern: str

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` (ordinary text; lone surrogates count as U+FFFD)."""
        ...

    def count(self, text: str) -> int:
        """``len(encode(text))`` without building the list."""
        ...

    def encode_batch(self, texts: Sequence[str], num_threads: int) -> list[list[int]]:
        """:meth:`encode` of each text, in order, over up to ``num_threads`` threads."""
        ...

    def count_batch(self, texts: Sequence[str], num_threads: int) -> list[int]:
        """:meth:`count` of each text, in order, over up to ``num_threads`` threads."""
        ...

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[Span]] | None:
        """Ids of surrogate-free ``text`` and each id's ``(start, end)`` in it, before any post-processor; None when
        normalization changes the text (the pipeline, which carries alignment through normalization, then
        computes them)."""
        ...

    def valid_text_calls(self) -> ValidTextCalls | None:
        """Compiled calls the pipeline's plain ``encode(text)``/``count(text)`` may go straight to (see
        :class:`~app.engine.tokenizer.ValidTextCalls`: equal to :meth:`encode`/:meth:`count` on the texts they
        admit), or None."""
        ...


class Model(Protocol):
    """Turns one pre-tokenized piece into token ids.

    Every model implements the first six members. The optional abilities after them are declared here with the
    defaults a model without the ability inherits (each model class subclasses :class:`Model`), so the pipeline
    asks a model, never probes it: ``native`` (a compiled core, which makes the pipeline native and requires
    :meth:`encode_pieces`), :meth:`segments`, :meth:`text_encoder`, :meth:`plan_encoder`, :meth:`fused_encoder`,
    :meth:`fuse`, :meth:`text_batch_encoder`, :meth:`sampler`, :meth:`nbest`, :meth:`cache_stats`,
    :meth:`clear_cache` and :meth:`exclude_from_text`."""

    #: The model's compiled core, or None (pure Python).
    native: Any = None
    #: The id the model gives to what its vocabulary cannot represent (``[UNK]``, ``<unk>``), None without one.
    unk_id: int | None = None

    def tokenize(self, text: str) -> list[int]:
        """Ids of ``text`` (one pre-token)."""
        ...

    def tokenize_with_spans(self, text: str) -> list[tuple[int, int, int]]:
        """``(id, start, end)`` per token, ``start:end`` in characters of ``text``."""
        ...

    def token_to_id(self, token: str) -> int | None: ...

    def id_to_token(self, token_id: int) -> str | None: ...

    @property
    def vocab_size(self) -> int:
        """Highest model id + 1."""
        ...

    # -- optional abilities (defaults: the model does not have them) -------------------------------------------

    def segments(self, text: str) -> Iterable[tuple[int, int]]:
        """``(start, end)`` stretches of a long pre-token that the model tokenizes independently with the same
        result (BPE where no merge crosses the cut); the pipeline then encodes and caches them one by one. Default:
        the whole text, one stretch."""
        return ((0, len(text)),)

    def encode_pieces(self, texts: Sequence[str | int], segment_from: int) -> list[int]:
        """Ids of pre-tokens (``str``) and already-matched ids (``int``) in one call into :attr:`native`, each
        pre-token longer than ``segment_from`` cut as :meth:`segments` cuts it. Only a model with a compiled core
        has it (``NotImplementedError`` otherwise)."""
        raise NotImplementedError(f"{type(self).__name__} has no compiled core")

    def text_encoder(self, normalizer: Normalizer | None, pre_tokenizer: PreTokenizer | None,
                     added: Sequence[AddedToken]) -> TextEncoder | None:
        """The model's own path for whole ordinary texts of a pipeline with these components and added tokens
        (the file's, special and not), used for every text when it has one; None (the default) when it has none.
        A model offering it was built for one file's components and receives those."""
        return None

    def fused_encoder(self, normalizer: Any, pre_tokenizer: Any) -> Callable[[str], list[int]] | None:
        """One compiled call for a whole ordinary text (normalizer and pre-tokenizer included) when the model can
        run them itself; None (the default) when it cannot."""
        return None

    def fuse(self, normalizer: Any, pre_tokenizer: Any) -> Callable[[list[str | int]], list[int]] | None:
        """One compiled call for stretches of text and matched added-token ids when the model can run the
        normalizer and pre-tokenizer itself; None (the default) when it cannot."""
        return None

    def plan_encoder(self, plan: Any, cache_size: int) -> Callable[[str], list[int]] | None:
        """One compiled call for a whole ordinary text, added tokens included, when the model can run the steps of
        ``plan`` (:class:`~app.engine.pipeline.text_plan.TextPlan`) itself, with a segment cache of ``cache_size``
        slots; None (the default) when it cannot."""
        return None

    def text_batch_encoder(self) -> Callable[[list[str], bool, int], list[Any]] | None:
        """The batch form of the whole-text encoder :meth:`plan_encoder` or :meth:`fused_encoder` last made (the
        one the pipeline runs): ``(texts, counts, num_threads)`` -> each text's ids (its number of ids when
        ``counts``), in one compiled call that releases the GIL once, short texts included, and encodes on up to
        ``num_threads`` threads of its own (``app/engine/_native/batch_threads.h``); None (the default) when there
        is none."""
        return None

    def sampler(self, sample: Sample, name: str) -> ItemsSampler | None:
        """How the model draws one segmentation as ``sample`` asks (subword regularisation, see
        :mod:`app.engine.sampling`): an :data:`ItemsSampler` over the pipeline's pre-tokens, or None when
        ``sample``'s settings are the deterministic segmentation. Raises :class:`~app.engine.sampling.SamplingError`
        (naming tokenizer ``name``) when the model cannot sample so; the default: it cannot sample at all."""
        raise cannot_sample(name, type(self).__name__)

    def nbest(self, items: Sequence[str | int], n: int, name: str) -> list[tuple[list[int], float]]:
        """The ``n`` best segmentations of pre-tokens and matched ids with their scores, best first (Unigram:
        SentencePiece's ``NBestEncode``). The default raises :class:`~app.engine.sampling.SamplingError`."""
        raise cannot_sample(name, type(self).__name__)

    def cache_stats(self) -> CacheStats | None:
        """Counters of the compiled core's own cache; None (the default) when the model has none."""
        return None

    def clear_cache(self) -> None:
        """Empty the model's own cache (the default: it has none)."""
        return None

    def commit_cache(self) -> int:
        """Fault in the model's own cache memory, contents unchanged; bytes covered (the default: 0, none)."""
        return 0

    def exclude_from_text(self, ids: Collection[int]) -> None:
        """Never produce ``ids`` from text (special tokens a model could otherwise match as vocabulary pieces);
        the default does nothing (a model whose pieces cannot spell a special token's string)."""
        return None


class PostProcessor(Protocol):
    """Adds the tokenizer's own special tokens around one sequence (``add_special_tokens=True``)."""

    def template(self) -> Template:
        """The single-sequence template as ``(name, id)`` pairs before and after the text."""
        ...

    def adjust_offsets(self, tokens: list[str], spans: list[Span]) -> list[Span]:
        """Offsets of the text's tokens (their strings as the model spells them) after processing (ByteLevel's
        ``trim_offsets``); the identity for most processors."""
        ...


class Decoder(Protocol):
    """Turns token strings back into text, as Hugging Face's ``decode_chain``. Decoder classes subclass it (and
    inherit the default of :attr:`skipped_special`)."""

    #: What a special token dropped by ``skip_special`` leaves in the chain: None (the default) leaves nothing, as
    #: Hugging Face's ``decode``; a string is decoded in its place.
    skipped_special: str | None = None

    def decode_chain(self, tokens: list[str]) -> list[str]: ...

    def surface(self, token: str) -> str | bytes:
        """What one token stands for in text, decoded on its own in the middle of a text (ByteLevel: the byte
        values; Metaspace: ``▁`` as a space; ByteFallback: ``<0xNN>`` as that byte; WordPiece: without ``##``).
        A ``str`` while the token is still text, ``bytes`` once a decoder has turned it into bytes (a sequence
        stops there). Used for token strings, not for :meth:`decode_chain`."""
        ...
