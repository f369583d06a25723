"""Training the classic character-level BPE (:mod:`app.engine.char_bpe` holds the model and the served tokenizer)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..char_bpe import UNK_ID, CharBPEEncoding, CharBPEModel, Symbol, display_symbol
from .byte_bpe import drain
from .compiled import learn
from .merges import text_order_key

__all__ = ["UNK_ID", "CharBPEEncoding", "CharBPEModel", "train_char_bpe"]


def train_char_bpe(
    word_counts: Mapping[str, int],
    *,
    vocab_size: int | None = None,
    num_merges: int | None = None,
    min_frequency: int = 2,
    tie_break: str = "first-seen",
    progress: Callable[[int], None] | None = None,
    keep_segmentation: bool = False,
    consume: bool = False,
    backend: str | None = None,
) -> CharBPEModel:
    """Learn a classic BPE model from word frequencies (``{word: count}`` in corpus order, words without
    whitespace). Stops at ``vocab_size`` ids (``<unk>``, ``</w>``, characters and merged symbols), after
    ``num_merges`` merges, or below ``min_frequency``. ``consume=True`` empties a dict argument while reading it.
    ``backend`` picks the merge learner (:func:`.compiled.resolve_backend`; same result either way).
    Raises ``ValueError`` for a word containing whitespace."""
    items = drain(word_counts) if consume else list(word_counts.items())
    chars = sorted({ch for w, _ in items for ch in w})
    if any(ch.isspace() for ch in chars):
        raise ValueError("words must not contain whitespace")
    base: list[Symbol] = [("", True), *((ch, False) for ch in chars)]
    index = {s[0]: i for i, s in enumerate(base) if not s[1]}
    words = [[index[ch] for ch in w] + [0] for w, _ in items]
    kept = [w for w, _ in items] if keep_segmentation else []
    freqs = [c for _, c in items]
    del items
    options: dict[str, Any] = dict(
        base_symbols=base,
        concat=lambda x, y: (x[0] + y[0], y[1]),
        order_key=lambda s: text_order_key(display_symbol(s)),
        unit_length=lambda s: len(s[0]) + (1 if s[1] else 0),
        max_symbols=None if vocab_size is None else vocab_size - 1,
        max_merges=num_merges,
        min_frequency=min_frequency,
        tie_break=tie_break,
        progress=progress,
    )
    res = learn(words, freqs, backend=backend, keep_words=keep_segmentation, **options)
    symbols: list[Symbol] = res.symbols  # type: ignore[assignment]
    model = CharBPEModel(
        symbols=symbols,
        n_base=len(base) + 1,
        merges=[(a + 1, b + 1, r + 1) for a, b, r in res.merges],
        stop_reason=res.stop_reason,
    )
    if keep_segmentation:
        model.segmentation = {w: [s + 1 for s in seg] for w, seg in zip(kept, res.words, strict=True)}
    return model
