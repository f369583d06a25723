"""tokenizer-service: exact byte-level BPE tokenization as a library (:mod:`app.engine`), a CLI and an HTTP service."""

__version__ = "0.1.0"
