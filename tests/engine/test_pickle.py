"""Encodings pickle as references: reloaded by name from their store (and sha256-verified) on the other side."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine import ArtifactError, RankBPETokenizer, get_tokenizer
from app.engine.registry import reset
from app.engine.store import bundled_store_dir

ROOT = Path(__file__).resolve().parents[2]
TEXT = "hello world — ünïcödé 123 <|endoftext|> 漢字"


@pytest.mark.parametrize("name", ["cl100k_base", "gpt2", "llama3"])
def test_round_trip_in_process_is_the_memoised_encoding(name: str) -> None:
    tokenizer = get_tokenizer(name)
    data = pickle.dumps(tokenizer)
    assert len(data) < 500, "a reference, not the ranks"
    back = pickle.loads(data)
    assert back is tokenizer
    assert back.encode(TEXT) == tokenizer.encode(TEXT)


def test_round_trip_in_another_process() -> None:
    tokenizer = get_tokenizer("o200k_base", backend="python")
    data = pickle.dumps(tokenizer)
    code = (
        "import pickle,sys; enc = pickle.loads(sys.stdin.buffer.read()); "
        f"print(enc.name, enc.backend, enc.encode({TEXT!r}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr.decode()
    name, backend, ids = proc.stdout.decode().split(" ", 2)
    assert (name, backend) == ("o200k_base", "python")
    assert json.loads(ids) == tokenizer.encode(TEXT)


def test_store_other_than_the_bundled_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store"
    shutil.copytree(bundled_store_dir(), store, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    tokenizer = get_tokenizer("gpt2", store)
    data = pickle.dumps(tokenizer)
    assert str(store).encode() in data
    reset()  # the receiving side has nothing memoised
    back = pickle.loads(data)
    assert back.spec.artifact_path.parent == store.resolve() and back.encode(TEXT) == tokenizer.encode(TEXT)
    # the store changed under the pickle: another artifact for that name is refused, not used
    manifest = json.loads((store / "manifest.json").read_text())
    reset()
    entry = next(e for e in manifest["tokenizers"] if e["name"] == "gpt2")
    other = next(e for e in manifest["tokenizers"] if e["name"] == "cl100k_base")
    for key in ("artifact", "sha256", "pattern", "special_tokens", "vocab_size"):
        entry[key] = other[key]
    (store / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("TOKENIZER_STORE_OVERRIDE", "true")  # else the changed gpt2 may not shadow the bundled one
    with pytest.raises(ArtifactError, match="another artifact"):
        pickle.loads(data)
    reset()


def test_trained_encodings_pickle(tmp_path: Path) -> None:
    """Trained tokenizers of both kinds (a store of their own) pickle the same way."""
    from app.engine.training import train_to_store

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("low lower newest widest " * 50 + TEXT, encoding="utf-8")
    store = tmp_path / "trained"
    for kind in ("char", "byte"):
        train_to_store([corpus], name=f"t-{kind}", store_dir=store, vocab_size=300 if kind == "byte" else 40,
                       kind=kind, min_frequency=1, quiet=True)
    for kind in ("char", "byte"):
        tokenizer = get_tokenizer(f"t-{kind}", store)
        reset()
        back = pickle.loads(pickle.dumps(tokenizer))
        assert type(back) is type(tokenizer) and back.encode(TEXT) == tokenizer.encode(TEXT)
    reset()


def test_an_encoding_without_a_store_refuses_to_pickle() -> None:
    ranks = {bytes([b]): b for b in range(256)}
    tokenizer = RankBPETokenizer("adhoc", pattern=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    with pytest.raises(TypeError, match="not loaded from a tokenizer store"):
        pickle.dumps(tokenizer)


def _run(code: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, cwd=ROOT)


def test_the_public_load_tokenizer_registers_the_reference() -> None:
    """``app.engine.load_tokenizer`` comes through the registry, which registers how tokenizers pickle: a fresh
    process that loads through it pickles a reference (a pipeline too), which loads back to the same ids."""
    code = (
        "import pickle; from app.engine import get_store, load_tokenizer; "
        "tok = load_tokenizer(get_store().spec('xlm-roberta')); data = pickle.dumps(tok); "
        f"print(len(data), pickle.loads(data).encode({TEXT!r}) == tok.encode({TEXT!r}))"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr.decode()
    size, same = proc.stdout.decode().split()
    assert int(size) < 500 and same == "True"


def test_without_the_registry_pickling_is_refused_clearly() -> None:
    """The base class imports nothing above it: without the registry imported there is no reducer, and pickling
    says so (a ``TypeError``, never the vocabulary pickled by value)."""
    code = (
        "import pickle, sys; from app.engine.loaders import load_tokenizer; from app.engine.store import Store, "
        "bundled_store_dir; tok = load_tokenizer(Store.load(bundled_store_dir()).spec('gpt2')); "
        "assert 'app.engine.registry' not in sys.modules\n"
        "try:\n    pickle.dumps(tok)\nexcept TypeError as exc:\n    print(exc)"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "through app.engine.registry, which is not imported" in proc.stdout.decode()
