"""Exactness-suite fixtures; the terminal summary of strings compared / mismatches per tokenizer is printed by
``tests/conftest.py`` (it must run in pytest-xdist's controller too)."""

from __future__ import annotations

import pytest

from app.engine import native

from .reference import BACKENDS, TALLY, TALLY_KEY, TOKENIZERS


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist, a worker hands its tally to the controller, which prints the suite's summary
    (``tests/conftest.py``)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[TALLY_KEY] = TALLY.to_json()


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
