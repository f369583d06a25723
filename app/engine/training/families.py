"""Training the pipeline families from files into a store: ``wordpiece``, ``unigram``, ``sentencepiece-unigram``,
``sentencepiece-bpe``.

:func:`make_trainer` builds the :class:`~.trainer.Trainer` of a kind from its options; :func:`train_family_to_store`
streams the files into it (chunks that end at line ends, :func:`.corpus.iter_chunks`), writes the artifact
(``NAME.tokenizer.json``, format ``hf_json``, or ``NAME.model``, format ``sentencepiece``; with ``vocab_txt`` also
``NAME.vocab.txt``, which the manifest does not list) and merges a manifest entry, as
:func:`.publish.train_to_store` does for the BPE kinds (which delegates here for these kinds).

With the compiled trainer built (``backend`` ``native``, the default then), every learner runs in C: the Unigram
learner of ``unigram`` and ``sentencepiece-unigram`` (seeds, EM, pruning), the WordPiece merge loop, and for
``sentencepiece-bpe`` the merge learner of the byte-level trainer; the whitespace words of the Unigram and
SentencePiece kinds are counted in C too. The artifact is the same with either backend. ``threads`` (1 or 2)
splits the Unigram E-step and pruning over the words (same artifact for any number); the WordPiece and BPE merge
loops are sequential and ignore it.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..store import TokenizerSpec
from .corpus import CorpusStats, iter_chunks, iter_raw_chunks
from .store_entry import (
    NAME_RE,
    TrainReport,
    existing_entries,
    progress_bar,
    progress_enabled,
    publish_entry,
    write_artifact,
)
from .trainer import FAMILY_KINDS, Trainer

#: SentencePiece's piece rules (:mod:`.piece_rules`) and its trainer's defaults, for both sentencepiece-* kinds.
_SP_PIECE_RULES = {"split_by_unicode_script": True, "split_by_number": True, "split_by_whitespace": True}
#: Options each kind accepts (besides vocab size, specials, min frequency), with their defaults.
OPTIONS: dict[str, dict[str, Any]] = {
    "wordpiece": {"lowercase": True, "strip_accents": None, "split_cjk": True, "vocab_txt": False,
                  "score": "wordpiece"},
    "unigram": {"character_coverage": 1.0, "max_piece_length": 16, "shrinking_factor": 0.75,
                "seed_size": 1_000_000, "prune_loss": "huggingface"},
    "sentencepiece-unigram": {"character_coverage": 0.9995, "byte_fallback": False, "split_digits": False,
                              "add_dummy_prefix": True, "max_piece_length": 16, "shrinking_factor": 0.75,
                              "seed_size": 1_000_000, "prune_loss": "sentencepiece", **_SP_PIECE_RULES},
    "sentencepiece-bpe": {"character_coverage": 0.9995, "byte_fallback": False, "split_digits": False,
                          "add_dummy_prefix": True, "max_piece_length": 16, **_SP_PIECE_RULES},
}


def make_trainer(kind: str, *, vocab_size: int, special_tokens: Sequence[str] = (), min_frequency: int = 2,
                 options: Mapping[str, Any] | None = None, backend: str | None = None, threads: int = 1) -> Trainer:
    """The trainer of ``kind``. ``special_tokens`` come after the kind's own (WordPiece: ``[PAD] [UNK] [CLS] [SEP]
    [MASK]``; Unigram: ``<unk>``; SentencePiece: ``<unk> <s> </s>``, the extra ones as control pieces).
    ``options`` may set the keys of :data:`OPTIONS` for the kind; ``None`` values mean the default.
    ``backend``/``threads``: see the module docstring. Raises ``ValueError`` for an unknown kind or option."""
    if kind not in FAMILY_KINDS:
        raise ValueError(f"kind must be one of {FAMILY_KINDS}, not {kind!r}")
    given = {k: v for k, v in (options or {}).items() if v is not None}
    unknown = set(given) - set(OPTIONS[kind])
    if unknown:
        raise ValueError(f"option(s) {', '.join(sorted(unknown))} do not apply to the {kind} kind")
    opts = {**OPTIONS[kind], **given}
    # each kind's trainer is imported when it is used (the others' modules are not loaded)
    if kind == "wordpiece":
        from .wordpiece import BERT_SPECIALS, WordPieceTrainer

        extra = [s for s in special_tokens if s not in BERT_SPECIALS]
        return WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                special_tokens=[*BERT_SPECIALS, *extra], backend=backend, **opts)
    if kind == "unigram":
        from .unigram import UnigramTrainer

        return UnigramTrainer(vocab_size=vocab_size, special_tokens=[s for s in special_tokens if s != "<unk>"],
                              backend=backend, threads=threads, **opts)
    from .sentencepiece import SentencePieceTrainer

    controls = [s for s in special_tokens if s not in ("<unk>", "<s>", "</s>")]
    return SentencePieceTrainer(model_type=kind.split("-", 1)[1], vocab_size=vocab_size, control_tokens=controls,
                                backend=backend, threads=threads, **opts)


def train_family_to_store(
    files: Sequence[str | Path],
    *,
    name: str,
    store_dir: str | Path,
    kind: str,
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    min_frequency: int = 2,
    options: Mapping[str, Any] | None = None,
    quiet: bool = False,
    description: str = "",
    backend: str | None = None,
    threads: int = 1,
) -> TrainReport:
    """Train ``kind`` on ``files`` and publish it into ``store_dir`` (see the module docstring). Raises
    ``ValueError`` for bad options or a corpus too small for the base vocabulary, ``OSError`` for unreadable
    files, :class:`~app.engine.errors.ManifestError` for an invalid existing manifest."""
    if not NAME_RE.fullmatch(name):
        raise ValueError(f"tokenizer name {name!r} must match {NAME_RE.pattern}")
    if not files:
        raise ValueError("no input files")
    if threads not in (1, 2):
        raise ValueError("threads must be 1 or 2")
    if min_frequency < 1:
        raise ValueError("min frequency must be >= 1")
    if len(set(special_tokens)) != len(special_tokens) or any(not s for s in special_tokens):
        raise ValueError("special tokens must be distinct non-empty strings")
    trainer = make_trainer(kind, vocab_size=vocab_size, special_tokens=special_tokens, min_frequency=min_frequency,
                           options=options, backend=backend, threads=threads)
    store = Path(store_dir).expanduser().resolve()
    existing = existing_entries(store, name)
    show = progress_enabled(quiet)
    stats = CorpusStats()
    t0 = time.perf_counter()
    bar = progress_bar(show, sum(os.path.getsize(f) for f in files), "reading", "B")
    feed_utf8 = getattr(trainer, "feed_utf8", None)  # a trainer that reads UTF-8 itself gets the raw bytes
    try:
        if feed_utf8 is None:
            for chunk in iter_chunks(files, exact_cuts=False, stats=stats,
                                     on_bytes=bar.update if bar is not None else None):
                trainer.feed(chunk)
        else:
            for raw in iter_raw_chunks(files, stats=stats, on_bytes=bar.update if bar is not None else None):
                if isinstance(raw, bytes):
                    feed_utf8(raw)
                else:
                    trainer.feed(raw)
    finally:
        if bar is not None:
            bar.close()
    t1 = time.perf_counter()
    bar = progress_bar(show, None, "training", " steps")
    done = [0]

    def progress(n: int, total: int | None) -> None:
        if bar is not None:
            if total is not None and bar.total != total:
                bar.total = total
            bar.update(n - done[0])
            done[0] = n

    try:
        artifact = trainer.finish(progress)
    finally:
        if bar is not None:
            bar.close()
    t2 = time.perf_counter()
    store.mkdir(parents=True, exist_ok=True)
    path = store / f"{name}{artifact.suffix}"
    write_artifact(path, artifact.data)
    for suffix, data in artifact.extra_files.items():
        write_artifact(store / f"{name}{suffix}", data)
    summary = artifact.summary
    inputs = ", ".join(Path(f).name for f in files)
    spec = TokenizerSpec(
        name=name,
        artifact_path=path,
        sha256=hashlib.sha256(artifact.data).hexdigest(),
        kind=artifact.kind,
        format=artifact.format,
        vocab_size=artifact.vocab_size,
        source=f"trained by `python -m app train --kind {kind}` on: {inputs}",
        description=description or f"{kind}, {artifact.vocab_size} ids",
    )
    manifest = publish_entry(store, existing, spec)
    merges = summary.get("merges", 0)
    return TrainReport(
        spec=spec,
        corpus=stats,
        distinct_pretokens=int(summary.get("distinct_words", 0)),  # type: ignore[call-overload]
        merges=merges if isinstance(merges, int) else 0,
        stop_reason=str(summary.get("stop_reason", "pruned to vocab size" if "rounds" in summary else "")),
        seconds_counting=t1 - t0,
        seconds_merging=t2 - t1,
        manifest=manifest,
        extra=dict(summary),
        backend=str(summary.get("backend", _backend(backend))),
    )


def _backend(backend: str | None) -> str:
    from .compiled import resolve_backend

    return resolve_backend(backend)
