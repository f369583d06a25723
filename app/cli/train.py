"""Training subcommands: ``train`` (learn a BPE, WordPiece, Unigram or SentencePiece-style tokenizer into a
store) and ``evaluate`` (compare tokenizers)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.engine import get_tokenizer
from app.engine.errors import UnknownTokenizerError
from app.engine.patterns import PATTERNS
from app.engine.training.merges import TIE_BREAKS
from app.engine.training.publish import KINDS, train_to_store

from ._io import CliError, add_errors_option, read_text_inputs


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "train",
        help="learn a tokenizer (BPE, WordPiece, Unigram, SentencePiece-style) from text files into a store",
        description="Learn a tokenizer from text files (streamed) and write its artifact and manifest entry "
        "into DIR (created if needed; an entry of the same name is replaced). Load it with TOKENIZER_STORE=DIR.",
    )
    p.add_argument("files", nargs="+", help="UTF-8 text files (invalid bytes are read as U+FFFD)")
    p.add_argument("--vocab-size", type=int, required=True, metavar="N",
                   help="byte/char: ordinary tokens incl. the base alphabet, special tokens on top; the other kinds: "
                   "every id, special tokens (and byte pieces) included")
    p.add_argument("--name", required=True, help="tokenizer name (letters, digits, . _ -)")
    p.add_argument("--store", required=True, metavar="DIR", help="store directory to write into")
    p.add_argument("--kind", choices=KINDS, default="byte",
                   help="byte: byte-level BPE (GPT-2 style, default); char: classic BPE with </w> and <unk>; "
                   "wordpiece: BERT-style WordPiece (tokenizer.json); unigram: Unigram LM with Metaspace "
                   "(tokenizer.json); sentencepiece-unigram / sentencepiece-bpe: SentencePiece-style on raw text "
                   "(.model)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--pattern", choices=sorted(PATTERNS), help="bundled pre-tokenizer pattern (default cl100k)")
    group.add_argument("--pattern-regex", metavar="REGEX", help="custom pre-tokenizer regex (`regex` module syntax)")
    p.add_argument("--special", action="append", default=[], metavar="NAME",
                   help="special token (repeatable); ids follow the vocabulary in the order given")
    p.add_argument("--min-frequency", type=int, default=2, metavar="K",
                   help="stop when the most frequent pair occurs fewer than K times (default 2)")
    p.add_argument("--tie-break", choices=TIE_BREAKS, default="first-seen",
                   help="equal counts: pair seen first in corpus order (default), or lexicographically greatest")
    p.add_argument("--threads", type=int, choices=(1, 2), default=1,
                   help="threads (default 1): byte kind: counting pre-tokens of a bundled pattern (compiled counter); "
                   "unigram kinds: the E-step and pruning of the compiled learner; same artifact either way")
    p.add_argument("--backend", choices=("native", "python"), default=None,
                   help="compiled trainer or the pure-Python reference (same result; default $TOKENIZER_ENGINE, "
                   "else native when built)")
    p.add_argument("--description", default="", help="description for the manifest")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar or summary")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    fam = p.add_argument_group("options of the wordpiece, unigram and sentencepiece-* kinds")
    yes: dict = dict(action="store_const", const=True, default=None)  # type: ignore[type-arg]
    no: dict = dict(action="store_const", const=False, default=None)  # type: ignore[type-arg]
    fam.add_argument("--no-lowercase", dest="lowercase", **no, help="wordpiece: keep case (default lowercase)")
    fam.add_argument("--strip-accents", dest="strip_accents", **yes,
                     help="wordpiece: strip accents (default: when lowercasing)")
    fam.add_argument("--keep-accents", dest="strip_accents", **no, help="wordpiece: never strip accents")
    fam.add_argument("--no-split-cjk", dest="split_cjk", **no,
                     help="wordpiece: do not put CJK characters in words of their own")
    fam.add_argument("--vocab-txt", dest="vocab_txt", **yes, help="wordpiece: also write NAME.vocab.txt (BERT)")
    fam.add_argument("--score", choices=("wordpiece", "count"), default=None,
                     help="wordpiece: rank pairs by count(ab)/(count(a)count(b)) (default) or by raw count "
                     "(Hugging Face's WordPieceTrainer; compresses better)")
    fam.add_argument("--character-coverage", type=float, default=None, metavar="F",
                     help="unigram/sentencepiece-*: share of characters that must be pieces "
                     "(default 1.0 unigram, 0.9995 sentencepiece-*)")
    fam.add_argument("--byte-fallback", dest="byte_fallback", **yes,
                     help="sentencepiece-*: 256 <0xNN> pieces for characters outside the vocabulary")
    fam.add_argument("--split-digits", dest="split_digits", **yes, help="sentencepiece-*: every digit alone")
    for flag, what in (("unicode-script", "no piece mixes Unicode scripts"),
                       ("number", "digits are a script of their own (with --split-by-unicode-script)"),
                       ("whitespace", "cut lines into words before every space; ▁ only at a piece's start")):
        dest = "split_by_" + flag.replace("-", "_")
        fam.add_argument(f"--split-by-{flag}", dest=dest, **yes, help=f"sentencepiece-*: {what} (default)")
        fam.add_argument(f"--no-split-by-{flag}", dest=dest, **no, help=f"sentencepiece-*: turn --split-by-{flag} off")
    fam.add_argument("--no-dummy-prefix", dest="add_dummy_prefix", **no,
                     help="sentencepiece-*: no ▁ in front of the text")
    fam.add_argument("--shrinking-factor", type=float, default=None, metavar="F",
                     help="unigram kinds: share of pieces kept per pruning round (default 0.75)")
    fam.add_argument("--max-piece-length", type=int, default=None, metavar="N",
                     help="unigram kinds, sentencepiece-bpe: longest piece in characters (default 16)")
    fam.add_argument("--seed-size", type=int, default=None, metavar="N",
                     help="unigram kinds: candidate pieces to start from (default 1000000)")
    fam.add_argument("--prune-loss", choices=("sentencepiece", "huggingface"), default=None,
                     help="unigram kinds: renormalization of the pruning loss, SentencePiece's or Hugging Face's "
                     "(default: huggingface for unigram, sentencepiece for sentencepiece-unigram)")
    p.set_defaults(handler=cmd_train)

    p = sub.add_parser(
        "evaluate",
        help="bytes per token, tokens per word and byte-fallback share of tokenizers on files",
        description="Per file and tokenizer: bytes/token (UTF-8 bytes per token), tokens/word (str.split words), "
        "tokens/char (code points; compare the same content across languages), byte-fallback share (tokens that "
        "are one byte >= 0x80, i.e. not a whole character), unknown share (<unk>/[UNK] tokens).",
    )
    p.add_argument("files", nargs="+", help="text files ('-' for stdin)")
    p.add_argument("--tokenizer", "-t", action="append", required=True,
                   help="tokenizer name or alias (repeatable to compare)")
    p.add_argument("--store", help="store directory; names it lacks are looked up in the default store")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_errors_option(p)
    p.set_defaults(handler=cmd_evaluate)


def _check_train_inputs(files: list[str], store: str) -> None:
    """Refuse, before any work, a ``--store`` that is an existing file and a corpus with no bytes at all."""
    if Path(store).exists() and not Path(store).is_dir():
        raise CliError(f"--store {store}: exists and is not a directory (a store is a directory with a manifest)")
    total = 0
    for name in files:
        path = Path(name)
        if path.is_dir():
            raise CliError(f"{name}: is a directory, not a text file")
        try:
            total += path.stat().st_size
        except OSError as exc:
            raise CliError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if total == 0:
        raise CliError(f"the corpus is empty ({len(files)} file{'s' if len(files) != 1 else ''}, 0 bytes): "
                       "nothing to learn from")


def cmd_train(args: argparse.Namespace) -> int:
    _check_train_inputs(args.files, args.store)
    try:
        report = train_to_store(
            args.files,
            name=args.name,
            store_dir=args.store,
            vocab_size=args.vocab_size,
            kind=args.kind,
            pattern=args.pattern,
            pattern_regex=args.pattern_regex,
            special_tokens=args.special,
            min_frequency=args.min_frequency,
            tie_break=args.tie_break,
            quiet=args.quiet,
            description=args.description,
            backend=args.backend,
            threads=args.threads,
            options=_family_options(args),
        )
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    spec = report.spec
    summary = {
        "name": spec.name,
        "kind": spec.kind,
        "format": spec.format,
        "artifact": str(spec.artifact_path),
        "sha256": spec.sha256,
        "vocab_size": spec.vocab_size,
        "special_tokens": dict(spec.special_tokens),
        "merges": report.merges,
        "stop_reason": report.stop_reason,
        "files": report.corpus.files,
        "bytes": report.corpus.bytes,
        "distinct_pretokens": report.distinct_pretokens,
        "forced_chunk_cuts": report.corpus.forced_cuts,
        "seconds_counting": round(report.seconds_counting, 3),
        "seconds_merging": round(report.seconds_merging, 3),
        "backend": report.backend,
        "native_counting": report.native_counting,
        "manifest": str(report.manifest),
    }
    if report.extra:
        summary["trainer"] = report.extra
    if args.json:
        print(json.dumps(summary, indent=2))
    elif not args.quiet:
        print(
            f"trained {spec.name} ({spec.kind}): {spec.vocab_size} ids, {report.merges} merges ({report.stop_reason}); "
            f"{report.corpus.bytes} bytes, {report.distinct_pretokens} distinct pre-tokens; "
            f"{report.seconds_counting:.1f}s counting + {report.seconds_merging:.1f}s merging ({report.backend})\n"
            f"artifact {spec.artifact_path} (sha256 {spec.sha256})\nmanifest {report.manifest}"
        )
    return 0


_FAMILY_OPTIONS = ("lowercase", "strip_accents", "split_cjk", "vocab_txt", "character_coverage", "byte_fallback",
                   "split_digits", "add_dummy_prefix", "shrinking_factor", "max_piece_length", "seed_size",
                   "prune_loss", "score", "split_by_unicode_script", "split_by_number", "split_by_whitespace")


def _family_options(args: argparse.Namespace) -> dict[str, object]:
    """The trainer options given on the command line (the kind checks that they apply to it)."""
    return {k: getattr(args, k) for k in _FAMILY_OPTIONS if getattr(args, k) is not None}


def _lookup(name: str, store: str | None):  # type: ignore[no-untyped-def]
    """A tokenizer from ``store``, or from the default store if ``store`` lacks it (to compare with stock ones)."""
    if store is None:
        return get_tokenizer(name)
    try:
        return get_tokenizer(name, store)
    except UnknownTokenizerError:
        try:
            return get_tokenizer(name)
        except UnknownTokenizerError:
            pass
        raise


def cmd_evaluate(args: argparse.Namespace) -> int:
    from app.engine.training.evaluate import evaluate_text  # (not at start-up: training does not need it)

    tokenizers = [_lookup(name, args.store) for name in args.tokenizer]
    rows = []
    for label, text in read_text_inputs(args.files, args.errors):
        for tokenizer in tokenizers:
            rows.append(evaluate_text(tokenizer, text, label=label))
    if args.json:
        print(json.dumps({"results": [r.as_dict() for r in rows]}, indent=2))
        return 0
    header = f"{'file':<30} {'tokenizer':<20} {'bytes':>10} {'tokens':>9} {'bytes/tok':>9} {'tok/word':>8} " \
             f"{'tok/char':>8} {'fallback':>8} {'unknown':>8}"
    print(header)
    for r in rows:
        print(
            f"{r.label[-30:]:<30} {r.tokenizer[:20]:<20} {r.bytes:>10} {r.tokens:>9} {r.bytes_per_token:>9.3f} "
            f"{r.tokens_per_word:>8.3f} {r.tokens_per_char:>8.3f} {r.byte_fallback_share:>8.2%} "
            f"{r.unknown_share:>8.2%}"
        )
    return 0
