"""WordPiece / Unigram / SentencePiece-style trainer benchmark: ours next to Hugging Face's and ``sentencepiece``'s.

Corpus: ``bench.corpora`` ``english`` (prose) plus every ``multilingual/<lang>.txt`` (translated UI text in ten
languages, scripts with and without spaces), cut into 64 KiB blocks at line ends; every 10th block is held out
(never trained on). Same corpus and vocabulary size (default 8,000 ids, special tokens and byte pieces included)
for every trainer. Each training runs in a fresh subprocess; the parent reads its peak RSS and CPU time from
``os.wait4``, the child reports its wall time. Held-out bytes per token: UTF-8 bytes of the held-out file / tokens;
every artifact is encoded by its peer library (``tokenizers`` for ``tokenizer.json``, ``sentencepiece`` for
``.model``; the tests prove this engine gives the same ids), so the figure is the vocabulary's, not an encoder's.

Pairs (family: ours / peer):

``wordpiece``   ``train --kind wordpiece`` (BertNormalizer lowercase, BertPreTokenizer) /
                ``tokenizers`` ``WordPieceTrainer`` with the same normalizer, pre-tokenizer and specials
``wordpiece-count``  the same with ``--score count`` (pairs ranked by raw count, as HF's trainer does)
``unigram``     ``train --kind unigram`` (Metaspace) / ``tokenizers`` ``UnigramTrainer`` with Metaspace
``sp-unigram``  ``train --kind sentencepiece-unigram`` / ``sentencepiece`` ``model_type=unigram``
``sp-bpe``      ``train --kind sentencepiece-bpe`` / ``sentencepiece`` ``model_type=bpe``

SentencePiece runs with identity normalisation and character coverage 0.9995 (as ours), split by whitespace;
its default piece rules (split by Unicode script, by number and by whitespace, at most 16 characters) are ours'
defaults too (``app.engine.training.piece_rules``). ``--threads 2`` gives the peers two
threads (``RAYON_NUM_THREADS``, ``num_threads``) and ours ``--threads 2`` (used by the Unigram learner; the
WordPiece and BPE learners are sequential).

Usage::

    python -m bench.train.families [--families wordpiece,unigram,sp-unigram,sp-bpe] [--vocab-size 8000]
                                   [--threads 1|2] [--mb M] [--rounds N] [--json OUT]

``--rounds N`` trains every pair N times, ours and the peer alternating (ours, peer, ours, peer, …, so both meet
the same load), each in a fresh subprocess; the table gives the medians of wall s, CPU s and peak RSS and the
median of the per-round CPU ratios ours / peer (every run is in the JSON). Held-out compression is measured once
per trainer (the artifacts are deterministic; ours' sha256 is checked to be the same in every round).

Larger corpus (``--mb M``, M above the 2.95 MB of the default corpus): the same multilingual training text, then
real text of ``bench.train.build_corpus`` (files that pip/apt packages install: Debian docs, GNU info manuals,
gettext catalogues, Python sources, C headers; mostly English and code, a different mix from the default corpus)
until the training file holds M MB; its held-out file grows the same way, by M/10 MB of that corpus's held-out
part. So the ratio can be read where the fixed costs (interpreter start, imports) do not dominate.

Before timing, ``app`` is byte-compiled (``compileall``), as an installed package is, so that no round pays for
compiling our sources (the peers' packages are compiled in site-packages).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.train.run import run_child

ROOT = Path(__file__).resolve().parents[2]
WORKER = "bench.train.families"  # this module, run as the child process
WORK = ROOT / "bench" / ".data" / "train_families"
FAMILIES = ("wordpiece", "wordpiece-count", "unigram", "sp-unigram", "sp-bpe")
KIND = {"wordpiece": "wordpiece", "wordpiece-count": "wordpiece", "unigram": "unigram",
        "sp-unigram": "sentencepiece-unigram", "sp-bpe": "sentencepiece-bpe"}
#: Trainer options of ours per family (the rest train with the kind's defaults).
OPTIONS = {"wordpiece-count": {"score": "count"}}
BLOCK = 64 * 1024
EVERY = 10


def build_corpus(mb: float = 0.0) -> tuple[Path, Path]:
    """``(train.txt, heldout.txt)`` in :data:`WORK` (rebuilt each run; deterministic); ``mb``: see the module
    docstring (``train-<mb>mb.txt`` / ``heldout-<mb>mb.txt`` then)."""
    sys.path.insert(0, str(ROOT))
    from bench.corpora import ensure

    sources = [ensure("english")] + sorted(ensure("multilingual").glob("*.txt"))
    WORK.mkdir(parents=True, exist_ok=True)
    train, held = WORK / "train.txt", WORK / "heldout.txt"
    if mb:
        train, held = WORK / f"train-{mb:g}mb.txt", WORK / f"heldout-{mb:g}mb.txt"
    index = 0
    with train.open("wb") as ft, held.open("wb") as fh:
        for src in sources:
            data = src.read_bytes()
            if not data.endswith(b"\n"):
                data += b"\n"
            pos = 0
            while pos < len(data):
                end = data.find(b"\n", min(pos + BLOCK, len(data) - 1)) + 1 or len(data)
                (fh if index % EVERY == EVERY - 1 else ft).write(data[pos:end])
                pos = end
                index += 1
    if mb:
        from bench.train.build_corpus import build

        big_train, big_held = build()
        for path, src, size in ((train, big_train, mb * 1e6), (held, big_held, mb * 1e5)):
            have = path.stat().st_size
            if have < size:
                with src.open("rb") as f, path.open("ab") as out:
                    out.write(f.read(int(size - have)) + f.readline())  # whole lines
    return train, held


# --------------------------------------------------------------------------- workers (child processes)


def _train(who: str, family: str, train_file: Path, vocab: int, out: Path, threads: int) -> dict[str, object]:
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    info: dict[str, object] = {}
    if who == "ours":
        from app.engine.training import train_to_store

        report = train_to_store([train_file], name=family, store_dir=out, kind=KIND[family], vocab_size=vocab,
                                quiet=True, threads=threads, options=OPTIONS.get(family))
        info = {"artifact": report.spec.artifact_path.name, "sha256": report.spec.sha256,
                "seconds_reading": round(report.seconds_counting, 2),
                "seconds_learning": round(report.seconds_merging, 2), "ids": report.spec.vocab_size}
    elif family in ("wordpiece", "wordpiece-count", "unigram"):
        from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

        if family.startswith("wordpiece"):
            specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
            tok.normalizer = normalizers.BertNormalizer(lowercase=True)
            tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
            tok.decoder = decoders.WordPiece()
            tr = trainers.WordPieceTrainer(vocab_size=vocab, min_frequency=2, special_tokens=specials,
                                           show_progress=False)
        else:
            tok = Tokenizer(models.Unigram())
            tok.pre_tokenizer = pre_tokenizers.Metaspace()
            tok.decoder = decoders.Metaspace()
            tr = trainers.UnigramTrainer(vocab_size=vocab, special_tokens=["<unk>"], unk_token="<unk>",
                                         show_progress=False)
        tok.train([str(train_file)], tr)
        tok.save(str(out / f"{family}.tokenizer.json"))
        info = {"artifact": f"{family}.tokenizer.json", "ids": tok.get_vocab_size()}
    else:
        import sentencepiece as spm

        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            input=str(train_file), model_writer=model, model_type=family.split("-")[1], vocab_size=vocab,
            normalization_rule_name="identity", character_coverage=0.9995, num_threads=threads,
            max_sentence_length=1 << 16, minloglevel=2,
        )
        (out / f"{family}.model").write_bytes(model.getvalue())
        info = {"artifact": f"{family}.model"}
    info["wall_seconds"] = round(time.perf_counter() - start, 2)
    return info


def _evaluate(artifact: Path, held_file: Path) -> dict[str, object]:
    text = held_file.read_text("utf-8")
    n_bytes = len(text.encode("utf-8"))
    lines = text.splitlines()
    if artifact.suffix == ".json":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(artifact))
        n_tokens = sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False))
        vocab = tok.get_vocab_size()
    else:
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(artifact))
        n_tokens = sum(len(ids) for ids in sp.encode(lines))
        vocab = sp.get_piece_size()
    return {"heldout_bytes": n_bytes, "heldout_tokens": n_tokens, "bytes_per_token": round(n_bytes / n_tokens, 4),
            "vocab": vocab}


# --------------------------------------------------------------------------- parent


def main() -> int:
    parser = argparse.ArgumentParser(description="WordPiece/Unigram/SentencePiece-style trainer benchmark")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--threads", type=int, choices=(1, 2), default=1)
    parser.add_argument("--mb", type=float, default=0.0, help="training text of M MB (see the module docstring)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating runs per trainer (medians reported)")
    parser.add_argument("--json", help="also write the results as JSON to this file")
    parser.add_argument("--worker", choices=("train", "evaluate"), help=argparse.SUPPRESS)
    parser.add_argument("--who", help=argparse.SUPPRESS)
    parser.add_argument("--family", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "train":
        out = WORK / f"{args.who}-{args.family}"
        print(json.dumps(_train(args.who, args.family, Path(args.file), args.vocab_size, out, args.threads)))
        return 0
    if args.worker == "evaluate":
        print(json.dumps(_evaluate(Path(args.family), Path(args.file))))
        return 0

    train_file, held_file = build_corpus(args.mb)
    import compileall  # (the parent only: the children do not pay for this import)

    compileall.compile_dir(ROOT / "app", quiet=1)
    threads = str(args.threads)
    env = dict(os.environ, RAYON_NUM_THREADS=threads, OMP_NUM_THREADS=threads, PYTHONPATH=str(ROOT))
    env.pop("TOKENIZER_ENGINE", None)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    load_start = os.getloadavg()
    rows, runs = [], []
    for family in args.families.split(","):
        per: dict[str, list[dict[str, object]]] = {"ours": [], "peer": []}
        for rnd in range(args.rounds):
            for who in ("ours", "peer"):
                print(f"[{time.strftime('%H:%M:%S')}] training {who} {family} (round {rnd + 1}) …", file=sys.stderr,
                      flush=True)
                info, usage = run_child(WORKER, ["--worker", "train", "--who", who, "--family", family,
                                                 "--file", str(train_file), "--vocab-size", str(args.vocab_size),
                                                 "--threads", threads], env)
                per[who].append({"family": family, "who": who, "round": rnd + 1, **info, **usage,
                                 "loadavg": os.getloadavg()[0]})
                runs.append(per[who][-1])
        if len({r.get("sha256") for r in per["ours"]}) != 1:
            raise RuntimeError(f"ours gave different artifacts across rounds for {family}")
        ratios = [float(o["cpu_seconds"]) / float(p["cpu_seconds"])  # type: ignore[arg-type]
                  for o, p in zip(per["ours"], per["peer"], strict=True)]
        for who in ("ours", "peer"):
            first = per[who][0]
            artifact = WORK / f"{who}-{family}" / str(first["artifact"])
            ev, _ = run_child(WORKER, ["--worker", "evaluate", "--family", str(artifact), "--file", str(held_file)],
                              env)
            row = {**first, **ev, "rounds": args.rounds}
            for key in ("wall_seconds", "cpu_seconds", "peak_rss_mib", "loadavg"):
                row[key] = round(statistics.median(float(r[key]) for r in per[who]), 2)  # type: ignore[arg-type]
            if who == "ours":
                row["cpu_ratio_median"] = round(statistics.median(ratios), 3)
            rows.append(row)
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    meta = {"date": started, "commit": commit.stdout.strip(), "threads": args.threads, "rounds": args.rounds,
            "vocab_size": args.vocab_size, "mb": args.mb,
            "train_bytes": train_file.stat().st_size, "heldout_bytes": held_file.stat().st_size,
            "python": platform.python_version(), "loadavg_start": load_start, "loadavg_end": os.getloadavg()}
    print(f"{started}, commit {meta['commit']}, {args.threads} thread(s), ours and peers, load average "
          f"{load_start[0]:.2f} at start / {os.getloadavg()[0]:.2f} at end")
    print(f"corpus: {meta['train_bytes']} bytes train, {meta['heldout_bytes']} bytes held-out; "
          f"vocab {args.vocab_size}")
    print(f"medians of {args.rounds} round(s), ours and peer alternating")
    print("| family | trainer | wall s | CPU s | peak RSS MiB | ids | held-out bytes/token | CPU ours / peer |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['family']} | {r['who']} | {r['wall_seconds']} | {r['cpu_seconds']} | {r['peak_rss_mib']} | "
              f"{r['vocab']} | {r['bytes_per_token']} | {r.get('cpu_ratio_median', '')} |")
    by = {(r["family"], r["who"]): r for r in rows}
    for family in args.families.split(","):
        ours, peer = by[(family, "ours")], by[(family, "peer")]
        print(f"{family}: peer / ours = {float(peer['cpu_seconds']) / float(ours['cpu_seconds']):.2f}x CPU, "
              f"{float(peer['wall_seconds']) / float(ours['wall_seconds']):.2f}x wall (medians of {args.rounds})")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows, "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
