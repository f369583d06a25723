"""Exceptions raised by the engine.

Every engine error derives from :class:`EngineError`, so callers (the web layer, the CLI) can map the whole
family to a user-facing error with one ``except`` clause. Messages are written for the person who sent the
input: they name the offending value and, where there is a closed set of valid values, list it.
"""

from __future__ import annotations

from collections.abc import Iterable


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class UnknownTokenizerError(EngineError, KeyError):
    """A tokenizer name or alias that the store does not hold."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = sorted(known)
        super().__init__(f"unknown tokenizer {name!r}; known tokenizers: {', '.join(self.known)}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class UnknownSpecialTokenError(EngineError, ValueError):
    """A special-token name that the tokenizer does not define."""

    def __init__(self, name: str, tokenizer: str, allowed: Iterable[str], *, max_listed: int = 40) -> None:
        self.name = name
        self.tokenizer = tokenizer
        self.allowed = sorted(allowed)
        listed = self.allowed[:max_listed]
        more = len(self.allowed) - len(listed)
        tail = f" (and {more} more)" if more > 0 else ""
        super().__init__(
            f"unknown special token {name!r} for tokenizer {tokenizer!r}; allowed: {', '.join(listed)}{tail}"
        )


class InvalidTokenIdError(EngineError, ValueError):
    """A token id that is not in the tokenizer's vocabulary (negative, too large, or an unused id)."""

    def __init__(self, token_id: int, tokenizer: str, n_vocab: int, *, index: int | None = None) -> None:
        self.token_id = token_id
        self.tokenizer = tokenizer
        self.index = index
        where = f" at position {index}" if index is not None else ""
        super().__init__(
            f"token id {token_id}{where} is not in the vocabulary of {tokenizer!r} (valid ids are in 0..{n_vocab - 1}"
            " and must be assigned)"
        )


class ArtifactError(EngineError):
    """An artifact that is missing, unreadable, malformed or whose sha256 does not match the manifest."""

    def __init__(self, path: str, reason: str, *, expected: str | None = None, actual: str | None = None) -> None:
        self.path = path
        self.reason = reason
        self.expected = expected
        self.actual = actual
        detail = f"{path}: {reason}"
        if expected is not None or actual is not None:
            detail += f" (expected sha256 {expected}, actual sha256 {actual})"
        super().__init__(detail)


class ManifestError(EngineError):
    """A store manifest that is missing, not valid JSON, or whose entries break the documented schema."""
