"""``python -m app import`` as a real process: a tokenizer.json the store does not bundle (trained here with
Hugging Face ``tokenizers``) is verified, hashed, copied and served by name; bad files fail with one line, exit 2."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

from .test_tokenize import run

TEXT = ["the quick brown fox jumps over the lazy dog", "Crème brûlée, naïve café", "12345 numbers and ünïcödé"] * 20


def _trained(path: Path) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Digits(True)])
    tok.decoder = decoders.BPEDecoder()
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=120, special_tokens=["[UNK]", "[CLS]", "[SEP]"]))
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[
        ("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    tok.save(str(path))
    tok.encode_special_tokens = True
    return tok


def test_import_then_serve_by_name(tmp_path: Path) -> None:
    src = tmp_path / "mine.json"
    ref = _trained(src)
    store = tmp_path / "store"
    out = run("import", str(src), "--name", "mine", "--store", str(store), "--model", "my-model")
    assert out.returncode == 0, out.stderr
    manifest = json.loads((store / "manifest.json").read_text())
    (entry,) = manifest["tokenizers"]
    assert entry["name"] == "mine" and entry["format"] == "hf_json" and entry["kind"] == "bpe"
    assert entry["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert entry["models"] == ["my-model"]
    text = "The Quick brown FOX 2024 café [CLS]\n"
    enc = run("encode", "-t", "mine", stdin=text, env={"TOKENIZER_STORE": str(store)})
    assert enc.returncode == 0, enc.stderr
    assert [int(x) for x in enc.stdout.split()] == ref.encode(text, add_special_tokens=False).ids
    again = run("import", str(src), "--name", "mine", "--store", str(store))
    assert again.returncode == 2 and "already used" in again.stderr and len(again.stderr.splitlines()) == 1
    assert run("import", str(src), "--name", "mine", "--store", str(store), "--replace").returncode == 0


def test_unsupported_or_broken_files_fail_with_one_line(tmp_path: Path) -> None:
    src = tmp_path / "mine.json"
    _trained(src)
    doc = json.loads(src.read_text())
    doc["decoder"] = {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True}
    bad = tmp_path / "ctc.json"
    bad.write_text(json.dumps(doc))
    for path in (bad, tmp_path / "missing.json"):
        out = run("import", str(path), "--name", "x", "--store", str(tmp_path / "s"))
        assert out.returncode == 2 and out.stderr.startswith("error: ") and len(out.stderr.splitlines()) == 1
        assert str(path) in out.stderr
    assert "CTC" in run("import", str(bad), "--name", "x", "--store", str(tmp_path / "s")).stderr
    assert not (tmp_path / "s" / "manifest.json").exists()
    out = run("import", str(src), "--name", "../evil", "--store", str(tmp_path / "s"))
    assert out.returncode == 2 and "invalid name" in out.stderr
