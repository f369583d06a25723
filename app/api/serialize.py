"""Response bodies as compact UTF-8 JSON, in bounded steps.

:func:`dumps` is ``orjson.dumps`` (several times faster than ``json.dumps``; non-ASCII unescaped) for ordinary
responses. One orjson call holds the GIL for all of its work, though, and a worker's event loop and uvicorn's
health-check thread need the GIL too: serializing a 40 MB ``/encode`` response in one call would stall the worker
for most of a second. So lists longer than :data:`CHUNK` items (ids, tokens, offsets) are serialized a slice at a
time, and the interpreter can hand the GIL to other threads between slices: no step takes more than a few
milliseconds. The bytes are identical either way. Freeing such a response's objects is one long C call too, so
:func:`release` empties its long lists a slice at a time once the bytes exist.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

#: Items of a list serialized per orjson call (a few milliseconds of work at most).
CHUNK = 65536


def dumps(obj: Any) -> bytes:
    """The JSON bytes of ``obj`` (dicts with string keys, lists, tuples, str, int, float, bool, None, and
    ``orjson.Fragment`` for JSON already serialized)."""
    try:
        if not _has_long_list(obj):
            return orjson.dumps(obj)
        out: list[bytes] = []
        _emit(obj, out)
        return b"".join(out)
    except TypeError:  # a lone surrogate or a >64-bit integer: never in engine output; stay safe rather than 500
        return json.dumps(obj, separators=(",", ":"), default=_fragment).encode("ascii")


def _fragment(value: Any) -> Any:
    """The value of an ``orjson.Fragment`` (pre-serialized JSON, such as a memoised ``model`` block) for the
    ``json`` fallback of :func:`dumps`."""
    if isinstance(value, orjson.Fragment):
        return json.loads(orjson.dumps(value))
    raise TypeError(f"cannot serialize {type(value).__name__}")


_CONTAINERS = (dict, list, tuple)


def _has_long_list(obj: Any) -> bool:
    """A list longer than :data:`CHUNK` anywhere in ``obj`` (the elements of such a list are not looked into).
    Plain loops, and no call for a scalar: this runs on every response, and small bodies are most of them."""
    if isinstance(obj, dict):
        values: Any = obj.values()
    elif isinstance(obj, list | tuple):
        if len(obj) > CHUNK:
            return True
        values = obj
    else:
        return False
    for v in values:
        if isinstance(v, _CONTAINERS) and _has_long_list(v):
            return True
    return False


def _emit(obj: Any, out: list[bytes]) -> None:
    """Append the JSON of ``obj`` to ``out``: long lists a slice per call (their items are small: ids, offset
    pairs, token objects), containers that hold long lists item by item, everything else in one call."""
    if isinstance(obj, list | tuple) and len(obj) > CHUNK:
        out.append(b"[")
        for start in range(0, len(obj), CHUNK):
            out.append(orjson.dumps(obj[start:start + CHUNK])[1:-1] if not start
                       else b"," + orjson.dumps(obj[start:start + CHUNK])[1:-1])
        out.append(b"]")
    elif not _has_long_list(obj):
        out.append(orjson.dumps(obj))
    elif isinstance(obj, dict):
        out.append(b"{")
        for i, (key, value) in enumerate(obj.items()):
            out.append((b"," if i else b"") + orjson.dumps(key) + b":")
            _emit(value, out)
        out.append(b"}")
    else:
        out.append(b"[")
        for i, value in enumerate(obj):
            if i:
                out.append(b",")
            _emit(value, out)
        out.append(b"]")


def release(obj: Any) -> None:
    """Empty the long lists inside ``obj`` a slice at a time (freeing a million objects at once holds the GIL for
    a long moment; in slices, other threads run in between). ``obj`` is unusable afterwards."""
    if isinstance(obj, dict):
        for value in obj.values():
            release(value)
    elif isinstance(obj, list):
        if len(obj) > CHUNK:
            while obj:
                del obj[-CHUNK:]
        else:
            for value in obj:
                if isinstance(value, dict | list):
                    release(value)
