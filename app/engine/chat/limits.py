"""Fixed limits on the caller's chat JSON, checked by :func:`~app.engine.chat.messages.parse_conversation` before
any framing work, and the short previews refusals use instead of echoing caller values.

They are not settings: each keeps a recursive step of the framings (jinja2's ``tojson``, ``jsonschema``, the
Harmony schema text, the escaping of caller text) far from Python's recursion limit, or a regex compile short.
``docs/limits.md`` lists them with the configurable ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: Most nesting of any message or tool object, counted from that object (depth 1: a tool's ``parameters`` object
#: is at depth 3); a tool call's ``arguments`` JSON text counts where it stands (its outer bracket at depth 5).
MAX_JSON_DEPTH = 64
#: Most characters of a regular expression in a tool schema (``pattern``, ``patternProperties`` keys) that a
#: framing validates as a regex (Mistral's, as mistral-common does).
MAX_PATTERN_CHARS = 1000
#: Characters of a caller value quoted in an error message at most.
PREVIEW_CHARS = 40
#: Nesting of a tool call's ``arguments`` object inside its message (message, tool_calls, call, function).
ARGUMENTS_DEPTH = 4

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET_RUN = re.compile(r"[\[{]+|[\]}]+")


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """``repr`` of at most ``limit`` characters of ``value`` (a string, else its ``repr``), with ``…`` and the
    full length when cut: what an error message may echo of caller input."""
    text = value if isinstance(value, str) else repr(value)[:limit + 1]
    if len(text) <= limit:
        return repr(text)
    size = f" ({len(text)} characters)" if isinstance(value, str) else ""
    return f"{text[:limit]!r}…{size}"


def depth_exceeds(value: Any, limit: int) -> bool:
    """True when ``value`` (parsed JSON: dicts, lists, scalars) nests containers more than ``limit`` deep, the value
    itself at depth 1. Iterative (no recursion), stops at the first container past the limit; a container's items
    are looked at one by one only when it holds containers (their types are gathered at C speed)."""
    if not isinstance(value, Mapping | list | tuple):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > limit:
            return True
        children = list(node.values()) if isinstance(node, Mapping) else node
        kinds = set(map(type, children))
        if kinds & _SCALARS == kinds:
            continue
        for child in children:
            if isinstance(child, Mapping | list | tuple):
                push((child, depth + 1))
    return False


#: Types that hold no JSON value.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def text_depth_exceeds(text: str, limit: int) -> bool:
    """True when JSON text ``text`` opens more than ``limit`` brackets (``[``, ``{``) at once, outside strings; any
    text, JSON or not, is measured the same way (a text with no more than ``limit`` opening brackets is never
    scanned)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    bare = _STRING.sub("", text)
    for run in _BRACKET_RUN.finditer(bare):
        start = run.start()
        n = run.end() - start
        if bare[start] in "[{":
            depth += n
            if depth > limit:
                return True
        else:
            depth = max(0, depth - n)
    return False
