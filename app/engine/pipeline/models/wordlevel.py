"""WordLevel: each pre-token is one vocabulary entry, or the unknown token."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..base import Model


class WordLevel(Model):
    """The model; ``unk_token`` must be in the vocabulary (so every pre-token has an id)."""

    def __init__(self, vocab: Mapping[str, int], unk_token: str) -> None:
        if unk_token not in vocab:
            raise ValueError(f"unk_token {unk_token!r} is not in the vocabulary")
        self.vocab = dict(vocab)
        self.unk_id: int | None = self.vocab[unk_token]
        self._unk = self.vocab[unk_token]
        top = max(self.vocab.values(), default=-1)
        self._id_to_token: list[str | None] = [None] * (top + 1)
        for token, token_id in self.vocab.items():
            self._id_to_token[token_id] = token

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> WordLevel:
        return cls(config["vocab"], str(config.get("unk_token", "<unk>")))

    @property
    def vocab_size(self) -> int:
        return len(self._id_to_token)

    def token_to_id(self, token: str) -> int | None:
        return self.vocab.get(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self._id_to_token[token_id] if 0 <= token_id < len(self._id_to_token) else None

    def tokenize(self, text: str) -> list[int]:
        return [self.vocab.get(text, self._unk)] if text else []

    def tokenize_with_spans(self, text: str) -> list[tuple[int, int, int]]:
        return [(self.vocab.get(text, self._unk), 0, len(text))] if text else []
