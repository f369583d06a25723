"""Reading, verifying and writing vocabulary artifacts.

Two formats are understood:

``tiktoken``
    One line per token: the base64 of the token's bytes, one space, its rank. The rank is the token id and the
    merge priority (lower merges first). This is the format of tiktoken's ``*.tiktoken`` files and of Meta's
    Llama 3 ``tokenizer.model``.
``char_bpe``
    The classic character-level BPE of the textbook, written by our trainer: JSON with the symbol vocabulary and
    the ordered merge list (see :mod:`app.engine.training`).

Every read verifies the sha256 of the exact bytes that are parsed, so a file that changes between the check
and the parse cannot slip through. With the compiled artifact cache, a compressed artifact is verified by the
sha256 of its compressed bytes instead, against a witness written the first time those bytes were decompressed and
their published sha256 checked (:func:`verify_artifact`); its published bytes are then decompressed only if a
loader asks for them, from the same bytes that were hashed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import lzma
from collections.abc import Mapping
from pathlib import Path

from .artifact_cache import ArtifactCache, Compiled
from .errors import ArtifactError

#: The artifact-cache part, keyed by an artifact's published sha256, that records the sha256 of a compressed file
#: proven to decompress to those published bytes, and their length (:func:`verify_artifact`).
XZ_WITNESS_PART = "xz-witness"


def read_bytes(path: Path) -> bytes:
    """A file's bytes; raises :class:`ArtifactError` (naming the file) if it is missing or unreadable."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ArtifactError(str(path), "artifact file is missing") from None
    except OSError as exc:
        raise ArtifactError(str(path), f"artifact file cannot be read: {exc.strerror or exc}") from None


def read_verified(path: Path, expected_sha256: str, compression: str | None = None) -> bytes:
    """Return the file's bytes (decompressed first when ``compression`` is ``"xz"``) after checking their sha256
    against ``expected_sha256`` — the hash of the published, uncompressed bytes.

    Raises :class:`ArtifactError` naming the file and both hashes on a mismatch (a corrupted or truncated file),
    or naming the file if it is missing, unreadable or not valid compressed data.
    """
    return _published(read_bytes(path), path, expected_sha256, compression)


def _published(raw: bytes, path: Path, expected_sha256: str, compression: str | None) -> bytes:
    """The published bytes of a file's ``raw`` bytes, checked (see :func:`read_verified`)."""
    data = raw
    if compression == "xz":
        try:
            data = lzma.decompress(raw, format=lzma.FORMAT_XZ)
        except lzma.LZMAError as exc:
            raise ArtifactError(str(path), f"not a valid xz file: {exc}") from None
    elif compression is not None:
        raise ArtifactError(str(path), f"unknown compression {compression!r}")
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256.lower():
        raise ArtifactError(str(path), "sha256 mismatch", expected=expected_sha256.lower(), actual=actual)
    return data


class VerifiedArtifact:
    """An artifact whose published bytes are established: ``size`` (their length) and :meth:`read` (the bytes).

    Built by :func:`verify_artifact`. When the published sha256 was established through the witness, the bytes are
    decompressed on the first :meth:`read`, from the same in-memory file that was hashed, and checked again."""

    __slots__ = ("_compression", "_data", "_path", "_raw", "_sha256", "size")

    def __init__(self, path: Path, sha256: str, compression: str | None, raw: bytes, size: int,
                 data: bytes | None) -> None:
        self._path, self._sha256, self._compression, self._raw = path, sha256, compression, raw
        self.size = size
        self._data = data

    def read(self) -> bytes:
        """The published bytes. Raises :class:`ArtifactError` as :func:`read_verified` does."""
        if self._data is None:
            self._data = _published(self._raw, self._path, self._sha256, self._compression)
            if len(self._data) != self.size:  # (the sha256 matched, so the witness was wrong about nothing else)
                raise ArtifactError(str(self._path), "artifact size differs from its verification record")
        return self._data


def verify_artifact(path: Path, expected_sha256: str, compression: str | None,
                    cache: ArtifactCache | None) -> VerifiedArtifact:
    """Verify an artifact as :func:`read_verified` does, without decompressing an ``xz`` file whose compressed bytes
    ``cache`` has seen decompress to the published bytes (part :data:`XZ_WITNESS_PART`: the sha256 of the
    compressed file must equal the one recorded when it was decompressed and checked). Writes that record after a
    full check. Without a cache, or uncompressed, this is :func:`read_verified`. Raises as it does."""
    if cache is None or compression != "xz":
        data = read_verified(path, expected_sha256, compression)
        return VerifiedArtifact(path, expected_sha256, compression, b"", len(data), data)
    raw = read_bytes(path)
    digest = hashlib.sha256(raw).hexdigest()
    witness = cache.get(expected_sha256.lower(), XZ_WITNESS_PART)
    if witness is not None:
        size = witness.meta.get("size")
        if witness.meta.get("xz_sha256") == digest and isinstance(size, int) and size >= 0:
            return VerifiedArtifact(path, expected_sha256, compression, raw, size, None)
    data = _published(raw, path, expected_sha256, compression)
    cache.put(expected_sha256.lower(), XZ_WITNESS_PART, Compiled({"xz_sha256": digest, "size": len(data)}))
    return VerifiedArtifact(path, expected_sha256, compression, raw, len(data), data)


def parse_tiktoken(data: bytes, *, source: str = "<bytes>") -> dict[bytes, int]:
    """Parse tiktoken-format bytes into ``{token_bytes: rank}``.

    Raises :class:`ArtifactError` on a malformed line, a duplicate token or a duplicate rank.
    """
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line:
            continue
        try:
            b64, rank_text = line.split()
            token = base64.b64decode(b64, validate=True)
            rank = int(rank_text)
        except (ValueError, binascii.Error):
            raise ArtifactError(source, f"malformed tiktoken line {lineno}") from None
        if token in ranks:
            raise ArtifactError(source, f"duplicate token on line {lineno}")
        ranks[token] = rank
    if len(set(ranks.values())) != len(ranks):
        raise ArtifactError(source, "two tokens share one rank")
    return ranks


def format_tiktoken(ranks: Mapping[bytes, int]) -> bytes:
    """Serialise ``{token_bytes: rank}`` in tiktoken format, ordered by rank (byte-identical for equal input)."""
    ordered = sorted(ranks.items(), key=lambda kv: kv[1])
    lines = [base64.b64encode(tok) + b" " + str(rank).encode() for tok, rank in ordered]
    return b"\n".join(lines) + b"\n"
