"""Glue between the trainer and its compiled half (``app.engine._native._trainer``, built from ``trainer.c``).

The compiled half does the hot loops of training: counting the pre-tokens of a bundled pattern (the
hand-written scanners the encoding core uses, into a C hash table; no Python object per piece; also the
whitespace words of the Unigram and SentencePiece kinds, :mod:`.word_counter`) and the incremental merge learner
of :mod:`.merges` on flat arrays; the Unigram learner (:mod:`.unigram`) and the WordPiece merge loop
(:mod:`.wordpiece`) use its ``UnigramWords`` and ``wordpiece_learn``. All give exactly what the Python
reference gives — the same pre-token counts in the same first-appearance order, the same merges and pieces (the
tests compare them on random corpora and whole training runs) — so artifacts are byte-identical whichever backend
trained them.

Backend selection (:func:`resolve_backend`), as for the encoding core (:mod:`app.engine.native`):

* a ``backend=`` argument (``"native"`` or ``"python"``) when given, else
* ``$TOKENIZER_ENGINE`` (``native`` or ``python``), else
* ``native`` when the extension imports, ``python`` otherwise (with a one-time warning if native was asked for).

``$TOKENIZER_NATIVE_DISABLE=1`` makes the import fail on purpose (how tests simulate a machine without a compiler).
A custom ``--pattern-regex`` has no native scanner: its pre-tokens are always counted in Python (the merges can
still be learned natively).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..native import OptionalExtension
from .corpus import BLOCK_BYTES, MAX_CHUNK_CHARS, CorpusStats, iter_chunks
from .merges import TIE_BREAKS, MergeResult, learn_merges

#: The compiled learner calls ``progress`` after every this many merges (and once at the end).
PROGRESS_EVERY = 256
#: With an alphabet the compiled learner builds the symbols' text; this many first merges are checked against concat.
_CHECKED = 64
#: Characters of text handed to the compiled counter at once when counting in threads.
BATCH_CHARS = 8 << 20

TRAINER = OptionalExtension("app.engine._native._trainer", "compiled trainer", "the pure-Python trainer")
trainer_module: Any = TRAINER.module
IMPORT_ERROR = TRAINER.error


def available() -> bool:
    """True if the compiled trainer imported."""
    return trainer_module is not None


def resolve_backend(requested: str | None = None) -> str:
    """``"native"`` or ``"python"`` (see the module docstring); raises ``ValueError`` for any other value."""
    return TRAINER.resolve_backend(requested)


def scanner_for(pattern: str) -> int:
    """The compiled counter's scanner id for a bundled pattern's regex text; 0 if there is none (or no extension)."""
    return TRAINER.scanner_id(pattern)


def is_counter(obj: object) -> bool:
    """True if ``obj`` is a compiled ``PretokenCounter``."""
    return trainer_module is not None and isinstance(obj, trainer_module.PretokenCounter)


def count_pretokens_native(
    paths: Iterable[str | Path],
    scanner: int,
    *,
    threads: int = 1,
    stats: CorpusStats | None = None,
    on_bytes: Callable[[int], None] | None = None,
    block_bytes: int = BLOCK_BYTES,
    max_chunk_chars: int = MAX_CHUNK_CHARS,
) -> Any:
    """Count pre-tokens like :func:`.corpus.count_pretokens`, with the compiled scanner ``scanner``.

    Returns a ``PretokenCounter``: ``len()`` distinct pre-tokens, ``items()`` their UTF-8 bytes and counts in
    order of first appearance (the Python path's ``Counter`` with its keys encoded). The same chunks as the
    Python path are read (:func:`.corpus.iter_chunks`); ``threads=2`` counts batches of chunks in two threads
    (output unchanged). Raises ``RuntimeError`` without the extension, ``OSError`` for an unreadable file.
    """
    if trainer_module is None:
        raise RuntimeError(f"compiled trainer not available: {IMPORT_ERROR}")
    counter = trainer_module.PretokenCounter(scanner)
    chunks = iter_chunks(
        paths, exact_cuts=True, stats=stats, on_bytes=on_bytes, block_bytes=block_bytes, max_chunk_chars=max_chunk_chars
    )
    if threads <= 1:
        for chunk in chunks:
            counter.feed(chunk)
        return counter
    batch: list[str] = []
    size = 0
    for chunk in chunks:
        batch.append(chunk)
        size += len(chunk)
        if size >= BATCH_CHARS:
            counter.feed_many(batch, threads)
            batch, size = [], 0
    if batch:
        counter.feed_many(batch, threads)
    return counter


def learn(
    words: Sequence[Sequence[int]],
    counts: Sequence[int],
    *,
    backend: str | None,
    keep_words: bool,
    **options: Any,
) -> MergeResult:
    """:func:`.merges.learn_merges` (words copied in place, not kept) or :func:`learn_merges_native`, whichever
    :func:`resolve_backend` picks for ``backend``; the same result either way."""
    if resolve_backend(backend) == "native":
        return learn_merges_native(words, counts, keep_words=keep_words, **options)
    return learn_merges(words, counts, copy_words=False, **options)


def learn_merges_native(
    words: Sequence[Sequence[int]] | Any,
    counts: Sequence[int] | None,
    *,
    base_symbols: Sequence[Hashable],
    concat: Callable[[Hashable, Hashable], Hashable],
    order_key: Callable[[Hashable], tuple[int, ...]],
    unit_length: Callable[[Hashable], int],
    max_symbols: int | None = None,
    max_merges: int | None = None,
    min_frequency: int = 2,
    tie_break: str = "first-seen",
    progress: Callable[[int], None] | None = None,
    keep_words: bool = True,
    consume: bool = False,
    alphabet: str | None = None,
    word_rules: tuple[bool, bool] = (True, True),
    valid: Any = None,
) -> MergeResult:
    """:func:`.merges.learn_merges` in C: same arguments, same result (``words`` only with ``keep_words``).

    ``words`` may also be a ``PretokenCounter`` (``counts=None``, the 256 single bytes as base symbols); with
    ``consume=True`` its table is freed once the words are copied. Requirements of the compiled learner (checked,
    ``ValueError``): every base symbol is one unit long, and ``order_key`` of a base symbol is its order units
    followed by one terminator, the same for all and above every unit (true of :func:`.merges.byte_order_key` and
    :func:`.merges.text_order_key`), so that the key of a concatenation is the concatenation of the units. A merged
    symbol is identified by its sequence of base symbols; the result is checked against ``concat``
    (``RuntimeError`` if they disagree; with ``alphabet``, whose symbols are the concatenations of their characters
    built in C, on the first merges only). ``progress(n)`` is called every :data:`PROGRESS_EVERY` merges and at the
    end. With ``alphabet`` (a str of the base symbols, each one character), ``words`` may be a list of str whose
    characters are base symbols (no list of ids per word is built), or a ``PretokenCounter`` of whitespace words
    (``counts=None``): its ``words(*word_rules)`` (``(dummy_prefix, collapse)``) cut around the characters outside
    the alphabet, equal pieces merged in first-appearance order (:func:`.unigram.split_unknown`), built in C.
    ``valid``: a :class:`.piece_rules.PieceRules` over the alphabet's characters (needs ``alphabet``), applied in C
    where :func:`.merges.learn_merges` applies it as a predicate. Raises ``RuntimeError`` without the extension.
    """
    if trainer_module is None:
        raise RuntimeError(f"compiled trainer not available: {IMPORT_ERROR}")
    if valid is not None and (alphabet is None or not hasattr(valid, "native")):
        raise ValueError("the compiled learner takes piece rules (PieceRules) over an alphabet only")
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, not {tie_break!r}")
    if min_frequency < 1:
        raise ValueError("min_frequency must be >= 1")
    symbols: list[Hashable] = list(base_symbols)
    sym_id: dict[Hashable, int] = {k: i for i, k in enumerate(symbols)}
    if len(sym_id) != len(symbols):
        raise ValueError("base symbols must be distinct")
    if any(unit_length(k) != 1 for k in symbols):
        raise ValueError("the compiled learner needs base symbols of one unit each")
    lexicographic = tie_break == "lexicographic"
    order_units: list[tuple[int, ...]] | None = None
    if lexicographic:
        keys = [order_key(k) for k in symbols]
        terminators = {k[-1] for k in keys if k}
        units = [k[:-1] for k in keys]
        top = max((u for us in units for u in us), default=-1)
        if len(terminators) != 1 or any(not k for k in keys) or top >= next(iter(terminators)):
            raise ValueError("order keys must be units followed by one common terminator above every unit")
        order_units = units
    if is_counter(words) and alphabet is None:
        if counts is not None or symbols != [bytes([b]) for b in range(256)]:
            raise ValueError("a PretokenCounter holds byte words: counts=None and the 256 bytes as base symbols")
    merges, n_symbols, stop, final, texts = trainer_module.learn(
        words,
        counts,
        len(symbols),
        order_units,
        -1 if max_symbols is None else max_symbols,
        -1 if max_merges is None else max_merges,
        min_frequency,
        lexicographic,
        progress,
        PROGRESS_EVERY,
        keep_words,
        consume,
        alphabet,
        *word_rules,
        None if valid is None else valid.native(),
    )
    if texts is not None:  # str symbols over the alphabet, made in C; concat must be their concatenation
        symbols.extend(texts)
        for a, b, r in merges[:_CHECKED]:
            if concat(symbols[a], symbols[b]) != symbols[r]:
                raise RuntimeError(f"compiled learner: merge ({a}, {b}) -> {r} disagrees with concat")
    else:
        for a, b, r in merges:
            key = concat(symbols[a], symbols[b])
            if r == len(symbols) and key not in sym_id:
                sym_id[key] = r
                symbols.append(key)
            elif sym_id.get(key) != r:
                raise RuntimeError(f"compiled learner: merge ({a}, {b}) -> {r} disagrees with concat")
    if len(symbols) != n_symbols:
        raise RuntimeError("compiled learner: symbol count disagrees with its merges")
    return MergeResult(
        merges=merges,
        symbols=symbols,
        words=final if final is not None else [],
        counts=[] if counts is None else list(counts),
        stop_reason=stop,
    )
