"""The tokenizer subcommands, run as a real process: ``python -m app encode|count|decode|tokenizers|verify``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app.engine import get_tokenizer

from ..conftest import REPO_ROOT


def run(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "app", *args], input=stdin, capture_output=True, text=True, cwd=REPO_ROOT,
        env=full_env, timeout=120,
    )


def test_encode_count_decode_round_trip(tmp_path: Path) -> None:
    text = "Hello <|endoftext|> wörld\n"
    tokenizer = get_tokenizer("gpt2")
    out = run("encode", "-t", "r50k_base", stdin=text)
    assert out.returncode == 0, out.stderr
    ids = [int(x) for x in out.stdout.split()]
    assert ids == tokenizer.encode(text)
    assert 50256 not in ids
    assert run("count", "-t", "gpt2", stdin=text).stdout.strip() == str(len(ids))
    back = run("decode", "-t", "gpt2", stdin=out.stdout)
    assert back.returncode == 0 and back.stdout == text


def test_files_json_and_specials(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("one two three")
    b.write_text("четыре пять")
    tokenizer = get_tokenizer("cl100k_base")
    out = run("count", "--json", str(a), str(b))
    doc = json.loads(out.stdout)
    assert doc["counts"] == {str(a): tokenizer.count("one two three"), str(b): tokenizer.count("четыре пять")}
    assert doc["total"] == sum(doc["counts"].values())
    out = run("encode", "--json", "--suffix", "<|endoftext|>", str(a))
    assert json.loads(out.stdout)["ids"] == tokenizer.encode("one two three", suffix=["<|endoftext|>"])


def test_errors_are_one_line_and_exit_2() -> None:
    out = run("encode", "-t", "nope", stdin="x")
    assert out.returncode == 2
    assert out.stderr.startswith("error: unknown tokenizer 'nope'") and "Traceback" not in out.stderr
    out = run("encode", "--suffix", "<|eot_id|>", stdin="x")
    assert out.returncode == 2 and "allowed: <|endofprompt|>" in out.stderr
    out = run("decode", stdin="1 2 x")
    assert out.returncode == 2 and "'x' is not a token id" in out.stderr
    out = run("decode", stdin="100256")
    assert out.returncode == 2 and "100256" in out.stderr


def test_tokenizers_and_verify(store_copy: Path) -> None:
    out = run("tokenizers", "--json")
    names = [t["name"] for t in json.loads(out.stdout)["tokenizers"]]
    bundled = [e["name"] for e in json.loads((store_copy / "manifest.json").read_text())["tokenizers"]]
    assert names == bundled and names[:5] == ["gpt2", "cl100k_base", "o200k_base", "o200k_harmony", "llama3"]
    n = len(bundled)
    ok = run("verify")
    assert ok.returncode == 0 and f"{n} of {n} tokenizers verified" in ok.stdout
    path = store_copy / "llama3.tiktoken"
    path.write_bytes(path.read_bytes()[:-10])
    bad = run("verify", "--store", str(store_copy))
    assert bad.returncode == 1
    assert "FAIL llama3" in bad.stdout and str(path) in bad.stdout and f"{n - 1} of {n}" in bad.stdout
    bad_env = run("verify", env={"TOKENIZER_STORE": str(store_copy)})
    assert bad_env.returncode == 1


def test_add_special_tokens_flag_applies_the_template() -> None:
    tokenizer = get_tokenizer("llama3")
    out = run("encode", "-t", "llama3", "--add-special-tokens", stdin="Hello")
    assert out.returncode == 0, out.stderr
    assert [int(x) for x in out.stdout.split()] == [128000, *tokenizer.encode("Hello")]
    assert run("count", "-t", "llama3", "--add-special-tokens", stdin="Hello").stdout.strip() == "2"
    assert run("count", "-t", "llama3", stdin="Hello").stdout.strip() == "1"


def test_sampling_options(tmp_path: Path) -> None:
    """--sample-seed/--alpha/--nbest/--dropout: the engine's sampled ids (file i of several: seed + i), counts of
    them, and one-line errors (exit 2) for bad values and tokenizers that cannot sample."""
    from app.engine.sampling import Sample

    text = "Subword regularisation is unbelievably useful"
    x = get_tokenizer("xlm-roberta-sentencepiece")
    out = run("encode", "-t", "xlm-roberta-sentencepiece", "--sample-seed", "4", "--alpha", "0.3", "--nbest", "6",
              stdin=text)
    assert out.returncode == 0, out.stderr
    assert [int(i) for i in out.stdout.split()] == x.encode(text, sample=Sample(seed=4, alpha=0.3, nbest=6))
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for f in files:
        f.write_text(text, encoding="utf-8")
    out = run("encode", "-t", "cl100k_base", "--json", "--sample-seed", "2", "--dropout", "0.4", *map(str, files))
    tokenizer = get_tokenizer("cl100k_base")
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    want = [tokenizer.encode(text, sample=Sample(seed=2 + i, dropout=0.4)) for i in range(2)]
    assert [r["ids"] for r in rows] == want
    assert run("count", "-t", "cl100k_base", "--dropout", "1", stdin=text).stdout.strip() == str(len(text))
    for args, message in [
        (["encode", "-t", "bge-small-en-v1.5", "--sample-seed", "1"], "cannot sample"),
        (["encode", "-t", "xlm-roberta-sentencepiece", "--dropout", "0.1"], "not 'dropout'"),
        (["encode", "-t", "xlm-roberta-sentencepiece", "--nbest", "0"], "nbest must be"),
        (["count", "-t", "cl100k_base", "--dropout", "2"], "dropout must be"),
        (["count", "--model", "gpt-4o", "--dropout", "0.1"], "not --model"),
    ]:
        bad = run(*args, stdin=text)
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
