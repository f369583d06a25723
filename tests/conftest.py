"""Suite-wide fixtures (the bundled store and a scratch copy of it for tests that damage artifacts) and the
exactness suite's terminal summary, which runs here so that pytest-xdist's controller prints it too."""

from __future__ import annotations

import atexit
import gc
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.engine import reset
from app.engine.store import bundled_store_dir

REPO_ROOT = Path(__file__).resolve().parent.parent


def _private_artifact_cache() -> None:
    """The suite never writes into the user's cache directory: the compiled artifact cache
    (``TOKENIZER_ARTIFACT_CACHE``) and ``XDG_CACHE_HOME`` (its default's root, for tests that clear the variable)
    point into one temporary directory per test process, removed at exit (children such as ``serve`` inherit it)."""
    root = tempfile.mkdtemp(prefix="tokenizer-tests-cache-")
    os.environ["XDG_CACHE_HOME"] = root
    os.environ["TOKENIZER_ARTIFACT_CACHE"] = os.path.join(root, "tokenizer-service", "compiled")
    atexit.register(shutil.rmtree, root, ignore_errors=True)


_private_artifact_cache()


@pytest.fixture
def store_copy(tmp_path: Path) -> Iterator[Path]:
    """A private copy of the bundled store (manifest, artifacts, licences) that a test may modify."""
    dst = tmp_path / "store"
    shutil.copytree(bundled_store_dir(), dst, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    yield dst
    reset()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: add a finished worker's exactness tally
    (``tests/engine/exactness/conftest.py``) to its own."""
    doc = getattr(node, "workeroutput", {}).get("exactness_tally")  # reference.TALLY_KEY, not imported needlessly
    if doc is not None:
        from tests.engine.exactness.reference import TALLY

        TALLY.merge(doc)


#: If set, the terminal summary's numbers are also written to this JSON file.
REPORT_ENV = "EXACTNESS_REPORT"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how many strings were compared with the reference per tokenizer, and how many differed (tiktoken for
    the tiktoken-format tokenizers, Hugging Face ``tokenizers`` for the ``tokenizer.json`` ones)."""
    reference = sys.modules.get("tests.engine.exactness.reference")
    if reference is None or not reference.TALLY.compared:
        return  # no exactness test ran in this process (nor in any pytest-xdist worker)
    BACKENDS, TALLY, TOKENIZERS = reference.BACKENDS, reference.TALLY, reference.TOKENIZERS
    tr = terminalreporter
    tr.write_sep("=", "exactness vs tiktoken 0.14 / HF tokenizers (tokenizer.json): strings compared / mismatches")
    order = [f"{t}/{b}" for b in BACKENDS for t in TOKENIZERS]
    names = [n for n in order if n in TALLY.compared] + sorted(set(TALLY.compared) - set(order))
    for name in names:
        sources = ", ".join(f"{src} {n}" for (tok, src), n in sorted(TALLY.by_source.items()) if tok == name)
        tr.write_line(
            f"{name:21s} compared {TALLY.compared[name]:>9,d}  mismatches {TALLY.mismatched.get(name, 0):>4d}"
            f"  ({sources})"
        )
    for line in TALLY.notes:
        tr.write_line(line)
    total = sum(TALLY.compared.values())
    tr.write_line(f"{'total':21s} compared {total:>9,d}  mismatches {sum(TALLY.mismatched.values()):>4d}")
    report = os.environ.get(REPORT_ENV, "").strip()
    if report:
        with open(report, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "compared": TALLY.compared,
                    "mismatched": TALLY.mismatched,
                    "by_source": {f"{tok} {src}": n for (tok, src), n in sorted(TALLY.by_source.items())},
                    "notes": TALLY.notes,
                },
                fh,
                indent=2,
            )
        tr.write_line(f"exactness tally written to {report}")


@pytest.fixture(autouse=True, scope="module")
def _collectable_after_each_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """What a module loaded is freed when it is done, so that one worker's run does not keep every module's
    tokenizers (a gemma3 load is ~200 MiB; the last full run's worker grew past 13 GiB and was killed):

    * the module's own memo functions (``functools.cache`` / ``lru_cache``) are cleared;
    * the app's start-up freezes everything alive out of the garbage collector (``gc.freeze``, see
      app/api/main.py, undone at the app's shutdown); an app that was never shut down would pin every tokenizer
      alive then for the rest of the run, so the frozen objects go back to the collector here too.
    """
    yield
    for value in list(vars(request.module).values()):
        clear = getattr(value, "cache_clear", None)
        if callable(clear) and getattr(value, "__module__", None) == request.module.__name__:
            clear()
    gc.unfreeze()
    gc.collect()
