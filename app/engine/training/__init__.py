"""Training: learn vocabularies (BPE merge tables, WordPiece, Unigram, SentencePiece-style) from a corpus and publish
them into a tokenizer store.

* :mod:`.merges` — the incremental trainer core (pair counts, pair -> words index, lazy heap; tie-breaking), the
  readable reference;
* :mod:`.corpus` — streaming pre-token / word counting (memory grows with distinct pre-tokens only);
* :mod:`.compiled` — the compiled counter and learner (``_native/trainer.c``), used by default when built; same
  results as the Python reference, which ``backend="python"`` or ``TOKENIZER_ENGINE=python`` selects;
* :mod:`.byte_bpe` — byte-level (GPT-2 style) training; ranks written in tiktoken format;
* :mod:`.char_bpe` — the classic character BPE with ``</w>`` and ``<unk>``: training, artifact, encoding;
* :mod:`.trainer` — the small streaming interface (``feed`` chunks, ``finish`` to an artifact) of the families:
* :mod:`.wordpiece` — WordPiece (score ``count(ab) / (count(a) count(b))``, ``##``), a ``tokenizer.json``;
* :mod:`.unigram` — the Unigram learner (seed, EM, pruning) and the Metaspace ``unigram`` kind's ``tokenizer.json``;
* :mod:`.sentencepiece` — SentencePiece-style Unigram and BPE on raw text, a ``.model``;
* :mod:`.families` — those four kinds from files into a store;
* :mod:`.publish` — :func:`train_to_store`: files in, artifact + manifest entry out (every kind);
* :mod:`.store_entry` — writing the artifact and the manifest entry, :class:`TrainReport`;
* :mod:`.evaluate` — bytes per token, tokens per word, byte-fallback share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .byte_bpe import ByteBPEResult, train_byte_bpe
    from .char_bpe import CharBPEEncoding, CharBPEModel, train_char_bpe
    from .merges import TIE_BREAKS, learn_merges
    from .publish import train_to_store
    from .store_entry import TrainReport

#: Where each name of the package lives; imported on first use (PEP 562), so a kind loads only its own trainer.
_LAZY = {"ByteBPEResult": "byte_bpe", "train_byte_bpe": "byte_bpe", "CharBPEEncoding": "char_bpe",
         "CharBPEModel": "char_bpe", "train_char_bpe": "char_bpe", "TIE_BREAKS": "merges", "learn_merges": "merges",
         "TrainReport": "store_entry", "train_to_store": "publish"}

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = [
    "TIE_BREAKS",
    "ByteBPEResult",
    "CharBPEEncoding",
    "CharBPEModel",
    "TrainReport",
    "learn_merges",
    "train_byte_bpe",
    "train_char_bpe",
    "train_to_store",
]
