"""The small interface every vocabulary trainer of the pipeline families implements.

A :class:`Trainer` is fed the corpus as text chunks that end at line ends (:meth:`Trainer.feed`, called in corpus
order; memory grows with the distinct words it keeps, not with the corpus) and then builds one artifact
(:meth:`Trainer.finish`). A trainer that reads UTF-8 itself may also have ``feed_utf8(data: bytes)``, the same as
``feed(data.decode("utf-8", errors="replace"))``; training then hands it the file's bytes where it can
(:func:`.corpus.iter_raw_chunks`). The artifact is self-describing (its own special tokens, normalizer and
pre-tokenizer), so publishing only writes its bytes and a manifest entry with :attr:`TrainedArtifact.format` and
:attr:`TrainedArtifact.kind`. Trainers are never imported on the serving path.

Determinism: the same chunks in the same order and the same options give the same bytes (words and pieces are
ordered by explicit keys, never by hash order; floats are printed by ``repr``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

#: The kinds served by a :class:`Trainer` (the byte and char BPE kinds have their own code paths).
FAMILY_KINDS = ("wordpiece", "unigram", "sentencepiece-unigram", "sentencepiece-bpe")

#: ``progress(done, total)``: steps done so far of ``total`` (None if unknown); called from :meth:`Trainer.finish`.
Progress = Callable[[int, "int | None"], None]


@dataclass
class TrainedArtifact:
    """What a trainer produced.

    ``data``: the artifact's bytes; ``suffix``: its file-name suffix (``.tokenizer.json``, ``.model``);
    ``format``/``kind``: the manifest fields; ``vocab_size``: ids in total (special tokens included);
    ``extra_files``: more files by suffix (``.vocab.txt``); ``summary``: figures for the CLI report."""

    data: bytes
    suffix: str
    format: str
    kind: str
    vocab_size: int
    extra_files: dict[str, bytes] = field(default_factory=dict)
    summary: dict[str, object] = field(default_factory=dict)


class Trainer(Protocol):
    """Streaming trainer: ``feed`` text chunks (whole lines), then ``finish`` once."""

    def feed(self, text: str) -> None:
        """Count one chunk of corpus text (one or more whole lines)."""

    def finish(self, progress: Progress | None = None) -> TrainedArtifact:
        """Learn the vocabulary from everything fed and build the artifact. Raises ``ValueError`` if the corpus
        cannot give a vocabulary (empty, or smaller than the required base)."""


def lines_of(chunk: str) -> list[str]:
    """The lines of a chunk without their ``\\n`` (and a trailing ``\\r``); a final empty piece is dropped."""
    lines = chunk.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def train_on(trainer: Trainer, chunks: Iterable[str], progress: Progress | None = None) -> TrainedArtifact:
    """Feed every chunk, then finish (a convenience for tests and callers with text in memory)."""
    for chunk in chunks:
        trainer.feed(chunk)
    return trainer.finish(progress)
