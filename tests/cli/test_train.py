"""``python -m app train`` and ``python -m app evaluate`` as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app.engine import get_tokenizer, reset

from ..conftest import REPO_ROOT


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=REPO_ROOT,
        env={**os.environ, **(env or {})}, timeout=300,
    )


def corpus(tmp_path: Path) -> list[str]:
    files = sorted(str(p) for p in (REPO_ROOT / "app" / "engine").glob("*.py"))
    assert files
    return files


def test_train_then_count_and_serve_from_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    files = corpus(tmp_path)
    out = run("train", *files, "--vocab-size", "600", "--name", "mine", "--store", str(store),
              "--special", "<|endoftext|>", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["vocab_size"] == 601 and summary["special_tokens"] == {"<|endoftext|>": 600}
    assert summary["merges"] == 600 - 256 and summary["stop_reason"] == "vocabulary size reached"
    assert out.stderr == ""  # no progress bar when stderr is not a terminal

    sample = tmp_path / "sample.txt"
    sample.write_text("def get_tokenizer(name):\n    return name  # ünïcödé\n", encoding="utf-8")
    count = run("count", "--store", str(store), "-t", "mine", str(sample))
    assert count.returncode == 0, count.stderr
    reset()
    tokenizer = get_tokenizer("mine", store_dir=store)
    assert int(count.stdout) == len(tokenizer.encode(sample.read_text()))
    # the store loads through TOKENIZER_STORE too, and the encode/decode commands round-trip
    ids = run("encode", "-t", "mine", str(sample), env={"TOKENIZER_STORE": str(store)})
    assert ids.returncode == 0, ids.stderr
    back = subprocess.run([sys.executable, "-m", "app", "decode", "-t", "mine"], input=ids.stdout,
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120,
                          env={**os.environ, "TOKENIZER_STORE": str(store)})
    assert back.stdout == sample.read_text()
    # retraining is byte-identical
    first = (store / "mine.tiktoken").read_bytes()
    again = run("train", *files, "--vocab-size", "600", "--name", "mine", "--store", str(store),
                "--special", "<|endoftext|>", "--quiet")
    assert again.returncode == 0 and again.stdout == ""
    assert (store / "mine.tiktoken").read_bytes() == first


def test_train_classic_kind_and_evaluate(tmp_path: Path) -> None:
    store = tmp_path / "store"
    text = tmp_path / "t.txt"
    text.write_text("low lower newest widest\n" * 20 + "low low newest\n", encoding="utf-8")
    out = run("train", str(text), "--kind", "char", "--vocab-size", "30", "--name", "classic", "--store",
              str(store), "--tie-break", "lexicographic", "--quiet")
    assert out.returncode == 0, out.stderr
    ev = run("evaluate", "--store", str(store), "-t", "classic", "-t", "cl100k_base", str(text), "--json")
    assert ev.returncode == 0, ev.stderr
    rows = json.loads(ev.stdout)["results"]
    assert [r["tokenizer"] for r in rows] == ["classic", "cl100k_base"]
    assert rows[0]["words"] == 83 and rows[0]["tokens"] > 0 and rows[0]["unknown_tokens"] == 0
    table = run("evaluate", "--store", str(store), "-t", "classic", str(text))
    assert table.returncode == 0 and "bytes/tok" in table.stdout and "classic" in table.stdout


def test_bad_input_is_a_clean_error(tmp_path: Path) -> None:
    store = tmp_path / "store"
    missing = run("train", str(tmp_path / "nope.txt"), "--vocab-size", "300", "--name", "x", "--store", str(store))
    assert missing.returncode == 2 and missing.stderr.startswith("error:") and "Traceback" not in missing.stderr
    f = tmp_path / "a.txt"
    f.write_text("abc")
    small = run("train", str(f), "--vocab-size", "10", "--name", "x", "--store", str(store))
    assert small.returncode == 2 and "vocab_size" in small.stderr
    both = run("train", str(f), "--vocab-size", "300", "--name", "x", "--store", str(store), "--pattern", "gpt2",
               "--pattern-regex", r"\w+")
    assert both.returncode == 2  # argparse: mutually exclusive
    unknown = run("evaluate", "-t", "nope", str(f))
    assert unknown.returncode == 2 and "unknown tokenizer" in unknown.stderr


def test_train_pipeline_kinds_with_options_then_encode(tmp_path: Path) -> None:
    store = tmp_path / "store"
    files = corpus(tmp_path)
    sample = tmp_path / "sample.txt"
    sample.write_text("def get_tokenizer(name): return 2024\n", encoding="utf-8")
    runs = {
        "wp": ("wordpiece", "hf_json", ["--vocab-txt", "--no-lowercase"]),
        "spb": ("sentencepiece-bpe", "sentencepiece", ["--byte-fallback", "--split-digits"]),
    }
    for name, (kind, fmt, extra) in runs.items():
        out = run("train", *files, "--kind", kind, "--vocab-size", "900", "--name", name, "--store", str(store),
                  "--json", *extra)
        assert out.returncode == 0, out.stderr
        summary = json.loads(out.stdout)
        assert summary["format"] == fmt and summary["vocab_size"] == 900 and summary["merges"] > 0
        ids = run("encode", "--store", str(store), "-t", name, str(sample))
        assert ids.returncode == 0, ids.stderr
        reset()
        expected = list(get_tokenizer(name, store_dir=store).encode(sample.read_text()))
        assert [int(t) for t in ids.stdout.split()] == expected
    assert (store / "wp.vocab.txt").read_text(encoding="utf-8").splitlines()[:2] == ["[PAD]", "[UNK]"]
    bad = run("train", *files, "--kind", "unigram", "--vocab-size", "900", "--name", "u", "--store", str(store),
              "--split-digits")
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and len(bad.stderr.splitlines()) == 1


def test_family_options_threads_and_backends_give_one_artifact(tmp_path: Path) -> None:
    files = corpus(tmp_path)
    digests = {}
    for name, extra in {"t1": ["--threads", "1"], "t2": ["--threads", "2"],
                        "py": ["--threads", "1", "--backend", "python"]}.items():
        out = run("train", *files, "--kind", "unigram", "--vocab-size", "700", "--name", name, "--store",
                  str(tmp_path / name), "--json", "--prune-loss", "sentencepiece", *extra)
        assert out.returncode == 0, out.stderr
        digests[name] = json.loads(out.stdout)["sha256"]
    assert digests["t1"] == digests["t2"] == digests["py"]
    wp = {}
    for score in ("wordpiece", "count"):
        out = run("train", *files, "--kind", "wordpiece", "--vocab-size", "700", "--name", "w", "--store",
                  str(tmp_path / score), "--json", "--score", score)
        assert out.returncode == 0, out.stderr
        wp[score] = json.loads(out.stdout)["sha256"]
    assert wp["wordpiece"] != wp["count"]


def test_sentencepiece_piece_rule_flags_reach_the_trainer_spec(tmp_path: Path) -> None:
    from app.engine.pipeline.sentencepiece import _model_proto_class

    files = corpus(tmp_path)
    specs = {}
    for name, extra in {"d": [], "off": ["--no-split-by-unicode-script", "--no-split-by-number",
                                          "--no-split-by-whitespace", "--max-piece-length", "8"]}.items():
        out = run("train", *files, "--kind", "sentencepiece-bpe", "--vocab-size", "700", "--name", name, "--store",
                  str(tmp_path), "--json", *extra)
        assert out.returncode == 0, out.stderr
        proto = _model_proto_class()()
        proto.ParseFromString((tmp_path / f"{name}.model").read_bytes())
        ts = proto.trainer_spec
        specs[name] = (ts.split_by_unicode_script, ts.split_by_number, ts.split_by_whitespace,
                       ts.max_sentencepiece_length, max(len(p.piece) for p in proto.pieces if p.type == 1))
    assert specs["d"][:4] == (True, True, True, 16) and specs["d"][4] <= 16
    assert specs["off"] == (False, False, False, 8, 8)
    bad = run("train", *files, "--kind", "unigram", "--vocab-size", "700", "--name", "u", "--store", str(tmp_path),
              "--no-split-by-number")
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and len(bad.stderr.splitlines()) == 1
