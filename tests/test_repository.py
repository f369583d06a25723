"""Repository hygiene: code, tests and tools never point readers at a document that is not in the repository."""

from __future__ import annotations

import subprocess

import pytest

from .conftest import REPO_ROOT

#: Documents that exist only outside the repository (a reader of the code cannot open them). Joined from parts at
#: run time so that neither this file nor its compiled bytecode cites them (``"a" + "b"`` is folded into one
#: constant by the compiler, so the bytecode would).
OUTSIDE = ("".join(("DESIGN", ".md")),)


def test_sources_do_not_cite_documents_outside_the_repository() -> None:
    files = subprocess.run(["git", "ls-files", "app", "tests", "bench", "fuzz", "docs", "README.md"],
                           cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert len(files) > 50
    offenders = []
    for name in files:
        if not name.endswith((".py", ".c", ".h", ".md", ".toml", ".sh")):
            continue
        text = (REPO_ROOT / name).read_text(encoding="utf-8", errors="replace")
        for doc in OUTSIDE:
            if doc in text:
                line = text[: text.index(doc)].count("\n") + 1
                offenders.append(f"{name}:{line}")
    assert not offenders, offenders


#: The modules of ``app/`` that read the process environment, and why. Settings: the service's
#: (``app/core/config.py``) and the library's defaults (``app/engine/defaults.py``). The others touch variables
#: that belong to other programs, not settings of ours: prometheus_client's multiprocess directory (how ``serve``
#: hands the metrics files to its workers) and Ray's cluster address; the client's mention is in its docstring.
ENVIRONMENT_READERS = frozenset({
    "app/core/config.py", "app/engine/defaults.py", "app/api/metrics.py", "app/cli/serve.py", "app/bulk/job.py",
    "app/client/__init__.py",
})


def test_only_the_settings_modules_read_the_environment() -> None:
    files = [p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "app").rglob("*.py")]
    assert len(files) > 50
    readers = {name for name in files
               if any(s in (REPO_ROOT / name).read_text(encoding="utf-8") for s in ("os.environ", "getenv"))}
    assert readers <= ENVIRONMENT_READERS, sorted(readers - ENVIRONMENT_READERS)
    assert {"app/core/config.py", "app/engine/defaults.py"} <= readers


def _imports(path: str) -> set[str]:
    """Top-level packages ``path`` imports (``import x.y`` / ``from x.y import z``; relative imports excluded),
    imports inside functions included."""
    import ast

    tree = ast.parse((REPO_ROOT / path).read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize(("tree", "forbidden"), [
    ("tests", {"bench"}), ("bench", {"tests"}), ("harness", {"tests", "bench"}), ("app", {"tests", "bench", "harness"}),
])
def test_tests_and_bench_share_only_the_harness(tree: str, forbidden: set[str]) -> None:
    """tests/ and bench/ never import each other (their shared helpers are :mod:`harness`); the tests of the
    benchmarks themselves (``tests/bench/``) are the one exception, as they exist to import ``bench``."""
    files = [p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / tree).rglob("*.py")]
    files = [f for f in files if not f.startswith("tests/bench/")]
    assert len(files) > 5
    offenders = sorted(f"{f}: {sorted(_imports(f) & forbidden)}" for f in files if _imports(f) & forbidden)
    assert not offenders, offenders
