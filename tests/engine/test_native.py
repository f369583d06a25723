"""The native backend against the pure-Python reference: identical ids everywhere, backend selection, the
no-compiler fallback, and GIL-released threads."""

from __future__ import annotations

import logging
import os
import random
import subprocess
import sys
import threading
from array import array
from pathlib import Path

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine import CacheStats, RankBPETokenizer, get_store, get_tokenizer, list_tokenizers, native
from app.engine.bpe import byte_pair_encode
from app.engine.patterns import GPT2

pytestmark = pytest.mark.skipif(not native.available(), reason=f"compiled core not built: {native.IMPORT_ERROR}")

ROOT = Path(__file__).resolve().parents[2]
#: The tiktoken-format tokenizers (byte-level BPE over ranks, the compiled core's own family).
NAMES = [n for n in list_tokenizers() if get_store().spec(n).format == "tiktoken"]
PIECES = [
    "a", "A", "ǅ", "ʰ", "中", "日本語", "\u0301", "\u0903", "1", "²", "٣", "123456", " ", "  ", "\t", "\n", "\r\n",
    "\x0b", "\x0c", "\x85", "\u00a0", "\u2028", "\u3000", "'", "'s", "'S", "'ſ", "'ll", "'VE", "'re", "'d", "'m",
    "'t", "/", ".", "-", "😀", "\x1c", "\x00", "hello", " world", "Привет", " мир", "Việt", " Việt", "<|endoftext|>",
    "ﬀ", "İ", "ß", "\ufeff", "\u200d", "x\u0301y", "ＡＢＣ", "\U0001f468\u200d\U0001f469",
]  # fmt: skip


def hostile_corpus(seed: int = 4, n: int = 400) -> list[str]:
    """Glued random sequences of class representatives, plus long runs that stress the O(n log n) paths."""
    rng = random.Random(seed)
    texts = ["", "hello world", "a  b", "today\n ", " \n  \n", "X.<|im_end|>", "don'T", "I'M fine'll"]
    for _ in range(n):
        texts.append("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 30))))
    texts += [
        "a" * 20_000,
        "^" * 20_000,
        "1" * 5_001,
        " " * 10_000 + "x",
        "\n" * 3_000 + " " * 3_000,
        "中" * 8_000,
        "Привет" * 2_000,
        "ab" * 9_000,
        "🙂" * 3_000,
    ]
    return texts


@pytest.fixture(scope="module", params=NAMES)
def pair(request: pytest.FixtureRequest) -> tuple[RankBPETokenizer, RankBPETokenizer]:
    """(native, python) encodings of one bundled tokenizer."""
    return get_tokenizer(request.param, backend="native"), get_tokenizer(request.param, backend="python")


def test_backends_are_what_they_say(pair: tuple[RankBPETokenizer, RankBPETokenizer]) -> None:
    fast, ref = pair
    assert fast.backend == "native" and ref.backend == "python"
    assert fast is not ref and fast is get_tokenizer(fast.name, backend="native")


def test_native_equals_reference_on_hostile_corpus(pair: tuple[RankBPETokenizer, RankBPETokenizer]) -> None:
    fast, ref = pair
    for text in hostile_corpus():
        want = ref.encode(text)
        assert fast.encode(text) == want, repr(text[:60])
        assert fast.count(text) == len(want)
        assert fast.encode_with_offsets(text) == ref.encode_with_offsets(text), repr(text[:60])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.one_of(
        st.text(max_size=80),
        st.lists(st.sampled_from(PIECES), max_size=25).map("".join),
    )
)
def test_native_equals_reference_on_arbitrary_text(pair: tuple[RankBPETokenizer, RankBPETokenizer], text: str) -> None:
    fast, ref = pair
    want = ref.encode(text)  # lone surrogates included: both scrub them to U+FFFD
    assert fast.encode(text) == want
    assert fast.count(text) == len(want)
    assert fast.encode_with_offsets(text) == ref.encode_with_offsets(text)


def test_prefix_suffix_parts_and_surrogates(pair: tuple[RankBPETokenizer, RankBPETokenizer]) -> None:
    fast, ref = pair
    special = next(iter(fast.special_tokens))
    text = "lone \ud800 and \udfff pair \ud83d\ude00 end"
    assert fast.encode(text, prefix=[special], suffix=[special]) == ref.encode(text, prefix=[special], suffix=[special])
    assert fast.count(text, prefix=[special]) == ref.count(text, prefix=[special])
    assert fast.encode("\ud800") == ref.encode("\ufffd")


def test_bpe_equals_reference_merge() -> None:
    tokenizer = get_tokenizer(NAMES[0], backend="native")
    core = tokenizer._native
    assert core is not None
    rng = random.Random(7)
    alphabet = [b"a", b"b", b"th", b"e", b" ", b"\xe4\xb8\xad", b"\xff", b"in", b"g"]
    for _ in range(2_000):
        piece = b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 90)))  # both merge loops
        want = [tokenizer._ranks[piece]] if piece in tokenizer._ranks else byte_pair_encode(piece, tokenizer._ranks)
        assert core.bpe(piece) == want, piece


def test_custom_pattern_uses_regex_split_and_native_bpe() -> None:
    ref = get_tokenizer("cl100k_base", backend="python")
    kwargs = dict(pattern=r"\p{L}+|\p{N}|[^\p{L}\p{N}]+", mergeable_ranks=ref._ranks, special_tokens={})
    fast = RankBPETokenizer("custom", backend="native", **kwargs)  # type: ignore[arg-type]
    slow = RankBPETokenizer("custom", backend="python", **kwargs)  # type: ignore[arg-type]
    assert fast._native is not None and not fast._native.has_scanner
    for text in hostile_corpus(seed=9, n=100):
        assert fast.encode(text) == slow.encode(text)
        assert fast.count(text) == len(slow.encode(text))
        assert fast.encode_with_offsets(text) == slow.encode_with_offsets(text)


def test_batches_with_threads_equal_serial(pair: tuple[RankBPETokenizer, RankBPETokenizer]) -> None:
    fast, ref = pair
    texts = hostile_corpus(seed=11, n=200)
    want = [ref.encode(t) for t in texts]
    assert fast.encode_batch(texts, num_threads=2) == want
    assert fast.count_batch(texts, num_threads=3) == [len(w) for w in want]


def test_native_batch_runs_in_c_threads_and_falls_back_for_surrogates() -> None:
    """The compiled batch (its own threads; UTF-8 built from every str kind) equals encode() text by text."""
    fast = get_tokenizer("cl100k_base", backend="native")
    assert fast._native is not None and fast._native.encode_batch is not None
    rng = random.Random(17)
    # 1-, 2- and 4-byte str kinds, empty texts, lone surrogates; ~1 MB in all, so the core starts its threads
    texts = ["", "ascii only", "é" * 9, "Привет мир", "😀 x", "a\ud800b", "\udfff", "中文" * 500]
    texts += ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 2_000))) for _ in range(300)]
    want = [fast.encode(t) for t in texts]
    for threads in (1, 2, 4, 300):
        assert fast.encode_batch(texts, num_threads=threads) == want
        assert fast.count_batch(texts, num_threads=threads) == [len(w) for w in want]
    raw = fast._native.encode_batch(texts, 2)
    assert [r is None for r in raw] == ["\ud800" in t or "\udfff" in t for t in texts]  # the caller scrubs those
    with pytest.raises(TypeError, match=r"texts\[1\] must be str"):
        fast.encode_batch(["a", b"b"], num_threads=2)  # type: ignore[list-item]


@pytest.mark.parametrize("name", NAMES)
def test_count_utf8_buffers_counts_arrow_string_layout_in_place(name: str) -> None:
    """Counting (and encoding) texts from one UTF-8 buffer and their offsets (Arrow's string layout; int32 and
    int64 offsets, a slice's offsets) equals count_batch (encode_batch) text by text, natively and in the
    pure-Python base; invalid UTF-8 (as strict as Python's decoder) and offsets outside the buffer are ValueErrors."""
    import array

    fast = get_tokenizer(name, backend="native")
    slow = get_tokenizer(name, backend="python")
    assert fast._native is not None and fast._native.count_utf8 is not None
    texts = [t for t in hostile_corpus(seed=21, n=150) if "\ud800" not in t and "\udfff" not in t] + ["", ""]
    raw = [t.encode("utf-8") for t in texts]
    data = b"".join(raw)
    bounds = [0]
    for r in raw:
        bounds.append(bounds[-1] + len(r))
    want = fast.count_batch(texts)
    for wide in (True, False):
        offsets = array.array("q" if wide else "i", bounds)
        assert fast.count_utf8_buffers(data, offsets, wide=wide) == want
        assert slow.count_utf8_buffers(data, offsets, wide=wide) == want
    ids_want = fast.encode_batch(texts)
    for tokenizer in (fast, slow):
        flat, starts = tokenizer.encode_utf8_buffers(data, array.array("q", bounds))
        ids, at = array.array("I", flat), array.array("i", starts)
        assert [list(ids[at[i]:at[i + 1]]) for i in range(len(texts))] == ids_want
    tail = array.array("q", bounds[5:])  # a slice: offsets need not start at 0
    assert fast.count_utf8_buffers(data, tail) == want[5:]
    assert fast.count_utf8_buffers(b"", array.array("q", [0])) == []
    for bad in (b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"a\xc3"):
        blob = b"ok" + bad
        with pytest.raises(ValueError, match="text 1 is not valid UTF-8"):
            fast.count_utf8_buffers(blob, array.array("q", [0, 2, len(blob)]))
        with pytest.raises(ValueError, match="text 1 is not valid UTF-8"):
            slow.count_utf8_buffers(blob, array.array("q", [0, 2, len(blob)]))
        with pytest.raises(ValueError, match="text 1 is not valid UTF-8"):
            fast.encode_utf8_buffers(blob, array.array("q", [0, 2, len(blob)]))
    with pytest.raises(ValueError, match="outside the data buffer"):
        fast.count_utf8_buffers(b"abc", array.array("q", [0, 2, 9]))
    with pytest.raises(ValueError, match="n \\+ 1 values"):
        fast.count_utf8_buffers(b"abc", b"\x00\x00\x00")


def test_concurrent_threads_share_one_encoding() -> None:
    fast = get_tokenizer("o200k_base", backend="native")
    texts = hostile_corpus(seed=13, n=50)
    want = [fast.encode(t) for t in texts]
    errors: list[str] = []

    def work(k: int) -> None:
        for i in range(len(texts)):
            j = (i + k) % len(texts)
            if fast.encode(texts[j]) != want[j] or fast.count(texts[j]) != len(want[j]):
                errors.append(repr(texts[j][:30]))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_environment_selects_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENGINE_ENV, "python")
    assert native.resolve_backend() == "python"
    assert get_tokenizer("gpt2").backend == "python"
    assert native.resolve_backend("native") == "native"  # an explicit argument wins
    monkeypatch.setenv(native.ENGINE_ENV, "native")
    assert get_tokenizer("gpt2").backend == "native"
    monkeypatch.delenv(native.ENGINE_ENV)
    assert native.resolve_backend() == "native"
    monkeypatch.setenv(native.ENGINE_ENV, "rust")
    with pytest.raises(ValueError, match="TOKENIZER_ENGINE"):
        native.resolve_backend()
    with pytest.raises(ValueError, match="backend"):
        native.resolve_backend("fast")


def test_load_logs_the_backend(caplog: pytest.LogCaptureFixture) -> None:
    """The record is caught on the ``app.engine`` logger itself: once an app has been created in this process the
    ``app`` logger no longer propagates to the root (where caplog listens by default), whatever pytest version."""
    ref = get_tokenizer("gpt2", backend="python")
    logger = logging.getLogger("app.engine")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="app.engine"):
            RankBPETokenizer("x", pattern=ref.pattern, mergeable_ranks=ref._ranks, special_tokens={}, backend="native")
    finally:
        logger.removeHandler(caplog.handler)
    assert any("native backend" in r.getMessage() for r in caplog.records)


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in (native.ENGINE_ENV, native.DISABLE_ENV)}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=300
    )


def test_without_the_extension_the_engine_falls_back_and_says_so() -> None:
    code = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "from app.engine import get_tokenizer, native\n"
        "assert not native.available()\n"
        "enc = get_tokenizer('gpt2')\n"
        "print(enc.backend, enc.encode('hello world'))\n"
    )
    proc = _run(code, TOKENIZER_NATIVE_DISABLE="1", TOKENIZER_ENGINE="native")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "python [31373, 995]"
    assert "compiled core is not available" in proc.stderr
    assert "python backend" in proc.stderr


def test_default_backend_is_native_in_a_fresh_process() -> None:
    proc = _run("from app.engine import get_tokenizer; print(get_tokenizer('gpt2').backend)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "native"


def test_native_piece_cache_counts_and_never_changes_output() -> None:
    ref = get_tokenizer("cl100k_base", backend="python")
    kwargs = dict(pattern=ref.pattern, mergeable_ranks=ref._ranks, special_tokens={})
    cached = RankBPETokenizer("c", backend="native", cache_size=64, **kwargs)  # type: ignore[arg-type]
    uncached = RankBPETokenizer("u", backend="native", cache_size=0, **kwargs)  # type: ignore[arg-type]
    texts = hostile_corpus(seed=17, n=150) + ["Привет мир, привет мир " * 50]
    for _ in range(2):  # the second pass hits the cache (and evicts: 64 slots)
        for text in texts:
            want = ref.encode(text)
            assert cached.encode(text) == want and cached.count(text) == len(want)
            assert uncached.encode(text) == want
    stats = cached.cache_stats()
    assert stats.hits > 0 and stats.misses > 0 and 0 < stats.size <= stats.max_size == 64
    assert uncached.cache_stats() == CacheStats(0, 0, 0, 0)
    cached.clear_cache()
    assert cached.cache_stats() == CacheStats(0, 0, 0, 64)
    assert cached.encode(texts[-1]) == ref.encode(texts[-1])


GIL_PROBE = """
import sys, threading
from app.engine import get_tokenizer
enc = get_tokenizer("cl100k_base", backend="native")
text = "a" * 8_000_000  # one long piece: seconds of BPE inside one native call
sys.setswitchinterval(1000.0)  # no forced GIL hand-offs: only code that releases the GIL lets others run
entered, done = threading.Event(), []
def work():
    entered.set()
    n = enc.count(text)
    done.append(n)
worker = threading.Thread(target=work)
worker.start()
entered.wait()  # we can only wake up while the worker is in count() if count() released the GIL
print("inside" if not done else "after")
worker.join()
print(done[0] > 0)
"""


def test_count_releases_the_gil() -> None:
    """With forced GIL switching off, the main thread runs while a worker is inside a native count()."""
    proc = _run(GIL_PROBE)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "inside"


# ------------------------------------------------------------------------------------------ atomic characters
# The core may start BPE from whole characters instead of their bytes where that provably changes nothing
# (tokcore.c, "atomic chars"). These tests compare it with the same core starting from bytes, and with the
# pure-Python reference on vocabularies built to break the rule.


def _atomic_pair(name: str) -> tuple[object, object]:
    from app.engine._native import _core

    tokenizer = get_tokenizer(name, backend="native")
    assert tokenizer._native is not None
    scanner = tokenizer._native.scanner
    return _core.Core(tokenizer._ranks, scanner, 0, True), _core.Core(tokenizer._ranks, scanner, 0, False)


@pytest.mark.parametrize("name", NAMES)
def test_atomic_characters_never_change_ids(name: str) -> None:
    from harness.realtext import documents, strings

    whole, from_bytes = _atomic_pair(name)
    assert whole.atomic_chars > 100 and from_bytes.atomic_chars == 0  # type: ignore[attr-defined]
    ranks = get_tokenizer(name, backend="native")._ranks
    rng = random.Random(5)
    # every single-character token of the vocabulary, glued to random neighbours (the contexts the rule checks)
    chars = [c for t in ranks if 2 <= len(t) <= 4 and len(c := t.decode("utf-8", "replace")) == 1 and c != "\ufffd"]
    neighbours = chars + [chr(c) for c in range(32, 127)] + [" ", "\n", "é", "中", "\u0e01", "\u0301"]
    texts = hostile_corpus(seed=13, n=300)
    for _ in range(3_000):
        k = rng.randint(1, 40)
        texts.append("".join(rng.choice(chars if rng.random() < 0.6 else neighbours) for _ in range(k)))
    for doc in documents()[:60]:
        texts.extend(strings(doc))
    for text in texts:
        assert whole.encode(text) == from_bytes.encode(text), text  # type: ignore[attr-defined]
    tokens = list(ranks)
    for _ in range(3_000):  # raw bytes, valid UTF-8 or not, straight into BPE
        piece = b"".join(rng.choice(tokens) for _ in range(rng.randint(1, 10)))
        assert whole.bpe(piece) == from_bytes.bpe(piece), piece  # type: ignore[attr-defined]


def _byte_vocab(*extra: bytes) -> dict[bytes, int]:
    ranks = {bytes([b]): b for b in range(256)}
    for i, token in enumerate(extra):
        ranks[token] = 256 + i
    return ranks


def test_atomic_characters_respect_cheaper_cross_merges() -> None:
    """A cross-boundary token ranked below the character ('\\xd0' glued to the space before it) must win."""
    from app.engine._native import _core

    o = "о".encode()  # b"\xd0\xbe"
    cases = [
        _byte_vocab(b" \xd0", o),  # ends with x + a proper prefix of the character
        _byte_vocab(b"\xbe!", o),  # starts with a proper suffix + y
        _byte_vocab(o, b" " + o, b"x" + o),  # contains x + the character: ranks above it, harmless
        _byte_vocab(b"\xd0\xbe\xd0", o),  # a token spanning two characters, cheaper than the character
        _byte_vocab(b"\xbe\xd0", o, b"\xd0\xb2", "ов".encode()),
    ]
    pieces = [b" \xd0\xbe", b"\xd0\xbe!", b"x\xd0\xbe ", b"\xd0\xbe\xd0\xbe", "ово".encode(), "вовов!".encode()]
    pieces.append(o)
    for ranks in cases:
        core = _core.Core(ranks, 0, 0, True)
        for piece in pieces:
            want = [ranks[piece]] if piece in ranks else byte_pair_encode(piece, ranks)
            assert core.bpe(piece) == want, (ranks, piece)


def test_duplicate_ranks_disable_atomic_characters() -> None:
    from app.engine._native import _core

    ranks = _byte_vocab("о".encode())
    ranks[b"zz"] = ranks["о".encode()]  # two tokens, one rank: the rule's proof does not apply
    assert _core.Core(ranks, 0, 0, True).atomic_chars == 0
    assert _core.Core(_byte_vocab("о".encode()), 0, 0, True).atomic_chars == 1


# (tokcore.c, next_cut): a piece that is not a token is merged in stretches, cut where no token holds the two bytes
# on either side next to each other (no merge can join across), each stretch merged alone or found in the cache.


def _split_reference(text: str, ranks: dict[bytes, int]) -> list[int]:
    """tiktoken's rule with the GPT-2 pattern: a piece that is a token is that token, any other is merged."""
    out: list[int] = []
    for piece in regex.findall(GPT2, text):
        b = piece.encode()
        out += [ranks[b]] if b in ranks else byte_pair_encode(b, ranks)
    return out


def test_stretches_are_merged_never_taken_whole() -> None:
    """'abc' is a token BPE cannot build (no 'ab', no 'bc'): inside 'abcd', cut before 'd', it stays three bytes."""
    from app.engine._native import _core

    ranks = _byte_vocab(b"abc", "中".encode())
    for cache_size in (0, 64):
        core = _core.Core(ranks, _core.SCAN_GPT2, cache_size, True)
        assert core.cuts  # type: ignore[attr-defined]
        assert core.bpe(b"abcd") == [97, 98, 99, 100]  # type: ignore[attr-defined]
        for text in ["abcd", "abc", "xabc", "abc中", "中abc中abcd", "abcd abcd abc"]:
            assert core.encode(text) == _split_reference(text, ranks), text  # type: ignore[attr-defined]


def test_stretches_equal_reference_on_random_vocabularies() -> None:
    """Random vocabularies over a few scripts' characters (ranks in random order, so many tokens are unreachable and
    many boundaries are joined by a token or not), random texts: cut or not, cached or not, ids are the reference's."""
    from app.engine._native import _core

    rng = random.Random(28)
    alphabet = [c.encode() for c in "ab中文日本語한국ไทยпр é"] + [b"\xe4", b"\xb8"]
    for _ in range(40):
        extra = {b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(5, 60))}
        extra = {t for t in extra if len(t) > 1}
        ranks = _byte_vocab(*rng.sample(sorted(extra), len(extra)))
        cores = [_core.Core(ranks, _core.SCAN_GPT2, size, atomic) for size in (0, 64) for atomic in (True, False)]
        for _ in range(60):
            piece = b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24)))
            want = [ranks[piece]] if piece in ranks else byte_pair_encode(piece, ranks)
            text = piece.decode("utf-8", "replace")
            for core in cores:
                assert core.bpe(piece) == want, (ranks, piece)  # type: ignore[attr-defined]
                assert core.encode(text) == _split_reference(text, ranks), (ranks, text)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("name", "cuts"), [("gpt2", True), ("cl100k_base", True), ("o200k_base", False)])
def test_cutting_is_on_where_most_cjk_boundaries_are_open(name: str, cuts: bool) -> None:
    """The rule of joined_build: cut only when fewer than half of the (continuation, three-byte lead) byte pairs are
    joined by some token (gpt2: 45 of 1,024; cl100k_base: 279; o200k_base: 754)."""
    whole, _ = _atomic_pair(name)
    assert whole.cuts is cuts  # type: ignore[attr-defined]


@given(st.text(max_size=200) | st.lists(st.sampled_from([*PIECES, "\ud800", "\udfff"]), max_size=30).map("".join))
@settings(max_examples=300, deadline=None)
def test_utf8_size_is_the_utf8_length_and_refuses_lone_surrogates(text: str) -> None:
    try:
        want: int | None = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        want, start = None, exc.start
    if want is None:
        with pytest.raises(UnicodeEncodeError) as err:
            native.utf8_size(text)
        assert err.value.start == start
    else:
        assert native.utf8_size(text) == want
        assert get_tokenizer("cl100k_base").count(text) == get_tokenizer("cl100k_base", backend="python").count(text)


@pytest.mark.parametrize("text", [
    "plain ASCII only", "Latin-1: café, naïve, ¿qué?", "BMP: Привет, 你好世界, ελληνικά", "astral: 😀 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𠀀",
    "lone: a\ud800b", "lone astral: 😀\udc00", "end \udbff", "é" * 3000 + "字" * 3000 + "😀" * 3000,
])
def test_every_str_kind_encodes_as_the_reference(text: str) -> None:
    # strs of 1, 2 and 4 bytes per code unit, one and many texts (the batch converts the code units itself); a
    # lone surrogate makes the compiled call fail and the caller scrub and retry
    for name in ("cl100k_base", "o200k_base", "llama3"):
        fast, reference = get_tokenizer(name), get_tokenizer(name, backend="python")
        assert fast.encode(text) == reference.encode(text)
        assert fast.count(text) == reference.count(text)
        assert fast.encode_batch([text, text[::-1]]) == [reference.encode(text), reference.encode(text[::-1])]


# ------------------------------------------------------------------------------------- FastCall (fast_call.h)


def test_fast_call_sends_only_the_plain_call_to_the_fast_function() -> None:
    import gc
    import inspect
    import weakref

    from app.engine._native._core import FastCall

    calls: list[tuple[object, ...]] = []

    def slow(text: str, *, option: int = 0) -> tuple[str, str, int]:
        """The general call."""
        return ("slow", text, option)

    def fast(*args: object) -> tuple[object, ...]:
        calls.append(args)
        return ("fast", *args)

    f = FastCall(fast, slow)
    assert f("x") == ("fast", "x")
    assert FastCall(fast, slow, 7)("x") == ("fast", 7, "x")  # the bound first argument
    assert FastCall(fast, slow, None)("x") == ("fast", None, "x")  # None is bound like any value
    assert FastCall(fast, slow, 7, length=True)("x") == 3  # len(("fast", 7, "x"))
    assert FastCall(fast, slow, length=True)("x", option=1) == ("slow", "x", 1)  # slow's result as it is
    with pytest.raises(TypeError):
        FastCall(lambda x: 5, slow, length=True)("x")  # len() of an int
    assert f("x", option=2) == ("slow", "x", 2)
    assert f(text="y") == ("slow", "y", 0)
    with pytest.raises(TypeError):
        f()  # slow's own error for a call it cannot take
    with pytest.raises(TypeError):
        f("a", "b")
    assert calls == [("x",), (7, "x"), (None, "x"), (7, "x")]
    assert f.__wrapped__ is slow and f.__doc__ == "The general call."
    assert str(inspect.signature(f)) == str(inspect.signature(slow))

    def boom(text: str) -> None:
        raise ValueError(text)

    with pytest.raises(ValueError, match="fast error"):
        FastCall(boom, slow)("fast error")
    with pytest.raises(TypeError, match="callable"):
        FastCall(1, slow)

    def strict(text: str) -> str:
        if "\ud800" in text:
            raise UnicodeEncodeError("utf-8", text, 0, 1, "surrogates not allowed")
        return "fast:" + text

    retrying = FastCall(strict, slow, retry=UnicodeEncodeError)
    assert retrying("ok") == "fast:ok"
    assert retrying("a\ud800") == ("slow", "a\ud800", 0)  # refused by fast: the general call, same argument
    assert retrying("a", option=3) == ("slow", "a", 3)
    with pytest.raises(ValueError, match="fast error"):  # other errors are not retried
        FastCall(boom, slow, retry=UnicodeEncodeError)("fast error")
    assert FastCall(boom, slow, retry=(KeyError, ValueError))("x") == ("slow", "x", 0)
    checked: list[str] = []

    def ascii_or_short(text: str) -> bool:
        checked.append(text)
        return len(text) < 3

    guarded = FastCall(fast, slow, avoid="<>", verify=ascii_or_short)
    assert guarded("plain") == ("fast", "plain") and checked == []  # ASCII: verify is not asked
    assert guarded("a<b") == ("slow", "a<b", 0) and guarded("x>") == ("slow", "x>", 0)
    assert guarded("é") == ("fast", "é") and guarded("été") == ("slow", "été", 0)
    assert checked == ["é", "été"]
    assert guarded(b"bytes") == ("slow", b"bytes", 0)  # not a str: the general call
    with pytest.raises(TypeError, match="avoid"):
        FastCall(fast, slow, avoid=b"<")
    strings = FastCall(fast, slow, avoid=("<think>", "</think>", "[x]"))  # a tuple: its strings decide
    assert strings("a < b <thin") == ("fast", "a < b <thin")  # first characters only: still the compiled call
    assert strings("x</think>") == ("slow", "x</think>", 0) and strings("[x]") == ("slow", "[x]", 0)
    assert strings("[y] <think>") == ("slow", "[y] <think>", 0)  # a later string behind an earlier first character
    for bad in (("",), ("<", 3), (b"<",)):
        with pytest.raises(TypeError, match="avoid"):
            FastCall(fast, slow, avoid=bad)
    many = "<" * 100  # past the occurrences compared one by one: the strings are then searched for
    assert strings(many + "x") == ("fast", many + "x") and strings(many + "<think>") == ("slow", many + "<think>", 0)
    assert strings("<" * 63 + "<think>") == ("slow", "<" * 63 + "<think>", 0)

    def broken(text: str) -> bool:
        raise KeyError(text)

    with pytest.raises(KeyError):
        FastCall(fast, slow, verify=broken)("é")

    class Holder:
        def method(self, text: str) -> str:
            return text

    h = Holder()
    h.call = FastCall(len, h.method)  # type: ignore[attr-defined]  # a cycle through the bound method
    alive = weakref.ref(h)
    del h
    gc.collect()
    assert alive() is None


def test_fast_call_avoid_strings_match_a_substring_search() -> None:
    """Whether a text goes to the general call is exactly whether it holds one of ``avoid``'s strings, on random
    texts over their characters (and wider ones: one- to four-byte str kinds)."""
    from app.engine._native._core import FastCall

    strings = ("<think>", "</think>", "<|im_start|>", "[x]", "éé", "😀<")
    call = FastCall(lambda text: "fast", lambda text: "slow", avoid=strings)
    rng = random.Random(28)
    for _ in range(3000):  # some texts mostly '<': past the occurrences compared one by one
        alphabet = rng.choice(("<>/|thinkmsar_[]xé😀 ", "<<<<<<think>/|x"))
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 240)))
        if rng.random() < 0.3:
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(strings) + text[at:]
        want = "slow" if any(s in text for s in strings) else "fast"
        assert call(text) == want, text


# -------------------------------------------------------------------------- checks of cached sections without dicts
@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=["Cs"]), max_size=4),
                max_size=30),
       st.lists(st.integers(0, 2**32 - 1), min_size=30, max_size=30))
def test_check_packed_vocab_equals_the_dict_checks(keys: list[str], all_ids: list[int]) -> None:
    """``check_packed_vocab`` refuses exactly the entries whose dict would lose a repeated key, and its range is
    the ids' ``min``/``max``; ``u32_range`` is ``min``/``max`` of any u32 buffer."""
    ids = all_ids[:len(keys)]
    blob, raw = "\0".join(keys).encode(), array("I", ids).tobytes()
    if len(set(keys)) == len(keys):
        expected = (min(ids), max(ids)) if ids else (0, -1)
        assert native.check_packed_vocab(blob, raw, len(keys)) == expected == native.u32_range(raw)
    else:
        with pytest.raises(ValueError, match="repeated"):
            native.check_packed_vocab(blob, raw, len(keys))
    for count in (len(keys) + 1, len(keys) - 1):
        if count >= 0:
            with pytest.raises(ValueError):
                native.check_packed_vocab(blob, raw, count)
    with pytest.raises(ValueError):
        native.check_packed_vocab(blob, raw + b"\0" * 4, len(keys))
    with pytest.raises(ValueError):
        native.u32_range(raw + b"\0")
