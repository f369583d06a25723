"""``python -m app`` — command-line interface.

Each subcommand group lives in its own module exposing ``register(subparsers)``; every handler returns a process
exit code. Engine errors become a one-line message on stderr and exit code 2 (usage or input error), never a
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from app.engine.errors import EngineError

#: Modules of :mod:`app.cli` that add subcommands, in help order.
COMMAND_MODULES = ("tokenize", "serve", "train", "bulk", "import_")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(prog="python -m app", description="Exact BPE tokenization: CLI and service.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"app.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 failure such as a failed verification, 2 bad input)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `python -m app encode … | head`
        return 0
