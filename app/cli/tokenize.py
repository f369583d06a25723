"""Tokenizer subcommands: ``encode``, ``count``, ``decode``, ``tokenizers``, ``verify``."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from app.engine import get_store, get_tokenizer, load_encoding
from app.engine.errors import ArtifactError
from app.engine.sampling import Sample

from ._io import CliError, add_errors_option, read_text_inputs


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--tokenizer", "-t", default="cl100k_base", help="tokenizer name or alias (default cl100k_base)")
        p.add_argument("--store", help="store directory (default $TOKENIZER_STORE or the bundled store)")

    def template(p: argparse.ArgumentParser) -> None:
        p.add_argument("--add-special-tokens", action="store_true",
                       help="wrap each input in the tokenizer's own template (BOS/EOS, [CLS] ... [SEP])")

    def sampling(p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("subword regularisation (any of these turns sampling on; see app.engine.sampling)")
        g.add_argument("--sample-seed", type=int, metavar="N", help="seed of the draw (default 0; file i of several "
                       "uses N + i)")
        g.add_argument("--alpha", type=float, help="Unigram: smoothing, >= 0 (default 0.1)")
        g.add_argument("--nbest", type=int, help="Unigram: -1 whole lattice, 1 best, 2..512 among the n best "
                       "(default -1)")
        g.add_argument("--dropout", type=float, metavar="P", help="BPE: probability of skipping a merge, 0..1 "
                       "(default 0.1)")

    p = sub.add_parser("encode", help="print token ids of text files or stdin")
    p.add_argument("files", nargs="*", help="files to encode (default: stdin)")
    common(p)
    p.add_argument("--prefix", action="append", default=[], metavar="SPECIAL", help="special token to put first")
    p.add_argument("--suffix", action="append", default=[], metavar="SPECIAL", help="special token to put last")
    p.add_argument("--json", action="store_true", help="print one JSON object per file")
    template(p)
    sampling(p)
    add_errors_option(p)
    p.set_defaults(handler=cmd_encode)

    p = sub.add_parser("count", help="count tokens of text files or stdin")
    p.add_argument("files", nargs="*", help="files to count (default: stdin)")
    common(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    template(p)
    p.add_argument("--model", "-m", help="model name (snapshots resolve): count with its tokenizer and print the "
                   "context window and the estimated cost")
    p.add_argument("--messages", metavar="FILE.json", help="count a chat conversation (a list of messages, or "
                   "{messages, tools, add_generation_prompt}) as --model frames it")
    p.add_argument("--max-output-tokens", type=int, help="output tokens to reserve and price (default: the model's "
                   "maximum)")
    sampling(p)
    add_errors_option(p)
    p.set_defaults(handler=cmd_count)

    p = sub.add_parser("decode", help="decode token ids (whitespace- or comma-separated) from files or stdin")
    p.add_argument("files", nargs="*", help="files with ids (default: stdin)")
    common(p)
    p.add_argument("--skip-special", action="store_true", help="leave special tokens out")
    p.set_defaults(handler=cmd_decode)

    p = sub.add_parser("tokenizers", help="list the tokenizers of the store")
    p.add_argument("--store", help="store directory")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_tokenizers)

    p = sub.add_parser("verify", help="re-hash every artifact of the store and load every tokenizer")
    p.add_argument("--store", help="store directory")
    p.set_defaults(handler=cmd_verify)


def _sample(args: argparse.Namespace) -> Sample | None:
    """The sampling settings of ``--sample-seed/--alpha/--nbest/--dropout`` (None when none is given); a bad value
    is a one-line error (exit 2)."""
    given = [args.sample_seed, args.alpha, args.nbest, args.dropout]
    if all(v is None for v in given):
        return None
    try:
        return Sample(seed=args.sample_seed or 0, alpha=args.alpha, nbest=args.nbest, dropout=args.dropout)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def cmd_encode(args: argparse.Namespace) -> int:
    tokenizer = get_tokenizer(args.tokenizer, args.store)
    sample = _sample(args)
    if sample is not None:
        tokenizer.check_sample(sample)
    for i, (label, text) in enumerate(read_text_inputs(args.files, args.errors)):
        ids = tokenizer.encode(text, add_special_tokens=args.add_special_tokens, prefix=args.prefix, suffix=args.suffix,
                         sample=sample.at(i) if sample else None)
        if args.json:
            print(json.dumps({"file": label, "tokenizer": tokenizer.name, "ids": ids, "count": len(ids)}))
        else:
            print(" ".join(map(str, ids)))
    return 0


def cmd_count(args: argparse.Namespace) -> int:
    sample = _sample(args)
    if args.model or args.messages:
        if sample is not None:
            raise CliError("--sample-seed/--alpha/--nbest/--dropout count plain text (with --tokenizer), not "
                           "--model or --messages")
        from .chat import cmd_count_model

        return cmd_count_model(args)
    tokenizer = get_tokenizer(args.tokenizer, args.store)
    if sample is not None:
        tokenizer.check_sample(sample)
    inputs = read_text_inputs(args.files, args.errors)
    counts = [(label, tokenizer.count(text, add_special_tokens=args.add_special_tokens,
                                sample=sample.at(i) if sample else None)) for i, (label, text) in enumerate(inputs)]
    total = sum(c for _, c in counts)
    if args.json:
        print(json.dumps({"tokenizer": tokenizer.name, "counts": dict(counts), "total": total}))
    elif len(counts) == 1:
        print(counts[0][1])
    else:
        for label, c in counts:
            print(f"{c}\t{label}")
        print(f"{total}\ttotal")
    return 0


def cmd_decode(args: argparse.Namespace) -> int:
    tokenizer = get_tokenizer(args.tokenizer, args.store)
    for label, text in read_text_inputs(args.files, "replace"):  # ids: a binary file fails on its first field
        fields = [f for f in re.split(r"[\s,\[\]]+", text) if f]
        try:
            ids = [int(f) for f in fields]
        except ValueError:
            bad = next(f for f in fields if not f.lstrip("-").isdigit())
            print(f"error: {label}: {bad!r} is not a token id", file=sys.stderr)
            return 2
        sys.stdout.write(tokenizer.decode(ids, skip_special=args.skip_special))
    return 0


def cmd_tokenizers(args: argparse.Namespace) -> int:
    store = get_store(args.store)
    rows = [
        {
            "name": s.name,
            "aliases": list(s.aliases),
            "kind": s.kind,
            "vocab_size": s.vocab_size,
            "special_tokens": len(s.special_tokens),
            "sha256": s.sha256,
            "models": list(s.models),
        }
        for s in store
    ]
    if args.json:
        print(json.dumps({"store": str(store.directory), "tokenizers": rows}, indent=2))
        return 0
    print(f"store: {store.directory}")
    for s in store:
        aliases = f" (aliases: {', '.join(s.aliases)})" if s.aliases else ""
        print(f"{s.name}{aliases}: {s.kind}, vocab {s.vocab_size}, {len(s.special_tokens)} special tokens")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    store = get_store(args.store)
    failures = 0
    for spec in store:
        start = time.perf_counter()
        try:
            load_encoding(spec)  # reads, re-hashes and parses the artifact (not the memoised copy)
        except (ArtifactError, ValueError) as exc:
            failures += 1
            print(f"FAIL {spec.name}: {exc}")
            continue
        elapsed = time.perf_counter() - start
        print(f"ok   {spec.name}: {Path(spec.artifact_path).name} sha256 {spec.sha256} ({elapsed:.2f}s)")
    print(f"{len(store) - failures} of {len(store)} tokenizers verified")
    return 1 if failures else 0
