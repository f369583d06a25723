"""The key-value header of a GGUF file (llama.cpp's model format), read from bytes.

Layout (little-endian): ``b"GGUF"``, ``uint32`` version (2 or 3), ``uint64`` tensor count, ``uint64`` key-value count,
then each pair as ``string key, uint32 type, value``; a string is ``uint64 length + UTF-8 bytes``, an array is
``uint32 element type, uint64 count, elements``. Type codes are the ``gguf`` package's :class:`GGUFValueType`.

Only the header is read (tensors, if any, follow it and are never touched). The ``gguf`` package's own
``GGUFReader`` reads the same header but builds one numpy object per array element — tens of seconds for a
250,000-piece vocabulary — so this reader decodes string arrays and numeric arrays with ``struct`` (one call per
numeric array); the tests check it against ``GGUFReader`` on every bundled file. The ``gguf`` package (and the
numpy it imports, about a second together) is imported on the first parse only: a load whose header comes from the
compiled artifact cache never imports it.
"""

from __future__ import annotations

import json
import struct
from array import array
from functools import cache
from typing import Any

from ..artifact_cache import Compiled
from .derived import array_bytes, compiled, pack_strings, read_array, unpack_strings

MAGIC = b"GGUF"


class _Codes:
    """The GGUF value-type codes this reader needs (from the ``gguf`` package's ``GGUFValueType``)."""

    def __init__(self) -> None:
        from gguf import GGUFValueType as T

        self.string, self.array, self.uint8 = int(T.STRING), int(T.ARRAY), int(T.UINT8)
        #: code -> (struct format character, size in bytes) of every scalar type
        self.scalars: dict[int, tuple[str, int]] = {
            int(T.UINT8): ("B", 1), int(T.INT8): ("b", 1), int(T.UINT16): ("H", 2), int(T.INT16): ("h", 2),
            int(T.UINT32): ("I", 4), int(T.INT32): ("i", 4), int(T.FLOAT32): ("f", 4), int(T.BOOL): ("?", 1),
            int(T.UINT64): ("Q", 8), int(T.INT64): ("q", 8), int(T.FLOAT64): ("d", 8),
        }


@cache
def _codes() -> _Codes:
    return _Codes()


#: Deepest nesting of arrays accepted (tokenizer metadata uses flat arrays; 5,000 nested ones overflowed the stack).
MAX_ARRAY_DEPTH = 8


class GGUFFormatError(ValueError):
    """Bytes that are not a well-formed GGUF header."""


def read_kv(data: bytes) -> dict[str, Any]:
    """Every key-value pair of the GGUF header in ``data``: scalars as Python values, strings as ``str``, string
    arrays as ``list[str]``, numeric arrays as ``list`` (``uint8`` arrays as ``bytes``). Raises
    :class:`GGUFFormatError`."""
    if data[:4] != MAGIC:
        raise GGUFFormatError("not a GGUF file (bad magic)")
    try:
        version, _tensors, count = struct.unpack_from("<IQQ", data, 4)
        if version not in (2, 3):
            raise GGUFFormatError(f"GGUF version {version} is not supported (2 and 3 are)")
        pos = 24
        out: dict[str, Any] = {}
        view = memoryview(data)

        def string(at: int) -> tuple[str, int]:
            (n,) = struct.unpack_from("<Q", data, at)
            end = at + 8 + n
            if end > len(data):
                raise GGUFFormatError("string runs past the end of the file")
            return str(view[at + 8:end], "utf-8"), end

        codes = _codes()
        scalars = codes.scalars

        def value(kind: int, at: int, depth: int = 0) -> tuple[Any, int]:
            if kind == codes.string:
                return string(at)
            if kind in scalars:
                fmt, size = scalars[kind]
                return struct.unpack_from("<" + fmt, data, at)[0], at + size
            if kind == codes.array:
                elem, n = struct.unpack_from("<IQ", data, at)
                at += 12
                if depth >= MAX_ARRAY_DEPTH:
                    raise GGUFFormatError(f"arrays nested deeper than {MAX_ARRAY_DEPTH}")
                # every element takes at least one byte (strings and arrays 8 and 12): a count the rest of the
                # file cannot hold is refused before anything is allocated
                if n > len(data) - at:
                    raise GGUFFormatError(f"array of {n} elements runs past the end of the file")
                if elem == codes.string:
                    items = []
                    for _ in range(n):
                        s, at = string(at)
                        items.append(s)
                    return items, at
                if elem in scalars:
                    fmt, width = scalars[elem]
                    size = width * n
                    if at + size > len(data):
                        raise GGUFFormatError("array runs past the end of the file")
                    if elem == codes.uint8:
                        return bytes(view[at:at + size]), at + size
                    return list(struct.unpack_from(f"<{n}{fmt}", data, at)), at + size
                items = []
                for _ in range(n):
                    v, at = value(elem, at, depth + 1)
                    items.append(v)
                return items, at
            raise GGUFFormatError(f"unknown GGUF value type {kind}")

        for _ in range(count):
            key, pos = string(pos)
            (kind,) = struct.unpack_from("<I", data, pos)
            out[key], pos = value(kind, pos + 4)
        return out
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, GGUFFormatError):
            raise
        raise GGUFFormatError(f"malformed GGUF header: {exc}") from None


def dump_kv(kv: dict[str, Any]) -> Compiled:
    """``kv`` (:func:`read_kv`'s result) as an artifact-cache entry (part ``"gguf-kv"``): string arrays as packed
    string sections, integer and float arrays as little-endian ``int64``/``float64`` sections (every GGUF number
    fits one exactly), ``uint8`` arrays as raw sections, everything else as ASCII JSON (key order kept)."""
    rest: dict[str, Any] = {}
    where: dict[str, list[Any]] = {}
    sections: dict[str, bytes] = {}
    for key, value in kv.items():
        name = f"s{len(sections)}"
        stored: tuple[str, bytes, int] | None = None
        if type(value) is bytes:
            stored = ("bytes", value, len(value))
        elif type(value) is list and value:
            if all(type(v) is str for v in value):
                packed = pack_strings(value)
                stored = None if packed is None else ("str", packed, len(value))
            elif all(type(v) is int and -(1 << 63) <= v < 1 << 63 for v in value):
                stored = ("int", array_bytes(array("q", value)), len(value))
            elif all(type(v) is float for v in value):
                stored = ("float", array_bytes(array("d", value)), len(value))
        if stored is None:
            rest[key] = value
        else:
            rest[key] = None
            where[key] = [stored[0], stored[2], name]
            sections[name] = stored[1]
    sections["kv"] = json.dumps(rest, ensure_ascii=True, allow_nan=True).encode("ascii")
    return compiled({"sections": where}, sections)


def restore_kv(data: Compiled) -> dict[str, Any]:
    """The key-value pairs :func:`dump_kv` stored. Raises ``ValueError``/``KeyError``/``TypeError`` for an
    inconsistent entry."""
    kv = json.loads(bytes(data.sections["kv"]))
    if type(kv) is not dict:
        raise TypeError("cached GGUF header is not an object")
    for key, (kind, count, name) in data.meta["sections"].items():
        if key not in kv or kv[key] is not None:
            raise ValueError(f"cached GGUF key {key!r} is misplaced")
        section = data.sections[name]
        if kind == "bytes":
            if len(section) != count:
                raise ValueError(f"cached GGUF bytes of {key!r} have the wrong size")
            kv[key] = bytes(section)
        elif kind == "str":
            kv[key] = unpack_strings(section, count)
        elif kind in ("int", "float"):
            kv[key] = read_array(section, "q" if kind == "int" else "d", count).tolist()
        else:
            raise ValueError(f"cached GGUF value of unknown kind {kind!r}")
    return kv
