"""The WordPiece model (BERT), as Hugging Face ``tokenizers`` implements it.

A word is split greedily from the left: the longest vocabulary entry that starts the rest of the word (after the
first piece, spelled with the continuing prefix ``##``). A word longer than ``max_input_chars_per_word``
characters, or one with a position where nothing matches, becomes one ``[UNK]`` covering the whole word.

The longest match is a walk down a character trie (one for word starts, one for continuations), so a word costs at
most its length times the longest entry, never a rescan per candidate end.

Compiled core (``app/engine/_native/wordpiece.c``, optional): the same tries and walk in C, for single pre-tokens
(:meth:`WordPiece.tokenize`, :meth:`WordPiece.encode_pieces`) and, behind BERT's normalizer and pre-tokenizer, for
whole texts (:meth:`WordPiece.fuse`: normalization, pre-tokenization and WordPiece in one call, the GIL released).
This module stays the reference; ``$TOKENIZER_ENGINE=python`` (or ``backend="python"``) runs it alone.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, cast

from ...native import OptionalExtension
from ..base import Model, Normalizer, PreTokenizer
from ..bert import BertNormalizer, BertPreTokenizer

_EXT = OptionalExtension("app.engine._native._wordpiece", "compiled WordPiece", "the pure-Python WordPiece")

#: Ids of a list of text stretches (str, each normalized, pre-tokenized and tokenized) and ids (int), in order.
FusedEncoder = Callable[[list[str | int]], list[int]]


def _trie(words: Mapping[str, int]) -> dict[str, Any]:
    """Nested dicts by character; the id of a complete entry is stored under the key ``""``."""
    root: dict[str, Any] = {}
    for word, token_id in words.items():
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = token_id
    return root


class WordPiece(Model):
    """Greedy longest-match-first WordPiece. Thread-safe (immutable after construction)."""

    def __init__(self, vocab: Mapping[str, int], *, unk_token: str = "[UNK]", continuing_subword_prefix: str = "##",
                 max_input_chars_per_word: int = 100, excluded: Collection[int] = (),
                 backend: str | None = None) -> None:
        """``vocab``: token -> id; ``excluded``: ids never matched in text (special tokens). Raises ``ValueError``
        if ``unk_token`` is not in the vocabulary. ``backend`` (``native``/``python``/None, see
        :func:`app.engine.native.resolve_backend`): native runs the compiled core when it is built (same ids);
        :attr:`backend` says which one is in use."""
        self.vocab = dict(vocab)
        if unk_token not in self.vocab:
            raise ValueError(f"WordPiece unknown token {unk_token!r} is not in the vocabulary")
        self.unk_token = unk_token
        self.unk_id: int = self.vocab[unk_token]
        self.prefix = continuing_subword_prefix
        self.max_chars = max_input_chars_per_word
        self._by_id: dict[int, str] = {}
        for token, token_id in self.vocab.items():
            self._by_id.setdefault(token_id, token)
        self._size = max(self.vocab.values(), default=-1) + 1
        self._excluded: frozenset[int] = frozenset()
        self._built = False  # (the matchable entries' model is made by the first exclude_from_text)
        self._native_wanted = (_EXT.resolve_backend(backend) == "native" and _EXT.module is not None
                               and 0 <= min(self.vocab.values()) and self._size <= 1 << 31)
        #: The compiled model (same ids) when the backend is native.
        self.native: Any = None
        self._tries: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.exclude_from_text(excluded)

    @property
    def backend(self) -> str:
        return "python" if self.native is None else "native"

    def exclude_from_text(self, ids: Collection[int]) -> None:
        """Never match the entries ``ids`` in text (special tokens; called by the loader before first use). Ids
        already excluded change nothing (the model is not rebuilt)."""
        excluded = self._excluded | frozenset(ids)
        if self._built and excluded == self._excluded:
            return
        self._excluded, self._built = excluded, True
        self._tries = None
        if self._native_wanted:
            starts, cont = self._entries()
            self.native = cast(Any, _EXT.module).Model(starts, cont, self.unk_id, self.max_chars)
        else:
            self._python_tries()

    def _entries(self) -> tuple[dict[str, int], dict[str, int]]:
        """The entries text can match: word starts, and continuations with the prefix removed."""
        starts = {t: i for t, i in self.vocab.items() if i not in self._excluded}
        cont = {t[len(self.prefix):]: i for t, i in starts.items() if self.prefix and t.startswith(self.prefix)}
        return starts, cont

    def _python_tries(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The reference's tries (built on first use when the compiled model does the encoding)."""
        tries = self._tries
        if tries is None:
            starts, cont = self._entries()
            tries = self._tries = (_trie(starts), _trie(cont))
        return tries

    @classmethod
    def from_hf(cls, config: Mapping[str, Any], *, excluded: Collection[int] = (),
                backend: str | None = None) -> WordPiece:
        """From a ``tokenizer.json`` model ``{"type": "WordPiece", "vocab", "unk_token", ...}``."""
        return cls(config.get("vocab") or {}, unk_token=config.get("unk_token", "[UNK]"),
                   continuing_subword_prefix=config.get("continuing_subword_prefix", "##"),
                   max_input_chars_per_word=int(config.get("max_input_chars_per_word", 100)), excluded=excluded,
                   backend=backend)

    def fuse(self, normalizer: Normalizer | None, pre_tokenizer: PreTokenizer | None) -> FusedEncoder | None:
        """The whole path of a text in the compiled core, when the pipeline around this model is BERT's: a
        :class:`~app.engine.pipeline.bert.BertNormalizer` (any options) or none, then a
        :class:`~app.engine.pipeline.bert.BertPreTokenizer`. None otherwise, on the Python backend, or when the core's
        character tables were built for another ``unicodedata`` version than this interpreter's."""
        module = _EXT.module
        native = self.native
        if native is None or module is None or type(pre_tokenizer) is not BertPreTokenizer:
            return None
        if normalizer is not None and type(normalizer) is not BertNormalizer:
            return None
        if module.UNIDATA_VERSION != unicodedata.unidata_version:
            return None
        options = 0
        if normalizer is not None:
            for flag, on in ((module.CLEAN, normalizer.clean_text), (module.CHINESE, normalizer.handle_chinese_chars),
                             (module.STRIP, normalizer.strip_accents), (module.LOWER, normalizer.lowercase)):
                options |= flag if on else 0
        encode_bert = native.encode_bert
        return lambda items: cast("list[int]", encode_bert(items, options))

    @property
    def vocab_size(self) -> int:
        return self._size

    def token_to_id(self, token: str) -> int | None:
        return self.vocab.get(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self._by_id.get(token_id)

    def tokenize_with_spans(self, text: str) -> list[tuple[int, int, int]]:
        n = len(text)
        if n == 0:
            return []
        if n > self.max_chars:
            return [(self.unk_id, 0, n)]
        out: list[tuple[int, int, int]] = []
        start = 0
        trie, cont = self._python_tries()
        while start < n:
            node = trie
            best_id, best_end = -1, -1
            i = start
            while i < n:
                node = node.get(text[i])  # type: ignore[assignment]
                if node is None:
                    break
                i += 1
                found = node.get("")
                if found is not None:
                    best_id, best_end = found, i
            if best_id < 0:
                return [(self.unk_id, 0, n)]
            out.append((best_id, start, best_end))
            start = best_end
            trie = cont
        return out

    def tokenize(self, text: str) -> list[int]:
        if self.native is not None:
            return cast("list[int]", self.native.tokenize(text))
        return [t[0] for t in self.tokenize_with_spans(text)]

    def encode_pieces(self, texts: Sequence[str | int], segment_from: int) -> list[int]:
        """Ids of the pre-tokens ``texts`` in order (an ``int`` item is an id already, passed through): one call
        into the compiled model, or the reference per piece. ``segment_from`` is ignored (words are never cut)."""
        if self.native is not None:
            return cast("list[int]", self.native.encode(texts if type(texts) is list else list(texts)))
        ids: list[int] = []
        for t in texts:
            if isinstance(t, int):
                ids.append(t)
            else:
                ids.extend(self.tokenize(t))
        return ids
