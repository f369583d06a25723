"""(e) Real multi-language text and source code (see ``realtext.py`` for the sources): ids equal tiktoken's,
and the text round-trips."""

from __future__ import annotations

from functools import cache

import pytest

from harness import realtext

from .reference import TALLY, assert_same, ours

#: Scripts the always-available sources must contain (so the test cannot silently shrink to English).
REQUIRED_SCRIPTS = ("CYRILLIC", "ARABIC", "HEBREW", "DEVANAGARI", "CJK", "HANGUL", "HIRAGANA", "GREEK", "THAI")


@cache
def documents() -> tuple[realtext.Document, ...]:
    docs = tuple(realtext.documents())
    sources = sorted({d.source for d in docs})
    chars = sum(len(d.text) for d in docs)
    TALLY.note(f"real text: {len(docs)} documents, {chars:,} characters, sources: {', '.join(sources)}")
    return docs


def test_always_available_sources_cover_many_scripts() -> None:
    import unicodedata

    docs = list(realtext.always_available())
    assert {d.source for d in docs} >= {"python_source", "gherkin_keywords", "letter_tables", "certificates"}
    scripts = {unicodedata.name(ch, "?").split()[0] for d in docs for ch in d.text if ord(ch) > 0x2FF}
    missing = [s for s in REQUIRED_SCRIPTS if s not in scripts]
    assert not missing, f"real-text sources lack scripts {missing}"


def test_real_text_equals_tiktoken(tokenizer: str, backend: str) -> None:
    total = 0
    for doc in documents():
        total += assert_same(tokenizer, realtext.strings(doc), source=f"real_{doc.source}", backend=backend)
    assert total > 10_000


@pytest.mark.parametrize("source", ["gettext", "cjk_testdata", "pydoc"])
def test_optional_source_roundtrip(source: str, backend: str) -> None:
    docs = [d for d in documents() if d.source == source]
    if not docs:
        pytest.skip(f"no {source} documents on this machine")
    tokenizer = ours("o200k_base", backend)
    for doc in docs:
        assert tokenizer.decode(tokenizer.encode(doc.text)) == doc.text
