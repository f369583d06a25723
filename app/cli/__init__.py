"""``python -m app`` — command-line interface.

Each subcommand group lives in its own module exposing ``register(subparsers)``; every handler returns a process
exit code. Every usage or input error (an engine error, a missing or unreadable file, a directory, a binary file,
a bad ``TOKENIZER_ENGINE``, input too large or deep for a step) is a one-line message on stderr and exit code 2, and
any other exception one bounded line and exit code 1 (:func:`app.core.failures.describe`), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from app.core.config import SettingsError
from app.core.failures import describe
from app.engine.errors import EngineError
from app.engine.native import resolve_backend

from ._io import CliError

#: Modules of :mod:`app.cli` that add subcommands, in help order.
COMMAND_MODULES = ("tokenize", "price", "serve", "train", "bulk", "import_", "cache")


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
        resolve_backend(None)  # a bad $TOKENIZER_ENGINE is an input error of every subcommand
        return int(args.handler(args))
    except (CliError, EngineError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `python -m app encode … | head`
        return 0
    except ValueError as exc:  # e.g. resolve_backend: "$TOKENIZER_ENGINE must be one of native, python, not …"
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path given on the command line: missing, a directory, not readable
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except (RecursionError, OverflowError, MemoryError) as exc:  # input past what a step can take: still one line
        print(f"error: the input is too large or nested too deeply ({describe(exc)})", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 -- the last line of defence: one bounded line, never a traceback
        print(f"error: internal error: {describe(exc)}", file=sys.stderr)
        return 1
