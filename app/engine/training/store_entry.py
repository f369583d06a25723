"""Writing a trained tokenizer into a store: the artifact (atomically), the manifest entry (merged into the
existing manifest), the :class:`TrainReport` and the progress bars. Shared by :mod:`.publish` (the BPE kinds) and
:mod:`.families` (the pipeline kinds).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ManifestError
from ..store import MANIFEST_FILE, Store, TokenizerSpec, write_manifest
from .corpus import CorpusStats

#: A tokenizer name a trainer accepts.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass
class TrainReport:
    """What :func:`.publish.train_to_store` (or :func:`.families.train_family_to_store`) did: the spec written,
    corpus figures, merges, timings (seconds), the merge learner's backend and whether pre-tokens were counted by
    the compiled counter."""

    spec: TokenizerSpec
    corpus: CorpusStats
    distinct_pretokens: int
    merges: int
    stop_reason: str
    seconds_counting: float
    seconds_merging: float
    manifest: Path
    extra: dict[str, object] = field(default_factory=dict)
    backend: str = "python"
    native_counting: bool = False


def progress_enabled(quiet: bool) -> bool:
    """Whether to show progress bars: not ``quiet`` and stderr is a terminal."""
    return not quiet and sys.stderr.isatty()


def existing_entries(store: Path, name: str) -> list[TokenizerSpec]:
    """The entries of the manifest in ``store`` (none if it has no manifest yet). Raises
    :class:`ManifestError` if the manifest is invalid or ``name`` is another entry's alias."""
    if not (store / MANIFEST_FILE).exists():
        return []
    old = Store.load(store)
    if name in old.known_names() and old.resolve(name) != name:
        raise ManifestError(f"{store / MANIFEST_FILE}: {name!r} is an alias of {old.resolve(name)!r}")
    return list(old)


def publish_entry(store: Path, existing: Sequence[TokenizerSpec], spec: TokenizerSpec) -> Path:
    """Write the manifest of ``store`` with ``spec`` added, or in place of the entry of the same name; other
    entries are kept as they are. Returns the manifest path."""
    specs = [s for s in existing if s.name != spec.name]
    if len(specs) != len(existing):
        specs = [spec if s.name == spec.name else s for s in existing]
    else:
        specs.append(spec)
    Store(store, specs)  # validates uniqueness of names and aliases before anything is written
    return write_manifest(store, specs)


def write_artifact(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file, then a rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def progress_bar(show: bool, total: int | None, desc: str, unit: str):  # type: ignore[no-untyped-def]
    """A ``tqdm`` bar on stderr counting ``total`` of ``unit`` (None: unknown), or None when not ``show``."""
    if not show:
        return None
    from tqdm import tqdm

    scale = unit == "B"
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=scale, unit_divisor=1024 if scale else 1000,
                file=sys.stderr, mininterval=0.5)
