"""The native pre-tokenizers against the ``regex`` module: generated Unicode tables, per-code-point flags,
differential fuzzing of piece boundaries, and a sweep of every code point in contexts."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest
import regex

from app.engine import native, patterns
from harness.scripts import load_script
from harness.texts import UNIFORM_PLANES, plane_sample

pytestmark = pytest.mark.skipif(not native.available(), reason=f"compiled core not built: {native.IMPORT_ERROR}")

ROOT = Path(__file__).resolve().parents[2]
BYTE_RANKS = {bytes([b]): b for b in range(256)}

#: One or two representatives of every class combination the patterns distinguish.
ALPHABET = [
    *"aAǅʰ中\u0301\u09031²٣",
    *" \t\n\r\x0b\x0c\x85\u00a0\u2028\u3000",
    *"'sSſtTrevmlLdD/.-",
    "😀",
    "\x1c",
    "\x00",
]


def _gen_module():  # type: ignore[no-untyped-def]
    return load_script("gen_unicode_tables")


@pytest.fixture(scope="module")
def regex_flags() -> list[int]:
    """Per-code-point flags computed from the installed (pinned) ``regex`` module."""
    return _gen_module().compute_flags()  # type: ignore[no-any-return]


def _core(pattern_id: str):  # type: ignore[no-untyped-def]
    return native.NativeCore(BYTE_RANKS, patterns.PATTERNS[pattern_id])


def test_committed_header_matches_regeneration(regex_flags: list[int]) -> None:
    gen = _gen_module()
    committed = gen.HEADER.read_text(encoding="utf-8")
    assert committed == gen.render(regex_flags), "unicode_tables.h is stale: run scripts/gen_unicode_tables.py"


def test_compiled_flags_equal_regex_for_every_code_point(regex_flags: list[int]) -> None:
    from app.engine._native import _core

    compiled = _core.all_unicode_flags()
    values = [compiled[2 * cp] | (compiled[2 * cp + 1] << 8) for cp in range(0x110000)]
    diff = [cp for cp in range(0x110000) if values[cp] != regex_flags[cp]]
    assert not diff, f"{len(diff)} code points differ, first U+{diff[0]:04X}"
    assert _core.REGEX_VERSION == regex_version()


def regex_version() -> str:
    from importlib.metadata import version

    return version("regex")


def test_known_class_facts() -> None:
    from app.engine._native import _core

    gen = _gen_module()
    bits = gen.FLAG_BITS
    assert _core.unicode_flags(0x85) & bits["S"]  # NEL is White_Space
    assert _core.unicode_flags(0x2028) & bits["S"]
    assert not _core.unicode_flags(0x1C) & bits["S"]  # FS is not (Python's re disagrees)
    assert _core.unicode_flags(0x17F) >> gen.LETTER_SHIFT == gen.LETTERS.index("s") + 1  # ſ matches (?i:s)
    assert _core.unicode_flags(ord("K")) >> gen.LETTER_SHIFT == 0


#: Cases per pattern; a dev run takes millions: ``NATIVE_FUZZ_CASES=2000000 NATIVE_FUZZ_SEED=7 pytest -k random``.
FUZZ_CASES = int(os.environ.get("NATIVE_FUZZ_CASES", "40000"))
FUZZ_SEED = int(os.environ.get("NATIVE_FUZZ_SEED", "20251118"))


@pytest.mark.parametrize("pattern_id", sorted(patterns.PATTERNS))
def test_scanner_matches_regex_on_random_strings(pattern_id: str) -> None:
    core = _core(pattern_id)
    compiled = regex.compile(patterns.PATTERNS[pattern_id])
    rng = random.Random(FUZZ_SEED + len(pattern_id))
    for _ in range(FUZZ_CASES):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40)))
        assert core.split(text) == compiled.findall(text), repr(text)


@pytest.mark.parametrize("pattern_id", sorted(patterns.PATTERNS))
def test_scanner_matches_regex_on_hostile_runs(pattern_id: str) -> None:
    core = _core(pattern_id)
    compiled = regex.compile(patterns.PATTERNS[pattern_id])
    cases = [
        "a" * 5000,
        "A" * 3000 + "a",
        "中A" * 1000,
        "A" * 2000 + "ʰ" + "A" * 2000,
        "\u0301" * 1000 + "x",
        "1" * 1000,
        " " * 2000 + "x",
        " \n" * 1000,
        "\n" * 500 + " " * 500,
        "!" * 2000 + "\r\n/" * 100,
        "'s'S'ſ'll'LL've're'd'm't" * 50,
        "x " * 2000 + "   ",
    ]
    for text in cases:
        assert core.split(text) == compiled.findall(text), repr(text[:40])


#: Words of ASCII letters next to what ends or extends them: the scanners' ASCII word paths take these and hand
#: everything else (a byte from 0x80 up after the letters, an apostrophe, no lowercase letter) to the general path.
WORD_PARTS = ["the", "The", "THE", "x", "I", "iPhone", "USAtoday", "abcdefghijklmnopqrstuvwxyzABCDEFGH",
              " ", " ", "  ", ",", ".", "'", "'s", "'LL", "-", "/", "_", "\n", "\r\n", "\t", "7", "42",
              "é", "É", "\u0301", "ʰ", "中", "ǅ", "\u00a0", "😀"]


@pytest.mark.parametrize("pattern_id", sorted(patterns.PATTERNS))
def test_scanner_matches_regex_on_ascii_words(pattern_id: str) -> None:
    core = _core(pattern_id)
    compiled = regex.compile(patterns.PATTERNS[pattern_id])
    rng = random.Random(FUZZ_SEED + 7 * len(pattern_id))
    weights = [12 if part.isascii() and part.strip().isalpha() else 3 if part.isascii() else 1 for part in WORD_PARTS]
    for _ in range(FUZZ_CASES // 4):
        text = "".join(rng.choices(WORD_PARTS, weights, k=rng.randint(0, 30)))
        assert core.split(text) == compiled.findall(text), repr(text)


def test_uniform_planes_are_uniform(regex_flags: list[int]) -> None:
    """The planes the sweeps below sample (``harness.texts.plane_sample``) have one set of ``regex`` properties
    between their ends, so their samples stand for every code point in them."""
    for plane in UNIFORM_PLANES:
        lo = plane << 16
        assert len(set(regex_flags[lo : lo + 0xFFFE])) == 1, f"plane {plane} is not uniform"


@pytest.mark.slow
@pytest.mark.parametrize("pattern_id", sorted(patterns.PATTERNS))
def test_every_code_point_in_contexts(pattern_id: str) -> None:
    """Each code point (surrogates excluded: text is scrubbed before scanning; uniform planes sampled, see
    ``harness.texts.plane_sample``) in a few contexts, a plane at a time."""
    core = _core(pattern_id)
    compiled = regex.compile(patterns.PATTERNS[pattern_id])
    contexts = ["a{c}b {c}{c}1 {c}'s x{c} \n{c}", "'{c}A{c}a中{c}\u0301"]
    for lo in range(0, 0x110000, 0x10000):
        chars = [chr(cp) for cp in plane_sample(lo) if not 0xD800 <= cp < 0xE000]
        text = "".join(ctx.format(c=c) for c in chars for ctx in contexts)
        got, want = core.split(text), compiled.findall(text)
        if got != want:
            i = next(k for k, (x, y) in enumerate(zip(got, want, strict=False)) if x != y)
            pytest.fail(f"block U+{lo:04X}: piece {i}: native {got[i - 2 : i + 2]!r} regex {want[i - 2 : i + 2]!r}")


#: Representatives of every class the deepseek_v3 split sequence distinguishes (CJK ranges and their edges,
#: letters/marks/punctuation/symbols inside and outside them, digits, whitespace, unmatched characters).
DEEPSEEK_ALPHABET = [
    *"aAzZé\u0301ǅʰ", *"中龥\u9fa6\u4dff一ひカ・ー\u3099\u30a0\u3040\u3097゛\u30ff\u3100〇", *"1²٣",
    *" \t\n\r\x0b\x0c\x85\u00a0\u2028\u3000", *"'sS.!-_/@[`{~", "€", "©", "😀", "\x00", "\u200d", "\ue000",
]


def _deepseek() -> tuple[native.NativeCore, Callable[[str], list[str]]]:
    from app.engine.pipeline.models.byte_level_rank import IsolatedSplits

    scanner = native.sequence_scanner_id(patterns.DEEPSEEK_V3_SPLITS)
    assert scanner != 0
    return native.NativeCore(BYTE_RANKS, "", scanner=scanner), IsolatedSplits(patterns.DEEPSEEK_V3_SPLITS).pieces


def test_split_sequence_scanner_matches_regex_on_random_strings() -> None:
    """deepseek_v3: the three splits in one native pass, against the splits applied in turn with ``regex``."""
    core, reference = _deepseek()
    rng = random.Random(FUZZ_SEED + 6)
    for _ in range(FUZZ_CASES):
        text = "".join(rng.choice(DEEPSEEK_ALPHABET) for _ in range(rng.randint(0, 40)))
        assert core.split(text) == reference(text), repr(text)


def test_split_sequence_scanner_matches_regex_on_ascii_words() -> None:
    """deepseek_v3 on words of ASCII letters (read sixteen at a time) ending at every kind of character, the CJK
    ranges among them."""
    core, reference = _deepseek()
    parts = [*WORD_PARTS, "中", "ひ", "ー", "abcdefghijklmnopq", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef"]
    weights = [12 if part.isascii() and part.strip().isalpha() else 3 if part.isascii() else 1 for part in parts]
    rng = random.Random(FUZZ_SEED + 8)
    for _ in range(FUZZ_CASES // 4):
        text = "".join(rng.choices(parts, weights, k=rng.randint(0, 30)))
        assert core.split(text) == reference(text), repr(text)


def test_split_sequence_scanner_matches_regex_on_hostile_runs() -> None:
    core, reference = _deepseek()
    cases = ["1" * 1000, "中" * 1000 + "1", "ひ・" * 500, " " * 2000 + "1", "\x00" * 3000, "\x00a" * 1000,
             "'" + "a" * 3000, "・\r\n" * 300, "a\u0301" * 1000, "  中  1  a  \n", "\u200d" * 100 + "中"]
    for text in cases:
        assert core.split(text) == reference(text), repr(text[:40])


@pytest.mark.slow
def test_split_sequence_scanner_every_code_point_in_contexts() -> None:
    """Every swept code point against the splits applied in turn with ``regex``: each BMP one in all three
    contexts, each supplementary one in one of them, in turn (the reference takes about 4 µs a character: all
    three for 1.1 million code points took most of a minute)."""
    core, reference = _deepseek()
    contexts = ["a{c}b {c}{c}1 {c}'s x{c} \n{c}", "中{c}ひ{c}・ {c}1{c}\x00{c}", "'{c}A{c}  {c}\u0301{c}\r\n"]
    for lo in range(0, 0x110000, 0x10000):
        chars = [chr(cp) for cp in plane_sample(lo) if not 0xD800 <= cp < 0xE000]
        text = "".join(ctx.format(c=c) for k, c in enumerate(chars)
                       for ctx in (contexts if lo == 0 else contexts[k % 3 : k % 3 + 1]))
        got, want = core.split(text), reference(text)
        if got != want:
            i = next(k for k, (x, y) in enumerate(zip(got, want, strict=False)) if x != y)
            pytest.fail(f"block U+{lo:04X}: piece {i}: native {got[i - 2 : i + 2]!r} regex {want[i - 2 : i + 2]!r}")
