"""Input helpers shared by CLI subcommands, and the one error type they raise (:class:`CliError`: one line on
stderr, exit status 2)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: Bytes looked at for a NUL (the sign of a binary file; text never holds one).
SNIFF_BYTES = 8192


class CliError(Exception):
    """A usage or input error: printed as ``error: <message>`` (one line), exit status 2."""


def add_errors_option(p: argparse.ArgumentParser) -> None:
    """``--errors strict|replace`` for subcommands that read text files."""
    p.add_argument("--errors", choices=("strict", "replace"), default="strict",
                   help="strict (default): refuse input that is not UTF-8 text (a binary file); replace: read "
                   "invalid bytes as U+FFFD and NUL bytes as they are")


def read_text_inputs(files: list[str], errors: str = "strict") -> list[tuple[str, str]]:
    """``(label, text)`` for each file (``-`` or no files: standard input), decoded as UTF-8.

    ``errors="strict"`` raises :class:`CliError` for a file that is not UTF-8 or holds a NUL byte in its first
    :data:`SNIFF_BYTES` (a binary file), naming the file and the offset; ``"replace"`` turns invalid bytes into
    U+FFFD. A missing, unreadable or directory path is a :class:`CliError` too.
    """
    if not files:
        files = ["-"]
    out = []
    for name in files:
        label = "<stdin>" if name == "-" else name
        try:
            data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
        except IsADirectoryError:
            raise CliError(f"{label}: is a directory, not a text file") from None
        except OSError as exc:
            raise CliError(f"{label}: cannot read: {exc.strerror or exc}") from None
        out.append((label, decode_text(label, data, errors)))
    return out


def decode_text(label: str, data: bytes, errors: str) -> str:
    """``data`` as UTF-8 (see :func:`read_text_inputs` for ``errors``)."""
    if errors == "replace":
        return data.decode("utf-8", errors="replace")
    nul = data.find(b"\0", 0, SNIFF_BYTES)
    if nul >= 0:
        raise CliError(f"{label}: looks like a binary file (NUL byte at offset {nul}); pass --errors=replace to "
                       "tokenize it anyway")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{label}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); pass "
                       "--errors=replace to read invalid bytes as U+FFFD") from None
