"""``python -m app import`` with SentencePiece ``.model``, GGUF and tekken files (a real process): recognised by
content, verified, stored and served by name with the reference's ids; a file of no known format fails with one
line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..engine.families.references import artifact_bytes, sentencepiece_reference, tekken_reference
from .test_tokenize import run

TEXT = "Import me: naïve café 日本語  twice\n"


@pytest.mark.parametrize(("bundled", "file_name", "fmt", "kind"), [
    ("mistral-v3", "tokenizer.model", "sentencepiece", "bpe"),
    ("llama2", "vocab.gguf", "gguf", "bpe"),
    ("mistral-nemo", "tekken.json", "tekken", "bpe"),
])
def test_import_then_encode(tmp_path: Path, bundled: str, file_name: str, fmt: str, kind: str) -> None:
    src = tmp_path / file_name
    src.write_bytes(artifact_bytes(bundled))
    store = tmp_path / "store"
    out = run("import", str(src), "--name", "mine", "--store", str(store))
    assert out.returncode == 0, out.stderr
    (entry,) = json.loads((store / "manifest.json").read_text())["tokenizers"]
    assert (entry["format"], entry["kind"]) == (fmt, kind)
    tokenizer = run("encode", "-t", "mine", stdin=TEXT, env={"TOKENIZER_STORE": str(store)})
    assert tokenizer.returncode == 0, tokenizer.stderr
    ids = [int(x) for x in tokenizer.stdout.split()]
    if fmt == "tekken":
        assert ids == tekken_reference(bundled).encode(TEXT, bos=False, eos=False)
    else:
        assert ids == sentencepiece_reference(bundled).encode(TEXT)


def test_unknown_binary_fails_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "random.bin"
    bad.write_bytes(b"\x00\x01binary that is no tokenizer\xff" * 10)
    out = run("import", str(bad), "--name", "x", "--store", str(tmp_path / "s"))
    assert out.returncode == 2 and out.stderr.startswith("error: ") and len(out.stderr.splitlines()) == 1
    assert not (tmp_path / "s" / "manifest.json").exists()
