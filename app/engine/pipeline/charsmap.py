"""SentencePiece's precompiled character map (``precompiled_charsmap``) and the two ways to apply it.

The blob is ``uint32 trie_size`` (little-endian), then a double-array trie of ``trie_size`` bytes (darts-clone
units, 32 bits each) whose keys are UTF-8 strings and whose values are offsets into the rest of the blob: a pool of
NUL-terminated replacement strings (``nmt_nfkc``: NFKC plus a few SentencePiece rules).

:class:`CharsMap` decodes the trie once into a dict ``key -> replacement`` (keys are whole characters or character
sequences) and offers both semantics that real tokenizers use:

* :meth:`CharsMap.normalize_sentencepiece` — SentencePiece's own (``normalizer.cc``): at each position the
  *longest* key that prefixes the rest of the input is replaced, else one character is copied;
* :meth:`CharsMap.normalize_hf` — Hugging Face's ``Precompiled`` normalizer: text is cut into extended grapheme
  clusters; a cluster of fewer than 6 UTF-8 bytes whose start matches a key is replaced *whole* by the replacement
  of the *shortest* matching key; otherwise each character is looked up on its own. The two differ on some input
  (a combining mark after a mapped character, for one).

Both return ``(text, spans)`` chunks so callers can keep offsets: see :class:`Precompiled`.
"""

from __future__ import annotations

import functools
import hashlib
import struct
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import regex

from .base import Piece, Span
from .derived import Derive, compiled, derive, pack_strings, unpack_strings

_GRAPHEME = regex.compile(r"\X", regex.DOTALL)


class CharsMapError(ValueError):
    """A ``precompiled_charsmap`` blob that is not a well-formed trie plus string pool."""


def _decode_trie(blob: bytes) -> dict[bytes, int]:
    """Every ``key -> value`` of the darts-clone double array at the start of ``blob`` (after its size)."""
    if len(blob) < 4:
        raise CharsMapError("charsmap shorter than its 4-byte header")
    (trie_size,) = struct.unpack_from("<I", blob, 0)
    if trie_size % 4 or 4 + trie_size > len(blob):
        raise CharsMapError(f"charsmap trie size {trie_size} does not fit the {len(blob)}-byte blob")
    units = struct.unpack_from(f"<{trie_size // 4}I", blob, 4)
    n = len(units)

    def offset(unit: int) -> int:
        return (unit >> 10) << ((unit & (1 << 9)) >> 6)

    # A unit with label c (low byte, leaf flag clear) at position p is the child labelled c of the one node whose
    # base is p ^ c (bases are unique in a double array), so one pass groups every node's children.
    children: dict[int, list[tuple[int, int]]] = {}
    for p, unit in enumerate(units):
        c = unit & 0x800000FF
        if 0 < c < 256:
            children.setdefault(p ^ c, []).append((c, p))
    out: dict[bytes, int] = {}
    # The array is built from a DAWG, so one position may be reached by several keys; keys are short, so a
    # depth bound also guards against a malformed, cyclic blob.
    stack: list[tuple[int, bytes]] = [(0, b"")]
    while stack:
        pos, key = stack.pop()
        if len(key) > 256:
            raise CharsMapError("charsmap trie has a key over 256 bytes (malformed or cyclic)")
        base = pos ^ offset(units[pos])
        if key and (units[pos] >> 8) & 1:  # has a leaf: the value sits at the base position
            if base >= n:
                raise CharsMapError("charsmap trie leaf outside the array")
            out[key] = units[base] & 0x7FFFFFFF
        for c, child in children.get(base, ()):
            stack.append((child, key + bytes([c])))
    return out


@functools.lru_cache(maxsize=2)
def _decode_table(blob: bytes) -> Mapping[str, str]:
    """``key -> replacement`` of a whole blob (empty for an empty blob), read-only. Raises :class:`CharsMapError`.

    Memoized on the blob's bytes: models that share a charsmap (XLM-R's ``nmt_nfkc`` in several artifacts, for
    one) decode it once; decoding takes about a second for 224,711 keys."""
    raw = _decode_trie(blob) if blob else {}
    trie_size = struct.unpack_from("<I", blob, 0)[0] if blob else 0
    pool = blob[4 + trie_size:]
    table: dict[str, str] = {}
    for key, value in raw.items():
        end = pool.find(b"\0", value)
        if value >= len(pool) or end < 0:
            raise CharsMapError(f"charsmap value {value} outside the string pool")
        try:
            table[key.decode("utf-8")] = pool[value:end].decode("utf-8")
        except UnicodeDecodeError:
            raise CharsMapError(f"charsmap key or value is not UTF-8: {key!r}") from None
    return MappingProxyType(table)


class CharsMap:
    """A decoded ``precompiled_charsmap``: replacement strings by key, with both matching semantics.

    Built from a blob (decoded at once, so a malformed blob fails here) or by :func:`load_charsmap` from the
    artifact cache (the table then decoded from the cached strings on first use; the compiled normalizers only
    need :attr:`blob`). :attr:`derived`: the artifact's cache of derivations (the metaspace risk tables use it),
    or None."""

    def __init__(self, blob: bytes, *, derived: Derive | None = None) -> None:
        """Decode ``blob``; raises :class:`CharsMapError` if it is malformed."""
        #: the blob itself (the compiled normalizer walks its trie in place)
        self.blob = bytes(blob)
        self.derived = derived
        self._packed: tuple[bytes, bytes] | None = None
        self._size = len(self.table)  # decoded now: a malformed blob fails here

    @classmethod
    def from_strings(cls, blob: bytes, keys: bytes, values: bytes, size: int,
                     derived: Derive | None = None) -> CharsMap:
        """The map of ``blob`` whose table is the ``size`` keys and replacements packed (:func:`pack_strings`) in
        ``keys`` and ``values``, unpacked on first use of :attr:`table`."""
        self = cls.__new__(cls)
        self.blob = bytes(blob)
        self.derived = derived
        self._size = size
        self._packed = (bytes(keys), bytes(values))
        return self

    @functools.cached_property
    def table(self) -> Mapping[str, str]:
        """``key -> replacement`` (a map :meth:`from_strings` made unpacks its strings on first use)."""
        if self._packed is None:
            return _decode_table(self.blob)
        keys, values = self._packed
        table = dict(zip(unpack_strings(keys, self._size), unpack_strings(values, self._size), strict=True))
        if len(table) != self._size:
            raise CharsMapError("cached charsmap table has repeated keys")
        self._packed = None  # the table is kept from now on (cached_property), its packed form no longer needed
        return table

    @functools.cached_property
    def _lengths(self) -> dict[str, list[int]]:
        """first character -> lengths (in characters) of the keys starting with it, longest first"""
        lengths: dict[str, set[int]] = {}
        for text_key in self.table:
            lengths.setdefault(text_key[0], set()).add(len(text_key))
        return {c: sorted(v, reverse=True) for c, v in lengths.items()}

    @functools.cached_property
    def _single(self) -> dict[int, str]:
        """the keys of one character, as a ``str.translate`` table"""
        return {ord(k): v for k, v in self.table.items() if len(k) == 1}

    def __len__(self) -> int:
        return self._size

    def longest_at(self, text: str, i: int) -> tuple[int, str] | None:
        """The longest key at ``text[i:]`` as ``(length, replacement)``, or None."""
        lengths = self._lengths.get(text[i])
        if lengths is None:
            return None
        table = self.table
        for n in lengths:
            rep = table.get(text[i:i + n])
            if rep is not None:
                return n, rep
        return None

    def shortest_at(self, text: str) -> str | None:
        """The replacement of the shortest key that prefixes ``text``, or None (Hugging Face's lookup)."""
        lengths = self._lengths.get(text[0]) if text else None
        if lengths is None:
            return None
        table = self.table
        for n in reversed(lengths):
            if n > len(text):
                break
            rep = table.get(text[:n])
            if rep is not None:
                return rep
        return None

    def chunks_hf(self, text: str) -> list[tuple[str, int, int]]:
        """Hugging Face's ``Precompiled`` semantics as ``(output, start, end)`` chunks over ``text`` (characters)."""
        out: list[tuple[str, int, int]] = []
        lengths = self._lengths
        pos = 0
        for grapheme in _GRAPHEME.findall(text):
            g = len(grapheme)
            if grapheme[0] in lengths and len(grapheme.encode("utf-8")) < 6:
                rep = self.shortest_at(grapheme)
                if rep is not None:
                    out.append((rep, pos, pos + g))
                    pos += g
                    continue
            for k, ch in enumerate(grapheme):
                rep = self.table.get(ch) if ch in lengths else None
                out.append((ch if rep is None else rep, pos + k, pos + k + 1))
            pos += g
        return out

    def normalize_hf_str(self, text: str) -> str:
        """The text of :meth:`chunks_hf` without the spans: a cluster replaced whole, or its characters looked up
        on their own in one ``str.translate`` (linear in the cluster, however long)."""
        lengths, single = self._lengths, self._single
        out: list[str] = []
        for grapheme in _GRAPHEME.findall(text):
            if grapheme[0] in lengths and len(grapheme.encode("utf-8")) < 6:
                rep = self.shortest_at(grapheme)
                if rep is not None:
                    out.append(rep)
                    continue
            out.append(grapheme.translate(single))
        return "".join(out)


def blob_digest(blob: bytes) -> str:
    """The sha256 of a charsmap blob (cached derivations of it record it, and are refused for another blob)."""
    return hashlib.sha256(blob).hexdigest()


def load_charsmap(blob: bytes, derived: Derive | None = None) -> CharsMap:
    """The :class:`CharsMap` of ``blob``, its decoded table taken from the artifact cache (part ``"charsmap"``)
    when ``derived`` is given: keys and replacements as two packed string sections, the blob's sha256, the key
    count. Raises :class:`CharsMapError` for a malformed blob (when it is decoded: on a cache miss)."""
    if derived is None or not blob:
        return CharsMap(blob, derived=derived)
    digest = blob_digest(blob)

    def dump(charsmap: CharsMap) -> Any:
        keys, values = pack_strings(list(charsmap.table)), pack_strings(list(charsmap.table.values()))
        if keys is None or values is None:  # a trie key or pool string never holds a NUL byte
            raise CharsMapError("charsmap key or value holds a NUL character")
        return compiled({"blob_sha256": digest, "size": len(charsmap)}, {"keys": keys, "values": values})

    def restore(data: Any) -> CharsMap:
        size = int(data.meta["size"])
        keys, values = data.sections["keys"], data.sections["values"]
        if data.meta["blob_sha256"] != digest:
            raise ValueError("cached charsmap is of another blob")
        if size < 1 or bytes(keys).count(0) != size - 1 or bytes(values).count(0) != size - 1:
            raise ValueError("cached charsmap sections do not hold its key count")
        return CharsMap.from_strings(blob, keys, values, size, derived)

    return derive(derived, "charsmap", lambda: CharsMap(blob, derived=derived), dump, restore)


def chunks_to_piece(piece: Piece, chunks: list[tuple[str, int, int]]) -> Piece:
    """A piece from ``(output, start, end)`` chunks over ``piece.text``: every output character takes the original
    span of the whole input range it came from (an empty output drops the range)."""
    text = "".join(c[0] for c in chunks)
    if piece.spans is None:
        return piece.with_text(text, None)
    spans: list[Span] = []
    src = piece.spans
    for out, start, end in chunks:
        if not out:
            continue
        span = piece.span(start, end) if end > start else piece.span(start, start)
        if len(out) == 1 and end - start == 1:
            spans.append(src[start])
        else:
            spans.extend([span] * len(out))
    return piece.with_text(text, spans)


class Precompiled:
    """Hugging Face's ``Precompiled`` normalizer (per grapheme; see the module docstring)."""

    def __init__(self, charsmap: CharsMap) -> None:
        self.charsmap = charsmap

    @classmethod
    def from_hf(cls, config: Mapping[str, Any], *, derived: Derive | None = None) -> Precompiled:
        """From ``{"type": "Precompiled", "precompiled_charsmap": base64}``; an empty map is the identity.
        ``derived``: the artifact's cache of derivations (:func:`load_charsmap`), or None."""
        import base64

        blob = base64.b64decode(config.get("precompiled_charsmap") or "")
        return cls(load_charsmap(blob, derived))

    def normalize(self, piece: Piece) -> Piece:
        if not piece.text or not len(self.charsmap):
            return piece
        return chunks_to_piece(piece, self.charsmap.chunks_hf(piece.text))

    def normalize_str(self, text: str) -> str:
        if not text or not len(self.charsmap):
            return text
        return self.charsmap.normalize_hf_str(text)
