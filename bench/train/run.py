"""Trainer benchmark: our BPE trainer vs Hugging Face ``tokenizers`` BpeTrainer vs SentencePiece BPE.

Same corpus (``bench/train/build_corpus.py``: >= 50 MB of real text from pip/apt-installed files, held-out
part never trained on), same vocabulary size (32,000 ordinary tokens). Each trainer runs in its own fresh
subprocess; the parent reads that child's peak resident memory and CPU time from ``os.wait4`` (per process,
not the machine's), the child reports its own wall time. Compression is measured afterwards, in another
subprocess: UTF-8 bytes of the held-out file / tokens the trained tokenizer gives it.

Trainers (single-threaded by default, for a like-for-like comparison on a shared 2-core machine; ``--threads 2``
gives every trainer two threads):

``ours-cl100k`` / ``ours-gpt2``
    ``app.engine.training.train_to_store`` (byte level, cl100k or GPT-2 pre-tokenizer pattern, min frequency 2),
    default backend (the compiled counter and learner when built); held-out counted with the engine's
    ``RankBPETokenizer``.
``ours-cl100k-python`` / ``ours-gpt2-python``
    the same with ``backend="python"`` (the pure-Python reference; same artifact, much slower).
``hf-bytelevel``
    ``tokenizers`` BPE model + ``ByteLevel(add_prefix_space=False)`` pre-tokenizer (GPT-2 regex) +
    ``BpeTrainer(vocab_size=32000, min_frequency=2, initial_alphabet=ByteLevel.alphabet())``,
    ``RAYON_NUM_THREADS=1``.
``spm-bpe``
    ``sentencepiece`` ``model_type=bpe``, ``vocab_size=32000``, ``byte_fallback=True``, identity normalisation,
    ``num_threads=1``, ``max_sentence_length=16384`` (longer lines are skipped by SentencePiece).

Usage::

    python -m bench.train.run [--trainers ours-cl100k,hf-bytelevel,...] [--vocab-size 32000] [--threads 1|2]
                              [--repeat N] [--json OUT]

``--repeat N`` trains each trainer N times (fresh subprocess each) and reports the medians of wall s, CPU s and
peak RSS (all runs are in the JSON). Prints a Markdown table. Wall times depend on machine load (cores are shared);
CPU seconds are the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKER = "bench.train.run"  # this module, run as the child process
WORK = ROOT / "bench" / ".data" / "train_bench" / "out"
TRAINERS = ("ours-cl100k", "ours-gpt2", "hf-bytelevel", "spm-bpe")
EXTRA_TRAINERS = ("ours-cl100k-python", "ours-gpt2-python")


# --------------------------------------------------------------------------- workers (run in a child process)


def _train(trainer: str, train_file: Path, vocab: int, out: Path, threads: int) -> dict[str, object]:
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    info: dict[str, object] = {}
    if trainer.startswith("ours-"):
        from app.engine.training import train_to_store

        parts = trainer.split("-")
        report = train_to_store(
            [train_file], name=trainer, store_dir=out / "store", vocab_size=vocab, pattern=parts[1],
            quiet=True, backend=parts[2] if len(parts) > 2 else None, threads=threads,
        )
        info = {"merges": report.merges, "distinct_pretokens": report.distinct_pretokens,
                "backend": report.backend, "native_counting": report.native_counting,
                "sha256": report.spec.sha256,
                "seconds_counting": round(report.seconds_counting, 2),
                "seconds_merging": round(report.seconds_merging, 2)}
    elif trainer == "hf-bytelevel":
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tr = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, show_progress=False,
                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train([str(train_file)], tr)
        tok.save(str(out / "tokenizer.json"))
        info = {"vocab": tok.get_vocab_size()}
    elif trainer == "spm-bpe":
        import sentencepiece as spm

        spm.SentencePieceTrainer.train(
            input=str(train_file), model_prefix=str(out / "spm"), model_type="bpe", vocab_size=vocab,
            byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
            num_threads=threads, max_sentence_length=16384, minloglevel=2,
        )
    else:
        raise SystemExit(f"unknown trainer {trainer}")
    info["wall_seconds"] = round(time.perf_counter() - start, 2)
    return info


def _evaluate(trainer: str, held_file: Path, out: Path) -> dict[str, object]:
    text = held_file.read_text("utf-8")
    n_bytes = len(text.encode("utf-8"))
    if trainer.startswith("ours-"):
        from app.engine import get_tokenizer

        tokenizer = get_tokenizer(trainer, store_dir=out / "store")
        n_tokens = tokenizer.count(text)
        roundtrip = tokenizer.decode(tokenizer.encode(text)) == text
    elif trainer == "hf-bytelevel":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(out / "tokenizer.json"))
        ids = tok.encode(text).ids
        n_tokens = len(ids)
        roundtrip = tok.decode(ids) == text
    else:
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
        ids = sp.encode(text)
        n_tokens = len(ids)
        roundtrip = sp.decode(ids) == text
    return {"heldout_bytes": n_bytes, "heldout_tokens": n_tokens, "bytes_per_token": round(n_bytes / n_tokens, 4),
            "roundtrip": roundtrip}


# --------------------------------------------------------------------------- parent


def run_child(module: str, args: list[str], env: dict[str, str]) -> tuple[dict[str, object], dict[str, float]]:
    """Run ``python -m module *args`` from the repository root; its last stdout line (JSON) and its CPU seconds
    and peak RSS (MiB). ``RuntimeError`` when it exits non-zero."""
    proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed with {proc.returncode}")
    return json.loads(output.strip().splitlines()[-1]), {
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # Linux: KiB
    }


def main() -> int:
    parser = argparse.ArgumentParser(description="BPE trainer benchmark")
    parser.add_argument("--trainers", default=",".join(TRAINERS))
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--threads", type=int, choices=(1, 2), default=1, help="threads for every trainer")
    parser.add_argument("--repeat", type=int, default=1, help="training runs per trainer (medians reported)")
    parser.add_argument("--json", help="also write the results as JSON to this file")
    parser.add_argument("--worker", choices=("train", "evaluate"), help=argparse.SUPPRESS)
    parser.add_argument("--trainer", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        out = WORK / args.trainer
        result = (_train(args.trainer, Path(args.file), args.vocab_size, out, args.threads) if args.worker == "train"
                  else _evaluate(args.trainer, Path(args.file), out))
        print(json.dumps(result))
        return 0

    from bench.train.build_corpus import build

    train_file, held_file = build()
    threads = str(args.threads)
    env = dict(os.environ, RAYON_NUM_THREADS=threads, OMP_NUM_THREADS=threads, PYTHONPATH=str(ROOT))
    env.pop("TOKENIZER_ENGINE", None)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    load_start = os.getloadavg()
    rows = []
    for trainer in args.trainers.split(","):
        runs = []
        for k in range(args.repeat):
            print(f"[{time.strftime('%H:%M:%S')}] training {trainer} ({k + 1}/{args.repeat}) …", file=sys.stderr,
                  flush=True)
            info, usage = run_child(WORKER, ["--worker", "train", "--trainer", trainer, "--file", str(train_file),
                                             "--vocab-size", str(args.vocab_size), "--threads", threads], env)
            runs.append({**usage, **info, "loadavg": os.getloadavg()[0]})
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
        print(f"[{time.strftime('%H:%M:%S')}] evaluating {trainer} …", file=sys.stderr, flush=True)
        ev, _ = run_child(WORKER, ["--worker", "evaluate", "--trainer", trainer, "--file", str(held_file)], env)
        medians = {key: round(statistics.median(float(r[key]) for r in runs), 2)  # type: ignore[arg-type]
                   for key in ("wall_seconds", "cpu_seconds", "peak_rss_mib")}
        rows.append({"trainer": trainer, **runs[-1], **medians, **ev, "runs": runs})
    meta = {
        "date": started,
        "commit": commit.stdout.strip(),
        "threads": args.threads,
        "repeat": args.repeat,
        "loadavg_start": load_start,
        "train_bytes": train_file.stat().st_size,
        "heldout_bytes": held_file.stat().st_size,
        "vocab_size": args.vocab_size,
        "python": platform.python_version(),
        "loadavg_end": os.getloadavg(),
    }
    print(f"{meta['date']}, commit {meta['commit']}, {args.threads} thread(s), median of {args.repeat}, load average "
          f"{load_start[0]:.2f} at start / {meta['loadavg_end'][0]:.2f} at end")  # type: ignore[index]
    print(f"corpus: {meta['train_bytes']} bytes train, {meta['heldout_bytes']} bytes held-out; vocab {args.vocab_size}")
    print("| trainer | wall s | CPU s | peak RSS MiB | held-out bytes/token | round-trips |")
    print("|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['trainer']} | {r['wall_seconds']} | {r['cpu_seconds']} | {r['peak_rss_mib']} | "
              f"{r['bytes_per_token']} | {r['roundtrip']} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
