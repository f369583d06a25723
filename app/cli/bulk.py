"""``python -m app bulk count|encode INPUT…``: token counts (or ids) of a whole corpus, on Ray Data.

Reads JSONL and Parquet files (or directories of them), writes one Parquet part file per chunk into ``--output``
with the input's other columns (or those named by ``--keep``), and prints a summary that is also written to
``<output>/_summary.json``. ``--messages-column`` counts chat conversations (lists of messages) as ``--model``'s
framing renders them, instead of text. Local Ray by default; ``--address`` or ``$RAY_ADDRESS`` for a cluster. Needs the
``bulk`` extra. Bad rows are reported, never fatal: exit 0. A job that cannot start exits 2; a chunk that fails
after every retry exits 1.
"""

from __future__ import annotations

import argparse
import sys

from app.bulk.errors import BulkError
from app.core.model_table import ModelTableError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("bulk", help="count or encode a whole JSONL/Parquet corpus on Ray Data (the bulk extra)")
    p.add_argument("action", choices=("count", "encode"), help="count: tokens per row; encode: ids per row")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="*.jsonl / *.ndjson / *.parquet files or directories")
    p.add_argument("--column", default="text", help="the text column (default: text)")
    p.add_argument("--messages-column", metavar="COLUMN",
                   help="count conversations instead: COLUMN holds chat messages (OpenAI shape), framed as --model's")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--tokenizer", help="tokenizer name or alias in the store")
    which.add_argument("--model", help="model name (model table): its tokenizer, and the cost in the summary")
    p.add_argument("--output", required=True, help="output directory (Parquet part files + _summary.json)")
    p.add_argument("--keep", nargs="*", metavar="COLUMN",
                   help="input columns to copy to the output (default: all but --column; none if given empty)")
    p.add_argument("--address", help="Ray cluster address (ray://host:10001, auto); default $RAY_ADDRESS, else local")
    p.add_argument("--num-cpus", type=int, help="CPUs of the local Ray (default: all)")
    p.add_argument("--workers", type=int, help="tokenizer actors, one CPU each (default: the cluster's CPUs)")
    p.add_argument("--store", help="tokenizer store directory (TOKENIZER_STORE, default: bundled store)")
    p.add_argument("--models-file", help="model table JSON (default <store>/models.json)")
    p.add_argument("--chunk-mb", type=float, help="JSONL chunk size in MB (default: up to 32, smaller at the end)")
    p.add_argument("--max-retries", type=int, default=3, help="retries of a chunk whose worker died (default 3)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing bulk output directory")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_bulk)


def cmd_bulk(args: argparse.Namespace) -> int:
    from app.bulk.job import BulkOptions, failure_message, format_summary, run_bulk

    for name, value in (("--num-cpus", args.num_cpus), ("--workers", args.workers)):
        if value is not None and value < 1:
            print(f"error: {name} must be >= 1", file=sys.stderr)
            return 2
    if args.chunk_mb is not None and args.chunk_mb <= 0:
        print("error: --chunk-mb must be > 0", file=sys.stderr)
        return 2
    opts = BulkOptions(
        inputs=args.inputs,
        output=args.output,
        mode=args.action,
        column=args.column,
        messages_column=args.messages_column,
        tokenizer=args.tokenizer,
        model=args.model,
        keep=args.keep,
        store=args.store,
        models_file=args.models_file,
        address=args.address,
        num_cpus=args.num_cpus,
        workers=args.workers,
        chunk_bytes=None if args.chunk_mb is None else max(1, int(args.chunk_mb * 1e6)),
        overwrite=args.overwrite,
        progress=not args.no_progress,
        max_retries=args.max_retries,
    )
    try:
        summary = run_bulk(opts)
    except (BulkError, ModelTableError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # Ray stopped the job (a chunk failed, or its worker died past the retries)
        message = failure_message(exc)
        if message is None:
            raise
        print(f"error: bulk job failed: {message}", file=sys.stderr)
        return 1
    print(format_summary(summary))
    return 0
