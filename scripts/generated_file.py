"""What the generator scripts (``scripts/gen_*.py``) share: the two-stage table layout of their C headers, and the
command line that writes the generated file or, with ``--check``, compares it with the committed one (exit 1 when
it differs). The scripts import it from their own directory (``harness.scripts.load_script`` puts it on
``sys.path`` for the tests)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def two_stage(values: list[int], block: int) -> tuple[list[int], list[int]]:
    """``values`` as ``(stage1, stage2)``: ``stage1[i]`` numbers the deduplicated ``block``-entry block of ``stage2``
    holding ``values[i * block : (i + 1) * block]``."""
    blocks: dict[tuple[int, ...], int] = {}
    stage1 = [blocks.setdefault(tuple(values[start : start + block]), len(blocks))
              for start in range(0, len(values), block)]
    return stage1, [v for b in blocks for v in b]


def c_rows(values: list[int], per_line: int, fmt: str = "d") -> str:
    """``values`` as the lines of a C array initializer, ``per_line`` a line, each formatted with ``fmt``."""
    return "\n".join("    " + ", ".join(format(v, fmt) for v in values[i : i + per_line]) + ","
                     for i in range(0, len(values), per_line))


def write_or_check(description: str, default: Path, script: str, text: Callable[[], str],
                   argv: list[str] | None = None) -> int:
    """Parse ``--check``/``--output`` from ``argv``; write ``text()`` to the output, or compare with it. Returns the
    exit status (0, or 1 for a stale file under ``--check``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    parser.add_argument("--output", type=Path, default=default)
    args = parser.parse_args(argv)
    generated = text()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != generated:
            print(f"{args.output} is stale: rerun scripts/{script}", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(generated, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0
