"""The bundled tokenizers as files the peer libraries can load offline, written once into a work directory.

Every file comes from ``tokenizers_store/`` (decompressed where the store keeps ``.xz``) or is derived from it
with the reference libraries' own builders, never downloaded:

* ``<name>.tiktoken``: the store's rank file as is (o200k_base, cl100k_base, llama3, gpt2);
* ``<name>.tokenizer.json``: the store's ``tokenizer.json`` decompressed (qwen3, deepseek-v3, gemma3), or the
  Hugging Face tokenizer the test suite builds from a GGUF vocabulary, saved with ``Tokenizer.save`` (qwen2, bge),
  or the merge-list BPE Hugging Face's converter makes of a SentencePiece BPE model (mistral-v1, llama2, phi-3;
  ``bench.families.run``'s builder), or one written from a rank file (``bench.engine.peers.hf_tokenizer_json``);
* ``<name>.model``: a SentencePiece model, decompressed or rebuilt from a GGUF vocabulary
  (``tests.engine.families.references.sentencepiece_reference``);
* ``<name>.tekken.json``: tekken decompressed, and ``<name>.tekken.tiktoken``: its ranks as a tiktoken rank file.

Run from the repository root (the GGUF builders are the test suite's).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path


class Artifacts:
    """Files for one work directory; every method writes its file on first use and returns its path."""

    def __init__(self, work_dir: Path) -> None:
        self.dir = Path(work_dir)
        self.dir.mkdir(parents=True, exist_ok=True)

    def _spec(self, name: str):  # type: ignore[no-untyped-def]
        from app.engine import get_store

        return get_store().spec(name)

    def fmt(self, name: str) -> str:
        """The store's format of ``name``: ``tiktoken``, ``hf_json``, ``sentencepiece``, ``gguf`` or ``tekken``."""
        return str(self._spec(name).format)

    def pattern(self, name: str) -> str:
        """The pre-tokenizer pattern of a tiktoken-format tokenizer (the store's, as tiktoken defines it)."""
        return str(self._spec(name).pattern)

    def special_tokens(self, name: str) -> dict[str, int]:
        return dict(self._spec(name).special_tokens)

    def _write(self, path: Path, data: bytes) -> Path:
        if not path.exists():
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        return path

    def tiktoken(self, name: str) -> Path:
        """The rank file of a tiktoken-format tokenizer, under its canonical name (some peers read the name)."""
        return self._write(self.dir / f"{name}.tiktoken", self._spec(name).read_artifact())

    def tokenizer_json(self, name: str) -> Path:
        """A Hugging Face ``tokenizer.json`` of ``name`` (see the module docstring for where each comes from)."""
        path = self.dir / f"{name}.tokenizer.json"
        if path.exists():
            return path
        fmt = self.fmt(name)
        if fmt == "hf_json":
            return self._write(path, self._spec(name).read_artifact())
        if fmt == "tiktoken":
            from bench.engine.peers import hf_tokenizer_json

            return self._write(path, hf_tokenizer_json(name, self.dir / "hf-cache").read_bytes())
        if name == "bge-small-en-v1.5":
            from harness.references import hf_bert

            return self._write(path, hf_bert().to_str().encode())
        if name == "qwen2":
            from harness.references import hf_qwen2

            return self._write(path, hf_qwen2().to_str().encode())
        if fmt in ("sentencepiece", "gguf"):
            from bench.families.run import hf_sentencepiece_bpe

            return self._write(path, hf_sentencepiece_bpe(name).to_str().encode())
        raise ValueError(f"no tokenizer.json recipe for {name} ({fmt})")

    def sentencepiece_model(self, name: str) -> Path:
        """A SentencePiece ``.model`` of a SentencePiece or GGUF ``llama`` tokenizer."""
        from harness.references import sentencepiece_reference

        path = self.dir / f"{name}.model"
        if path.exists():
            return path
        if self.fmt(name) == "sentencepiece":
            return self._write(path, self._spec(name).read_artifact())
        return self._write(path, sentencepiece_reference(name).serialized_model_proto())

    def tekken(self, name: str) -> Path:
        return self._write(self.dir / f"{name}.tekken.json", self._spec(name).read_artifact())

    def tekken_ranks(self, name: str) -> tuple[Path, str, int]:
        """tekken's vocabulary as a tiktoken rank file (ranks as tekken numbers them), its pattern, and the
        number of special ids before the first rank (an id is ``rank + offset``)."""
        doc = json.loads(self.tekken(name).read_bytes())
        cfg = doc["config"]
        vocab = doc["vocab"][: cfg["default_vocab_size"] - cfg["default_num_special_tokens"]]
        lines = b"".join(base64.b64encode(base64.b64decode(v["token_bytes"])) + b" %d\n" % v["rank"] for v in vocab)
        path = self._write(self.dir / f"{name}.tekken.tiktoken", lines)
        return path, str(cfg["pattern"]), int(cfg["default_num_special_tokens"])
