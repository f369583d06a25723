"""Artifact verification through the compiled artifact cache's witness (``app.engine.artifacts.verify_artifact``):
a compressed artifact already proven to decompress to its published bytes is verified by the sha256 of its
compressed bytes, and decompressed only when a loader asks for its bytes."""

from __future__ import annotations

import hashlib
import lzma
from pathlib import Path

import pytest

from app.engine.artifact_cache import ArtifactCache
from app.engine.artifacts import XZ_WITNESS_PART, read_verified, verify_artifact
from app.engine.errors import ArtifactError
from app.engine.loaders import LoadOptions, load_tokenizer
from app.engine.store import Store

PUBLISHED = b'{"a published artifact": [' + b", ".join(str(i).encode() for i in range(5000)) + b"]}"
SHA = hashlib.sha256(PUBLISHED).hexdigest()


def _xz(tmp_path: Path, data: bytes = PUBLISHED, preset: int = 6) -> Path:
    path = tmp_path / "artifact.json.xz"
    path.write_bytes(lzma.compress(data, format=lzma.FORMAT_XZ, preset=preset))
    return path


def _no_decompression(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("decompressed")

    monkeypatch.setattr(lzma, "decompress", refuse)


def test_the_first_verification_decompresses_and_records_a_witness(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    artifact = verify_artifact(_xz(tmp_path), SHA, "xz", cache)
    assert artifact.size == len(PUBLISHED) and artifact.read() == PUBLISHED
    witness = cache.get(SHA, XZ_WITNESS_PART)
    assert witness is not None and witness.meta["size"] == len(PUBLISHED)


def test_a_witnessed_file_is_verified_without_decompressing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, cache = _xz(tmp_path), ArtifactCache(tmp_path / "cache")
    verify_artifact(path, SHA, "xz", cache)
    _no_decompression(monkeypatch)
    artifact = verify_artifact(path, SHA, "xz", cache)
    assert artifact.size == len(PUBLISHED)
    with pytest.raises(AssertionError, match="decompressed"):
        artifact.read()  # the bytes, when asked for, come from decompressing the hashed file


def test_other_compressed_bytes_are_checked_in_full(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    verify_artifact(_xz(tmp_path), SHA, "xz", cache)
    recompressed = _xz(tmp_path, preset=1)  # the same published bytes, other compressed bytes: a full check
    assert verify_artifact(recompressed, SHA, "xz", cache).read() == PUBLISHED
    tampered = _xz(tmp_path, PUBLISHED.replace(b"4999", b"4998"))
    with pytest.raises(ArtifactError, match="sha256 mismatch"):
        verify_artifact(tampered, SHA, "xz", cache)


def test_a_witness_that_lies_about_the_size_is_caught_on_read(tmp_path: Path) -> None:
    path, cache = _xz(tmp_path), ArtifactCache(tmp_path / "cache")
    verify_artifact(path, SHA, "xz", cache)
    witness = cache.get(SHA, XZ_WITNESS_PART)
    assert witness is not None
    cache.put(SHA, XZ_WITNESS_PART, type(witness)({**witness.meta, "size": 3}))
    artifact = verify_artifact(path, SHA, "xz", cache)
    with pytest.raises(ArtifactError, match="size"):
        artifact.read()


def test_without_a_cache_or_compression_it_is_read_verified(tmp_path: Path) -> None:
    plain = tmp_path / "artifact.json"
    plain.write_bytes(PUBLISHED)
    assert verify_artifact(plain, SHA, None, ArtifactCache(tmp_path / "c")).read() == read_verified(plain, SHA)
    assert verify_artifact(_xz(tmp_path), SHA, "xz", None).read() == PUBLISHED
    with pytest.raises(ArtifactError, match="sha256 mismatch"):
        verify_artifact(plain, "0" * 64, None, None)


@pytest.mark.parametrize("name", ["gemma3", "xlm-roberta", "qwen3", "mistral-nemo", "mistral-v1"])
def test_warm_loads_of_compressed_artifacts_do_not_decompress(name: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    spec = Store.load().spec(name)
    options = LoadOptions(artifact_cache=ArtifactCache(tmp_path))
    cold = load_tokenizer(spec, options)
    texts = ["Hello, world!  déjà vu 東京 🙂", "x" * 300 + " \t\n 12345 ", "<s> </s> <unk> [CLS] <|endoftext|>"]
    expected = [cold.encode(t) for t in texts]
    _no_decompression(monkeypatch)
    warm = load_tokenizer(spec, options)
    assert [warm.encode(t) for t in texts] == expected
