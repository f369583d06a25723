"""The :class:`Tokenizer` base class: the one contract every tokenizer family implements.

Families (each a subclass): byte-level BPE over ranks (:class:`~app.engine.encoding.RankBPETokenizer`, the compiled fast
path), the classic character BPE (:class:`~app.engine.char_bpe.CharBPEEncoding`), component pipelines
(:class:`~app.engine.pipeline.Pipeline`: Hugging Face ``tokenizer.json``, SentencePiece, WordPiece, Unigram …; the
compiled byte-level ``tokenizer.json`` path is one of its models,
:class:`~app.engine.pipeline.models.byte_level_rank.ByteLevelRankBPE`).
:func:`app.engine.get_tokenizer` returns one of these for any name in the store; callers type against
:class:`Tokenizer`, call any of its methods (every family has all of them: framed counting and the Arrow-buffer
methods included) and never ask which family they hold.

A family provides ``_encode_text(text) -> ids`` (ordinary text only; a method or an attribute set in
``__init__``; optionally ``_count_text(text) -> count`` alongside), calls :meth:`Tokenizer._init_special_tokens`,
and implements the abstract methods
(:meth:`~Tokenizer.decode_tokens_bytes`, :meth:`~Tokenizer.encode_with_offsets`, :meth:`~Tokenizer.cache_stats`,
:meth:`~Tokenizer.clear_cache`); everything else is implemented here over those hooks, and a family overrides what
it does faster (``count`` without building ids, batches in C threads) or differently (``decode`` through a decoder
pipeline).

Pickling: a tokenizer pickles as a reference to its store, by the reducer :mod:`app.engine.registry` registers
for :class:`Tokenizer` with :func:`copyreg.pickle` when it is imported (any of ``get_tokenizer``, ``get_store``,
``load_tokenizer`` from :mod:`app.engine` imports it). This module imports nothing above it.

Rules every implementation keeps:

* **Text is text.** No text argument is ever parsed for special tokens. Special tokens enter only by name:
  ``prefix``/``suffix`` of :meth:`Tokenizer.encode`, :class:`~app.engine.specials.Special` parts of
  :meth:`Tokenizer.encode_parts`, or the tokenizer's own :class:`Template` when ``add_special_tokens=True``.
  (Non-special *added* tokens of a ``tokenizer.json`` are part of how the model reads ordinary text and are matched
  in it, as Hugging Face does; see :attr:`Tokenizer.added_tokens`.)
* ``add_special_tokens`` defaults to False. When True, the template's tokens go outside ``prefix``/``suffix``:
  ``[*template.prefix, *prefix, *text, *suffix, *template.suffix]``.
* Offsets are ``(start, end)`` in characters (code points) of the caller's text; special tokens get empty spans at
  their position (``(0, 0)`` before the text, ``(len, len)`` after it).
* ``sample=None`` (the default) is the deterministic encoding; a :class:`~app.engine.sampling.Sample` draws one
  segmentation of the text (subword regularisation, seeded; see :mod:`app.engine.sampling`) and leaves every
  special token where it would be without it.
* Ids outside the vocabulary raise :class:`~app.engine.errors.InvalidTokenIdError` on decode; unknown special
  names raise :class:`~app.engine.errors.UnknownSpecialTokenError`.
"""

from __future__ import annotations

import copyreg
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from ._batch import map_in_threads
from .cache import CacheStats
from .errors import UnknownSpecialTokenError
from .sampling import Sample, cannot_sample
from .specials import Special, Template
from .store import TokenizerSpec


@dataclass(frozen=True)
class ValidTextCalls:
    """Compiled calls a tokenizer's plain ``encode(text)``/``count(text)`` go straight to
    (:meth:`Tokenizer.valid_text_calls`). For a str ``text`` holding none of ``avoid``'s characters (a tuple: none
    of its non-empty strings) and, unless it is ASCII, for which ``verify(text)`` is true,
    ``encode(text)``/``count(text)`` equal the tokenizer's ``_encode_text(text)`` and its length, except that they
    raise ``UnicodeEncodeError`` for text with lone surrogates; every other text goes to the tokenizer's methods."""

    encode: Callable[[str], list[int]]
    count: Callable[[str], int]
    avoid: str | tuple[str, ...] = ""
    verify: Callable[[str], bool] | None = None


class Tokenizer(ABC):
    """A loaded, verified tokenizer. Thread-safe. See the module docstring for the rules and the hooks a family
    provides.

    Special tokens: a special id must not be an ordinary token's id (``ValueError`` at construction); several
    names may map to one id (o200k_harmony 200018 is ``<|endofprompt|>`` and ``<|reserved_200018|>``): all of them
    encode to it, and decoding names it by the first name in manifest order, as tiktoken does; an unknown name
    raises :class:`~app.engine.errors.UnknownSpecialTokenError`, which lists the allowed names. :attr:`template`
    (what ``add_special_tokens=True`` adds) is built from the names given to :meth:`_init_special_tokens` or set
    directly by a family whose post-processor defines it."""

    name: str
    n_vocab: int  #: highest id + 1 (ordinary, added and special)
    backend: str = "python"  #: ``"native"`` (compiled core) or ``"python"``
    spec: TokenizerSpec | None = None  #: the manifest entry it was loaded from (None when built in code)
    pattern: str = ""  #: the pre-tokenizer regex ("" when the family has none)

    _special_tokens: dict[str, int]
    _special_by_id: dict[int, str]
    _template: Template
    #: ids of ordinary text (no special tokens); a family's method, or an attribute its ``__init__`` sets
    _encode_text: Callable[[str], list[int]]
    #: ``len(_encode_text(text))`` without the list, when the family has such a call (None: :meth:`count` takes the
    #: length of ``_encode_text``)
    _count_text: Callable[[str], int] | None = None
    #: Compiled calls the plain ``encode(text)``/``count(text)`` go straight to (``_bind_plain_encode``), without
    #: the Python frames of ``_encode_text``; None: a family has none.
    _valid_text_calls: ValidTextCalls | None = None

    # -- what every family implements -----------------------------------------------------------------------------

    @abstractmethod
    def decode_tokens_bytes(self, ids: Sequence[int], *, skip_special: bool = False) -> list[bytes]:
        """Each token's surface bytes: what it stands for in text (byte-level: its bytes; SentencePiece: ``▁`` as a
        space and ``<0xNN>`` as that byte; WordPiece: without ``##``). Special tokens as their UTF-8 name, or left
        out with ``skip_special``. Raises :class:`~app.engine.errors.InvalidTokenIdError`."""

    @abstractmethod
    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids of ``text`` (ordinary text) and each one's ``(start, end)`` span in characters of ``text``."""

    @abstractmethod
    def cache_stats(self) -> CacheStats:
        """Hits, misses and size of the tokenizer's pre-token cache(s)."""

    @abstractmethod
    def clear_cache(self) -> None:
        """Empty the pre-token cache(s) (ids unchanged)."""

    def commit_cache(self) -> int:
        """Fault in this process's memory of the pre-token cache(s) now, contents unchanged; returns the bytes
        covered (the default: 0, a family whose caches are written when they are built). The compiled rank core
        commits its cache when it is built; a forked serving process calls this at start-up for its own copy, so that
        the first texts it caches do not pay the page faults (or copies of the parent's pages)."""
        return 0

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """A reference (name, store, sha256, backend), reloaded by name from its store on the other side, by the
        reducer :mod:`app.engine.registry` registers for :class:`Tokenizer` (:func:`copyreg.pickle`): a worker
        process never receives the vocabulary, and gets the same verified artifact or an error. ``TypeError`` for a
        tokenizer not loaded from a store, or when no reducer is registered."""
        reduce = copyreg.dispatch_table.get(Tokenizer)
        if reduce is None:
            raise TypeError(f"cannot pickle {self!r}: tokenizers pickle as a reference to their store, through "
                            "app.engine.registry, which is not imported")
        return reduce(self)  # type: ignore[return-value]

    # -- special tokens -------------------------------------------------------------------------------------------

    def _init_special_tokens(self, special_tokens: Mapping[str, int], is_ordinary: Callable[[int], bool],
                             template_names: tuple[Sequence[str], Sequence[str]] = ((), ())) -> None:
        """Store the table and the template; raises ``ValueError`` if a special id is also an ordinary token's id
        or a template name is not a special token."""
        self._special_tokens = dict(special_tokens)
        self._special_by_id = {}
        for special, token_id in self._special_tokens.items():
            if is_ordinary(token_id):
                raise ValueError(f"{self.name}: special token {special!r} reuses ordinary id {token_id}")
            self._special_by_id.setdefault(token_id, special)
        pre, suf = template_names
        unknown = [n for n in (*pre, *suf) if n not in self._special_tokens]
        if unknown:
            raise ValueError(f"{self.name}: template names unknown special tokens {unknown}")
        self._template = Template(tuple((n, self._special_tokens[n]) for n in pre),
                                  tuple((n, self._special_tokens[n]) for n in suf))

    @property
    def special_tokens(self) -> dict[str, int]:
        """Special-token name -> id (a copy). These never match text."""
        return dict(self._special_tokens)

    @property
    def added_tokens(self) -> dict[str, int]:
        """Non-special added tokens (string -> id), matched in ordinary text before the model runs; none for
        families without them."""
        return {}

    @property
    def template(self) -> Template:
        """What ``add_special_tokens=True`` puts around a text."""
        return self._template

    @property
    def unk_id(self) -> int | None:
        """The id of the unknown token, which stands for text the vocabulary cannot represent (``[UNK]``,
        ``<unk>``); None when every text is representable (byte-level BPE, byte fallback without one)."""
        return None

    def special_token_id(self, name: str) -> int:
        """The id of a special token by name; raises :class:`~app.engine.errors.UnknownSpecialTokenError` listing
        the allowed ones."""
        try:
            return self._special_tokens[name]
        except (KeyError, TypeError):
            raise UnknownSpecialTokenError(str(name), self.name, self._special_tokens) from None

    def is_special(self, token_id: int) -> bool:
        """True if ``token_id`` is a special token's id."""
        return token_id in self._special_by_id

    def _around(self, prefix: Sequence[str], suffix: Sequence[str],
                add_special_tokens: bool) -> tuple[list[int], list[int]]:
        """The ids before and after a text: the template's (when asked) outside the named ``prefix``/``suffix``.
        Raises :class:`~app.engine.errors.UnknownSpecialTokenError` for an unknown name."""
        before = [self.special_token_id(n) for n in prefix]
        after = [self.special_token_id(n) for n in suffix]
        if add_special_tokens:
            before = [*self._template.prefix_ids, *before]
            after = [*after, *self._template.suffix_ids]
        return before, after

    def _around_count(self, prefix: Sequence[str], suffix: Sequence[str], add_special_tokens: bool) -> int:
        """How many ids :meth:`_around` puts around a text (same errors)."""
        before, after = self._around(prefix, suffix, add_special_tokens)
        return len(before) + len(after)

    # -- encoding and counting ------------------------------------------------------------------------------------

    def valid_text_calls(self) -> ValidTextCalls | None:
        """The compiled calls the plain ``encode(text)``/``count(text)`` go to (:class:`ValidTextCalls`), or None
        when this tokenizer has none (its plain calls then go through ``_encode_text``)."""
        return self._valid_text_calls

    def _bind_plain_encode(self) -> None:
        """Send ``encode(text)``, the call with one positional argument and no options, straight to
        ``_encode_text`` (one compiled call when that is a compiled function with its first argument bound), through
        an instance attribute (``app/engine/_native/fast_call.h``); every other call is :meth:`encode` itself. The
        same for ``count(text)`` unless the family has a ``count`` of its own. With :meth:`valid_text_calls` the
        plain calls go to those for the texts they admit, and every other text to the method. It
        saves the Python frames, up to ~170 ns a call (``python -m bench.families.plain_call``; about 0.8 us with
        ``_encode_text``'s own frame). A family calls it once its ``_encode_text`` is final; without the compiled
        core, or on the pure-Python backend, it does nothing."""
        from .native import CORE

        if CORE.module is None or self.backend == "python":  # the pure-Python reference stays all Python
            return
        fast: Any = self._encode_text
        bound: tuple[Any, ...] = ()
        if isinstance(fast, partial) and len(fast.args) == 1 and not fast.keywords:
            fast, bound = fast.func, fast.args
        dispatch = CORE.module.FastCall
        encode, count = type(self).encode.__get__(self), type(self).count.__get__(self)
        calls = self._valid_text_calls
        if calls is not None:
            guard: dict[str, Any] = {"retry": UnicodeEncodeError, "avoid": calls.avoid, "verify": calls.verify}
            self.__dict__["encode"] = dispatch(calls.encode, encode, **guard)
            self.__dict__["count"] = dispatch(calls.count, count, **guard)
            return
        self.__dict__["encode"] = dispatch(fast, encode, *bound)
        if type(self).count is Tokenizer.count:
            if self._count_text is not None:
                self.__dict__["count"] = dispatch(self._count_text, count)
            else:
                self.__dict__["count"] = dispatch(fast, count, *bound, length=True)

    def encode(self, text: str, *, add_special_tokens: bool = False, prefix: Sequence[str] = (),
               suffix: Sequence[str] = (), sample: Sample | None = None) -> list[int]:
        """Ids of ``text`` (ordinary text), with special tokens named in ``prefix``/``suffix`` around it and, when
        ``add_special_tokens``, the :attr:`template` outside those; ``sample``: one sampled segmentation of the
        text instead of the best one. Raises :class:`~app.engine.errors.UnknownSpecialTokenError` for an unknown
        name, :class:`~app.engine.sampling.SamplingError` when the tokenizer cannot sample as asked."""
        if not prefix and not suffix and not add_special_tokens:
            return self._encode_text(text) if sample is None else self._sampled(text, sample, 0)
        before, after = self._around(prefix, suffix, add_special_tokens)
        body = self._encode_text(text) if sample is None else self._sampled(text, sample, 0)
        return [*before, *body, *after]

    def count(self, text: str, *, add_special_tokens: bool = False, prefix: Sequence[str] = (),
              suffix: Sequence[str] = (), sample: Sample | None = None) -> int:
        """Number of tokens :meth:`encode` would return."""
        if not prefix and not suffix and not add_special_tokens and sample is None:
            return len(self._encode_text(text)) if self._count_text is None else self._count_text(text)
        return len(self.encode(text, add_special_tokens=add_special_tokens, prefix=prefix, suffix=suffix,
                               sample=sample))

    def count_framed(self, text: str, names: Sequence[str]) -> int:
        """Tokens of ``text`` read as parts: every occurrence of one of ``names`` (special tokens of this tokenizer;
        at a position the first listed name that occurs there -- list longer names first) is that one special
        token, and each stretch between occurrences is ordinary text counted on its own. Equal to :meth:`count` of
        those parts (``encode_parts``' length).

        Only for text whose special-token strings are known to be framing, never caller text (a chat template's
        output after the caller's text was escaped): unlike every other method it reads special tokens out of
        text. Raises :class:`~app.engine.errors.UnknownSpecialTokenError` for a name that is not a special token.
        """
        names = tuple(names)
        for name in names:
            if name not in self._special_tokens:
                self.special_token_id(name)  # raises, naming the allowed ones
        if not names:
            return self.count(text)
        pieces = _framed_splitter(names).split(text)
        count = self.count
        return sum(count(p) for p in pieces[::2] if p) + len(pieces) // 2

    def encode_batch(self, texts: Sequence[str], *, num_threads: int = 1,
                     sample: Sample | None = None) -> list[list[int]]:
        """:meth:`encode` of each text, in order, over up to ``num_threads`` threads (item ``i`` sampled with
        seed ``sample.seed + i``)."""
        if sample is not None:
            return self._sampled_batch(texts, sample)
        return map_in_threads(self._encode_text, texts, num_threads)

    def count_batch(self, texts: Sequence[str], *, num_threads: int = 1, sample: Sample | None = None) -> list[int]:
        """:meth:`count` of each text, in order."""
        if sample is not None:
            return [len(ids) for ids in self._sampled_batch(texts, sample)]
        return map_in_threads(self.count, texts, num_threads)

    def count_utf8_buffers(self, data: Any, offsets: Any, *, wide: bool = True) -> list[int]:
        """:meth:`count` of each text of a batch in Arrow's string layout: the texts' UTF-8 back to back in ``data``
        (any buffer), text ``i`` = ``data[offsets[i]:offsets[i + 1]]``, ``offsets`` n + 1 int64 values (int32
        unless ``wide``). Raises ``ValueError`` for a text that is not valid UTF-8. Here each text is decoded and
        counted; a family with a compiled core counts the bytes in place (no ``str`` objects)."""
        return self.count_batch(_decode_utf8_buffers(data, offsets, wide))

    def encode_utf8_buffers(self, data: Any, offsets: Any, *, wide: bool = True) -> tuple[bytes, bytes]:
        """:meth:`encode` of each text of a batch in Arrow's string layout (as :meth:`count_utf8_buffers`): every
        text's ids back to back (native-endian uint32) and n + 1 int32 offsets into them -- the two buffers of an
        Arrow ``list<int32>`` array. Raises ``ValueError`` for invalid UTF-8, ``OverflowError`` past 2**31 - 1
        ids."""
        import array

        ids, bounds = array.array("I"), array.array("i", [0])
        for row in self.encode_batch(_decode_utf8_buffers(data, offsets, wide)):
            ids.extend(row)
            if len(ids) > 2**31 - 1:
                raise OverflowError("more than 2**31 - 1 ids in one batch")
            bounds.append(len(ids))
        return ids.tobytes(), bounds.tobytes()

    def encode_parts(self, parts: Sequence[str | Special], *, add_special_tokens: bool = False,
                     sample: Sample | None = None) -> list[int]:
        """Ids of an ordered mix of texts and :class:`Special` tokens, e.g. ``["sys", Special("<|eot_id|>"), "hi"]``.

        Texts are encoded separately (pre-tokenization does not run across a part boundary); the template wraps the
        whole sequence when ``add_special_tokens``; with ``sample``, the text parts are sampled in order from one
        generator. Raises :class:`~app.engine.errors.UnknownSpecialTokenError` for an unknown name and
        ``TypeError`` for a part of another type.
        """
        encode_text: Callable[[str], list[int]] = self._encode_text
        if sample is not None:
            self.check_sample(sample)
            encode_text = partial(self._sample_text, sample=sample, rng=sample.rng())
        out: list[int] = self._template.prefix_ids if add_special_tokens else []
        for part in parts:
            if isinstance(part, Special):
                out.append(self.special_token_id(part.name))
            elif isinstance(part, str):
                out.extend(encode_text(part))
            else:
                raise TypeError(f"a part must be str or Special, not {type(part).__name__}")
        if add_special_tokens:
            out.extend(self._template.suffix_ids)
        return out

    # -- sampling hooks: a family that can sample overrides both ---------------------------------------------------

    def check_sample(self, sample: Sample) -> None:
        """Raise :class:`~app.engine.sampling.SamplingError` if this tokenizer cannot sample as ``sample`` asks
        (the default: it cannot sample at all)."""
        raise cannot_sample(self.name, type(self).__name__)

    def _sample_text(self, text: str, sample: Sample, rng: random.Random) -> list[int]:
        """Ids of one sampled segmentation of ordinary ``text``, drawing from ``rng`` (after :meth:`check_sample`)."""
        raise cannot_sample(self.name, type(self).__name__)

    def _sampled(self, text: str, sample: Sample, offset: int) -> list[int]:
        self.check_sample(sample)
        return self._sample_text(text, sample, sample.rng(offset))

    def _sampled_batch(self, texts: Sequence[str], sample: Sample) -> list[list[int]]:
        self.check_sample(sample)
        return [self._sample_text(t, sample, sample.rng(i)) for i, t in enumerate(texts)]

    # -- decoding -------------------------------------------------------------------------------------------------

    def token_bytes(self, token_id: int) -> bytes:
        """The surface bytes of one token; raises :class:`~app.engine.errors.InvalidTokenIdError`."""
        return self.decode_tokens_bytes([token_id])[0]

    def decode_bytes(self, ids: Sequence[int], *, skip_special: bool = False) -> bytes:
        """The concatenated surface bytes of ``ids``; raises :class:`~app.engine.errors.InvalidTokenIdError`."""
        return b"".join(self.decode_tokens_bytes(ids, skip_special=skip_special))

    def decode(self, ids: Sequence[int], *, errors: str = "replace", skip_special: bool = False) -> str:
        """Text of ``ids``; invalid UTF-8 becomes U+FFFD (``errors="replace"``)."""
        return self.decode_bytes(ids, skip_special=skip_special).decode("utf-8", errors=errors)

    def decode_batch(self, batch: Sequence[Sequence[int]], *, skip_special: bool = False) -> list[str]:
        """:meth:`decode` of each id list, in order."""
        return [self.decode(ids, skip_special=skip_special) for ids in batch]


def _decode_utf8_buffers(data: Any, offsets: Any, wide: bool) -> list[str]:
    """The texts of a batch in Arrow's string layout, decoded; ``ValueError`` naming the first invalid one."""
    raw = memoryview(data).cast("B")
    bounds = memoryview(offsets).cast("B").cast("q" if wide else "i")
    texts = []
    for i in range(len(bounds) - 1):
        try:
            texts.append(bytes(raw[bounds[i]:bounds[i + 1]]).decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError(f"text {i} is not valid UTF-8") from None
    return texts


@lru_cache(maxsize=256)
def _framed_splitter(names: tuple[str, ...]) -> re.Pattern[str]:
    """A split on ``names`` in the given order (Python's alternation: at a position the first that matches)."""
    return re.compile("(" + "|".join(map(re.escape, names)) + ")")
