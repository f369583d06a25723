"""``python -m app import`` as a real process: a tokenizer.json the store does not bundle (trained here with
Hugging Face ``tokenizers``) is verified, hashed, copied and served by name; bad files fail with one line, exit 2."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
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
    tokenizer = run("encode", "-t", "mine", stdin=text, env={"TOKENIZER_STORE": str(store)})
    assert tokenizer.returncode == 0, tokenizer.stderr
    assert [int(x) for x in tokenizer.stdout.split()] == ref.encode(text, add_special_tokens=False).ids
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


def _gguf_nested(depth: int) -> bytes:
    import struct

    key = b"tokenizer.ggml.model"
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<I", 9)
    return out + struct.pack("<IQ", 9, 1) * (depth - 1) + struct.pack("<IQ", 4, 0)


def _word_level(vocab: dict[str, int], pre: dict[str, object] | None = None) -> bytes:
    return json.dumps({"model": {"type": "WordLevel", "vocab": vocab, "unk_token": next(iter(vocab))},
                       "pre_tokenizer": pre}).encode()


HOSTILE_FILES = {
    "model-is-a-string.json": (b'{"model": "x"}', "model type None is not supported"),
    "deep.json": (b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    "nested.gguf": (_gguf_nested(5000), "nested deeper than"),
    "id31.json": (_word_level({"a": 2**31}), "model.vocab id 2147483648 is out of range"),
    "id300m.json": (_word_level({"a": 300_000_000}), "model.vocab id 300000000 is out of range"),
    "repeats.json": (_word_level({"a": 0}, {"type": "Split", "pattern": {"Regex": "(?:a{3000}){3000}"},
                                            "behavior": "Isolated", "invert": False}), "repeats up to 9000000"),
    "tekken.json": (json.dumps({"config": {"pattern": "a", "default_num_special_tokens": 300_000_000,
                                           "default_vocab_size": 300_000_256}, "vocab": []}).encode(),
                    "default_num_special_tokens 300000000 is out of range"),
}


def test_hostile_files_fail_with_one_line_exit_2_and_bounded_memory(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30: tracebacks from these (RecursionError, AttributeError), or "successful" imports that took
    4.7 GB (id 300,000,000), 16.8 GB (id 2**31) or 2.4 GB (the nested repeat) at load."""
    import resource

    from app.cli import main

    store = tmp_path / "store"
    for name, (data, reason) in HOSTILE_FILES.items():
        src = tmp_path / name
        src.write_bytes(data)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        assert main(["import", str(src), "--name", "x", "--store", str(store)]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith(f"error: {src}: ") and len(err.splitlines()) == 1, err[:500]
        assert reason in err, (name, err)
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before < 200, name
    assert not (store / "manifest.json").exists()


def test_a_split_regex_that_backtracks_imports_and_is_bounded_when_it_runs(tmp_path: Path) -> None:
    """The regex policy: a pattern within the limits imports (exactness first: no construct is refused), and runs
    with a time bound: a text that makes it backtrack is one line, exit 2, in well under a second or two."""
    import time

    src = tmp_path / "redos.json"
    src.write_bytes(_word_level({"[UNK]": 0, "a": 1}, {"type": "Split", "pattern": {"Regex": "(a|a)+$"},
                                                        "behavior": "Isolated", "invert": False}))
    store = tmp_path / "store"
    assert run("import", str(src), "--name", "redos", "--store", str(store)).returncode == 0
    t0 = time.monotonic()
    out = run("count", "--tokenizer", "redos", stdin="a" * 33 + "!", env={"TOKENIZER_STORE": str(store)})
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1 and "exceeded its time bound" in out.stderr
    assert time.monotonic() - t0 < 30  # a process start included; the match itself stops at its 0.25 s budget
