"""The compiled trainer (``_trainer``) against the Python reference: counts, merges, whole artifacts."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import regex

from app.engine import native
from app.engine.char_bpe import display_symbol
from app.engine.patterns import CL100K, PATTERNS
from app.engine.training import compiled, train_byte_bpe, train_char_bpe, train_to_store
from app.engine.training.corpus import count_pretokens, count_words
from app.engine.training.merges import MergeResult, byte_order_key, learn_merges, text_order_key

from .test_corpus import TRICKY
from .test_merges import random_corpus

pytestmark = pytest.mark.skipif(not compiled.available(), reason=f"no compiled trainer: {compiled.IMPORT_ERROR}")

REPO = Path(__file__).resolve().parents[3]
BYTES = [bytes([b]) for b in range(256)]


def _byte_options(**kw: object) -> dict[str, object]:
    return {**dict(base_symbols=BYTES, concat=lambda x, y: x + y, order_key=byte_order_key, unit_length=len), **kw}


def _same(py: MergeResult, c: MergeResult) -> None:
    assert c.merges == py.merges
    assert c.symbols == py.symbols
    assert c.words == py.words
    assert c.stop_reason == py.stop_reason


@pytest.mark.parametrize("tie_break", ["first-seen", "lexicographic"])
def test_byte_learner_equals_python_on_random_corpora(tie_break: str) -> None:
    for seed in range(150):
        rng = random.Random(seed)
        alphabet = ["ab", "abc", "aab ", "xyzé", "ab\u4e00", "a"][seed % 6]
        corpus = random_corpus(rng, alphabet, n_words=rng.randint(1, 200), max_len=rng.randint(1, 14))
        words = [list(w.encode()) for w in corpus]
        counts = list(corpus.values())
        kw = _byte_options(
            max_symbols=rng.choice([None, 256 + rng.randint(0, 80)]),
            max_merges=rng.choice([None, rng.randint(0, 60)]),
            min_frequency=rng.choice([1, 2, 3, 7]),
            tie_break=tie_break,
        )
        py = learn_merges(words, counts, **kw)  # type: ignore[arg-type]
        c = compiled.learn_merges_native(words, counts, **kw)  # type: ignore[arg-type]
        _same(py, c)


def _hostile_words(rng: random.Random) -> dict[str, int]:
    """Long words of repeated patterns over tiny alphabets, with a few random edits: runs (merges of a symbol with
    itself, left to right) and periodic words (merged occurrences next to each other, so a merge briefly makes and
    takes back pairs)."""
    corpus: dict[str, int] = {}
    for _ in range(rng.randint(1, 50)):
        unit = rng.choice(["a", "ab", "aab", "abc", "abab", "aaab", "abcab", "ba", "aabb"])
        w = (unit * rng.randint(1, 60))[: rng.randint(1, 150)]
        for _ in range(rng.choice([0, 0, 1, 3])):
            i = rng.randrange(len(w))
            w = w[:i] + rng.choice("abcd") + w[i + 1:]
        corpus[w] = corpus.get(w, 0) + rng.randint(1, 9)
    return corpus


@pytest.mark.parametrize("tie_break", ["first-seen", "lexicographic"])
def test_learner_equals_python_on_hostile_words(tie_break: str) -> None:
    merged = 0
    for seed in range(120):
        rng = random.Random(9000 + seed)
        corpus = _hostile_words(rng)
        words = [list(w.encode()) for w in corpus]
        kw = _byte_options(
            max_symbols=rng.choice([None, 256 + rng.randint(0, 150)]),
            max_merges=rng.choice([None, None, rng.randint(0, 100)]),
            min_frequency=rng.choice([1, 1, 2, 5]),
            tie_break=tie_break,
        )
        py = learn_merges(words, list(corpus.values()), **kw)  # type: ignore[arg-type]
        c = compiled.learn_merges_native(words, list(corpus.values()), **kw)  # type: ignore[arg-type]
        _same(py, c)
        merged += len(py.merges)
    assert merged > 5000  # long runs of merges, not trivial corpora


@pytest.mark.parametrize("tie_break", ["first-seen", "lexicographic"])
def test_char_learner_equals_python_on_random_corpora(tie_break: str) -> None:
    for seed in range(150):
        rng = random.Random(5000 + seed)
        # "</w>" spelled literally makes different symbols with equal display strings (the pair id breaks the tie)
        alphabet = ["ab", "abc", "aabb", "lowerstn", "<w/>a", "é\u4e00b"][seed % 6]
        corpus = random_corpus(rng, alphabet, n_words=rng.randint(1, 150), max_len=rng.randint(1, 10))
        chars = sorted({ch for w in corpus for ch in w})
        base = [("", True), *((ch, False) for ch in chars)]
        index = {ch: i + 1 for i, ch in enumerate(chars)}
        words = [[index[ch] for ch in w] + [0] for w in corpus]
        kw: dict[str, object] = dict(
            base_symbols=base,
            concat=lambda x, y: (x[0] + y[0], y[1]),
            order_key=lambda s: text_order_key(display_symbol(s)),
            unit_length=lambda s: len(s[0]) + (1 if s[1] else 0),
            max_symbols=rng.choice([None, len(base) + rng.randint(0, 50)]),
            max_merges=rng.choice([None, rng.randint(0, 80)]),
            min_frequency=rng.choice([1, 2, 3]),
            tie_break=tie_break,
        )
        py = learn_merges(words, list(corpus.values()), **kw)  # type: ignore[arg-type]
        c = compiled.learn_merges_native(words, list(corpus.values()), **kw)  # type: ignore[arg-type]
        _same(py, c)


@pytest.mark.parametrize("tie_break", ["first-seen", "lexicographic"])
def test_learners_agree_on_real_text(tie_break: str) -> None:
    files = sorted((REPO / "app" / "engine").rglob("*.py"))
    counts = count_pretokens(files, CL100K)
    py = train_byte_bpe(counts, vocab_size=2000, tie_break=tie_break, keep_segmentation=True, backend="python")
    c = train_byte_bpe(counts, vocab_size=2000, tie_break=tie_break, keep_segmentation=True, backend="native")
    assert c == py
    words = count_words(files)
    mpy = train_char_bpe(words, num_merges=1500, tie_break=tie_break, keep_segmentation=True, backend="python")
    mc = train_char_bpe(words, num_merges=1500, tie_break=tie_break, keep_segmentation=True, backend="native")
    assert mc.merges == mpy.merges and mc.symbols == mpy.symbols and mc.segmentation == mpy.segmentation


def test_counter_input_equals_list_input_and_progress() -> None:
    files = sorted((REPO / "app" / "engine" / "training").rglob("*.py"))
    counter = compiled.count_pretokens_native(files, compiled.scanner_for(CL100K))
    items = counter.items()
    words = [list(k) for k, _ in items]
    counts = [c for _, c in items]
    seen: list[int] = []
    from_lists = compiled.learn_merges_native(words, counts, **_byte_options(max_symbols=900))  # type: ignore[arg-type]
    from_counter = compiled.learn_merges_native(
        counter, None, progress=seen.append, keep_words=False, consume=True, **_byte_options(max_symbols=900)
    )  # type: ignore[arg-type]
    assert from_counter.merges == from_lists.merges and len(from_counter.merges) == 900 - 256
    assert len(counter) == 0  # consumed
    assert seen == [*range(compiled.PROGRESS_EVERY, 644, compiled.PROGRESS_EVERY), 644]


@pytest.mark.parametrize("every", [1, 10_000])  # raised inside the loop, or by the final call
def test_progress_exception_propagates(monkeypatch: pytest.MonkeyPatch, every: int) -> None:
    monkeypatch.setattr(compiled, "PROGRESS_EVERY", every)

    def boom(n: int) -> None:
        raise KeyError(n)

    words = [list(b"abababab cdcdcd efefef"[i:]) for i in range(20)]
    with pytest.raises(KeyError) as info:
        compiled.learn_merges_native(words, [3] * 20, progress=boom, **_byte_options())  # type: ignore[arg-type]
    assert (info.value.args[0] == 1) == (every == 1)


@pytest.mark.parametrize("pattern_id", sorted(PATTERNS))
def test_counter_equals_regex_counts(pattern_id: str) -> None:
    pattern = PATTERNS[pattern_id]
    rng = random.Random(pattern_id)
    pieces = ["Hello", " world", "\n", "\r\n", "  ", "'ll", "'S", "123456", " 7", "日本語", "🙂", "\t", "ß", "x",
              "é", "..", " !", "\u00a0", "Ǆ", "don't"]
    texts = [TRICKY] + ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 300))) for _ in range(40)]
    expected: Counter[bytes] = Counter()
    for t in texts:
        expected.update(p.encode() for p in regex.findall(pattern, t))
    scanner = compiled.scanner_for(pattern)
    assert scanner
    one = compiled.trainer_module.PretokenCounter(scanner)
    for t in texts:
        one.feed(t)
    assert one.items() == list(expected.items())  # counts and first-appearance order
    assert one.pieces == sum(expected.values()) and len(one) == len(expected)
    for threads in (1, 2):
        many = compiled.trainer_module.PretokenCounter(scanner)
        many.feed_many(texts[:7], threads)
        many.feed_many(texts[7:], threads)
        assert many.items() == list(expected.items())


@pytest.mark.parametrize("threads", [1, 2])
def test_counting_files_equals_python_path(tmp_path: Path, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiled, "BATCH_CHARS", 300)  # several batches of several chunks
    files = sorted((REPO / "app").rglob("*.py"))[:40] + [tmp_path / "c.txt"]
    files[-1].write_bytes(TRICKY.encode() + b"\xff\xfe broken \xc3 utf-8\n")
    for pattern_id in ("cl100k", "gpt2", "o200k", "llama3"):
        pattern = PATTERNS[pattern_id]
        expected = count_pretokens(files, pattern, block_bytes=4096)
        got = compiled.count_pretokens_native(files, compiled.scanner_for(pattern), threads=threads, block_bytes=4096)
        assert got.items() == [(k.encode(), v) for k, v in expected.items()]


def test_counter_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        compiled.trainer_module.PretokenCounter(99)
    counter = compiled.trainer_module.PretokenCounter(compiled.trainer_module.SCAN_GPT2)
    with pytest.raises(TypeError):
        counter.feed(b"bytes")
    with pytest.raises(UnicodeEncodeError):
        counter.feed("lone \ud800 surrogate")
    with pytest.raises(TypeError):
        counter.feed_many(["ok", 3], 2)
    assert compiled.scanner_for(r"\w+") == 0


@pytest.mark.parametrize(
    "options",
    [
        dict(kind="byte", pattern="cl100k"),
        dict(kind="byte", pattern="gpt2", tie_break="lexicographic"),
        dict(kind="byte", pattern_regex=r"\w+|\s+|[^\w\s]+", min_frequency=1),
        dict(kind="char", vocab_size=900),
        dict(kind="char", tie_break="lexicographic", min_frequency=3),
    ],
)
def test_artifacts_are_byte_identical_across_backends(tmp_path: Path, options: dict[str, object]) -> None:
    files = sorted((REPO / "app").rglob("*.py"))
    kw: dict[str, object] = {"vocab_size": 1200, "quiet": True, "special_tokens": ["<|end|>"], **options}
    outs = []
    for run, backend, threads in (("py", "python", 1), ("c1", "native", 1), ("c2", "native", 2), ("c3", "native", 1)):
        report = train_to_store(files, name="t", store_dir=tmp_path / run, backend=backend, threads=threads,
                                **kw)  # type: ignore[arg-type]
        assert report.backend == backend
        assert report.native_counting == (backend == "native" and "pattern_regex" not in options
                                          and options["kind"] == "byte")
        outs.append((report.spec.artifact_path.read_bytes(), (tmp_path / run / "manifest.json").read_bytes()))
    assert outs[0] == outs[1] == outs[2] == outs[3]


def test_backend_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(native.ENGINE_ENV, raising=False)
    assert compiled.resolve_backend() == "native"
    assert compiled.resolve_backend("python") == "python"
    monkeypatch.setenv(native.ENGINE_ENV, "python")
    assert compiled.resolve_backend() == "python"
    assert compiled.resolve_backend("native") == "native"
    monkeypatch.setenv(native.ENGINE_ENV, "fast")
    with pytest.raises(ValueError):
        compiled.resolve_backend()
    with pytest.raises(ValueError):
        compiled.resolve_backend("gpu")


def test_learner_checks_its_requirements() -> None:
    with pytest.raises(ValueError):  # base symbols longer than one unit
        compiled.learn_merges_native([[0, 1]], [2], base_symbols=[b"ab", b"c"], concat=lambda x, y: x + y,
                                     order_key=byte_order_key, unit_length=len)  # type: ignore[arg-type]
    with pytest.raises(ValueError):  # symbol id outside the base alphabet
        compiled.learn_merges_native([[0, 300]], [2], **_byte_options())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        compiled.learn_merges_native([[0, 1]], [2], **_byte_options(tie_break="random"))  # type: ignore[arg-type]
    with pytest.raises(ValueError):  # order keys without a common terminator
        compiled.learn_merges_native([[0, 1]], [2], **_byte_options(tie_break="lexicographic",  # type: ignore[arg-type]
                                                                       order_key=lambda k: tuple(k)))


def test_without_the_extension_training_falls_back_to_python(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text(TRICKY * 5, encoding="utf-8")
    outs = []
    for disable in ("1", "0"):
        env = dict(os.environ, TOKENIZER_NATIVE_DISABLE=disable, PYTHONPATH=str(REPO))
        env.pop(native.ENGINE_ENV, None)
        proc = subprocess.run(
            [sys.executable, "-m", "app", "train", str(corpus), "--vocab-size", "300", "--name", "t",
             "--store", str(tmp_path / disable), "--json", "--quiet"],
            env=env, capture_output=True, text=True, check=True, cwd=REPO,
        )
        outs.append(json.loads(proc.stdout))
    assert (outs[0]["backend"], outs[0]["native_counting"]) == ("python", False)
    assert (outs[1]["backend"], outs[1]["native_counting"]) == ("native", True)
    assert outs[0]["sha256"] == outs[1]["sha256"]
