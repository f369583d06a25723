"""Artifact regexes (issue 30): size and counted-repeat limits before compiling, a time bound for unvetted patterns,
and never running one on the event loop."""

from __future__ import annotations

import time

import pytest

from app.engine import patterns
from app.engine.artifact_regex import (
    MAX_PATTERN_CHARS,
    MAX_REPEAT_PRODUCT,
    VETTED,
    BoundedRegex,
    OffloadRequired,
    PatternRejected,
    PatternTimeoutError,
    check_source,
    on_event_loop,
    repeat_product,
)
from app.engine.pipeline.pre_tokenizers import GPT2_PATTERN


@pytest.mark.parametrize(("source", "product"), [
    (r"(?:a{3000}){3000}", 9_000_000),
    (r"\p{N}{1,3}", 3),
    (r"(a{2}(b{3}){4}){5}", 60),
    (r"[{]{10}x", 10),
    (r"\x{41}{7}", 7),
    (r"a{,9}", 9),
    (r"a{3,}", 3),
    (r"{12}", 1),  # not a quantifier: a literal
    (r"[[a](?:a{3000}){3000}", 9_000_000),  # V0 reads "[[a]" as one class: the repeats after it still count
    (r"(?:ab|cd)+", 1),
])
def test_repeat_product(source: str, product: int) -> None:
    assert repeat_product(source) == product


def test_limits_are_checked_before_compiling() -> None:
    with pytest.raises(PatternRejected, match="repeats up to 9000000 times"):
        check_source(r"(?:a{3000}){3000}")  # 2.4 GB when compiled
    with pytest.raises(PatternRejected, match="longer than the limit"):
        BoundedRegex("a" * (MAX_PATTERN_CHARS + 1))
    with pytest.raises(PatternRejected, match="does not compile"):
        BoundedRegex("(?P<unclosed")
    check_source("a{%d}" % MAX_REPEAT_PRODUCT)  # noqa: UP031 -- at the limit


def test_every_named_pattern_is_vetted_and_within_the_limits() -> None:
    for source in [*patterns.PATTERNS.values(), *patterns.DEEPSEEK_V3_SPLITS, GPT2_PATTERN]:
        assert source in VETTED
        check_source(source)


def test_an_exponential_pattern_stops_at_its_budget() -> None:
    """Issue 30: ``(a|a)+$`` on 33 characters ran for ever (2**33 paths); now a PatternTimeoutError after about
    its budget (0.25 s here), for findall, finditer and sub alike."""
    hostile = BoundedRegex("(a|a)+$")
    text = "a" * 40 + "!"
    for call in (hostile.findall, hostile.finditer, lambda t: hostile.sub("", t)):
        t0 = time.monotonic()
        with pytest.raises(PatternTimeoutError, match="exceeded its time bound"):
            call(text)
        assert time.monotonic() - t0 < 3
    assert [m.span() for m in hostile.finditer("aaa")] == [(0, 3)]  # it still runs where it is fast


def test_unvetted_patterns_never_run_on_the_event_loop() -> None:
    custom = BoundedRegex(r"\w+")
    vetted = BoundedRegex(patterns.CL100K)
    with on_event_loop():
        with pytest.raises(OffloadRequired):
            custom.findall("hello world")
        assert vetted.findall("hello world") == ["hello", " world"]
    assert custom.findall("hello world") == ["hello", "world"]
