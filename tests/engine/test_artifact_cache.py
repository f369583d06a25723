"""The compiled artifact cache (app/engine/artifact_cache.py): round trip, verification of every kind of damage
(never trusted: warning, deletion, rebuild), atomic writes, read-only directories, concurrent writers."""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import stat
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from app.engine import artifact_cache as ac
from app.engine.artifact_cache import ArtifactCache, Compiled, u32_bytes, u32_view

SHA = hashlib.sha256(b"artifact").hexdigest()
OTHER = hashlib.sha256(b"other").hexdigest()
PART = "test-ranks"


def _value() -> tuple[list[bytes], dict[str, Any]]:
    return [b"a", b"bc", b"", b"\xff\x00d"], {"pattern": "x+", "n": 4}


def _dump(value: tuple[list[bytes], dict[str, Any]]) -> Compiled:
    tokens, meta = value
    offsets = [0]
    for t in tokens:
        offsets.append(offsets[-1] + len(t))
    return Compiled(meta=dict(meta), sections={"blob": b"".join(tokens), "offsets": u32_bytes(offsets)})


def _restore(compiled: Compiled) -> tuple[list[bytes], dict[str, Any]]:
    blob = bytes(compiled.sections["blob"])
    offsets = u32_view(compiled.sections["offsets"])
    if offsets[-1] != len(blob):
        raise ValueError("offsets do not cover the blob")
    return [blob[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)], dict(compiled.meta)


class Builder:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> tuple[list[bytes], dict[str, Any]]:
        self.calls += 1
        return _value()


def _load(cache: ArtifactCache, build: Builder) -> tuple[list[bytes], dict[str, Any]]:
    return cache.load(SHA, PART, build, _dump, _restore)


def test_round_trip_miss_then_hit(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "c")
    build = Builder()
    assert _load(cache, build) == _value()
    assert (build.calls, cache.misses, cache.hits, cache.rebuilt) == (1, 1, 0, 0)
    path = cache.path(SHA, PART)
    assert path.name == f"{SHA}.{PART}.v{ac.FORMAT_VERSION}.tkc" and path.is_file()
    assert cache.files() == [path]
    fresh = ArtifactCache(tmp_path / "c")
    assert _load(fresh, build) == _value()
    assert (build.calls, fresh.hits, fresh.misses) == (1, 1, 0)


def test_sections_are_readonly_views_of_a_mapping(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    cache.put(SHA, PART, _dump(_value()))
    got = cache.get(SHA, PART)
    assert got is not None and got.meta == {"pattern": "x+", "n": 4}
    blob = got.sections["blob"]
    assert isinstance(blob, memoryview) and blob.readonly and bytes(blob) == b"abc\xff\x00d"
    assert list(u32_view(got.sections["offsets"])) == [0, 1, 3, 3, 6]
    with pytest.raises(TypeError):
        blob[0] = 0  # type: ignore[index]


def test_empty_sections_and_meta(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    cache.put(SHA, PART, Compiled(meta={}, sections={"empty": b""}))
    got = cache.get(SHA, PART)
    assert got is not None and got.meta == {} and bytes(got.sections["empty"]) == b""


def test_bad_keys_are_programming_errors(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    with pytest.raises(ValueError):
        cache.path("ABC", PART)
    with pytest.raises(ValueError):
        cache.path(SHA, "../x")
    with pytest.raises(TypeError):
        cache.put(SHA, PART, Compiled(meta={"x": object()}))


def _rewrite(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _flip_payload(data: bytes) -> bytes:
    b = bytearray(data)
    b[-3] ^= 0x01
    return bytes(b)


def _flip_header(data: bytes) -> bytes:
    b = bytearray(data)
    i = data.index(b'"pattern"')
    b[i + 1] ^= 0x20  # "Pattern": still valid JSON, caught by the digest
    return bytes(b)


def _wrong_magic(data: bytes) -> bytes:
    return b"XKCACHE\0" + data[8:]


def _other_version(data: bytes) -> bytes:
    return data[:8] + struct.pack("<I", ac.FORMAT_VERSION + 1) + data[12:]


def _header_len_out_of_bounds(data: bytes) -> bytes:
    return data[:12] + struct.pack("<I", len(data) + 8) + data[16:]


def _checksum_zeroed(data: bytes) -> bytes:
    return data[:24] + b"\0" * 4 + data[28:]


def _length_changed(data: bytes) -> bytes:
    return data[:16] + struct.pack("<Q", len(data) + 8) + data[24:] + b"\0" * 8


def _section_out_of_bounds(data: bytes) -> bytes:
    """A file whose digest is right but whose section table points past the end (a writer bug, not bit rot)."""
    return ac.encode(SHA, PART, Compiled(meta={}, sections={"blob": b"abc"})).replace(b'["blob",0,3]',
                                                                                      b'["blob",0,9]')


def _rehash(data: bytes) -> bytes:
    """``data`` with the file length and checksum of its bytes (what a writer with a bug would produce)."""
    magic, version, header_len, _, _, _ = ac._FIXED.unpack_from(data, 0)
    checked = ac._FIXED.pack(magic, version, header_len, len(data), 0, 0)[:24]
    crc = zlib.crc32(data[ac._FIXED.size:], zlib.crc32(checked))
    return ac._FIXED.pack(magic, version, header_len, len(data), crc, 0) + data[ac._FIXED.size:]


DAMAGE = {
    "flipped payload byte": _flip_payload,
    "flipped header byte": _flip_header,
    "truncated file": lambda d: d[: len(d) - 5],
    "truncated to the fixed header": lambda d: d[:20],
    "empty file": lambda d: b"",
    "wrong magic": _wrong_magic,
    "other format version": _other_version,
    "header length out of bounds": _header_len_out_of_bounds,
    "checksum zeroed": _checksum_zeroed,
    "file length changed (zeros appended)": _length_changed,
    "zeros appended": lambda d: d + b"\0" * 8,
    "another sha256 in the header": lambda d: ac.encode(OTHER, PART, _dump(_value())),
    "another part in the header": lambda d: ac.encode(SHA, "other-part", _dump(_value())),
    "section out of bounds": lambda d: _rehash(_section_out_of_bounds(d)),
    "header not JSON": lambda d: _rehash(d[:32] + b"\x00" + d[33:]),
    "restore fails on a verified file": lambda d: ac.encode(
        SHA, PART, Compiled(meta={}, sections={"blob": b"ab", "offsets": u32_bytes([0, 5])})),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_file_is_never_trusted(tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    cache = ArtifactCache(tmp_path)
    build = Builder()
    _load(cache, build)
    path = cache.path(SHA, PART)
    good = path.read_bytes()
    _rewrite(path, DAMAGE[damage](good))
    with caplog.at_level(logging.WARNING, logger="app.engine.artifact_cache"):
        assert _load(cache, build) == _value()
    assert build.calls == 2 and cache.rebuilt == 1 and cache.hits == 0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "damaged" in warnings[0].getMessage() and str(path) in warnings[0].getMessage()
    assert path.read_bytes() == good  # rebuilt and rewritten
    assert _load(cache, build) == _value() and cache.hits == 1 and build.calls == 2


def _two_sections() -> bytes:
    return ac.encode(SHA, PART, Compiled(meta={"n": 3}, sections={"blob": b"abcdefghij", "offsets": u32_bytes([0, 4,
                                                                                                          10])}))


def test_every_bit_flip_is_detected() -> None:
    """Each single-bit flip anywhere in a file (fixed part, header, padding, each section) fails verification."""
    data = _two_sections()
    ac.decode(memoryview(data), SHA, PART)
    regions = {"fixed": (0, ac._FIXED.size)}
    regions.update(ac.decode(memoryview(data), SHA, PART).regions)
    assert set(regions) == {"fixed", "blob", "offsets"}
    flipped: dict[str, int] = dict.fromkeys(regions, 0)
    for at in range(len(data)):
        for bit in range(8):
            bad = bytearray(data)
            bad[at] ^= 1 << bit
            with pytest.raises(ac.DamagedFile):
                ac.decode(memoryview(bytes(bad)), SHA, PART)
            for name, (start, length) in regions.items():
                flipped[name] += start <= at < start + length
    assert all(flipped.values())  # every region was hit


def test_every_truncation_and_extension_is_detected() -> None:
    data = _two_sections()
    for end in range(len(data)):
        with pytest.raises(ac.DamagedFile):
            ac.decode(memoryview(data[:end]), SHA, PART)
    for extra in (b"\0", b"\0" * 8, b"x" * 16):
        with pytest.raises(ac.DamagedFile):
            ac.decode(memoryview(data + extra), SHA, PART)


def test_two_bit_flips_in_a_large_section_are_detected() -> None:
    """Flips far apart in a section of a few MiB (CRC-32 catches every double-bit error within 2**31 bits)."""
    blob = bytes(range(256)) * (16 << 10)
    data = ac.encode(SHA, PART, Compiled(meta={}, sections={"big": blob}))
    (start, length), = ac.decode(memoryview(data), SHA, PART).regions.values()
    for first, second in ((start, start + length - 1), (start + 12345, start + (3 << 20)), (start + 7, start + 8)):
        bad = bytearray(data)
        bad[first] ^= 0x10
        bad[second] ^= 0x01
        with pytest.raises(ac.DamagedFile, match="checksum"):
            ac.decode(memoryview(bytes(bad)), SHA, PART)


def test_get_of_damaged_file_deletes_it(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    cache.put(SHA, PART, _dump(_value()))
    path = cache.path(SHA, PART)
    path.write_bytes(_flip_payload(path.read_bytes()))
    assert cache.get(SHA, PART) is None
    assert not path.exists()


def test_atomic_write_crash_before_replace_leaves_nothing_visible(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ArtifactCache(tmp_path)

    def crash(src: str, dst: str) -> None:
        raise OSError("simulated crash between write and replace")

    monkeypatch.setattr(ac.os, "replace", crash)
    build = Builder()
    assert _load(cache, build) == _value()  # a failed write never fails the load
    assert list(tmp_path.iterdir()) == []  # no cache file, no temp file left
    monkeypatch.undo()
    assert cache.get(SHA, PART) is None


def test_stale_temp_files_of_a_killed_writer_are_cleaned(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    stale = tmp_path / f".{cache.path(SHA, PART).name}.abc.tmp"
    stale.write_bytes(b"partial")
    fresh = tmp_path / f".{cache.path(OTHER, PART).name}.def.tmp"
    fresh.write_bytes(b"in progress")
    old = os.stat(stale).st_mtime - 2 * ac.STALE_TEMP_SECONDS
    os.utime(stale, (old, old))
    assert cache.get(SHA, PART) is None  # a temp file is never read
    assert cache.clean_temp() == 1
    assert not stale.exists() and fresh.exists()


def _make_read_only(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """chmod the directory read-only; as root (which ignores the mode) also make temp-file creation fail as a
    read-only file system would."""
    directory.chmod(stat.S_IRUSR | stat.S_IXUSR)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        def erofs(*args: Any, **kwargs: Any) -> Any:
            raise OSError(30, "Read-only file system")

        monkeypatch.setattr(ac.tempfile, "mkstemp", erofs)


def test_read_only_directory_loads_without_caching(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    _make_read_only(ro, monkeypatch)
    try:
        cache = ArtifactCache(ro)
        build = Builder()
        with caplog.at_level(logging.WARNING, logger="app.engine.artifact_cache"):
            assert _load(cache, build) == _value()
            assert cache.load(OTHER, PART, build, _dump, _restore) == _value()
        assert build.calls == 2 and list(ro.iterdir()) == []
        assert len([r for r in caplog.records if "cannot write" in r.getMessage()]) == 1  # logged once
    finally:
        ro.chmod(stat.S_IRWXU)


def test_read_only_directory_with_built_files_serves_hits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ArtifactCache(tmp_path / "img")
    cache.put(SHA, PART, _dump(_value()))
    _make_read_only(tmp_path / "img", monkeypatch)
    try:
        ro = ArtifactCache(tmp_path / "img")
        build = Builder()
        assert _load(ro, build) == _value() and ro.hits == 1 and build.calls == 0
    finally:
        (tmp_path / "img").chmod(stat.S_IRWXU)


def test_unwritable_path_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    cache = ArtifactCache(tmp_path / "file" / "cache")
    build = Builder()
    assert _load(cache, build) == _value() and build.calls == 1


def _writer(directory: str, rounds: int, tag: int) -> None:
    cache = ArtifactCache(directory)
    big = bytes([tag]) * 200_000
    for _ in range(rounds):
        cache.put(SHA, PART, Compiled(meta={"tag": tag}, sections={"blob": big}))


def test_concurrent_writers_end_with_one_valid_file(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn" if os.name != "posix" else "fork")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), 30, tag)) for tag in (1, 2)]
    for p in procs:
        p.start()
    reader = ArtifactCache(tmp_path)
    seen = 0
    while any(p.is_alive() for p in procs):
        got = reader.get(SHA, PART)  # never a torn file: absent or complete
        if got is not None:
            tag = got.meta["tag"]
            assert bytes(got.sections["blob"]) == bytes([tag]) * 200_000
            seen += 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    assert [p.name for p in tmp_path.iterdir()] == [reader.path(SHA, PART).name]
    got = reader.get(SHA, PART)
    assert got is not None and bytes(got.sections["blob"]) == bytes([got.meta["tag"]]) * 200_000


def test_u32_helpers() -> None:
    assert u32_bytes([1, 2**32 - 1]) == b"\x01\0\0\0\xff\xff\xff\xff"
    assert list(u32_view(b"\x01\0\0\0\xff\xff\xff\xff")) == [1, 2**32 - 1]
    with pytest.raises(ValueError):
        u32_view(b"abc")
    with pytest.raises(OverflowError):
        u32_bytes([2**32])


def _mapped_rss_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of ``path`` (``/proc/self/smaps``)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            first = line.split(" ", 1)[0]
            if "-" in first and not first.endswith(":"):  # a mapping's header line
                inside = line.rstrip("\n").endswith(str(path))
            elif inside and first == "Rss:":
                total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs /proc/self/smaps")
def test_release_drops_a_copied_sections_pages_and_keeps_its_bytes(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    big = os.urandom(4 << 20)
    cache.put(SHA, PART, Compiled(meta={"n": 1}, sections={"small": b"kept", "big": big}))
    got = cache.get(SHA, PART)
    assert got is not None and got.mapping is not None
    path = cache.path(SHA, PART)
    before = _mapped_rss_kib(path)
    assert before >= 4 << 10  # verifying the digest read every page
    got.release("big")
    after = _mapped_rss_kib(path)
    assert after <= before - (4 << 10) + 8  # all but at most the two partial pages at its ends
    assert bytes(got.sections["small"]) == b"kept" and bytes(got.sections["big"]) == big  # faulted in again
    Compiled(meta={}, sections={"x": b"y"}).release("x")  # not mapped: nothing to do
    got.release("absent")
