"""Bulk tokenization of whole corpora (JSONL or Parquet) on Ray Data: ``python -m app bulk count|encode …``.

Layout: :mod:`.sources` finds the input files and cuts them into chunks (whole lines of a JSONL file, one row
group of a Parquet file) and reads one chunk into rows; :mod:`.runner` is the engine side (one encoding, loaded by
name from its store and sha256-verified, tokenizing a chunk in batches and writing its own Parquet part file);
:mod:`.job` runs the chunks through a pool of Ray actors and builds the summary. Nothing here imports the web
layer, and the engine is called directly (never over HTTP). Needs the ``bulk`` extra (``ray[data]``, ``pyarrow``).
"""

from __future__ import annotations

from .errors import BulkError

__all__ = ["BulkError"]
