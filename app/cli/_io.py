"""Input helpers shared by CLI subcommands."""

from __future__ import annotations

import sys
from pathlib import Path


def read_text_inputs(files: list[str]) -> list[tuple[str, str]]:
    """``(label, text)`` for each file (``-`` or no files: standard input), decoded as UTF-8 (invalid bytes
    become U+FFFD, with the file still processed)."""
    if not files:
        files = ["-"]
    out = []
    for name in files:
        data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
        out.append(("<stdin>" if name == "-" else name, data.decode("utf-8", errors="replace")))
    return out
