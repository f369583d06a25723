"""Generate ``app/engine/pipeline/_hf_unicode.py``: the code points Hugging Face ``tokenizers`` normalizes as
unassigned although Python's ``unicodedata`` assigns them a combining class or a decomposition.

Hugging Face's NFC/NFD/NFKC/NFKD use older Unicode tables than Python's ``unicodedata``. A code point assigned
after those tables is, for Hugging Face, a starter with no decomposition and no composition. This script (run in
development, where ``tokenizers`` is installed; it is a test dependency, never needed at run time):

1. takes every code point Python assigns with a nonzero combining class or a decomposition mapping;
2. keeps those where Hugging Face's result differs from ``unicodedata`` in one of a few contexts, for one form
   (a new mark is always caught by the context "U+0301 X U+0323": Python reorders U+0323 across it);
3. verifies, for every kept code point, in several contexts and all four forms, that Hugging Face's result equals
   "normalize the text between occurrences of the code point with ``unicodedata``, keep the code point as is";
4. finds the new canonical composites among them (their pair composes in Python, not in Hugging Face) and checks
   that cutting the text before their second character reproduces Hugging Face (that character is a starter that
   composes backwards only into new composites);
5. writes the module.

Usage: ``python scripts/gen_hf_unicode_exceptions.py`` (add ``--check`` to compare with the committed module).
"""

from __future__ import annotations

import argparse
import sys
import unicodedata
from pathlib import Path

import tokenizers
from tokenizers import normalizers as hf_norm

FORMS = ("NFC", "NFD", "NFKC", "NFKD")
OUT = Path(__file__).resolve().parent.parent / "app" / "engine" / "pipeline" / "_hf_unicode.py"
HF = {form: getattr(hf_norm, form)() for form in FORMS}
#: Detection contexts ("X" stands for the code point).
DETECT = ("X", "aX\u0301", "\u0301X\u0323", "a\u0323X\u0301")
#: Verification contexts: alone, after a base letter, between marks of different classes (both orders), at the
#: start before marks, doubled, before a composing pair, after a Hangul syllable part, inside compatibility text.
VERIFY = ("X", "aX", "Xa", "aX\u0301", "\u0301X\u0323", "\u0323X\u0301", "a\u0323X\u0301", "a\u0301X\u0323",
          "X\u0301\u0323", "XX", "aXX\u0301", "X\u0301a\u0301", "e\u0301Xe\u0301", "\u1100X\u1161", "\ufb01X\u2460",
          "\u0627X\u0653", "\u0915X\u093c")


def model(form: str, text: str, cut: frozenset[str], before: frozenset[str]) -> str:
    """Normalization with ``cut`` characters kept as unassigned starters and text cut before ``before``."""
    out: list[str] = []
    seg: list[str] = []
    for c in text:
        if c in cut or c in before:
            out.append(unicodedata.normalize(form, "".join(seg)))
            seg = []
        if c in cut:
            out.append(c)
        else:
            seg.append(c)
    out.append(unicodedata.normalize(form, "".join(seg)))
    return "".join(out)


def hf_unicode_version(exceptions: frozenset[str]) -> str:
    """The Unicode version Hugging Face's tables agree with, from marks whose version is known: U+08D4 (9.0),
    U+0D3B and U+1DF6 (10.0), U+07FD (11.0)."""
    agrees = {"9.0": "\u08d4" not in exceptions, "10.0": "\u0d3b" not in exceptions and "\u1df6" not in exceptions,
              "11.0": "\u07fd" not in exceptions}
    newest = [v for v, ok in agrees.items() if ok]
    if agrees != {"9.0": True, "10.0": False, "11.0": False}:
        raise SystemExit(f"unexpected version evidence {agrees}; update hf_unicode_version")
    return newest[-1]


def generate() -> str:
    candidates = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000
                  and unicodedata.category(chr(cp)) != "Cn"
                  and (unicodedata.combining(chr(cp)) or unicodedata.decomposition(chr(cp)))]
    exceptions = frozenset(c for c in candidates
                           if any(HF[f].normalize_str(t) != unicodedata.normalize(f, t)
                                  for t in (x.replace("X", c) for x in DETECT) for f in FORMS))
    # New canonical composites: a two-character canonical decomposition that Python composes back.
    composites = {c: unicodedata.normalize("NFD", c) for c in exceptions
                  if unicodedata.decomposition(c) and not unicodedata.decomposition(c).startswith("<")}
    pairs = {c: d for c, d in composites.items() if len(d) == 2 and unicodedata.normalize("NFC", d) == c}
    before = frozenset(d[1] for d in pairs.values())
    for b in before:
        if unicodedata.combining(b) != 0:
            raise SystemExit(f"U+{ord(b):04X} is not a starter")
    # Every composition Python knows with such a second character must produce a new composite.
    for cp in range(0x110000):
        c = chr(cp)
        if 0xD800 <= cp < 0xE000 or c in exceptions:
            continue
        d = unicodedata.decomposition(c)
        if d and not d.startswith("<") and len(d.split()) == 2 and chr(int(d.split()[1], 16)) in before \
                and unicodedata.normalize("NFC", unicodedata.normalize("NFD", c)) == c:
            raise SystemExit(f"U+{cp:04X} composes with a cut character and is known to Hugging Face")
    bad: list[str] = []
    tests = [x.replace("X", c) for c in sorted(exceptions) for x in VERIFY]
    tests += [d[0] + d[1] + tail for d in pairs.values() for tail in ("", "\u0301", "\u0323\u0301", "a")]
    tests += ["a" + d[1] + "\u0301" for d in pairs.values()]
    for t in tests:
        for f in FORMS:
            if HF[f].normalize_str(t) != model(f, t, exceptions, before):
                bad.append(f"{f} {t!r}")
    if bad:
        raise SystemExit("Hugging Face differs from the model on:\n" + "\n".join(bad[:50]))
    version = hf_unicode_version(exceptions)

    def ranges(chars: frozenset[str]) -> str:
        cps = sorted(ord(c) for c in chars)
        spans: list[list[int]] = []
        for cp in cps:
            if spans and spans[-1][1] == cp - 1:
                spans[-1][1] = cp
            else:
                spans.append([cp, cp])
        items = [f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in spans]
        lines = ['    "' + "".join(items[i:i + 5]) + '"' for i in range(0, len(items), 5)]
        return "(\n" + "\n".join(lines) + "\n)"

    return f'''"""Code points Hugging Face ``tokenizers`` normalizes as unassigned (GENERATED — do not edit).

Produced by ``scripts/gen_hf_unicode_exceptions.py`` with tokenizers {tokenizers.__version__} against Python's
``unicodedata`` {unicodedata.unidata_version}: every code point Python assigns a nonzero combining class or a
decomposition mapping whose NFC/NFD/NFKC/NFKD in Hugging Face differs from Python's, each verified in
{len(VERIFY)} contexts for all four forms to behave in Hugging Face as an unassigned code point (a starter with
no decomposition and no composition). Hugging Face's tables agree with Unicode {version}.
"""

#: Unicode version of Python's tables the set was computed against (the set is only valid for it).
UNIDATA_VERSION = "{unicodedata.unidata_version}"
#: Unicode version Hugging Face's normalization tables correspond to.
HF_UNICODE_VERSION = "{version}"
#: The {len(exceptions)} code points, as a regular-expression character class body.
EXCEPTIONS = {ranges(exceptions)}
#: Second characters of the new canonical composites' pairs (starters): Hugging Face composes nothing into them,
#: so text is cut before each.
CUT_BEFORE = {ranges(before)}
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed module differs")
    args = parser.parse_args()
    text = generate()
    if args.check:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
