"""The README and ``docs/`` point only at things that exist: every relative link (and its ``#anchor``), every
repository path named in backticks, every ``python -m`` module; code docstrings name only documents that exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .conftest import REPO_ROOT

#: Top-level entries of the repository; a backticked word that starts with one of them is a repository path.
TOP_DIRS = ("app/", "tests/", "bench/", "deploy/", "scripts/", "fuzz/", "tokenizers_store/", "docs/", ".ci/")
TOP_FILES = frozenset({"README.md", "Dockerfile", "docker-compose.yml", "pyproject.toml", "setup.py"})

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_IMG = re.compile(r"<img\s[^>]*src=\"([^\"]+)\"")
_CODE = re.compile(r"`([^`\n]+)`")
_MODULE = re.compile(r"python -m ((?:app|bench|tests)(?:\.\w+)*)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _tracked(*patterns: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def _front_docs() -> list[str]:
    """The README and every page under ``docs/`` (on disk, so a page not yet committed is checked too)."""
    return ["README.md", *sorted(p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "docs").rglob("*.md"))]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(md: Path) -> set[str]:
    text = _FENCE.sub("", md.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.+)$", text, re.M)}


def _exists(rel: str) -> bool:
    if any(c in rel for c in "*?["):
        return any(REPO_ROOT.glob(rel))
    return (REPO_ROOT / rel).exists()


def _broken_links(doc: str) -> list[str]:
    path = REPO_ROOT / doc
    text = path.read_text(encoding="utf-8")
    broken = []
    for target in [m.group(1) for m in _LINK.finditer(text)] + [m.group(1) for m in _IMG.finditer(text)]:
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path.resolve()
        try:
            dest.relative_to(REPO_ROOT.resolve())
        except ValueError:
            broken.append(f"{doc}: {target} (outside the repository)")
            continue
        if not dest.exists():
            broken.append(f"{doc}: {target}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{doc}: {target} (no such heading)")
    return broken


def _named_paths(text: str) -> set[str]:
    """Repository paths in backticks (``tests/x.py::test_y`` names the file), and ``python -m`` modules as files."""
    names: set[str] = set()
    for m in _CODE.finditer(text):
        word = m.group(1).strip().split("::")[0]
        if " " in word or any(c in word for c in "<>{}…$"):
            continue
        if word.startswith(TOP_DIRS) or word in TOP_FILES:
            names.add(word.rstrip("/") if word.endswith("/") else word)
    for m in _MODULE.finditer(text):
        names.add(m.group(1).replace(".", "/") + "(.py|/__main__.py)")
    return names


def _path_exists(name: str) -> bool:
    if name.endswith("(.py|/__main__.py)"):
        stem = name[: -len("(.py|/__main__.py)")]
        return _exists(stem + ".py") or _exists(stem + "/__main__.py")
    return _exists(name)


def test_the_front_docs_exist_and_the_readme_is_a_front_page() -> None:
    docs = _front_docs()
    for page in ("http-api", "chat", "families", "exactness", "performance", "training", "deployment", "reliability",
                 "library", "cli", "bulk", "playground", "configuration", "README"):
        assert f"docs/{page}.md" in docs, page
    assert len((REPO_ROOT / "README.md").read_bytes()) <= 8 * 1024
    assert not (REPO_ROOT / "RELIABILITY.md").exists()  # moved to docs/reliability.md


@pytest.mark.parametrize("doc", _front_docs())
def test_every_relative_link_resolves(doc: str) -> None:
    assert not _broken_links(doc)


def test_links_in_every_other_tracked_markdown_file_resolve() -> None:
    others = [d for d in _tracked("*.md") if d not in _front_docs() and not d.startswith("app/api/static/vendor/")]
    assert len(others) > 3
    broken = [b for d in others for b in _broken_links(d)]
    assert not broken, broken


@pytest.mark.parametrize("doc", _front_docs())
def test_every_repository_path_named_exists(doc: str) -> None:
    names = _named_paths((REPO_ROOT / doc).read_text(encoding="utf-8"))
    missing = sorted(n for n in names if not _path_exists(n))
    assert not missing, missing


def test_code_names_only_documents_that_exist() -> None:
    """A ``*.md`` named with a directory in a source file exists: from the repository root, from the file's folder or
    one above it, or in the store (whose manifest names files relative to itself)."""
    pattern = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.md)\b")
    offenders = []
    for name in _tracked("app/*.py", "tests/*.py", "bench/*.py", "harness/*.py", "scripts/*.py", "fuzz/*.py",
                         "setup.py"):
        if not (REPO_ROOT / name).is_file():  # tracked but deleted in the working tree
            continue
        text = (REPO_ROOT / name).read_text(encoding="utf-8", errors="replace")
        for m in pattern.finditer(text):
            ref = m.group(1)
            folders = (d for d in (REPO_ROOT / name).parents if d.is_relative_to(REPO_ROOT))
            bases = [REPO_ROOT / "tokenizers_store", *folders]
            if any((base / ref).exists() for base in bases):
                continue
            offenders.append(f"{name}: {ref}")
    assert not offenders, offenders


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    assert _named_paths("see `app/engine/no_such.py` and `tests/test_docs.py::test_x`, run `python -m bench.nope`") \
        == {"app/engine/no_such.py", "tests/test_docs.py", "bench/nope(.py|/__main__.py)"}
    assert not _path_exists("app/engine/no_such.py") and _path_exists("tests/test_docs.py")
    assert not _path_exists("bench/nope(.py|/__main__.py)") and _path_exists("app(.py|/__main__.py)")
    assert _slug("`app.client` — the service from Python") == "appclient--the-service-from-python"
    assert "licences" in _anchors(REPO_ROOT / "docs" / "README.md")
