"""Build the trainer benchmark's corpus: a training file and a held-out file in ``bench/.data/train_bench/``.

Source: ``bench.corpora.ensure("train")`` — >= 50 MiB of real text built only from files that pip/apt packages
install (Debian docs, GNU info manuals, gettext catalogues, Python stdlib sources, C headers, translated UI
strings from pinned wheels; see ``bench/corpora.py``). Nothing is downloaded here.

Split (deterministic): the source is cut into blocks of about 256 KiB at line ends; every 20th block
(index 19, 39, …) goes to ``heldout.txt``, the rest to ``train.txt``. Held-out text is thus interleaved through
every section (prose, translations, code) but never seen in training.

Usage: ``python -m bench.train.build_corpus [--force]`` prints the two paths and sizes.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "bench" / ".data" / "train_bench"
BLOCK = 256 * 1024
EVERY = 20


def build(force: bool = False) -> tuple[Path, Path]:
    """Return ``(train.txt, heldout.txt)``, building them if missing (or ``force``)."""
    sys.path.insert(0, str(ROOT))
    from bench.corpora import ensure

    src = ensure("train")
    train, held = OUT_DIR / "train.txt", OUT_DIR / "heldout.txt"
    stamp = OUT_DIR / ".source.sha256"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    if not force and train.exists() and held.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return train, held
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with src.open("rb") as f, train.open("wb") as ft, held.open("wb") as fh:
        index = 0
        while True:
            block = f.read(BLOCK)
            if not block:
                break
            rest = f.readline()  # finish the line so blocks end at line ends
            (fh if index % EVERY == EVERY - 1 else ft).write(block + rest)
            index += 1
    stamp.write_text(digest + "\n")
    return train, held


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    for p in build(args.force):
        print(f"{p}\t{p.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
