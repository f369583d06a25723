"""Shrinking a failing input to a minimal one, for the fuzzers (``tests/engine/exactness/fuzz.py``,
``tests/engine/families/fuzz.py``)."""

from __future__ import annotations

from collections.abc import Callable


def shrink(text: str, failing: Callable[[str], bool], *, budget: int | None = None) -> str:
    """A short string on which ``failing`` still holds: delta debugging over characters (ddmin), then single
    character removals until none helps. ``failing(text)`` must be true. With ``budget``, at most that many calls
    of ``failing`` (the string reached by then is returned; it still fails)."""
    calls = 0

    def still_fails(candidate: str) -> bool:
        nonlocal calls
        if budget is not None and calls >= budget:
            return False
        calls += 1
        return failing(candidate)

    chars = list(text)
    n = 2
    while len(chars) >= 2:
        size = max(1, len(chars) // n)
        chunks = [chars[i : i + size] for i in range(0, len(chars), size)]
        for i in range(len(chunks)):
            rest = [c for j, ch in enumerate(chunks) if j != i for c in ch]
            if rest and still_fails("".join(rest)):
                chars, n = rest, max(n - 1, 2)
                break
        else:
            if n >= len(chars):
                break
            n = min(len(chars), n * 2)
    i = 0
    while i < len(chars) and len(chars) > 1:
        trial = chars[:i] + chars[i + 1 :]
        if still_fails("".join(trial)):
            chars = trial
        else:
            i += 1
    return "".join(chars)
