"""The WordPiece model (BERT), as Hugging Face ``tokenizers`` implements it.

A word is split greedily from the left: the longest vocabulary entry that starts the rest of the word (after the
first piece, spelled with the continuing prefix ``##``). A word longer than ``max_input_chars_per_word``
characters, or one with a position where nothing matches, becomes one ``[UNK]`` covering the whole word.

The longest match is a walk down a character trie (one for word starts, one for continuations), so a word costs at
most its length times the longest entry, never a rescan per candidate end.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any


def _trie(words: Mapping[str, int]) -> dict[str, Any]:
    """Nested dicts by character; the id of a complete entry is stored under the key ``""``."""
    root: dict[str, Any] = {}
    for word, token_id in words.items():
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = token_id
    return root


class WordPiece:
    """Greedy longest-match-first WordPiece. Thread-safe (immutable after construction)."""

    def __init__(self, vocab: Mapping[str, int], *, unk_token: str = "[UNK]", continuing_subword_prefix: str = "##",
                 max_input_chars_per_word: int = 100, excluded: Collection[int] = ()) -> None:
        """``vocab``: token -> id; ``excluded``: ids never matched in text (special tokens). Raises ``ValueError``
        if ``unk_token`` is not in the vocabulary."""
        self.vocab = dict(vocab)
        if unk_token not in self.vocab:
            raise ValueError(f"WordPiece unknown token {unk_token!r} is not in the vocabulary")
        self.unk_token = unk_token
        self.unk_id = self.vocab[unk_token]
        self.prefix = continuing_subword_prefix
        self.max_chars = max_input_chars_per_word
        self._by_id: dict[int, str] = {}
        for token, token_id in self.vocab.items():
            self._by_id.setdefault(token_id, token)
        self._size = max(self.vocab.values(), default=-1) + 1
        self._excluded: frozenset[int] = frozenset()
        self.exclude_from_text(excluded)

    def exclude_from_text(self, ids: Collection[int]) -> None:
        """Never match the entries ``ids`` in text (special tokens; called by the loader before first use)."""
        self._excluded = self._excluded | frozenset(ids)
        starts = {t: i for t, i in self.vocab.items() if i not in self._excluded}
        cont = {t[len(self.prefix):]: i for t, i in starts.items() if self.prefix and t.startswith(self.prefix)}
        self._start = _trie(starts)
        self._cont = _trie(cont)

    @classmethod
    def from_hf(cls, config: Mapping[str, Any], *, excluded: Collection[int] = ()) -> WordPiece:
        """From a ``tokenizer.json`` model ``{"type": "WordPiece", "vocab", "unk_token", ...}``."""
        return cls(config.get("vocab") or {}, unk_token=config.get("unk_token", "[UNK]"),
                   continuing_subword_prefix=config.get("continuing_subword_prefix", "##"),
                   max_input_chars_per_word=int(config.get("max_input_chars_per_word", 100)), excluded=excluded)

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
        trie = self._start
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
            trie = self._cont
        return out

    def tokenize(self, text: str) -> list[int]:
        return [t[0] for t in self.tokenize_with_spans(text)]
