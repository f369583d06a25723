"""The compiled SentencePiece BPE (``app/engine/_native/spbpe.c``) against the pure-Python reference
(``app.engine.pipeline.models.sp_bpe`` behind the Python normalizer and split): random vocabularies (score ties,
duplicate pieces, user-defined, unused, control and byte pieces with some bytes missing, no byte fallback) under
every normalizer option without a charsmap, on both sides of the heap threshold; then the five bundled SentencePiece
BPE tokenizers on hostile strings, real multilingual text and long runs, against the reference and ``sentencepiece``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from app.engine import get_tokenizer
from app.engine.artifact_cache import ArtifactCache, Compiled
from app.engine.loaders import LoadOptions, load_tokenizer
from app.engine.pipeline import Pipeline
from app.engine.pipeline.models import sp_bpe
from app.engine.pipeline.models.sp_bpe import SentencePieceBPE
from app.engine.pipeline.sentencepiece import (
    BYTE,
    CONTROL,
    NORMAL,
    UNKNOWN,
    UNUSED,
    USER_DEFINED,
    SentencePieceVocab,
    build_pipeline,
)
from app.engine.store import Store
from harness import realtext
from harness.references import sentencepiece_reference
from harness.texts import HOSTILE, SPECIAL_STRINGS, sample

from .corpus import hostile, long_strings

pytestmark = pytest.mark.skipif(sp_bpe._EXT.module is None,
                                reason=f"compiled SentencePiece BPE not built: {sp_bpe._EXT.error}")

ALPHABET = "abcd\u2581 é中😀"
BUNDLED = ["mistral-v1", "mistral-v3", "mistral-v7", "llama2", "phi-3"]


def _random_vocab(rng: random.Random) -> SentencePieceVocab:
    """A random SentencePiece BPE vocabulary: <unk> and controls, some <0xNN> pieces, characters, and pieces made
    by joining earlier ones, with scores from a small set (ties) and a few user-defined, unused and duplicate
    pieces."""
    pieces, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [UNKNOWN, CONTROL, CONTROL]

    def add(piece: str, kind: int = NORMAL) -> None:
        pieces.append(piece)
        scores.append(float(rng.choice([-1, -2, -2.5, -3, -4, -7])) if rng.random() < 0.7 else -rng.random() * 9)
        types.append(kind)

    byte_fallback = rng.random() < 0.7
    if byte_fallback:
        missing = set(rng.sample(range(256), rng.choice([0, 0, 5, 60])))
        for b in range(256):
            if b not in missing:
                add(f"<0x{b:02X}>", BYTE)
    chars = rng.sample(ALPHABET, rng.randint(2, len(ALPHABET)))
    for c in chars:
        add(c)
    made = list(chars)
    for _ in range(rng.randint(0, 80)):
        piece = rng.choice(made) + rng.choice(made)
        if len(piece) > 7:
            continue
        kind = UNUSED if rng.random() < 0.1 else USER_DEFINED if rng.random() < 0.05 else NORMAL
        add(piece, kind)
        made.append(piece)
    for _ in range(rng.randint(0, 3)):  # pieces the text must contain whole: never merged further
        add(rng.choice(["[X]", "ab", "<b>", "é中", "a\u2581"]), USER_DEFINED)
    if rng.random() < 0.3:  # a piece listed twice: the first id wins
        add(rng.choice(made))
    if rng.random() < 0.2:  # a control piece spelling an ordinary character: it is that character's id
        add(rng.choice(chars), CONTROL)
    return SentencePieceVocab(
        pieces=pieces, scores=scores, types=types, model_type="bpe", byte_fallback=byte_fallback,
        add_dummy_prefix=rng.random() < 0.7, remove_extra_whitespaces=rng.random() < 0.5,
        escape_whitespaces=rng.random() < 0.8, treat_whitespace_as_suffix=rng.random() < 0.2, bos_id=1, eos_id=2)


def _random_text(rng: random.Random) -> str:
    pool = ALPHABET + "xyz \u2581[]X<>b\ud800\ud83d\ude00ß\n"
    n = rng.choice([0, 1, 3, 8, 20, 40, 90, 200])
    return "".join(rng.choice(pool) for _ in range(rng.randint(0, n)))


def test_random_vocabularies_match_the_reference() -> None:
    rng = random.Random(5)
    checked = fused = 0
    for case in range(300):
        vocab = _random_vocab(rng)
        native = build_pipeline("n", vocab, source="random", backend="native")
        python = build_pipeline("p", vocab, source="random", backend="python")
        assert native.backend == "native" and python.backend == "python"
        fused += native.text_path == "whole-text"
        for _ in range(25):
            text = _random_text(rng)
            assert native.encode(text) == python.encode(text), (case, text)
            # the model alone, on text that was not normalized (lone surrogates go to byte fallback as bytes)
            model, ref = native.model, python.model
            assert isinstance(model, SentencePieceBPE) and isinstance(ref, SentencePieceBPE)
            assert model.tokenize(text) == ref.tokenize(text), (case, text)
            checked += 1
    assert checked == 7500 and 150 < fused < 300  # user-defined pieces with spaces keep the per-piece path


def test_unused_pieces_are_split_back_as_the_reference_does() -> None:
    """'ab' is UNUSED: merged (best score), then split back into 'a' 'b'; 'abc' is reached through it."""
    pieces = ["<unk>", "a", "b", "c", "ab", "abc", "bc"]
    scores = [0.0, -5.0, -5.0, -5.0, -1.0, -2.0, -3.0]
    vocab = list(zip(pieces, scores, strict=True))
    native = SentencePieceBPE(vocab, unk_id=0, mergeable=[1, 2, 3, 4, 5, 6], unused=[4], backend="native")
    python = SentencePieceBPE(vocab, unk_id=0, mergeable=[1, 2, 3, 4, 5, 6], unused=[4], backend="python")
    for text in ["ab", "abc", "abab", "cab", "abcab" * 20]:
        assert native.tokenize(text) == python.tokenize(text), text
    assert native.tokenize("ab") == [1, 2] and native.tokenize("abc") == [5]


def test_large_vocabularies_match_the_reference() -> None:
    """More than 65535 symbols: the compiled model's wide pair table instead of the 16-bit one."""
    rng = random.Random(8)
    vocab = _random_vocab(rng)
    pieces = [*vocab.pieces, *(f"\ue000{i}" for i in range(70_000))]
    scores = [*vocab.scores, *(-20.0 - (i % 7) for i in range(70_000))]
    mergeable = [i for i, t in enumerate(vocab.types) if t in (NORMAL, USER_DEFINED, UNUSED)]
    mergeable += range(len(vocab.pieces), len(pieces))
    args = {"unk_id": 0, "byte_fallback": vocab.byte_fallback, "mergeable": mergeable,
            "unused": [i for i, t in enumerate(vocab.types) if t == UNUSED]}
    native = SentencePieceBPE(list(zip(pieces, scores, strict=True)), backend="native", **args)  # type: ignore[arg-type]
    python = SentencePieceBPE(list(zip(pieces, scores, strict=True)), backend="python", **args)  # type: ignore[arg-type]
    assert native.native is not None and native.native.n_pairs > 65_535
    for _ in range(300):
        text = _random_text(rng) + "".join(rng.choice("\ue0000123456789") for _ in range(rng.randint(0, 30)))
        assert native.tokenize(text) == python.tokenize(text), text


def test_cut_pieces_come_from_the_cache_with_unknown_runs_fused() -> None:
    """No piece joins 'b' and 'c', so 'abcd' is merged as 'ab' + 'cd', and those pieces are cached (spbpe.c
    merge_cut); 'x' is unknown (no byte fallback) and a run of unknowns is one id, across a cut too."""
    pieces = ["<unk>", "a", "b", "c", "d", "ab", "cd", "abab"]
    vocab = list(zip(pieces, [0.0, -5.0, -5.0, -5.0, -5.0, -1.0, -2.0, -3.0], strict=True))
    args = {"unk_id": 0, "mergeable": range(1, len(pieces)), "cache_size": 64}
    native = SentencePieceBPE(vocab, backend="native", **args)  # type: ignore[arg-type]
    python = SentencePieceBPE(vocab, backend="python", **args)  # type: ignore[arg-type]
    assert native.encode_pieces(["abcd"], 0) == [5, 6] and native.cache_stats().hits == 0
    assert native.encode_pieces(["cdab"], 0) == [6, 5] and native.cache_stats().hits == 2  # both halves
    texts = ["abcd", "xabcd", "abcdx", "xxabcdxx", "abxcd", "cdab", "dabcab", "ababcdabab", "xcdx", "cdxxab"]
    for text in [*texts, *reversed(texts), *texts]:
        assert native.encode_pieces([text], 0) == python.tokenize(text), text
    assert native.encode_pieces(["xxabcdxx"], 0) == [0, 5, 6, 0]
    assert native.cache_stats().hits > 0


def test_ties_merge_leftmost_first() -> None:
    pieces = ["<unk>", "a", "aa"]
    vocab = list(zip(pieces, [0.0, -1.0, -1.0], strict=True))
    native = SentencePieceBPE(vocab, unk_id=0, backend="native")
    assert native.tokenize("aaa") == [2, 1] and native.tokenize("a" * 7) == [2, 2, 2, 1]
    assert native.tokenize("a" * 101) == [2] * 50 + [1]  # the heap path (more than HEAP_FROM symbols)


def test_cache_changes_nothing_and_is_bounded() -> None:
    tok = get_tokenizer("llama2")
    assert isinstance(tok, Pipeline) and isinstance(tok.model, SentencePieceBPE)
    vocab = tok.model.vocab
    tok.model.prepare_reference()
    uncached = SentencePieceBPE(vocab, unk_id=0, byte_fallback=True, mergeable=tok.model._pieces.values(),
                                backend="native", cache_size=0)
    texts = sample(5, 40, seed=3)
    tok.clear_cache()
    assert tok.cache_stats().hits == 0 and tok.cache_stats().size == 0
    first = [tok.encode(t) for t in texts]
    assert [tok.encode(t) for t in texts] == first
    stats = tok.cache_stats()
    assert stats.hits > 0 and 0 < stats.size <= stats.max_size
    for t, ids in zip(texts, first, strict=True):
        pieces = tok.pre_token_pieces(t)
        assert uncached.encode_pieces([p.text for p in pieces], 0) == ids
    assert uncached.cache_stats().max_size == 0


def test_threads_give_the_same_ids() -> None:
    tok = get_tokenizer("mistral-v3")
    texts = sample(10, 200, seed=11)
    tok.clear_cache()
    assert tok.encode_batch(texts, num_threads=4) == [tok.encode(t) for t in texts]


def _long_text(rng: random.Random) -> str:
    """A text past the compiled model's stack buffers (it takes working memory kept from earlier calls)."""
    pool = ALPHABET + "xyz \u2581[]X<>b\ud800\ud83d\ude00ß\n"
    kind = rng.random()
    n = rng.choice([300, 900, 2500, 5000])
    if kind < 0.3:  # one character (a long merge on the heap)
        return rng.choice(ALPHABET) * n
    if kind < 0.45:  # no merges, many ids
        return "".join(chr(rng.randint(0x0B80, 0x0BFF)) for _ in range(n))
    return "".join(rng.choice(pool) for _ in range(n))


def test_long_calls_reuse_working_memory_exactly() -> None:
    """Long calls of every entry point, alternating between random vocabularies (with UNUSED pieces, whose
    split-back table is kept between calls too) and growing and shrinking in size: whatever an earlier call
    left in the kept buffers never shows in a later one's ids."""
    rng = random.Random(17)
    models = []
    for _ in range(12):
        vocab = _random_vocab(rng)
        models.append((build_pipeline("n", vocab, source="random", backend="native"),
                       build_pipeline("p", vocab, source="random", backend="python")))
    assert any(p.model._unused for _, p in models)  # type: ignore[attr-defined]
    for step in range(120):
        native, python = models[rng.randrange(len(models))]
        model, ref = native.model, python.model
        assert isinstance(model, SentencePieceBPE) and isinstance(ref, SentencePieceBPE)
        text = _long_text(rng)
        assert native.encode(text) == python.encode(text), (step, text[:40])
        assert model.tokenize(text) == ref.tokenize(text), (step, text[:40])
        items: list[str | int] = [text[: len(text) // 2], 7, text[len(text) // 2:]]
        assert model.encode_pieces(items, 0) == ref.encode_pieces(items, 0), (step, text[:40])


def test_threads_on_long_texts_give_the_same_ids() -> None:
    """Long calls of two models from four threads at once share the kept working memory safely."""
    toks = [get_tokenizer("mistral-v3", backend="native"), get_tokenizer("llama2", backend="native")]
    refs = [get_tokenizer("mistral-v3", backend="python"), get_tokenizer("llama2", backend="python")]
    rng = random.Random(4)
    texts = [t[: rng.randint(300, 3000)] for t in long_strings(3000)]
    jobs = [(k, text) for k in range(2) for text in texts]
    expected = [refs[k].encode(text) for k, text in jobs]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            order = list(range(len(jobs)))
            rng.shuffle(order)
            got = dict(zip(order, pool.map(lambda i: toks[jobs[i][0]].encode(jobs[i][1]), order), strict=True))
            assert [got[i] for i in range(len(jobs))] == expected


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="resident memory read from /proc")
def test_memory_of_repeated_long_calls_stays_bounded() -> None:
    """Repeated long calls keep at most the bounded working memory (a call used to leak its id buffer)."""
    tok = get_tokenizer("mistral-v7", backend="native")
    text = "".join(chr(0x0B80 + i % 128) for i in range(300_000))  # mostly byte fallback: ~800,000 ids per call

    def resident_mib() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    for _ in range(3):
        ids = tok.encode(text)
    del ids
    before = resident_mib()
    for _ in range(30):
        assert len(tok.encode(text)) > 700_000
    assert resident_mib() - before < 32  # a leak of the 3.6 MB id buffer per call would be ~100 MiB


def test_engine_python_forces_the_reference() -> None:
    code = ("from app.engine import get_tokenizer\n"
            "from harness.references import sentencepiece_reference\n"
            "t = get_tokenizer('mistral-v1')\n"
            "assert t.backend == 'python' and t.model.native is None and t.text_path == 'python', t.backend\n"
            "text = 'hello  world \u2581x'\n"
            "assert t.encode(text) == sentencepiece_reference('mistral-v1').encode(text), t.encode(text)\n")
    env = {**os.environ, "TOKENIZER_ENGINE": "python"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def _bundled_texts(name: str, seed: int) -> list[str]:
    tok = get_tokenizer(name)
    assert isinstance(tok, Pipeline) and isinstance(tok.model, SentencePieceBPE)
    tok.model.prepare_reference()
    user = sorted(tok.model._user)  # the user-defined pieces, matched in text
    texts = list(hostile([*tok.special_tokens, *user], seed=seed, count=300, token_limit=20))
    texts += HOSTILE
    docs = realtext.documents()
    rng = random.Random(seed)
    texts += rng.sample([s for doc in docs for s in realtext.strings(doc)], 800)
    texts += [doc.text[:20_000] for doc in rng.sample(docs, 6)]
    return texts


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_match_the_reference_and_sentencepiece(name: str) -> None:
    native = get_tokenizer(name, backend="native")
    python = get_tokenizer(name, backend="python")
    assert isinstance(native, Pipeline) and native.backend == "native" and native.text_path == "whole-text"
    assert python.backend == "python"
    ref = sentencepiece_reference(name)
    texts = _bundled_texts(name, seed=BUNDLED.index(name))
    bad_python, bad_sp = [], []
    for text in texts:
        ids = native.encode(text)
        if ids != python.encode(text):
            bad_python.append(text[:80])
        if not any(s in text for s in SPECIAL_STRINGS) and ids != ref.encode(text):
            bad_sp.append(text[:80])
    assert len(texts) > 1500
    assert not bad_python, bad_python[:5]
    assert not bad_sp, bad_sp[:5]


@pytest.mark.parametrize("name", ["mistral-v3", "phi-3"])
def test_bundled_long_runs(name: str) -> None:
    """One long run of a character, runs without spaces, byte-fallback scripts: the heap path on long inputs."""
    native = get_tokenizer(name, backend="native")
    python = get_tokenizer(name, backend="python")
    ref = sentencepiece_reference(name)
    for text in long_strings(6_000):
        ids = native.encode(text)
        assert ids == python.encode(text), text[:40]
        assert ids == ref.encode(text), text[:40]


def test_reference_tables_are_built_once_on_first_use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With the compiled model the reference's tables wait for their first use (a warm load restores the compiled
    model and builds none of them); threads asking at once build them once, and get the reference's results."""
    spec = Store.load().spec("mistral-v1")
    load_tokenizer(spec, LoadOptions(artifact_cache=ArtifactCache(tmp_path), backend="native"))  # cold: fills it
    tok = load_tokenizer(spec, LoadOptions(artifact_cache=ArtifactCache(tmp_path), backend="native"))
    model = tok.model  # type: ignore[attr-defined]
    assert isinstance(model, SentencePieceBPE) and model.backend == "native"
    assert not model._reference_ready and model._all_built is None
    python = get_tokenizer("mistral-v1", backend="python")
    real = model._mergeable_ranks
    calls: list[int] = []

    def slow() -> Any:
        calls.append(1)
        time.sleep(0.05)  # (widens the window in which other threads arrive)
        return real()

    monkeypatch.setattr(model, "_mergeable_ranks", slow)
    texts = [f"Hello wörld {i} ▁▁ 中文 <s> [INST]" * (i + 1) for i in range(16)]
    barrier = threading.Barrier(8)

    def work(text: str) -> tuple[Any, Any, Any]:
        barrier.wait() if text in texts[:8] else None
        return tok.encode_with_offsets(text), model.token_to_id("▁Hello"), model.tokenize_with_spans(text)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, texts))
    assert calls == [1]
    model.prepare_reference()
    assert calls == [1] and model._reference_ready
    for text, (offsets, hello, spans) in zip(texts, results, strict=True):
        assert offsets == python.encode_with_offsets(text)
        assert hello == python.model.token_to_id("▁Hello") is not None  # type: ignore[attr-defined]
        assert spans == python.model.tokenize_with_spans(text)  # type: ignore[attr-defined]
    assert model.token_to_id("<0x41>") == python.model.token_to_id("<0x41>")  # type: ignore[attr-defined]
    assert model.token_to_id("no such") is None


def test_space_split_answer_comes_from_the_cache(tmp_path: Path) -> None:
    """A warm load takes :meth:`SentencePieceBPE.splits_at_space` from the stored model's meta (not recomputed):
    an entry that says False gives a pipeline without the cut, whose ids are the same (the cut is exact here)."""
    from app.engine.pipeline.sp_split import SpaceSymbolSplit

    spec = Store.load().spec("llama2")
    cold = load_tokenizer(spec, LoadOptions(artifact_cache=ArtifactCache(tmp_path), backend="native"))
    assert isinstance(cold.pre_tokenizer, SpaceSymbolSplit)  # type: ignore[attr-defined]
    cache = ArtifactCache(tmp_path)
    stored = cache.get(spec.sha256, sp_bpe.SP_BPE_MODEL_PART)
    assert stored is not None and stored.meta["space_split"] is True
    cache.put(spec.sha256, sp_bpe.SP_BPE_MODEL_PART,
              Compiled({**stored.meta, "space_split": False}, {k: bytes(v) for k, v in stored.sections.items()}))
    warm_cache = ArtifactCache(tmp_path)
    warm = load_tokenizer(spec, LoadOptions(artifact_cache=warm_cache, backend="native"))
    assert warm_cache.hits >= 2 and warm_cache.misses == warm_cache.rebuilt == 0
    assert warm.pre_tokenizer is None  # type: ignore[attr-defined]
    texts = [*HOSTILE, *sample(5, 40, seed=17)]
    assert [warm.encode(t) for t in texts] == [cold.encode(t) for t in texts]
