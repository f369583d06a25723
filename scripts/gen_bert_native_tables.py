"""Regenerate ``app/engine/_native/bert_tables.h``: the BERT character tables of the compiled WordPiece core.

Every entry is computed by the pure-Python reference itself (:mod:`app.engine.pipeline.bert`, i.e. this
interpreter's ``unicodedata`` plus the flips of :mod:`app.engine.pipeline.bert_tables`), so the C core classifies
and maps each code point exactly as the reference does. Per code point:

* flags: dropped by clean text, whitespace, Chinese character, punctuation, non-spacing mark (as the reference's
  ``is_control``/``WHITESPACE``/``is_chinese_char``/``is_punctuation``/``is_nonspacing_mark`` say), and "reorders"
  (:data:`app.engine.pipeline.bert.REORDERING`: its decomposition keeps a character that NFD's canonical
  reordering can move, so the core leaves such text to the reference's whole-string normalizer);
* its output under strip accents only, lowercase only, and both (``BertNormalizer._char`` with clean text and
  Chinese handling off), stored only where it is not the character itself; Hangul syllables instead carry a flag
  (the core decomposes them arithmetically; checked here to equal the reference's output).

The tables are only valid for the ``unicodedata`` version they were built with; the engine checks
``UNIDATA_VERSION`` before using the core's normalizer. Usage: ``python scripts/gen_bert_native_tables.py`` (writes
the header in place, ~1 minute).
"""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.engine.pipeline.bert import (  # noqa: E402
    WHITESPACE,
    BertNormalizer,
    combining_class,
    is_chinese_char,
    is_control,
    is_nonspacing_mark,
    is_punctuation,
)
from app.engine.pipeline.bert_tables import NFD, REORDERING, UNIDATA_VERSION  # noqa: E402

OUT = ROOT / "app" / "engine" / "_native" / "bert_tables.h"
DROP, WS, CJK, PUNCT, MARK, HANGUL, REORDERS, NONSTARTERS = 1, 2, 4, 8, 16, 32, 64, 128
IDENTITY = 0xFF
BLOCK = 256


def _hangul(cp: int) -> str:
    """The canonical decomposition of a Hangul syllable (the arithmetic of the Unicode standard)."""
    s = cp - 0xAC00
    lead, vowel, tail = 0x1100 + s // 588, 0x1161 + (s % 588) // 28, s % 28
    return chr(lead) + chr(vowel) + (chr(0x11A7 + tail) if tail else "")


def _check_reordering(ch: str, maps: list[BertNormalizer], kept_classes: dict[int, int]) -> None:
    """The shape the core relies on for a character of REORDERING: under strip accents (with or without
    lowercasing) it keeps at most one starter, first, then characters of nonzero class that are word characters
    (not whitespace, not punctuation) and unchanged by lowercasing; records their classes."""
    outs = [maps[0]._char(ch), maps[2]._char(ch)]
    for out in outs:
        body = out[1:] if out and combining_class(out[0]) == 0 else out
        for d in body:
            if combining_class(d) == 0 or d in WHITESPACE or is_punctuation(d) or d.lower() != d:
                raise SystemExit(f"U+{ord(ch):04X}: its stripped form {out!r} does not have the shape the core needs")
            kept_classes[ord(d)] = combining_class(d)
    if outs[1] != "".join(c.lower() for c in outs[0]) and outs[1][1:] != outs[0][1:]:
        raise SystemExit(f"U+{ord(ch):04X}: lowercasing changes its combining characters")


def main() -> None:
    if unicodedata.unidata_version != UNIDATA_VERSION:
        raise SystemExit(f"unicodedata {unicodedata.unidata_version} != bert_tables {UNIDATA_VERSION}")
    maps = [BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=s, lowercase=lo)
            for s, lo in ((True, False), (False, True), (True, True))]
    pool: list[int] = []
    pooled: dict[str, int] = {}
    records: dict[tuple[int, ...], int] = {}
    per_cp: list[int] = []
    kept_classes: dict[int, int] = {}
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:  # the core turns surrogates into U+FFFD before looking anything up
            per_cp.append(0)
            continue
        ch = chr(cp)
        flags = 0
        if ch == "\0" or ch == "\ufffd" or is_control(ch):
            flags |= DROP
        if ch in WHITESPACE:
            flags |= WS
        if is_chinese_char(ch):
            flags |= CJK
        if is_punctuation(ch):
            flags |= PUNCT
        if is_nonspacing_mark(ch):
            flags |= MARK
        if cp in REORDERING:
            flags |= REORDERS
            _check_reordering(ch, maps, kept_classes)
        if all(combining_class(d) > 0 for d in NFD.get(cp) or unicodedata.normalize("NFD", ch)):
            flags |= NONSTARTERS
        fields: list[int] = [flags]
        if 0xAC00 <= cp <= 0xD7A3:
            jamo = _hangul(cp)
            if [m._char(ch) for m in maps] != [jamo, ch, jamo]:
                raise SystemExit(f"U+{cp:04X}: the reference does not decompose it as the core would")
            fields = [flags | HANGUL, IDENTITY, 0, IDENTITY, 0, IDENTITY, 0]
        for m in maps if len(fields) == 1 else ():
            out = m._char(ch)
            if out == ch:
                fields += [IDENTITY, 0]
                continue
            if out not in pooled:
                pooled[out] = len(pool)
                pool.extend(ord(c) for c in out)
            fields += [len(out), pooled[out]]
        key = tuple(fields)
        if key not in records:
            records[key] = len(records)
        per_cp.append(records[key])
    if len(records) >= 1 << 16 or len(pool) >= 1 << 16:
        raise SystemExit("tables outgrew 16-bit indices")
    blocks: dict[tuple[int, ...], int] = {}
    stage1: list[int] = []
    for b in range(0, 0x110000, BLOCK):
        block = tuple(per_cp[b:b + BLOCK])
        if block not in blocks:
            blocks[block] = len(blocks)
        stage1.append(blocks[block])
    lines = [
        "/* GENERATED by scripts/gen_bert_native_tables.py from the pure-Python BERT reference — do not edit. */",
        "#ifndef BERT_TABLES_H", "#define BERT_TABLES_H", "#include <stdint.h>", "",
        f'#define BERT_UNIDATA_VERSION "{UNIDATA_VERSION}"',
        *(f"#define BERT_{name} {value}" for name, value in (
            ("DROP", DROP), ("WS", WS), ("CJK", CJK), ("PUNCT", PUNCT), ("MARK", MARK), ("HANGUL", HANGUL),
            ("REORDERS", REORDERS), ("NONSTARTERS", NONSTARTERS), ("IDENTITY", IDENTITY),
            ("BLOCK_SHIFT", BLOCK.bit_length() - 1))),
        "", "/* flags, then (length, pool offset) of the strip / lower / strip+lower outputs; length",
        "   BERT_IDENTITY = the character itself */",
        "typedef struct { uint8_t flags, n[3]; uint16_t off[3]; } bert_record;", "",
        f"static const bert_record bert_records[{len(records)}] = {{",
    ]
    for key in records:
        f, n0, o0, n1, o1, n2, o2 = key
        lines.append(f"    {{{f}, {{{n0}, {n1}, {n2}}}, {{{o0}, {o1}, {o2}}}}},")
    lines.append("};")
    lines.append(f"static const uint32_t bert_pool[{max(1, len(pool))}] = {{")
    for i in range(0, len(pool), 12):
        lines.append("    " + ", ".join(f"0x{c:X}" for c in pool[i:i + 12]) + ",")
    lines.append("};")
    lines.append("/* (code point, combining class) of the characters REORDERS characters keep, by code point */")
    lines.append(f"#define BERT_N_CLASSES {len(kept_classes)}")
    lines.append(f"static const uint32_t bert_classes[{len(kept_classes)}][2] = {{")
    for cp, ccc in sorted(kept_classes.items()):
        lines.append(f"    {{0x{cp:X}, {ccc}}},")
    lines.append("};")
    lines.append(f"static const uint16_t bert_stage1[{len(stage1)}] = {{")
    for i in range(0, len(stage1), 24):
        lines.append("    " + ", ".join(map(str, stage1[i:i + 24])) + ",")
    lines.append("};")
    lines.append(f"static const uint16_t bert_stage2[{len(blocks) * BLOCK}] = {{")
    for block in blocks:
        for i in range(0, BLOCK, 32):
            lines.append("    " + ", ".join(map(str, block[i:i + 32])) + ",")
    lines += ["};", "", "#endif", ""]
    OUT.write_text("\n".join(lines))
    print(f"{OUT}: {len(records)} records, {len(pool)} pooled code points, {len(blocks)} blocks")


if __name__ == "__main__":
    main()
