"""The compiled NFC quick check (``app/engine/_native/nfc_check.h``, table from ``scripts/gen_nfc_tables.py``) next to
``unicodedata.is_normalized("NFC", ·)``: ``nfc_verify`` always gives unicodedata's answer, and the quick check alone
never says "NFC" where unicodedata says no."""

from __future__ import annotations

import random
import unicodedata
from pathlib import Path

import pytest

from app.engine import native
from app.engine.registry import get_store, load_encoding
from harness.scripts import load_script

pytestmark = pytest.mark.skipif(not native.available(), reason="compiled core not built")
ROOT = Path(__file__).resolve().parents[2]


def _core() -> object:
    return native.CORE.module


def _is_nfc(text: str) -> bool:
    return unicodedata.is_normalized("NFC", text)


def test_every_code_point_alone() -> None:
    core = _core()
    sure = 0
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        expected = _is_nfc(ch)
        assert core.nfc_verify(ch) is expected, hex(cp)  # type: ignore[attr-defined]
        if core.nfc_quick(ch):  # type: ignore[attr-defined]
            assert expected, hex(cp)
            sure += 1
    assert sure > 250_000  # the quick check is sure of most assigned characters (CJK, Hangul syllables, Latin …)


def test_every_canonical_pair_that_composes_is_left_to_unicodedata() -> None:
    core = _core()
    pairs = 0
    for cp in range(0x110000):
        decomposition = unicodedata.decomposition(chr(cp))
        if not decomposition or decomposition.startswith("<"):
            continue
        parts = [chr(int(p, 16)) for p in decomposition.split()]
        if len(parts) != 2:
            continue
        text = "".join(parts)
        pairs += 1
        assert core.nfc_verify(text) is _is_nfc(text)  # type: ignore[attr-defined]
        if not _is_nfc(text):
            assert not core.nfc_quick(text)  # type: ignore[attr-defined]
    assert pairs > 900


# Bases, marks of many combining classes (in and out of order), Hangul jamo and syllables, scripts with marks.
POOL = ("aeoAEOnN " "\u0300\u0301\u0302\u0308\u0316\u0323\u0327\u0328\u0345\u05b0\u05bc\u0651\u0670\u093c\u094d"
        "\u0e31\u0e34\u0e38\u0e48\u0e4b\u0bbe\u0bcd\u0cd5\u0d3e\u1100\u1112\u1161\u1175\u11a8\u11c2\uac00\ud7a3"
        "\u304b\u3099\u309a\u30cf\u4e2d\u0915\u0b95\u0e01\u05d0\u0627\u00c5\u212b\u1e0a\u0344\u0f73\u2126\uf900"
        "\U0001d15e\U0001d165\U0001d16d\U00011099\U000110ba\U0001f600")


def test_random_strings_of_marks_and_jamo() -> None:
    core = _core()
    rng = random.Random(1505)
    disagreements = quick_sure = 0
    for _ in range(60_000):
        text = "".join(rng.choice(POOL) for _ in range(rng.randint(1, 8 if _ % 2 else 40)))  # several stretches
        expected = _is_nfc(text)
        disagreements += core.nfc_verify(text) is not expected  # type: ignore[attr-defined]
        if core.nfc_quick(text):  # type: ignore[attr-defined]
            quick_sure += 1
            assert expected, ascii(text)
    assert disagreements == 0 and quick_sure > 1000


def test_marks_at_every_offset_of_a_latin_run() -> None:
    """Two-byte text whose Latin run (below U+0300, read eight characters at a time) is broken at every offset by
    marks in and out of canonical order, a character that composes with the one before it, or one not in NFC."""
    core = _core()
    latin = "".join(chr(cp) for cp in range(0x100, 0x2FF, 7))  # Latin Extended, IPA, modifiers: a two-byte str
    answers = set()
    for tail in ("\u0316\u0350", "\u0350\u0316", "\u0301", "e\u0301", "\u0340", "\u1e9b\u0323", "x"):
        for at in range(0, 41):
            text = latin[:at] + tail + latin[at:at + 20]
            expected = _is_nfc(text)
            answers.add(expected)
            assert core.nfc_verify(text) is expected, ascii(text)  # type: ignore[attr-defined]
            assert not core.nfc_quick(text) or expected, ascii(text)  # type: ignore[attr-defined]
    assert answers == {True, False}


def test_nfc_apply_is_unicodedatas_nfc() -> None:
    """``nfc_apply`` normalizes only the stretches that are not NFC, and gives the whole text's NFC: random texts of
    marks, jamo and composing pairs (several stretches each, one changed or several), and the text itself (the same
    object) when it is NFC."""
    core = _core()

    def nfc(text: str) -> str:
        return unicodedata.normalize("NFC", text)

    rng = random.Random(2812)
    changed = 0
    for k in range(20_000):
        text = "".join(rng.choice(POOL) for _ in range(rng.randint(1, 8 if k % 2 else 60)))
        got = core.nfc_apply(text, nfc)  # type: ignore[attr-defined]
        assert got == nfc(text), ascii(text)
        if got == text:
            assert got is text
        changed += got != text
    assert changed > 1000
    handed: list[str] = []

    def counted(text: str) -> str:
        handed.append(text)
        return nfc(text)

    far = "abc e\u0301" + " x" * 40 + " \u1100\u1161 xyz"  # two stretches 80 characters apart: each alone
    assert core.nfc_apply(far, counted) == nfc(far) and handed == ["e\u0301", "\u1100\u1161"]  # type: ignore[attr-defined]
    handed.clear()  # closer than 64 characters: handed over as one
    assert core.nfc_apply("abc e\u0301 def \u1100\u1161 xyz", counted) == "abc \u00e9 def \uac00 xyz"  # type: ignore[attr-defined]
    assert handed == ["e\u0301 def \u1100\u1161"]
    for hostile in ("e\u0301 " * 50_000, ("e\u0301" + "x" * 70) * 2_000, "\u0301" * 100_000):
        handed.clear()  # many stretches: at most one call per 64 characters
        assert core.nfc_apply(hostile, counted) == nfc(hostile)  # type: ignore[attr-defined]
        assert len(handed) <= len(hostile) // 64 + 1
    with pytest.raises(TypeError, match="str"):
        core.nfc_apply("e\u0301", lambda s: 1)  # type: ignore[attr-defined]
    with pytest.raises(KeyError):
        core.nfc_apply("e\u0301", lambda s: {}[s])  # type: ignore[attr-defined]


def test_non_strings_raise_type_error() -> None:
    with pytest.raises(TypeError):
        _core().nfc_verify(b"abc")  # type: ignore[attr-defined]


def test_the_committed_table_is_the_generators_output() -> None:
    """Regenerated with this Python's unicodedata when its Unicode version is the header's (another version gives
    another, equally sound table: unassigned code points are never sure)."""
    if unicodedata.unidata_version != _core().NFC_UNICODE_VERSION:  # type: ignore[attr-defined]
        pytest.skip(f"unicodedata {unicodedata.unidata_version}, table from {_core().NFC_UNICODE_VERSION}")  # type: ignore[attr-defined]
    gen = load_script("gen_nfc_tables")
    committed = (ROOT / "app" / "engine" / "_native" / "nfc_tables.h").read_text(encoding="utf-8")
    assert committed == gen.render(gen.compute_values()), "nfc_tables.h is stale: run scripts/gen_nfc_tables.py"  # type: ignore[attr-defined]


def test_a_byte_level_pipeline_with_nfc_uses_it() -> None:
    """qwen3's tokenizer.json normalizes to NFC: its plain calls go through the compiled check and give the ids of
    its text encoder's own path, NFC or not (tests/engine/pipeline/test_byte_level_rank.py compares both with the
    reference pipeline on NFC-sensitive text)."""
    tok = load_encoding(get_store().spec("qwen3"))
    encoder = tok._text_encoder  # noqa: SLF001 -- the byte-level text encoder under test
    assert encoder is not None and encoder._is_nfc is _core().nfc_verify  # noqa: SLF001
    for text in ["Cafe\u0301 cre\u0300me bru\u0302le\u0301e", "a\u0301\u0316 x", "\u1100\u1161\u11a8 한국어",
                 "中文 text é", "ก่อน \u0e48\u0e38"]:
        assert tok.encode(text) == encoder.encode(text) == encoder.encode(unicodedata.normalize("NFC", text))
