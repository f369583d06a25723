"""The one-line description of an unexpected exception (:mod:`app.core.failures`)."""

from __future__ import annotations

from app.core.failures import MAX_LINE_CHARS, describe


def _deep(n: int) -> int:
    return _deep(n + 1) + 1


def test_a_recursion_error_is_one_bounded_line() -> None:
    try:
        _deep(0)
    except RecursionError as exc:
        line = describe(exc)
    assert "\n" not in line and len(line) <= MAX_LINE_CHARS
    assert line.startswith("RecursionError: maximum recursion depth exceeded") and "test_failures.py" in line
    assert "frames)" in line


def test_long_messages_and_bad_str_are_cut_or_named() -> None:
    line = describe(ValueError("x\n" * 100_000))
    assert "\n" not in line and len(line) <= MAX_LINE_CHARS and line.startswith("ValueError: x x")

    class Odd(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert describe(Odd()) == "Odd: <unprintable>"
