"""tiktoken's ``allowed_special`` / ``disallowed_special`` rules, shared by :mod:`app.compat.tiktoken` (in
process) and :class:`app.client.RemoteEncoding` (over HTTP, where the allowed tokens travel as named parts).

The rules (tiktoken 0.14's ``Encoding.encode``): ``allowed_special="all"`` means every special token;
``disallowed_special="all"`` (the default) means every special token not allowed; if the text contains the
string of a disallowed token (any string listed there, special or not), ``ValueError``; the strings of allowed
special tokens in the text become those tokens, leftmost first.

This module depends on nothing but ``regex``.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Set
from typing import Any, Literal, NoReturn

import regex

Allowed = Literal["all"] | Set[str]
Disallowed = Literal["all"] | Collection[str]


@functools.lru_cache(maxsize=128)
def alternation(tokens: frozenset[str]) -> regex.Pattern[str]:
    """A pattern matching any of ``tokens`` literally; where one token is a prefix of another, the longer wins.

    The alternatives form a trie (one branch per next character, "stop here" tried last), so a search costs
    about one branch per character instead of one try per token: o200k_harmony has over a thousand."""
    trie: dict[str, Any] = {}
    for token in tokens:
        node = trie
        for char in token:
            node = node.setdefault(char, {})
        node[""] = None  # a token ends here

    def emit(node: dict[str, Any]) -> str:
        branches = [regex.escape(char) + emit(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        if len(branches) == 1 and "" not in node:
            return branches[0]
        return "(?:" + "|".join(branches) + ("|" if "" in node else "") + ")"

    return regex.compile(emit(trie))


def raise_disallowed_special_token(token: str) -> NoReturn:
    """Raise tiktoken's ``ValueError`` for a disallowed special token found in text."""
    raise ValueError(
        f"Encountered text corresponding to disallowed special token {token!r}.\n"
        "If you want this text to be encoded as a special token, "
        f"pass it to `allowed_special`, e.g. `allowed_special={{{token!r}, ...}}`.\n"
        "If you want this text to be encoded as normal text, disable the check for this token "
        f"by passing `disallowed_special=(enc.special_tokens_set - {{{token!r}}})`.\n"
        "To disable this check for all special tokens, pass `disallowed_special=()`.\n"
    )


def check_special_set(allowed: Any) -> None:
    """tiktoken hands ``allowed_special`` to its extension as a set of strings: anything else is a TypeError."""
    if not isinstance(allowed, set | frozenset):
        raise TypeError(f"'{type(allowed).__name__}' object is not an instance of 'set'")


def resolve(text: str, allowed_special: Allowed, disallowed_special: Disallowed, specials: set[str],
            all_specials: frozenset[str]) -> Set[str]:
    """Apply the rules to ``text`` for an encoding whose special tokens are ``specials`` (``all_specials`` is
    the same as a frozenset): expand ``"all"``, raise ``ValueError`` for a disallowed token's string in the text,
    and return the allowed set."""
    if allowed_special == "all":
        allowed_special = specials
    if disallowed_special == "all":
        if isinstance(allowed_special, set | frozenset) and not allowed_special:
            disallowed_special = all_specials  # the default: skip rebuilding the same set
        else:
            disallowed_special = specials - allowed_special  # type: ignore[operator]
    if disallowed_special:
        if not isinstance(disallowed_special, frozenset):
            disallowed_special = frozenset(disallowed_special)
        if match := alternation(disallowed_special).search(text):
            raise_disallowed_special_token(match.group())
    check_special_set(allowed_special)
    return allowed_special  # type: ignore[return-value]


def split(text: str, names: frozenset[str]) -> list[tuple[str, str]]:
    """``text`` cut at every occurrence of one of ``names`` (leftmost first): ``("text", s)`` and
    ``("special", name)`` items, in order, always ending with a (possibly empty) text item."""
    if not names:
        return [("text", text)]
    out: list[tuple[str, str]] = []
    start = 0
    for match in alternation(names).finditer(text):
        out += [("text", text[start : match.start()]), ("special", match.group())]
        start = match.end()
    out.append(("text", text[start:]))
    return out
