"""The :class:`Tokenizer` protocol: the one surface every tokenizer family implements.

Families: byte-level BPE over ranks (:class:`~app.engine.encoding.Encoding`, the compiled fast path), the classic
character BPE (:class:`~app.engine.char_bpe.CharBPEEncoding`), and component pipelines
(:class:`~app.engine.pipeline.Pipeline`: Hugging Face ``tokenizer.json``, SentencePiece, WordPiece, Unigram …).
:func:`app.engine.get_encoding` returns one of these for any name in the store; callers type against
:class:`Tokenizer` and never ask which family they hold.

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
* Ids outside the vocabulary raise :class:`~app.engine.errors.InvalidTokenIdError` on decode; unknown special
  names raise :class:`~app.engine.errors.UnknownSpecialTokenError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ._batch import map_in_threads
from .cache import CacheStats
from .specials import Special, SpecialTokensMixin, Template
from .store import TokenizerSpec


@runtime_checkable
class Tokenizer(Protocol):
    """A loaded, verified tokenizer. Thread-safe. See the module docstring for the rules."""

    name: str
    n_vocab: int  #: highest id + 1 (ordinary, added and special)
    backend: str  #: ``"native"`` (compiled core) or ``"python"``
    spec: TokenizerSpec | None  #: the manifest entry it was loaded from (None when built in code)
    pattern: str  #: the pre-tokenizer regex ("" when the family has none)

    @property
    def special_tokens(self) -> dict[str, int]:
        """Special-token name -> id (a copy). These never match text."""
        ...

    @property
    def added_tokens(self) -> dict[str, int]:
        """Non-special added tokens (string -> id), matched in ordinary text before the model runs."""
        ...

    @property
    def template(self) -> Template:
        """What ``add_special_tokens=True`` adds."""
        ...

    def special_token_id(self, name: str) -> int: ...

    def is_special(self, token_id: int) -> bool: ...

    def encode(self, text: str, *, add_special_tokens: bool = False, prefix: Sequence[str] = (),
               suffix: Sequence[str] = ()) -> list[int]: ...

    def count(self, text: str, *, add_special_tokens: bool = False, prefix: Sequence[str] = (),
              suffix: Sequence[str] = ()) -> int: ...

    def encode_batch(self, texts: Sequence[str], *, num_threads: int = 1) -> list[list[int]]: ...

    def count_batch(self, texts: Sequence[str], *, num_threads: int = 1) -> list[int]: ...

    def encode_parts(self, parts: Sequence[str | Special], *, add_special_tokens: bool = False) -> list[int]: ...

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]: ...

    def decode(self, ids: Sequence[int], *, errors: str = "replace", skip_special: bool = False) -> str: ...

    def decode_bytes(self, ids: Sequence[int], *, skip_special: bool = False) -> bytes: ...

    def decode_batch(self, batch: Sequence[Sequence[int]], *, skip_special: bool = False) -> list[str]: ...

    def decode_tokens_bytes(self, ids: Sequence[int], *, skip_special: bool = False) -> list[bytes]:
        """Each token's surface bytes: what it stands for in text (byte-level: its bytes; SentencePiece: ``▁`` as a
        space and ``<0xNN>`` as that byte; WordPiece: without ``##``). Special tokens as their UTF-8 name."""
        ...

    def token_bytes(self, token_id: int) -> bytes: ...

    def cache_stats(self) -> CacheStats: ...

    def clear_cache(self) -> None: ...


class TokenizerBase(SpecialTokensMixin):
    """Shared implementation of the :class:`Tokenizer` surface over two hooks a family provides:
    ``_encode_text(text) -> ids`` (ordinary text only) and ``decode_tokens_bytes(ids, skip_special=...)``.

    A family overrides what it can do faster (``count`` without building ids, batches in C threads) or differently
    (``decode`` through a decoder pipeline)."""

    name: str
    n_vocab: int
    backend: str = "python"
    spec: TokenizerSpec | None = None
    pattern: str = ""

    def decode_tokens_bytes(self, ids: Sequence[int], *, skip_special: bool = False) -> list[bytes]:
        raise NotImplementedError

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as a reference (name, store, sha256, backend) and reloaded by name from its store on the other
        side (:func:`app.engine.registry.pickle_reference`): a worker process never receives the vocabulary, and
        gets the same verified artifact or an error. ``TypeError`` for a tokenizer not loaded from a store."""
        from .registry import pickle_reference

        return pickle_reference(self)  # type: ignore[arg-type]

    def encode(self, text: str, *, add_special_tokens: bool = False, prefix: Sequence[str] = (),
               suffix: Sequence[str] = ()) -> list[int]:
        """Ids of ``text`` (ordinary text), with special tokens named in ``prefix``/``suffix`` around it and, when
        ``add_special_tokens``, the :attr:`template` outside those. Raises
        :class:`~app.engine.errors.UnknownSpecialTokenError` for an unknown name."""
        if not prefix and not suffix and not add_special_tokens:
            return self._encode_text(text)
        before, after = self._around(prefix, suffix, add_special_tokens)
        return [*before, *self._encode_text(text), *after]

    def count(self, text: str, *, add_special_tokens: bool = False, prefix: Sequence[str] = (),
              suffix: Sequence[str] = ()) -> int:
        """Number of tokens :meth:`encode` would return."""
        return len(self.encode(text, add_special_tokens=add_special_tokens, prefix=prefix, suffix=suffix))

    def encode_batch(self, texts: Sequence[str], *, num_threads: int = 1) -> list[list[int]]:
        """:meth:`encode` of each text, in order, over up to ``num_threads`` threads."""
        return map_in_threads(self._encode_text, texts, num_threads)

    def count_batch(self, texts: Sequence[str], *, num_threads: int = 1) -> list[int]:
        """:meth:`count` of each text, in order."""
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
