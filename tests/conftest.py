"""Suite-wide fixtures: the bundled store and a scratch copy of it for tests that damage artifacts."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine import reset
from app.engine.store import bundled_store_dir

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def store_copy(tmp_path: Path) -> Iterator[Path]:
    """A private copy of the bundled store (manifest, artifacts, licences) that a test may modify."""
    dst = tmp_path / "store"
    shutil.copytree(bundled_store_dir(), dst, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    yield dst
    reset()
