"""One bounded line for an unexpected exception: what the last-resort handlers (HTTP and CLI) log or print.

A ``RecursionError`` traceback runs to a thousand frames (hundreds of kilobytes of log per request); the line here
names the exception, a prefix of its message and the innermost frames, and never exceeds :data:`MAX_LINE_CHARS`.
"""

from __future__ import annotations

import traceback

#: Longest line :func:`describe` returns.
MAX_LINE_CHARS = 600
#: Innermost frames named.
FRAMES = 3
_MESSAGE_CHARS = 200


def describe(exc: BaseException) -> str:
    """``Type: message [at file:line fn <- …] (N frames)`` on one line, at most :data:`MAX_LINE_CHARS`
    characters; never raises."""
    try:
        message = " ".join(str(exc).split())
    except Exception:  # noqa: BLE001 -- a __str__ that fails must not hide the original error
        message = "<unprintable>"
    if len(message) > _MESSAGE_CHARS:
        message = message[:_MESSAGE_CHARS] + "…"
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    where = " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in reversed(frames[-FRAMES:]))
    line = f"{type(exc).__name__}: {message}"
    if where:
        line += f" at {where} ({len(frames)} frames)"
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS - 1] + "…"
