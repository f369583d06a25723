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
and the parse cannot slip through.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import lzma
from collections.abc import Mapping
from pathlib import Path

from .errors import ArtifactError


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
    data = read_bytes(path)
    if compression == "xz":
        try:
            data = lzma.decompress(data, format=lzma.FORMAT_XZ)
        except lzma.LZMAError as exc:
            raise ArtifactError(str(path), f"not a valid xz file: {exc}") from None
    elif compression is not None:
        raise ArtifactError(str(path), f"unknown compression {compression!r}")
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256.lower():
        raise ArtifactError(str(path), "sha256 mismatch", expected=expected_sha256.lower(), actual=actual)
    return data


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
