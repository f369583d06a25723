"""Exactness-suite fixtures and the terminal summary of strings compared / mismatches per tokenizer."""

from __future__ import annotations

import json
import os

import pytest

from app.engine import native

from .reference import BACKENDS, TALLY, TOKENIZERS

#: If set, the terminal summary's numbers are also written to this JSON file.
REPORT_ENV = "EXACTNESS_REPORT"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how many strings were compared with the reference per tokenizer, and how many differed (tiktoken for
    the tiktoken-format tokenizers, Hugging Face ``tokenizers`` for the ``tokenizer.json`` ones)."""
    if not TALLY.compared:
        return
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


@pytest.fixture(params=TOKENIZERS)
def tokenizer(request: pytest.FixtureRequest) -> str:
    """Each bundled tokenizer name in turn."""
    return str(request.param)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each engine backend in turn; ``native`` skips (naming why) when the compiled core did not build."""
    if request.param == "native" and not native.available():
        pytest.skip(f"compiled core not available: {native.IMPORT_ERROR}")
    return str(request.param)
