"""Regexes that come from artifacts: checked at import and load, bounded in time when they run.

The ``pattern`` of a ``tokenizer.json``'s ``Split``/``Replace``, a tekken file's ``config.pattern`` and a
manifest's ``pattern_regex`` are code written by whoever made the file. Policy (see ``docs/limits-artifacts.md``):

* **At import and load** (:func:`check_source`, run by :class:`BoundedRegex` before compiling): at most
  :data:`MAX_PATTERN_CHARS` characters, and counted repeats (``{m,n}``) whose product along any nesting is at most
  :data:`MAX_REPEAT_PRODUCT` (the ``regex`` module unrolls them when compiling: ``(?:a{3000}){3000}`` costs
  2.4 GB); then it must compile.
* **When it runs**: a matcher with a time bound, not a refusal of constructs. A static test for exponential
  backtracking is either unsound (misses ambiguous nests that are not syntactically obvious: ``(a|a)+``,
  ``(\\w|\\d)+``, ``(a+)+`` behind a look-around …) or refuses real tokenizer patterns (several nest quantified
  alternations that cannot backtrack exponentially); exactness comes first, so every pattern that compiles runs,
  and an unvetted one runs with the ``regex`` module's ``timeout=`` (the whole call's wall-clock budget:
  :data:`BASE_SECONDS` plus :data:`SECONDS_PER_CHAR` per character of the text, an order of magnitude above what
  a linear pattern needs) and ``concurrent=True`` (the GIL is released while it matches, so the event loop and
  other threads keep running). Past the budget the call raises :class:`PatternTimeoutError` (a 422 over HTTP,
  one line in the CLI).
* **Vetted patterns** (:data:`VETTED`: the named patterns of :mod:`app.engine.patterns`, which the test suite
  sweeps against the references) run without the budget: ``timeout=`` doubles the ``regex`` module's matching
  time.
* **Never on the event loop**: inside :func:`on_event_loop` (the HTTP dispatcher's inline path for small
  bodies), running an unvetted pattern raises :class:`OffloadRequired` before matching; the dispatcher then runs
  the request on its thread pool.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import regex

from .errors import EngineError
from .patterns import DEEPSEEK_V3_SPLITS, PATTERNS

#: Longest pattern source accepted, in characters (the longest bundled one has under 600).
MAX_PATTERN_CHARS = 16_384
#: Largest product of counted-repeat bounds along any nesting of a pattern (``(?:a{100}){100}``: 10,000, 3 MB).
MAX_REPEAT_PRODUCT = 10_000
#: Time budget of one call on an unvetted pattern: this many seconds …
BASE_SECONDS = 0.25
#: … plus this many per character of the text (linear patterns need well under 0.2 µs per character).
SECONDS_PER_CHAR = 2e-6

#: The GPT-2 pattern of Hugging Face's ByteLevel pre-tokenizer (``use_regex``), as its source writes it.
HF_BYTE_LEVEL = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
#: Pattern sources that run without a time budget (swept against the references by the test suite).
VETTED: frozenset[str] = frozenset([*PATTERNS.values(), *DEEPSEEK_V3_SPLITS, HF_BYTE_LEVEL])

_INLINE: ContextVar[bool] = ContextVar("artifact_regex_inline", default=False)
_COUNTED = re.compile(r"\{(\d*)(?:,(\d*))?\}")


class PatternRejected(ValueError):
    """A pattern refused at import or load (too long, repeats too large, or does not compile); the loaders turn it
    into an :class:`~app.engine.errors.ArtifactError` naming the file."""


class PatternTimeoutError(EngineError):
    """An artifact's regex exceeded its time budget on this text (the artifact backtracks on it)."""

    def __init__(self, chars: int, budget: float) -> None:
        super().__init__(f"the tokenizer's pattern exceeded its time bound ({budget:.2f} s for {chars} characters): "
                         "its regex backtracks on this input; the tokenizer file should be fixed")


class OffloadRequired(BaseException):  # noqa: N818 -- a signal to the dispatcher, not an error
    """Raised on the event loop before an unvetted pattern runs. A ``BaseException`` so that no ``except
    Exception`` between the dispatcher and the pattern swallows it."""


@contextmanager
def on_event_loop() -> Iterator[None]:
    """Mark work running on the event loop: an unvetted pattern raises :class:`OffloadRequired` inside."""
    token = _INLINE.set(True)
    try:
        yield
    finally:
        _INLINE.reset(token)


def running_inline() -> bool:
    """True inside :func:`on_event_loop` (in this thread's context: threads it starts do not inherit it)."""
    return _INLINE.get()


def repeat_product(source: str) -> int:
    """The largest product of counted-repeat bounds (``{m}``, ``{m,n}``: the larger number; ``{m,}``: m) along any
    nesting of groups in ``source`` (1 when there is none). Escapes and character classes are skipped; a ``{``
    that is not a quantifier is a literal, as in ``regex``. A ``[`` inside a class nests only in the V1 syntax
    (which a pattern may switch on inline), so both readings are measured and the larger product counts."""
    return max(_product(source, nested=False), _product(source, nested=True))


def _product(source: str, *, nested: bool) -> int:
    stack: list[int] = [1]
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c in "\\[":
            if c == "[":
                i = _class_end(source, i, nested)
            else:
                i += 2
                if source[i - 1:i] in ("p", "P", "N", "x", "u", "U", "g", "k") and source[i:i + 1] == "{":
                    close = source.find("}", i)  # \p{..} \x{..} \N{..}: one atom
                    i = n if close < 0 else close + 1
            count, i = _counted(source, i)
            stack[-1] = max(stack[-1], count)
            continue
        if c == "(":
            stack.append(1)
            i += 1
            continue
        if c == ")" and len(stack) > 1:
            inner = stack.pop()
            i += 1
            count, i = _counted(source, i)
            stack[-1] = max(stack[-1], inner * count)
            continue
        i += 1
        count, i = _counted(source, i)
        stack[-1] = max(stack[-1], count)
    while len(stack) > 1:
        inner = stack.pop()
        stack[-1] = max(stack[-1], inner)
    return stack[0]


def _counted(source: str, i: int) -> tuple[int, int]:
    """``(bound, next index)`` of a counted repeat at ``i`` (bound 1 and ``i`` when there is none)."""
    m = _COUNTED.match(source, i)
    if m is None or (not m.group(1) and not m.group(2)):
        return 1, i
    numbers = [int(g) for g in m.groups() if g]
    return max(1, *numbers), m.end()


def _class_end(source: str, i: int, nested: bool) -> int:
    """Index after the character class opening at ``i`` (``nested``: a ``[`` inside opens a class, as in V1)."""
    depth, j, n = 0, i, len(source)
    while j < n:
        c = source[j]
        if c == "\\":
            j += 2
            continue
        if c == "[" and (nested or depth == 0):
            depth += 1
            j += 1
            if j < n and source[j] == "^":
                j += 1
            if j < n and source[j] == "]":  # a leading ']' is a literal
                j += 1
            continue
        if c == "]":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return n


def check_source(source: str) -> None:
    """Raise :class:`PatternRejected` if ``source`` is longer than :data:`MAX_PATTERN_CHARS` or its counted
    repeats multiply past :data:`MAX_REPEAT_PRODUCT` (both checked before compiling)."""
    if len(source) > MAX_PATTERN_CHARS:
        raise PatternRejected(f"regex of {len(source)} characters is longer than the limit of {MAX_PATTERN_CHARS}")
    product = repeat_product(source)
    if product > MAX_REPEAT_PRODUCT:
        raise PatternRejected(f"regex {source[:60]!r} repeats up to {product} times (counted repeats multiplied "
                              f"through their nesting); the limit is {MAX_REPEAT_PRODUCT}")


class BoundedRegex:
    """A checked, compiled artifact pattern whose calls are bounded in time unless it is vetted.

    ``finditer``/``findall``/``sub`` behave as the ``regex`` module's; an unvetted pattern raises
    :class:`PatternTimeoutError` past :meth:`budget` and :class:`OffloadRequired` on the event loop. Raises
    :class:`PatternRejected` at construction (see :func:`check_source`). Thread-safe."""

    __slots__ = ("source", "vetted", "_compiled")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source = source
        self.vetted = source in VETTED and flags == 0
        if not self.vetted:
            check_source(source)
        try:
            self._compiled: Any = regex.compile(source, flags)
        except (regex.error, OverflowError, RecursionError, MemoryError) as exc:
            raise PatternRejected(f"regex {source[:80]!r} does not compile here: {exc}") from None

    @staticmethod
    def budget(chars: int) -> float:
        """Seconds one call on a text of ``chars`` characters may take (unvetted patterns)."""
        return BASE_SECONDS + SECONDS_PER_CHAR * chars

    def _guarded(self, text: str, call: Callable[[float], Any]) -> Any:
        if self.vetted:
            return None
        if _INLINE.get():
            raise OffloadRequired
        budget = self.budget(len(text))
        try:
            return call(budget)
        except TimeoutError:
            raise PatternTimeoutError(len(text), budget) from None

    def finditer(self, text: str) -> Iterator[Any]:
        """Every match, in order (materialized for an unvetted pattern, so the budget covers the whole scan)."""
        if self.vetted:
            return iter(self._compiled.finditer(text))
        found = self._guarded(text, lambda b: list(self._compiled.finditer(text, timeout=b, concurrent=True)))
        return iter(found)

    def findall(self, text: str) -> list[Any]:
        """``regex``'s ``findall``."""
        if self.vetted:
            return self._compiled.findall(text)  # type: ignore[no-any-return]
        return self._guarded(text, lambda b: self._compiled.findall(text, timeout=b, concurrent=True))  # type: ignore[no-any-return]

    def sub(self, repl: Callable[[Any], str] | str, text: str) -> str:
        """``regex``'s ``sub``."""
        if self.vetted:
            return str(self._compiled.sub(repl, text))
        return str(self._guarded(text, lambda b: self._compiled.sub(repl, text, timeout=b, concurrent=True)))
