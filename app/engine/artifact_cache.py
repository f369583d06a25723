"""The compiled artifact cache: derived tables of an artifact, stored once in a binary file mapped straight into memory.

A derivation (a rank table, a piece list, a normalizer table …) is keyed by (artifact sha256, part name,
:data:`FORMAT_VERSION`) and stored as ``<dir>/<sha256>.<part>.v<FORMAT_VERSION>.tkc``. A file holds a JSON ``meta``
and named raw sections (blobs, little-endian integer arrays). On read the sections are zero-copy memoryviews into a
read-only ``mmap`` of the file, so the pages are file-backed and shared by every process that maps the same file.

File layout (all integers little-endian)::

    magic  b"TKCACHE\\0"        8 bytes
    format version             u32
    header length H            u32
    file length                u64 (the whole file, fixed part included)
    checksum                   u32: CRC-32 (``zlib.crc32``) of the 24 bytes above, then of header + payload
    (reserved, zero)           u32
    header                     H bytes of UTF-8 JSON: {"sha256", "part", "version", "meta", "sections": [[name, offset,
                               length], ...]} (offsets relative to the payload start)
    padding                    to a multiple of 8
    payload                    the sections, each starting on a multiple of 8

Every read is verified (magic, version, file length, checksum, the key in the header, section bounds): a file that
fails any check is logged once, deleted when possible and reported absent, so the caller rebuilds — never trusted.
Writes are atomic (a temp file in the same directory, then ``os.replace``); a cache that cannot be written (read-only
image, full disk) never fails a load.

The checksum guards against damage and staleness only (it is stored in the file, so whoever can write the file can
recompute it; memory safety comes from each restore's structural checks): CRC-32 detects every single-bit flip and
every burst of up to 32 bits, the stored length every truncation or extension, and other damage but for a chance
of 2**-32. It reads about three times faster than sha256 (format version 3; version 2 files held a sha256).
"""

from __future__ import annotations

import contextlib
import json
import logging
import mmap
import os
import re
import struct
import sys
import tempfile
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger("app.engine.artifact_cache")

#: The engine's compiled-format version: part of every key and every file header. Bump it when the layout of any
#: part changes (old files are then simply never looked up again; ``cache build`` writes the new ones).
#: 2: rank tables carry the compiled core's image (app/engine/rank_tables.py); 3: CRC-32 + length; 4: the core's image
#: version 2 (its three-bit filter; a core refuses an older image and would rebuild its tables on every load); 5: the
#: SentencePiece BPE model's dump version 2 (its exact bigram rows, app/engine/_native/spbpe.c); 6: the core's hash of
#: keys up to 8 bytes (app/engine/_native/bytes_hash.h), which places every slot of its image.
FORMAT_VERSION = 6

MAGIC = b"TKCACHE\0"
SUFFIX = ".tkc"
_FIXED = struct.Struct("<8sIIQII")  # magic, version, header length, file length, checksum, reserved
_CHECKED = 24  # the fixed part's bytes under the checksum: magic, version, header length, file length
_ALIGN = 8
_SHA256 = re.compile(r"[0-9a-f]{64}")
_PART = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_FILE_NAME = re.compile(r"(?P<sha256>[0-9a-f]{64})\.(?P<part>[a-z0-9][a-z0-9-]{0,63})\.v(?P<version>[0-9]+)\.tkc")
#: Temp files older than this (seconds) are left-overs of a crashed writer and are removed by :meth:`clean_temp`.
STALE_TEMP_SECONDS = 600.0

T = TypeVar("T")


@dataclass(frozen=True)
class Compiled:
    """One derivation in its stored form: ``meta`` (JSON-able) and named raw ``sections``. Read from the cache, the
    sections are read-only memoryviews into a shared mmap of the file (``mapping``; ``regions``: each section's
    offset and length in it)."""

    meta: dict[str, Any]
    sections: Mapping[str, memoryview | bytes] = field(default_factory=dict)
    mapping: mmap.mmap | None = field(default=None, compare=False, repr=False)
    regions: Mapping[str, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)

    def release(self, name: str) -> None:
        """Drop this process's resident pages of section ``name`` (whole pages inside it) once it has been copied:
        verifying the file read every page, and they stay counted in the process's memory while the mapping lives
        (other sections keep it alive). The file's contents are unchanged: a later read faults them in again.
        Does nothing for a section that is not mapped."""
        region = self.regions.get(name)
        if self.mapping is None or region is None:
            return
        page = mmap.PAGESIZE
        start = -(-region[0] // page) * page
        end = (region[0] + region[1]) // page * page
        if end > start:
            with contextlib.suppress(OSError, ValueError, AttributeError):  # (no madvise: the pages just stay)
                self.mapping.madvise(mmap.MADV_DONTNEED, start, end - start)


class DamagedFile(ValueError):
    """A cache file failed verification (internal: turned into a warning and a rebuild)."""


def _check_key(sha256: str, part: str) -> None:
    if not _SHA256.fullmatch(sha256):
        raise ValueError(f"artifact cache: not a lowercase hex sha256: {sha256!r}")
    if not _PART.fullmatch(part):
        raise ValueError(f"artifact cache: bad part name: {part!r}")


def _pad(n: int) -> int:
    return -n % _ALIGN


def encode(sha256: str, part: str, compiled: Compiled) -> bytes:
    """The file bytes of ``compiled`` under the key (sha256, part). Raises ``ValueError``/``TypeError`` for a bad key
    or a ``meta`` that is not JSON-able."""
    _check_key(sha256, part)
    table: list[list[Any]] = []
    chunks: list[bytes | memoryview] = []
    offset = 0
    for name, data in compiled.sections.items():
        if not isinstance(name, str):
            raise TypeError("artifact cache: section names are strings")
        view = memoryview(data).cast("B")
        table.append([name, offset, view.nbytes])
        chunks.append(view)
        offset += view.nbytes
        pad = _pad(offset)
        if pad:
            chunks.append(b"\0" * pad)
            offset += pad
    header = json.dumps({"sha256": sha256, "part": part, "version": FORMAT_VERSION, "meta": compiled.meta,
                         "sections": table}, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode()
    header += b" " * _pad(_FIXED.size + len(header))
    length = _FIXED.size + len(header) + offset
    crc = zlib.crc32(header, zlib.crc32(_FIXED.pack(MAGIC, FORMAT_VERSION, len(header), length, 0, 0)[:_CHECKED]))
    for chunk in chunks:
        crc = zlib.crc32(chunk, crc)
    return b"".join([_FIXED.pack(MAGIC, FORMAT_VERSION, len(header), length, crc, 0), header, *chunks])


def decode(buffer: memoryview, sha256: str, part: str) -> Compiled:
    """Verify ``buffer`` (a whole cache file) against the key and return its contents, sections as slices of
    ``buffer``. Raises :class:`DamagedFile` naming the first check that failed."""
    if buffer.nbytes < _FIXED.size:
        raise DamagedFile("truncated header")
    magic, version, header_len, length, crc, reserved = _FIXED.unpack_from(buffer, 0)
    if magic != MAGIC:
        raise DamagedFile("wrong magic")
    if version != FORMAT_VERSION:
        raise DamagedFile(f"format version {version}, expected {FORMAT_VERSION}")
    payload_start = _FIXED.size + header_len
    if payload_start > buffer.nbytes or payload_start % _ALIGN:
        raise DamagedFile("header length out of bounds")
    if reserved:
        raise DamagedFile("reserved field is not zero")
    if length != buffer.nbytes:
        raise DamagedFile(f"file length {buffer.nbytes}, header says {length}")
    if zlib.crc32(buffer[_FIXED.size:], zlib.crc32(buffer[:_CHECKED])) != crc:
        raise DamagedFile("checksum mismatch")
    try:
        header = json.loads(bytes(buffer[_FIXED.size:payload_start]))
    except ValueError:
        raise DamagedFile("header is not JSON") from None
    if not isinstance(header, dict):
        raise DamagedFile("header is not an object")
    if header.get("sha256") != sha256 or header.get("part") != part or header.get("version") != FORMAT_VERSION:
        raise DamagedFile(f"header names {header.get('sha256')!r}/{header.get('part')!r}/v{header.get('version')!r}")
    meta, table = header.get("meta"), header.get("sections")
    if not isinstance(meta, dict) or not isinstance(table, list):
        raise DamagedFile("header lacks meta or sections")
    payload_len = buffer.nbytes - payload_start
    sections: dict[str, memoryview] = {}
    regions: dict[str, tuple[int, int]] = {}
    for entry in table:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                and all(type(v) is int for v in entry[1:])):
            raise DamagedFile("bad section entry")
        name, offset, length = entry
        if offset < 0 or length < 0 or offset + length > payload_len or name in sections:
            raise DamagedFile(f"section {name!r} out of bounds")
        sections[name] = buffer[payload_start + offset:payload_start + offset + length]
        regions[name] = (payload_start + offset, length)
    mapping = buffer.obj if isinstance(buffer.obj, mmap.mmap) else None
    return Compiled(meta=meta, sections=sections, mapping=mapping, regions=regions)


class ArtifactCache:
    """A directory of compiled files (see the module docstring). Thread-safe; several processes may share the
    directory (writes are atomic, the last complete writer wins, every reader verifies).

    Counters (for tests and metrics): ``hits`` (verified files used), ``misses`` (absent files: built), ``rebuilt``
    (damaged or unreadable files replaced by a fresh build), ``write_errors`` (files that could not be stored; the
    first error's text in ``write_error``).

    ``read_only``: never write nor delete (``cache verify`` inspects a directory without changing it)."""

    def __init__(self, directory: Path | str, *, read_only: bool = False) -> None:
        self.directory = Path(directory)
        self.read_only = read_only
        self.hits = 0
        self.misses = 0
        self.rebuilt = 0
        self.write_errors = 0
        self.write_error: str | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ArtifactCache({str(self.directory)!r})"

    def path(self, sha256: str, part: str) -> Path:
        """The file of the key (sha256, part) at the current :data:`FORMAT_VERSION`."""
        _check_key(sha256, part)
        return self.directory / f"{sha256}.{part}.v{FORMAT_VERSION}{SUFFIX}"

    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def _discard(self, path: Path, reason: str) -> None:
        if self.read_only:
            log.warning("artifact cache: %s is damaged (%s)", path, reason)
            return
        log.warning("artifact cache: %s is damaged (%s); rebuilding it", path, reason)
        with contextlib.suppress(OSError):
            path.unlink()

    def get(self, sha256: str, part: str) -> Compiled | None:
        """The verified contents of the key's file, or None when it is absent, unreadable or fails verification (then
        one warning is logged and the file deleted if possible). Does not touch the counters."""
        path = self.path(sha256, part)
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if size == 0:
                    raise DamagedFile("empty file")
                mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            return None
        except DamagedFile as exc:
            self._discard(path, str(exc))
            return None
        except (OSError, ValueError) as exc:
            log.warning("artifact cache: cannot read %s (%s); not using it", path, exc)
            return None
        try:
            return decode(memoryview(mapped), sha256, part)
        except DamagedFile as exc:
            self._discard(path, str(exc))
            return None

    def put(self, sha256: str, part: str, compiled: Compiled) -> None:
        """Store ``compiled`` under the key, atomically. An ``OSError`` (read-only directory, full disk …) is logged
        once per cache and swallowed. Raises ``ValueError``/``TypeError`` for a bad key or a non-JSON-able meta."""
        path = self.path(sha256, part)
        data = encode(sha256, part, compiled)
        if self.read_only:
            return
        tmp: str | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=self.directory)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            with self._lock:
                self.write_errors += 1
                first = self.write_error is None
                if first:
                    self.write_error = f"{self.directory}: {exc.strerror or exc}"
            if first:
                log.warning("artifact cache: cannot write %s (%s); loading without caching", self.directory, exc)
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def load(self, sha256: str, part: str, build: Callable[[], T], dump: Callable[[T], Compiled],
             restore: Callable[[Compiled], T]) -> T:
        """The derivation of the key: restored from a verified file (a hit), else ``build()`` stored with ``dump``
        (a miss). A ``restore`` that raises ``ValueError``/``KeyError``/``IndexError``/``TypeError`` on a verified file
        marks it damaged (warning, deletion, rebuild). Exceptions of ``build`` propagate unchanged."""
        path = self.path(sha256, part)
        existed = path.exists()
        compiled = self.get(sha256, part)
        if compiled is not None:
            try:
                value = restore(compiled)
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                self._discard(path, f"restore failed: {type(exc).__name__}: {str(exc)[:200]}")
            else:
                self._count("hits")
                return value
        self._count("rebuilt" if existed else "misses")
        value = build()
        self.put(sha256, part, dump(value))
        return value

    def clean_temp(self, max_age: float = STALE_TEMP_SECONDS) -> int:
        """Remove temp files of crashed writers older than ``max_age`` seconds; returns how many were removed."""
        removed = 0
        cutoff = time.time() - max_age
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.directory):
                if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        if entry.stat().st_mtime < cutoff:
                            os.unlink(entry.path)
                            removed += 1
        return removed

    def check(self, path: Path) -> str | None:
        """Why the cache file ``path`` (any name in the directory) fails verification against the key its name
        gives, or None when it verifies. Never deletes or logs."""
        m = _FILE_NAME.fullmatch(path.name)
        if m is None:
            return "not a cache file name (<sha256>.<part>.v<version>.tkc)"
        if int(m["version"]) != FORMAT_VERSION:
            return f"format version {m['version']}, not this engine's {FORMAT_VERSION} (never read; can be removed)"
        try:
            with open(path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size == 0:
                    return "empty file"
                mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            return f"cannot read: {exc}"
        try:
            decode(memoryview(mapped), m["sha256"], m["part"])
        except DamagedFile as exc:
            return str(exc)
        return None

    def files(self) -> list[Path]:
        """The cache files of the current format version in the directory (sorted)."""
        return [p for p in self.all_files() if p.name.endswith(f".v{FORMAT_VERSION}{SUFFIX}")]

    def all_files(self) -> list[Path]:
        """Every ``*.tkc`` file of the directory, any format version (sorted)."""
        try:
            return sorted(p for p in self.directory.glob(f"*{SUFFIX}") if p.is_file())
        except OSError:
            return []


# -- helpers for sections ----------------------------------------------------------------------------------------

_LITTLE = sys.byteorder == "little"


def u32_bytes(values: Iterable[int]) -> bytes:
    """``values`` (each in 0..2**32-1) as a little-endian u32 array. Raises ``OverflowError``."""
    arr = array("I", values)
    if arr.itemsize != 4:  # pragma: no cover - every supported platform has 4-byte unsigned int
        arr = array("L", arr)
    if not _LITTLE:  # pragma: no cover
        arr.byteswap()
    return arr.tobytes()


def u32_view(section: memoryview | bytes) -> Sequence[int]:
    """A little-endian u32 section as a sequence of ints (zero-copy on little-endian machines). Raises
    ``ValueError`` when the length is not a multiple of 4."""
    view = memoryview(section).cast("B")
    if view.nbytes % 4:
        raise ValueError("u32 section length is not a multiple of 4")
    if _LITTLE and array("I").itemsize == 4:
        return view.cast("I")
    arr = array("I", bytes(view))  # pragma: no cover
    arr.byteswap()  # pragma: no cover
    return arr  # pragma: no cover
