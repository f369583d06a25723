"""The ``pattern`` of Hugging Face's Split, Replace and their decoders: ``{"String": s}`` or ``{"Regex": r}``.

Hugging Face compiles regexes with Oniguruma; they run here on the ``regex`` module (the bundled files' patterns
are covered by the differential tests), checked and bounded in time as every artifact's pattern is
(:mod:`app.engine.artifact_regex`). A string pattern matches literally; an empty string pattern matches nothing.
"""

from __future__ import annotations

from typing import Any

import regex

from ..artifact_regex import BoundedRegex, PatternRejected


class PatternError(ValueError):
    """A pattern that is neither ``String`` nor ``Regex``, or a regex that does not compile."""


class HFPattern:
    """A compiled pattern: non-overlapping leftmost matches, as ``find_iter``."""

    def __init__(self, *, string: str | None = None, regex_source: str | None = None) -> None:
        if (string is None) == (regex_source is None):
            raise PatternError("a pattern is exactly one of String or Regex")
        self.string = string
        self.regex_source = regex_source
        if regex_source is not None:
            try:
                self._regex: Any = BoundedRegex(regex_source)
            except PatternRejected as exc:
                raise PatternError(str(exc)) from None
        else:
            self._regex = regex.compile(regex.escape(string)) if string else None

    @classmethod
    def from_hf(cls, config: Any) -> HFPattern:
        if isinstance(config, dict) and len(config) == 1:
            if isinstance(config.get("String"), str):
                return cls(string=config["String"])
            if isinstance(config.get("Regex"), str):
                return cls(regex_source=config["Regex"])
        raise PatternError(f"unsupported pattern {config!r:.80}")

    def matches(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` of every match, in order (empty matches included for a regex)."""
        if self._regex is None or not text:
            return []
        return [m.span() for m in self._regex.finditer(text)]

    def replace(self, text: str, content: str) -> str:
        """``text`` with every match replaced by ``content``."""
        if self._regex is None:
            return text
        if self.string is not None:
            return text.replace(self.string, content)
        return str(self._regex.sub(lambda _m: content, text))
