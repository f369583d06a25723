"""Repository hygiene: code, tests and tools never point readers at a document that is not in the repository."""

from __future__ import annotations

import subprocess

from .conftest import REPO_ROOT

#: Documents that exist only outside the repository (a reader of the code cannot open them). Spelled in parts so
#: that this file does not cite them itself and needs no exemption.
OUTSIDE = ("DESIGN" + ".md",)


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
