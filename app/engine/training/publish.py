"""Training end to end: corpus files in, an artifact and a manifest entry in a store directory out.

:func:`train_to_store` streams the files, learns the merges, writes ``NAME.tiktoken`` (byte level) or
``NAME.char_bpe.json`` (classic) into the store directory (created if needed) and merges a manifest entry into
its ``manifest.json`` (an entry of the same name is replaced; other entries are kept as they are). The store
then loads with ``TOKENIZER_STORE=DIR`` or ``get_tokenizer(NAME, store_dir=DIR)``.

Determinism: the same files (same order and bytes) and options give byte-identical artifacts and manifest
entries — no timestamps, absolute paths or hash-order dependence go into either.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..store import TokenizerSpec
from .corpus import CorpusStats
from .store_entry import (
    NAME_RE,
    TrainReport,
    existing_entries,
    progress_bar,
    progress_enabled,
    publish_entry,
    write_artifact,
)
from .trainer import FAMILY_KINDS

KINDS = ("byte", "char", *FAMILY_KINDS)


def train_to_store(
    files: Sequence[str | Path],
    *,
    name: str,
    store_dir: str | Path,
    vocab_size: int,
    kind: str = "byte",
    pattern: str | None = None,
    pattern_regex: str | None = None,
    special_tokens: Sequence[str] = (),
    min_frequency: int = 2,
    tie_break: str = "first-seen",
    quiet: bool = False,
    description: str = "",
    backend: str | None = None,
    threads: int = 1,
    options: Mapping[str, Any] | None = None,
) -> TrainReport:
    """Train a tokenizer on ``files`` and publish it into ``store_dir``.

    ``kind`` is ``"byte"`` (byte-level BPE; ``pattern`` names a bundled pre-tokenizer pattern, default
    ``cl100k``, or ``pattern_regex`` gives one) or ``"char"`` (classic BPE on whitespace-split words; no pattern).
    ``vocab_size`` counts ordinary ids (bytes or ``<unk>``/``</w>``/characters, plus merged tokens); special
    tokens get the ids after them, in the order given. A progress bar shows on a terminal unless ``quiet``.
    ``backend`` (``"native"``/``"python"``, default ``$TOKENIZER_ENGINE`` or native when the compiled trainer is
    built; see :mod:`.compiled`) picks the pre-token counter (bundled patterns only) and the merge learner; the
    artifact is the same either way. ``threads`` (1 or 2) counts pre-tokens in that many threads (compiled
    counter only).

    The kinds of :data:`.trainer.FAMILY_KINDS` (``wordpiece``, ``unigram``, ``sentencepiece-unigram``,
    ``sentencepiece-bpe``) are trained by :func:`.families.train_family_to_store`, which takes their
    ``options`` (:data:`.families.OPTIONS`); they take no pattern and no tie-break.

    Raises ``ValueError`` for bad options (name, sizes, duplicate specials, an invalid regex), ``OSError`` for
    unreadable files, :class:`ManifestError` if the existing manifest is invalid or the name is another
    entry's alias.
    """
    if not NAME_RE.fullmatch(name):
        raise ValueError(f"tokenizer name {name!r} must match {NAME_RE.pattern}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    if kind in FAMILY_KINDS:
        if pattern is not None or pattern_regex is not None:
            raise ValueError(f"the {kind} kind has its own pre-tokenization and takes no pattern")
        from .families import train_family_to_store

        return train_family_to_store(files, name=name, store_dir=store_dir, kind=kind, vocab_size=vocab_size,
                                     special_tokens=special_tokens, min_frequency=min_frequency, options=options,
                                     quiet=quiet, description=description, backend=backend, threads=threads)
    # the BPE kinds' modules (imported here, so that the family kinds do not load them)
    from ..artifacts import format_tiktoken
    from ..patterns import resolve_pattern
    from ..pretokenize import compile_pattern
    from .byte_bpe import train_byte_bpe
    from .char_bpe import train_char_bpe
    from .compiled import count_pretokens_native, resolve_backend, scanner_for
    from .corpus import count_pretokens, count_words
    from .merges import TIE_BREAKS

    if options:
        raise ValueError(f"the {kind} kind takes no trainer options ({', '.join(sorted(options))})")
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie-break must be one of {TIE_BREAKS}, not {tie_break!r}")
    if min_frequency < 1:
        raise ValueError("min frequency must be >= 1")
    if len(set(special_tokens)) != len(special_tokens) or any(not s for s in special_tokens):
        raise ValueError("special tokens must be distinct non-empty strings")
    if not files:
        raise ValueError("no input files")
    if threads not in (1, 2):
        raise ValueError("threads must be 1 or 2")
    resolved = resolve_backend(backend)
    regex_text, pattern_id = "", None
    if kind == "byte":
        if pattern is None and pattern_regex is None:
            pattern = "cl100k"
        try:
            regex_text, pattern_id = resolve_pattern(pattern, pattern_regex)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        try:
            compile_pattern(regex_text)
        except Exception as exc:  # regex.error
            raise ValueError(f"invalid pattern regex: {exc}") from None
    elif pattern is not None or pattern_regex is not None:
        raise ValueError("the classic (char) kind splits on whitespace and takes no pattern")

    store = Path(store_dir).expanduser().resolve()
    existing = existing_entries(store, name)

    show = progress_enabled(quiet)
    stats = CorpusStats()
    total_bytes = sum(os.path.getsize(f) for f in files)
    t0 = time.perf_counter()
    bar = progress_bar(show, total_bytes, "reading", "B")
    on_bytes = bar.update if bar is not None else None
    try:
        scanner = scanner_for(regex_text) if kind == "byte" and resolved == "native" else 0
        counts: Any
        if scanner:
            counts = count_pretokens_native(files, scanner, threads=threads, stats=stats, on_bytes=on_bytes)
        elif kind == "byte":
            counts = count_pretokens(files, regex_text, stats=stats, on_bytes=on_bytes)
        else:
            counts = count_words(files, stats=stats, on_bytes=on_bytes)
    finally:
        if bar is not None:
            bar.close()
    t1 = time.perf_counter()
    distinct = len(counts)

    bar = progress_bar(show, vocab_size - 256 if kind == "byte" else None, "merging", " merges")
    done = [0]

    def progress(n: int) -> None:
        if bar is not None:
            bar.update(n - done[0])
            done[0] = n

    try:
        if kind == "byte":
            result = train_byte_bpe(
                counts, vocab_size=vocab_size, min_frequency=min_frequency, tie_break=tie_break, progress=progress,
                consume=True, backend=resolved,
            )
            artifact = format_tiktoken(result.ranks)
            n_ordinary = len(result.ranks)
            n_merges, stop = len(result.merges), result.stop_reason
            artifact_name, fmt, spec_kind = f"{name}.tiktoken", "tiktoken", "byte_bpe"
        else:
            model = train_char_bpe(
                counts, vocab_size=vocab_size, min_frequency=min_frequency, tie_break=tie_break, progress=progress,
                consume=True, backend=resolved,
            )
            artifact = model.to_artifact()
            n_ordinary = len(model.vocab)
            n_merges, stop = len(model.merges), model.stop_reason
            artifact_name, fmt, spec_kind = f"{name}.char_bpe.json", "char_bpe", "char_bpe"
    finally:
        if bar is not None:
            bar.close()
    t2 = time.perf_counter()

    store.mkdir(parents=True, exist_ok=True)
    path = store / artifact_name
    write_artifact(path, artifact)
    specials = {s: n_ordinary + i for i, s in enumerate(special_tokens)}
    inputs = ", ".join(Path(f).name for f in files)
    spec = TokenizerSpec(
        name=name,
        artifact_path=path,
        sha256=hashlib.sha256(artifact).hexdigest(),
        kind=spec_kind,
        format=fmt,
        pattern=regex_text,
        pattern_id=pattern_id,
        special_tokens=specials,
        vocab_size=n_ordinary + len(specials),
        source=f"trained by `python -m app train` ({kind}-level BPE) on: {inputs}",
        license="",
        description=description
        or (
            f"{kind}-level BPE, {n_ordinary} ordinary tokens ({n_merges} merges, tie-break {tie_break}, "
            f"min frequency {min_frequency})"
        ),
    )
    manifest = publish_entry(store, existing, spec)
    return TrainReport(
        spec=spec,
        corpus=stats,
        distinct_pretokens=distinct,
        merges=n_merges,
        stop_reason=stop,
        seconds_counting=t1 - t0,
        seconds_merging=t2 - t1,
        manifest=manifest,
        backend=resolved,
        native_counting=bool(scanner),
    )
