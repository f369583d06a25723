"""Byte-level BPE training (GPT-2 style): 256 single bytes as the base alphabet, no unknown token.

Every pre-token (a piece of the pre-tokenizer pattern) is UTF-8 encoded and learned on as a sequence of bytes;
merges never cross pre-token boundaries. The result is written in tiktoken format, which the ordinary
:class:`~app.engine.encoding.RankBPETokenizer` loads unchanged.

Ranks (= token ids):

* 0..255 are the single bytes in byte-value order (rank ``b`` is ``bytes([b])``);
* then one rank per new token, in the order training created it. A merge whose result already exists as a
  token (the same bytes reached by a different split) creates no rank.
* Special tokens (``--special``) get the ids right after the last rank, in the order given.

Why this reproduces training: the engine merges, at each step, the adjacent pair whose concatenation has the
lowest rank. With ranks in merge order that is the textbook "apply the merges in learned order" — at any point
the lowest-ranked applicable merge is the earliest learned one, and a merge never makes an earlier one
applicable again. So encoding a word seen in training gives the segmentation training ended with. The one
documented exception: rank-based encoding merges *any* adjacent pair whose concatenation is a token, while
training merged only the pairs it chose; if a token can be formed by two splits and training never merged
the second split in some word (possible only when the same bytes arise along two merge paths), encoding may
merge further than training did. The test suite checks equality on real and random corpora.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .compiled import is_counter, learn, learn_merges_native, resolve_backend
from .merges import MergeResult, byte_order_key


@dataclass
class ByteBPEResult:
    """Learned byte-level vocabulary: ``ranks`` (token bytes -> rank), the merge steps as byte pairs, and the
    training-time segmentation of every pre-token."""

    ranks: dict[bytes, int]
    merges: list[tuple[bytes, bytes]]
    segmentation: dict[bytes, list[bytes]]
    stop_reason: str


def train_byte_bpe(
    pretoken_counts: Mapping[str, int] | Mapping[bytes, int] | Any,
    *,
    vocab_size: int,
    min_frequency: int = 2,
    tie_break: str = "first-seen",
    progress: Callable[[int], None] | None = None,
    keep_segmentation: bool = False,
    consume: bool = False,
    backend: str | None = None,
) -> ByteBPEResult:
    """Learn up to ``vocab_size`` ordinary tokens (256 bytes + merges) from pre-token frequencies.

    ``pretoken_counts`` maps pre-tokens (str, UTF-8 encoded here, or bytes) to frequencies, in corpus order, or
    is a compiled ``PretokenCounter`` (:func:`.compiled.count_pretokens_native`). With ``consume=True`` the
    mapping (a dict or counter) is emptied while it is converted, so its memory is released before training.
    ``backend`` picks the merge learner (:func:`.compiled.resolve_backend`: the compiled one by default, the
    Python reference with ``"python"``); both give the same result. Raises ``ValueError`` if ``vocab_size < 256``.
    """
    if vocab_size < 256:
        raise ValueError(f"a byte-level vocabulary needs vocab_size >= 256, not {vocab_size}")
    native = resolve_backend(backend) == "native"
    options: dict[str, Any] = dict(
        base_symbols=[bytes([b]) for b in range(256)],
        concat=lambda x, y: x + y,
        order_key=byte_order_key,
        unit_length=len,
        max_symbols=vocab_size,
        min_frequency=min_frequency,
        tie_break=tie_break,
        progress=progress,
    )
    keys: list[bytes] = []
    res: MergeResult
    if native and is_counter(pretoken_counts) and not keep_segmentation:
        res = learn_merges_native(pretoken_counts, None, keep_words=False, consume=consume, **options)
    else:
        items: list[tuple[Any, int]]
        if is_counter(pretoken_counts):
            counter: Any = pretoken_counts
            items = counter.items()
            if consume:
                counter.clear()
        else:
            items = drain(pretoken_counts) if consume else list(pretoken_counts.items())
        keys = [_utf8(k) for k, _ in items] if keep_segmentation else []
        words = [list(_utf8(k)) for k, _ in items]
        counts = [c for _, c in items]
        del items
        res = learn(words, counts, backend=backend, keep_words=keep_segmentation, **options)
    symbols: list[bytes] = res.symbols  # type: ignore[assignment]
    ranks = {tok: i for i, tok in enumerate(symbols)}
    merges = [(symbols[a], symbols[b]) for a, b, _ in res.merges]
    segmentation = (
        {key: [symbols[s] for s in w] for key, w in zip(keys, res.words, strict=True)} if keep_segmentation else {}
    )
    return ByteBPEResult(ranks=ranks, merges=merges, segmentation=segmentation, stop_reason=res.stop_reason)


def _utf8(key: str | bytes) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else key


def drain(counts: Mapping[Any, int]) -> list[tuple[Any, int]]:
    """The items of ``counts`` in order, emptying it as it goes if it is a dict (to free memory early)."""
    if not isinstance(counts, dict):
        return list(counts.items())
    items = []
    while counts:
        items.append(counts.popitem())  # LIFO: reversed below
    items.reverse()
    return items
