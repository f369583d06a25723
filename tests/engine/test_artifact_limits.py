"""Ids and sizes an artifact states are bounded by its real size before anything is allocated (issue 30: a
104-byte file naming id 300,000,000 imported and took 4.7 GB at load)."""

from __future__ import annotations

import base64
import json
import resource
import struct
import time

import pytest

from app.engine.artifact_limits import MAX_IDS, MIN_ID_BOUND, check_id, id_bound
from app.engine.errors import ArtifactError
from app.engine.pipeline.gguf_kv import GGUFFormatError, read_kv
from app.engine.pipeline.hf_json import from_hf_json
from app.engine.tekken import parse_tekken


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_id_bound() -> None:
    assert id_bound(104) == MIN_ID_BOUND
    assert id_bound(1_000_000) == 4_000_000
    assert id_bound(10**9) == id_bound(None) == MAX_IDS
    check_id(MIN_ID_BOUND - 1, "id", 10, "f")
    with pytest.raises(ArtifactError, match="id 65536 is out of range"):
        check_id(MIN_ID_BOUND, "id", 10, "f")
    with pytest.raises(ArtifactError, match="out of range"):
        check_id(-1, "id", 10, "f")


@pytest.mark.parametrize("bad_id", [300_000_000, 2**31, 2**64, 10**400])
def test_a_tokenizer_json_id_past_the_bound_is_refused_before_allocating(bad_id: int) -> None:
    doc = {"model": {"type": "WordLevel", "vocab": {"a": bad_id}, "unk_token": "a"}}
    data = json.dumps(doc).encode()
    before, t0 = _rss_mb(), time.monotonic()
    with pytest.raises(ArtifactError, match="model.vocab id .* is out of range"):
        from_hf_json(data, "t", source="t.json")
    assert time.monotonic() - t0 < 2 and _rss_mb() - before < 100
    added = {"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
             "added_tokens": [{"id": bad_id, "content": "<x>", "special": True}]}
    with pytest.raises(ArtifactError, match="added_tokens id .* is out of range"):
        from_hf_json(json.dumps(added).encode(), "t", source="t.json")


def test_a_tokenizer_json_nested_too_deeply_is_an_artifact_error() -> None:
    with pytest.raises(ArtifactError, match="nested too deeply"):
        from_hf_json(b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "t", source="t.json")


def _tekken(n_special: int, vocab_size: int, pattern: str = r"\w+") -> bytes:
    vocab = [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode()} for i in range(256)]
    return json.dumps({"config": {"pattern": pattern, "default_num_special_tokens": n_special,
                                  "default_vocab_size": vocab_size}, "vocab": vocab}).encode()


def test_tekken_sizes_past_the_bound_and_hostile_patterns_are_refused() -> None:
    pattern, ranks, specials = parse_tekken(_tekken(100, 356), "t.json")
    assert len(ranks) == 256 and len(specials) == 100
    before = _rss_mb()
    with pytest.raises(ArtifactError, match="default_num_special_tokens 300000000 is out of range"):
        parse_tekken(_tekken(300_000_000, 300_000_256), "t.json")
    assert _rss_mb() - before < 100
    with pytest.raises(ArtifactError, match="config.pattern: regex .* repeats up to"):
        parse_tekken(_tekken(100, 356, "(?:a{3000}){3000}"), "t.json")


def _gguf_nested_arrays(depth: int) -> bytes:
    key = b"k"
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<I", 9)
    for _ in range(depth - 1):
        out += struct.pack("<IQ", 9, 1)  # an array of one array …
    return out + struct.pack("<IQ", 4, 0)  # … of no uint32


def test_gguf_nested_arrays_and_counts_past_the_file_are_format_errors() -> None:
    """Issue 30: a GGUF of 5,000 nested arrays raised RecursionError out of ``import``."""
    assert read_kv(_gguf_nested_arrays(3)) == {"k": [[[]]]}
    with pytest.raises(GGUFFormatError, match="nested deeper than"):
        read_kv(_gguf_nested_arrays(5000))
    key = b"k"
    huge = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + key + struct.pack("<I", 9)
    huge += struct.pack("<IQ", 9, 2**60)  # 2**60 arrays promised, none there
    with pytest.raises(GGUFFormatError, match="runs past the end"):
        read_kv(huge)
