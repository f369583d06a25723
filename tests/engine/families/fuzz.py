"""A generative exactness fuzzer for the SentencePiece, Unigram, WordPiece, tekken and GGUF tokenizers (not
collected by pytest): seeded random strings from a weighted grammar of hostile fragments, each tokenizer (compiled
and pure-Python backends) against its reference (:data:`~.exactness.REFERENCES`).

    python -m tests.engine.families.fuzz [--names a,b] [--seconds S] [--seed N] [--backends native,python]

``--seconds`` is the budget of each tokenizer. Per string it compares the ids of ours and the reference, our count
with the number of the reference's ids, the decode of the reference's ids (ours vs the reference's decode), and that
no id of ours is a special token read from the text (text is always plain text); per batch of 64 strings, our
``encode_batch``/``count_batch`` on 2 threads. On a mismatch it shrinks the string by deleting characters (delta
debugging) to a minimal string that still shows the same kind of mismatch and prints it (``repr``) with both id
lists. It ends with one line per tokenizer: strings compared, characters, mismatches by kind, the seed.

Lone surrogates: only ``mistral-common`` takes them (as tiktoken, it reads them as U+FFFD); ``sentencepiece`` and
Hugging Face ``tokenizers`` refuse such a ``str``, so the grammar makes them only for tokenizers whose reference
accepts them. :func:`surrogate_check` tests ours on them everywhere.
"""

from __future__ import annotations

import argparse
import random
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from app.engine import get_tokenizer
from app.engine.tokenizer import Tokenizer
from harness.texts import SPECIAL_STRINGS, real_documents

from ..shrinking import shrink
from .exactness import REFERENCES, _reference

Gen = Callable[[random.Random], str]

#: Every kind of Unicode whitespace the families treat differently (SentencePiece escapes only U+0020; BERT
#: splits on Zs and \t\n\r; the charsmaps fold some of them).
WHITESPACE = (" " * 6 + "\t\n\r\v\f\u00a0\u0085\u1680\u2028\u2029\u202f\u205f\u3000"
              + "".join(map(chr, range(0x2000, 0x200B))) + "\x1c\x1d\x1e\x1f")

#: Characters NFKC changes: fullwidth forms, ligatures, circled / parenthesised / squared compatibility
#: characters, Hangul compatibility jamo, half-width katakana, super/subscripts, roman numerals, math letters.
NFKC = ("ｆｕｌｌＷＩＤＴＨ０１９！＂＃＄％＆（）＊＋，－．／：；＜＝＞？＠［＼］＾＿｀｛｜｝～"
        "ﬀﬁﬂﬃﬄﬅﬆ①②③⑩⑳⑴⒜ⓐⒶ㈱㈲㊀㊤㋐㌀㌔㍱㎏㎞㏄㏒™℡℃℉ªº¹²³⁴⁰₀₉ⁿ½¼¾⅓Ⅻⅻⅰ"
        "ㄱㄲㄳㄴㅏㅐㅢㆍㅤﾊﾝｶｸｶﾀｶﾅｧｨﾞﾟｰ｡｢｣､･ǄǅǆǇǈǉĲĳŀŉſµ΅ϐϑϒϕϰϱϲϴ℘ℌℍ𝐀𝐚𝔄𝕒𝟎𝟗"
        "ﹰﹱﺀﺁﻻﻼ\ufb50\ufb51\u0f77\u0f79\u2126\u212a\u212b\u2000\u3000\u00a8\u00af\u00b4\u00b8\u02d8")

COMBINING = "".join(map(chr, [*range(0x300, 0x370), 0x20D0, 0x20D1, 0x20E3, 0x1AB0, 0x1DC0, 0x302A, 0x3099,
                              0x309A, 0x05B8, 0x0651, 0x093C, 0x094D, 0x0E31, 0x0E48, 0x0F71, 0xFE20]))

SCRIPTS = {
    "cjk": (0x4E00, 0x9FFF), "hiragana": (0x3041, 0x3096), "katakana": (0x30A1, 0x30FA), "hangul": (0xAC00, 0xD7A3),
    "thai": (0x0E01, 0x0E5B), "devanagari": (0x0900, 0x097F), "arabic": (0x0600, 0x06FF), "hebrew": (0x0591, 0x05F4),
    "cyrillic": (0x0400, 0x04FF), "greek": (0x0370, 0x03FF), "latin-ext": (0x00C0, 0x024F),
    "ethiopic": (0x1200, 0x137C),
    "jamo": (0x1100, 0x11FF), "cjk-ext-b": (0x20000, 0x2A6DF), "math-alnum": (0x1D400, 0x1D7FF),
    "gothic": (0x10330, 0x1034A), "tamil": (0x0B82, 0x0BFA), "georgian": (0x10A0, 0x10FF),
}

ZERO_WIDTH = "\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad\u034f\u180e\u061c\ufff9"

EMOJI = ["\U0001F600", "\U0001F44D", "\U0001F9D1\u200d\U0001F4BB", "\U0001F468\u200d\U0001F469\u200d\U0001F467",
         "\u2764\ufe0f", "\u2764\ufe0e", "#\ufe0f\u20e3", "1\u20e3", "\U0001F3F3\ufe0f\u200d\U0001F308",
         "\U0001F1FA\U0001F1F8", "\U0001F1EF\U0001F1F5", "\U0001F1E6", "\U0001F44B\U0001F3FD", "\U0001F3FF",
         "\U0001F9D1\U0001F3FB\u200d\U0001F91D\u200d\U0001F9D1\U0001F3FF", "\u263a", "\u00a9\ufe0f", "\ufe0f",
         "\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F", "\U0001FAE0", "\U0001F004"]

SPECIAL_LOOKALIKES = ["<s>", "</s>", "<unk>", "<pad>", "<mask>", "[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]",
                      "<0x41>", "<0x0A>", "<0x00>", "<0xFF>", "<0x", "[INST]", "[/INST]", "[REF]", "[/REF]",
                      "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s", "s>", "[CLS", "##", "##ing", "▁<s>",
                      "[AVAILABLE_TOOLS]", "[TOOL_CALLS]", "[SYSTEM_PROMPT]", "<|fim_prefix|>", "\u2581\u2581"]

PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" + "“”‘’«»—–…¿¡·•§¶†‡‰′″‹›、。，！？：；「」『』【】〈〉《》※"
DIGITS = "0123456789" * 3 + "٠١٢٣٤٥٦٧٨٩۰۹०९๐๙０９²³¹½"
WORDS = ["the", "hello", "World", "don't", "I'm", "we'll", "Straße", "İstanbul", "ǅemal", "café", "naïve",
         "ΣΊΣΥΦΟΣ", "ﬁnance", "Ångström", "résumé", "Zürich", "ÆØÅ", "œuvre", "ß", "ẞ", "ı", "ǰ", "ŉ", "ﬀ"]


def _pick_range(rng: random.Random, lo: int, hi: int, n: int) -> str:
    return "".join(chr(rng.randint(lo, hi)) for _ in range(n))


def _n(rng: random.Random, top: int = 6) -> int:
    """A small count, mostly 1-3, sometimes up to ``top``."""
    return min(top, 1 + int(rng.expovariate(0.7)))


def ws_run(rng: random.Random) -> str:
    if rng.random() < 0.4:
        return rng.choice(" \n\t") * _n(rng, 12)
    return "".join(rng.choice(WHITESPACE) for _ in range(_n(rng, 8)))


def metaspace(rng: random.Random) -> str:
    parts = ["\u2581" * _n(rng, 4), " " * rng.randint(0, 3)]
    rng.shuffle(parts)
    return "".join(parts) + rng.choice(["", "a", "hello", " ", "\u2581"])


def nfkc(rng: random.Random) -> str:
    s = "".join(rng.choice(NFKC) for _ in range(_n(rng, 6)))
    if rng.random() < 0.3:
        s += "".join(rng.choice(COMBINING) for _ in range(_n(rng, 3)))
    return s


def combining(rng: random.Random) -> str:
    marks = "".join(rng.choice(COMBINING) for _ in range(_n(rng, 4)))
    return rng.choice(["", " ", "\u2581", "\t", "\u3000"]) + marks + rng.choice(["", "a", "x", " "])


def accents(rng: random.Random) -> str:
    word = "".join(rng.choice("aeiouncyAEIOUNCYsz") + rng.choice(["", "\u0301", "\u0300", "\u0308", "\u0303",
                                                                    "\u0327", "\u030c", "\u0301\u0323"])
                   for _ in range(_n(rng, 8)))
    return unicodedata.normalize(rng.choice(["NFC", "NFD", "NFKC", "NFKD"]), word) if rng.random() < 0.7 else word


def script(rng: random.Random) -> str:
    lo, hi = SCRIPTS[rng.choice(list(SCRIPTS))]
    return _pick_range(rng, lo, hi, _n(rng, 10))


def emoji(rng: random.Random) -> str:
    return "".join(rng.choice(EMOJI) for _ in range(_n(rng, 4)))


def control(rng: random.Random) -> str:
    return "".join(chr(rng.choice([*range(0x20), *range(0x7F, 0xA0)])) for _ in range(_n(rng, 4)))


def zero_width(rng: random.Random) -> str:
    return "".join(rng.choice(ZERO_WIDTH) for _ in range(_n(rng, 3)))


def odd_code_points(rng: random.Random) -> str:
    """Private use, unassigned, noncharacters, astral planes, U+10FFFF."""
    ranges = [(0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFF), (0x0378, 0x0379), (0x2FE0, 0x2FEF),
              (0xFDD0, 0xFDEF), (0xFFFE, 0xFFFF), (0x1FFFE, 0x1FFFF), (0x30000, 0x3134A), (0xE0000, 0xE007F),
              (0x10000, 0x1FFFF), (0x40000, 0x4FFFF), (0xFFF0, 0xFFF8), (0x1F000, 0x1FAFF)]
    return "".join(_pick_range(rng, *rng.choice(ranges), 1) for _ in range(_n(rng, 4)))


def digits(rng: random.Random) -> str:
    s = "".join(rng.choice(DIGITS[:30] if rng.random() < 0.7 else DIGITS) for _ in range(_n(rng, 20)))
    if rng.random() < 0.4:
        s += rng.choice(".,-/:") + "".join(rng.choice("0123456789") for _ in range(_n(rng, 6)))
    return s


def punct(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return rng.choice(PUNCT) * _n(rng, 12)
    return "".join(rng.choice(PUNCT) for _ in range(_n(rng, 8)))


def word(rng: random.Random) -> str:
    w = rng.choice(WORDS) if rng.random() < 0.5 else "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(_n(rng, 10)))
    return rng.choice([str.lower, str.upper, str.title, str.swapcase, str])(w)


def long_word(rng: random.Random) -> str:
    """Over 100 characters (BERT's whole-word ``[UNK]`` limit, long-word paths and caches)."""
    size = rng.choice([99, 100, 101, 102, rng.randint(101, 400)])
    if rng.random() < 0.4:
        unit = rng.choice(["a", "ab", "xyz", "na", "é", "中", "\u2581", "ﬁ", "1", "-", "🙂", "e\u0301"])
        return (unit * size)[:size]
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzéü中") for _ in range(size))


def special(rng: random.Random) -> str:
    return "".join(rng.choice(SPECIAL_LOOKALIKES) for _ in range(_n(rng, 3)))


def real_slice(rng: random.Random) -> str:
    docs = real_documents()
    d = rng.choice(docs)
    i = rng.randrange(max(1, len(d) - 80))
    return d[i:i + rng.randint(1, 80)]


def surrogate(rng: random.Random) -> str:
    return chr(rng.randint(0xD800, 0xDFFF)) * _n(rng, 2)


#: The grammar: fragment generators and their weights.
FRAGMENTS: list[tuple[Gen, float]] = [
    (ws_run, 14), (metaspace, 5), (nfkc, 8), (combining, 5), (accents, 5), (script, 8), (emoji, 4), (control, 4),
    (zero_width, 3), (odd_code_points, 3), (digits, 5), (punct, 5), (word, 12), (long_word, 1.5), (special, 3),
    (real_slice, 5),
]


def generate(rng: random.Random, *, surrogates: bool = False) -> str:
    """One random string: 1-12 fragments, often joined by whitespace runs, often led or ended by one."""
    gens, weights = zip(*FRAGMENTS, strict=True)
    if surrogates:
        gens, weights = (*gens, surrogate), (*weights, 2)
    parts = []
    if rng.random() < 0.3:
        parts.append(ws_run(rng))
    for _ in range(min(12, 1 + int(rng.expovariate(0.35)))):
        parts.append(rng.choices(gens, weights)[0](rng))
        if rng.random() < 0.35:
            parts.append(ws_run(rng) if rng.random() < 0.6 else " ")
    if rng.random() < 0.3:
        parts.append(ws_run(rng))
    text = "".join(parts)
    r = rng.random()
    if r > 0.97:  # a long mixture (long-input paths, caches, chunking)
        return text + "".join(generate(rng, surrogates=surrogates) for _ in range(rng.randint(5, 30)))
    if r < 0.05:
        text = unicodedata.normalize("NFD", text)
    elif r < 0.08:
        text = text * 2
    return text


def surrogates_accepted(name: str) -> bool:
    """Whether ``name``'s reference takes a ``str`` with lone surrogates."""
    return REFERENCES[name] == "mistral-common"


def _parsed(tok: Tokenizer, text: str, ids: list[int]) -> bool:
    """Whether ``ids`` hold a special token whose name is written in ``text`` (read from the text as a token;
    the unknown token, which stands for unknown text, is not counted)."""
    named = {i for n, i in tok.special_tokens.items() if n in text and "unk" not in n.lower()}
    return bool(named) and any(i in named for i in ids)


def parsed_specials(name: str, encode: Callable[[str], list[int]], tok: Tokenizer) -> tuple[str, ...]:
    """The special-token strings the reference (not ours) reads as tokens; strings holding one are skipped."""
    out = []
    for s in {*SPECIAL_STRINGS, *SPECIAL_LOOKALIKES}:
        probe = f"x {s}y"
        try:
            ref = encode(probe)
        except Exception:
            out.append(s)
            continue
        if _parsed(tok, probe, ref) or _reads_unknown_name(tok, probe, ref):
            out.append(s)
    return tuple(sorted(out))


def _reads_unknown_name(tok: Tokenizer, text: str, ref: list[int]) -> bool:
    """Whether the reference read the unknown token's own name in ``text`` as that token, where ours (text is text)
    did not: XLM-R's Unigram vocabulary holds ``<unk>`` as a piece that Hugging Face matches in text."""
    unk = {i for n, i in tok.special_tokens.items() if n in text and "unk" in n.lower()}
    return bool(unk & set(ref)) and not unk & set(tok.encode(text))


@dataclass
class Checker:
    """Compares one tokenizer (both backends) with its reference on a string."""

    name: str
    backends: tuple[str, ...] = ("native", "python")
    toks: dict[str, Tokenizer] = field(init=False)
    skip: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.toks = {b: get_tokenizer(self.name, backend=b) for b in self.backends}
        self.encode, self.decode = _reference(self.name)
        self.skip = parsed_specials(self.name, self.encode, next(iter(self.toks.values())))

    def usable(self, text: str) -> bool:
        return not any(s in text for s in self.skip)

    def check(self, text: str) -> tuple[str, object, object] | None:
        """None when every backend agrees with the reference, else ``(kind, ours, reference)``."""
        try:
            ref = self.encode(text)
        except Exception as exc:  # the reference refuses: not ours to compare
            return ("reference-error", None, repr(exc))
        ref_text = self.decode(ref)
        for b, tok in self.toks.items():
            try:
                ids = tok.encode(text)
            except Exception as exc:
                return (f"{b}:crash", repr(exc), ref)
            if ids != ref:
                return (f"{b}:ids", ids, ref)
            n = tok.count(text)
            if n != len(ref):
                return (f"{b}:count", n, len(ref))
            if _parsed(tok, text, ids):
                return (f"{b}:special-from-text", ids, ref)
            try:
                got = tok.decode(ref)
            except Exception as exc:
                return (f"{b}:decode-crash", repr(exc), ref_text)
            if got != ref_text:
                return (f"{b}:decode", got, ref_text)
        return None

    def check_batch(self, texts: list[str]) -> str | None:
        """The first of ``texts`` whose ``encode_batch``/``count_batch`` (2 threads) entry differs from the
        reference (or from the kind ``"<backend>:batch"`` of check), else None."""
        refs = [self.encode(t) for t in texts]
        for tok in self.toks.values():
            ids, counts = tok.encode_batch(texts, num_threads=2), tok.count_batch(texts, num_threads=2)
            for t, r, i, c in zip(texts, refs, ids, counts, strict=True):
                if i != r or c != len(r):
                    return t
        return None

    def check_batched(self, text: str) -> tuple[str, object, object] | None:
        """:meth:`check` for a batch of ``text`` in the middle of others (kind ``"<backend>:batch"``)."""
        texts = ["a", text, " b", text]
        ref = self.encode(text)
        for b, tok in self.toks.items():
            ids, counts = tok.encode_batch(texts, num_threads=2), tok.count_batch(texts, num_threads=2)
            if ids[1] != ref or ids[3] != ref or counts[1] != len(ref) or counts[3] != len(ref):
                return (f"{b}:batch", (ids[1], counts[1]), ref)
        return None


@dataclass
class Report:
    name: str
    seed: int
    strings: int = 0
    chars: int = 0
    skipped: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    repros: list[tuple[str, str, object, object]] = field(default_factory=list)

    def line(self, seconds: float) -> str:
        bad = sum(v for k, v in self.kinds.items() if k != "reference-error")  # the reference refused: not compared
        return (f"{self.name}: {self.strings} strings, {self.chars} chars, seed {self.seed}, {bad} mismatches "
                f"{dict(self.kinds)}, {self.skipped} skipped (reference reads a special), {seconds:.0f}s")


def fuzz(checker: Checker, *, seed: int, seconds: float | None = None, count: int | None = None,
         max_repros: int = 5, verbose: bool = True) -> Report:
    """Run the grammar against ``checker`` for ``seconds`` or ``count`` strings; shrink and keep up to
    ``max_repros`` mismatches (one per kind and minimal string)."""
    rng = random.Random(f"{checker.name}:{seed}")
    report = Report(checker.name, seed)
    deadline = time.monotonic() + seconds if seconds is not None else float("inf")
    sur = surrogates_accepted(checker.name)
    seen: set[tuple[str, str]] = set()
    batch: list[str] = []
    while time.monotonic() < deadline and (count is None or report.strings < count):
        text = generate(rng, surrogates=sur)
        if not checker.usable(text):
            report.skipped += 1
            continue
        report.strings += 1
        report.chars += len(text)
        batch.append(text)
        bad = checker.check(text)
        check = checker.check
        if bad is None and len(batch) >= 64:
            odd = checker.check_batch(batch)
            batch = []
            if odd is not None:
                text, check = odd, checker.check_batched
                bad = check(text) or ("batch:unreproduced", None, None)
        if bad is None:
            continue
        kind = bad[0]
        report.kinds[kind] += 1
        if kind in ("reference-error", "batch:unreproduced") or len(report.repros) >= max_repros:
            continue

        def same(t: str, kind: str = kind, check: Callable[[str], tuple[str, object, object] | None] = check) -> bool:
            if not checker.usable(t):
                return False
            r = check(t)
            return r is not None and r[0] == kind

        small = shrink(text, same, budget=3000)
        if (kind, small) in seen:
            continue
        seen.add((kind, small))
        res = check(small) or bad
        report.repros.append((kind, small, res[1], res[2]))
        if verbose:
            print(f"MISMATCH {checker.name} {kind}: {small!r}\n  ours {res[1]!r}\n  ref  {res[2]!r}\n"
                  f"  (from {text!r})", flush=True)
    return report


def surrogate_check(tok: Tokenizer, rng: random.Random, count: int) -> list[str]:
    """Ours on strings with lone surrogates: each must give the ids of the same string with U+FFFD for them (a
    clean result), or raise ``ValueError`` (a clean error). Returns the strings that did neither."""
    wrong = []
    for _ in range(count):
        text = generate(rng, surrogates=True)
        clean = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        try:
            ids = tok.encode(text)
        except ValueError:
            continue
        except Exception:
            wrong.append(text)
            continue
        if ids != tok.encode(clean) or tok.count(text) != len(ids):
            wrong.append(text)
    return wrong


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", default=",".join(REFERENCES))
    parser.add_argument("--seconds", type=float, default=60.0, help="budget per tokenizer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backends", default="native,python")
    args = parser.parse_args()
    for name in args.names.split(","):
        checker = Checker(name, tuple(args.backends.split(",")))
        t0 = time.monotonic()
        report = fuzz(checker, seed=args.seed, seconds=args.seconds)
        odd = {b: len(surrogate_check(tok, random.Random(args.seed), 200)) for b, tok in checker.toks.items()}
        backends = {b: tok.backend for b, tok in checker.toks.items()}
        print(report.line(time.monotonic() - t0) + f"; backends {backends}; skip list {list(checker.skip)}; "
              f"lone-surrogate strings not clean {odd}", flush=True)


if __name__ == "__main__":
    main()
