"""Intrinsic tokenizer metrics, to compare a trained tokenizer with the stock ones on the same text.

Per text:

``bytes_per_token``
    UTF-8 bytes of the text / tokens (higher = better compression).
``tokens_per_word``
    tokens / whitespace-separated words (``str.split``); lower is better ("fertility").
``byte_fallback_share``
    share of tokens that are a single byte which is not a whole character — a byte >= 0x80, i.e. a piece of a
    multi-byte UTF-8 character that the vocabulary could not cover with a longer token. ASCII single-byte tokens
    are whole characters and do not count. Always 0 for the classic kind, which has no byte tokens.
``unknown_share``
    share of unknown tokens: ``<unk>`` of the classic kind, the model's unknown id (``[UNK]``, ``<unk>``) of the
    pipelines (:attr:`~app.engine.tokenizer.Tokenizer.unk_id`); 0 for byte-level tokenizers.
``tokens_per_char``
    tokens / characters (code points): the multilingual fairness figure — the same content in several
    languages, side by side, shows how much more one language costs than another under one tokenizer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..tokenizer import Tokenizer


@dataclass(frozen=True)
class TextMetrics:
    """Metrics of one text under one tokenizer (see the module docstring); counts are exact integers."""

    label: str
    tokenizer: str
    bytes: int
    words: int
    tokens: int
    byte_fallback_tokens: int
    unknown_tokens: int
    chars: int = 0

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0

    @property
    def tokens_per_word(self) -> float:
        return self.tokens / self.words if self.words else 0.0

    @property
    def tokens_per_char(self) -> float:
        return self.tokens / self.chars if self.chars else 0.0

    @property
    def byte_fallback_share(self) -> float:
        return self.byte_fallback_tokens / self.tokens if self.tokens else 0.0

    @property
    def unknown_share(self) -> float:
        return self.unknown_tokens / self.tokens if self.tokens else 0.0

    def as_dict(self) -> dict[str, Any]:
        """Counts and derived ratios, JSON-ready."""
        d = asdict(self)
        d.update(
            bytes_per_token=round(self.bytes_per_token, 4),
            tokens_per_word=round(self.tokens_per_word, 4),
            tokens_per_char=round(self.tokens_per_char, 4),
            byte_fallback_share=round(self.byte_fallback_share, 6),
            unknown_share=round(self.unknown_share, 6),
        )
        return d


def evaluate_text(tokenizer: Tokenizer, text: str, *, label: str = "") -> TextMetrics:
    """Metrics of ``text`` under ``tokenizer`` (a tokenizer of any family; unknown tokens: its
    :attr:`~app.engine.tokenizer.Tokenizer.unk_id`)."""
    ids = tokenizer.encode(text)
    unk_id = tokenizer.unk_id
    unknown = sum(1 for t in ids if t == unk_id) if unk_id is not None else 0
    fallback = 0  # always 0 for the classic kind, whose tokens are whole characters
    single: dict[int, bool] = {}
    for t in ids:
        hit = single.get(t)
        if hit is None:
            b = tokenizer.token_bytes(t)
            hit = single[t] = len(b) == 1 and b[0] >= 0x80
        fallback += hit
    return TextMetrics(
        label=label,
        tokenizer=tokenizer.name,
        bytes=len(text.encode("utf-8", errors="surrogatepass")),
        words=len(text.split()),
        tokens=len(ids),
        byte_fallback_tokens=fallback,
        unknown_tokens=unknown,
        chars=len(text),
    )
