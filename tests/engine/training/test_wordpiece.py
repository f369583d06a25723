"""WordPiece training: the seeds' score examples, the incremental learner against a full recount, and the
artifact (Hugging Face ``tokenizers`` and this engine encode identically with it)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping

import pytest
from tokenizers import Tokenizer

from app.engine import get_tokenizer, reset
from app.engine.pipeline.hf_json import from_hf_json
from app.engine.training import compiled, train_to_store
from app.engine.training.trainer import train_on
from app.engine.training.wordpiece import BERT_SPECIALS, WordPieceTrainer, learn_wordpiece, pair_score
from harness.references import recount_merges

from .family_corpus import corpus_text, hostile_samples

N_SPECIAL = len(BERT_SPECIALS)


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    reset()
    yield
    reset()


def test_seed_scores() -> None:
    # u:40, n:20, g:15; (u,n):16, (n,g):12 -> 0.02 and 0.04: (n,g) wins despite the lower raw count
    assert pair_score(16, 40, 20) == pytest.approx(0.02) and pair_score(12, 20, 15) == pytest.approx(0.04)
    # P: 100, 1000, 500 -> 0.0002; Q: 30, 40, 50 -> 0.015; raw counts would pick P, WordPiece picks Q
    assert pair_score(100, 1000, 500) == pytest.approx(0.0002)
    assert pair_score(30, 40, 50) == pytest.approx(0.015)


def test_zq_beats_aa() -> None:
    vocab, merges, _ = learn_wordpiece({"zq": 1, "aa": 8}, vocab_size=N_SPECIAL + 5, min_frequency=1)
    assert vocab[N_SPECIAL:] == ["##a", "##q", "a", "z", "zq"] and merges == 1  # 1/(1*1) > 8/(8*8)
    vocab, _, _ = learn_wordpiece({"zq": 1, "aa": 8}, vocab_size=N_SPECIAL + 6, min_frequency=1)
    assert vocab[-1] == "aa"


def test_hug_corpus_under_the_hash_convention() -> None:
    words = {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}
    vocab, merges, stop = learn_wordpiece(words, vocab_size=N_SPECIAL + 8, min_frequency=1)
    # 7 initial pieces (b h p, ##g ##n ##s ##u); (##g,##s) 5/(20*5) = 1/20 beats (##u,##g) 20/(36*20) = 1/36
    assert sorted(vocab[N_SPECIAL:-1]) == ["##g", "##n", "##s", "##u", "b", "h", "p"]
    assert vocab[-1] == "##gs" and merges == 1 and stop == "vocab_size"
    assert len(vocab) - N_SPECIAL == 8


def _naive(words: Mapping[str, int], vocab_size: int, min_frequency: int, by_count: bool = False) -> list[str]:
    """Full recount per merge, the same score and tie rule (:func:`harness.references.recount_merges`):
    the reference for the incremental learner."""
    vocab = sorted({s for w in words for s in (w[0], *("##" + c for c in w[1:]))})
    for new, *_ in recount_merges(words, min_frequency, by_count):
        if N_SPECIAL + len(vocab) >= vocab_size:
            break
        if new not in vocab:
            vocab.append(new)
    return vocab


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("score", ["wordpiece", "count"])
@pytest.mark.parametrize("seed", range(6))
def test_incremental_learner_equals_full_recount(seed: int, score: str, backend: str) -> None:
    if backend == "native" and not compiled.available():
        pytest.skip(f"no compiled trainer: {compiled.IMPORT_ERROR}")
    rng = random.Random(seed)
    words = {"".join(rng.choice("aabbcde") for _ in range(rng.randint(1, 9))): rng.randint(1, 20)
             for _ in range(rng.randint(5, 60))}
    size = N_SPECIAL + 10 + rng.randint(0, 60)
    mf = rng.choice([1, 2, 3])
    vocab, _, _ = learn_wordpiece(words, vocab_size=size, min_frequency=mf, score=score, backend=backend)
    assert vocab[N_SPECIAL:] == _naive(words, size, mf, by_count=score == "count")


@pytest.mark.skipif(not compiled.available(), reason=f"no compiled trainer: {compiled.IMPORT_ERROR}")
@pytest.mark.parametrize("score", ["wordpiece", "count"])
def test_compiled_learner_gives_the_same_artifact_and_progress(score: str) -> None:
    text = corpus_text(80_000)
    runs = []
    for backend in ("python", "native"):
        calls: list[tuple[int, int | None]] = []
        art = train_on(WordPieceTrainer(vocab_size=1500, score=score, backend=backend), [text],
                       lambda d, t: calls.append((d, t)))  # noqa: B023
        runs.append((art.data, art.summary, calls))
    assert runs[0] == runs[1]
    rng = random.Random(7)  # many ties: tiny alphabet, equal counts
    words = {"".join(rng.choice("ab") for _ in range(rng.randint(1, 8))): rng.choice([1, 2, 4])
             for _ in range(200)}
    for mf in (1, 2, 3):
        assert learn_wordpiece(words, vocab_size=60, min_frequency=mf, score=score, backend="python") == \
            learn_wordpiece(words, vocab_size=60, min_frequency=mf, score=score, backend="native")


def test_count_score_takes_aa_over_zq() -> None:
    vocab, _, _ = learn_wordpiece({"zq": 1, "aa": 8}, vocab_size=N_SPECIAL + 5, min_frequency=1, score="count")
    assert vocab[-1] == "aa"
    with pytest.raises(ValueError, match="score"):
        learn_wordpiece({"ab": 2}, vocab_size=N_SPECIAL + 5, score="ratio")


@pytest.fixture(scope="module")
def trained() -> bytes:
    return train_on(WordPieceTrainer(vocab_size=3000), [corpus_text()]).data


def test_hf_tokenizers_and_this_engine_encode_identically(trained: bytes) -> None:
    hf = Tokenizer.from_str(trained.decode("utf-8"))
    ours = from_hf_json(trained, "wp")
    assert hf.get_vocab_size() == ours.n_vocab == 3000
    text = corpus_text()
    for s in hostile_samples(text, 400):
        if any(t in s.upper() for t in BERT_SPECIALS):  # Hugging Face matches special tokens in text; we never do
            assert not {0, 2, 3, 4} & set(ours.encode(s))
            continue
        assert list(ours.encode(s)) == hf.encode(s, add_special_tokens=False).ids, s
    pair = "The tokenizer.json loads"
    assert list(ours.encode(pair, add_special_tokens=True)) == hf.encode(pair).ids
    assert ours.decode(ours.encode(pair)) == hf.decode(hf.encode(pair).ids) == "the tokenizer. json loads"


def test_uncoverable_word_is_one_unk(trained: bytes) -> None:
    ours = from_hf_json(trained, "wp")
    unk = BERT_SPECIALS.index("[UNK]")
    assert list(ours.encode("token\u2603")) == [unk]  # a snowman never seen: the whole word is [UNK]
    ids = list(ours.encode("tokenizer"))
    assert unk not in ids and len(ids) >= 1


def test_training_is_deterministic_and_writes_vocab_txt() -> None:
    text = corpus_text(60_000)
    a = train_on(WordPieceTrainer(vocab_size=800, vocab_txt=True), [text])
    cut = text.index("\n", 1000) + 1  # chunks end at line ends
    b = train_on(WordPieceTrainer(vocab_size=800, vocab_txt=True), [text[:cut], text[cut:]])
    assert a.data == b.data and a.extra_files == b.extra_files
    doc = json.loads(a.data)
    lines = a.extra_files[".vocab.txt"].decode("utf-8").splitlines()
    assert lines[:N_SPECIAL] == list(BERT_SPECIALS)
    assert {t: i for i, t in enumerate(lines)} == doc["model"]["vocab"]
    cased = train_on(WordPieceTrainer(vocab_size=800, lowercase=False, split_cjk=False), [text])
    cdoc = json.loads(cased.data)
    assert cdoc["normalizer"]["lowercase"] is False and cdoc["normalizer"]["handle_chinese_chars"] is False
    assert any(t[:1].isupper() for t in cdoc["model"]["vocab"]) and not any(
        t[:1].isupper() for t in doc["model"]["vocab"] if t not in BERT_SPECIALS)


def test_published_and_served_by_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    corpus = tmp_path / "c.txt"
    corpus.write_text(corpus_text(60_000), encoding="utf-8")
    report = train_to_store([corpus], name="wp", store_dir=tmp_path / "s", kind="wordpiece", vocab_size=900,
                            quiet=True, options={"vocab_txt": True})
    assert report.spec.format == "hf_json" and report.spec.kind == "wordpiece" and report.spec.vocab_size == 900
    assert (tmp_path / "s" / "wp.vocab.txt").exists()
    tokenizer = get_tokenizer("wp", store_dir=tmp_path / "s")
    hf = Tokenizer.from_file(str(report.spec.artifact_path))
    assert list(tokenizer.encode("Hello, tokenizer world")) == hf.encode("Hello, tokenizer world",
                                                                   add_special_tokens=False).ids
    with pytest.raises(ValueError, match="do not apply"):
        train_to_store([corpus], name="wp", store_dir=tmp_path / "s", kind="wordpiece", vocab_size=900,
                       quiet=True, options={"byte_fallback": True})


@pytest.mark.parametrize("seed", range(4))
def test_bert_splitter_and_word_counts_equal_the_components(seed: int) -> None:
    from app.engine.pipeline.base import Piece
    from app.engine.pipeline.bert import BertPreTokenizer
    from app.engine.training.wordpiece import bert_splitter

    rng = random.Random(seed)
    alphabet = "aZ09 \t\u3000\u00a0\u2028.,!¿«»-_\u055d\u00e9\u0301日本語\u0e01\ud55c\x00\x07\ufffd\u200b\U0001f600"
    pre = BertPreTokenizer()
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25))) for _ in range(500)]
    split = bert_splitter(set("".join(texts)))
    for t in texts:
        assert split(t) == [p.text for p in pre.pre_tokenize([Piece(t)]) if p.text], repr(t)
    # whole word counting against normalizer + pre-tokenizer piece by piece
    for lowercase in (True, False):
        tr = WordPieceTrainer(vocab_size=100, lowercase=lowercase)
        tr.feed("\n".join(texts))
        want: dict[str, int] = {}
        for chunk, n in tr._chunks.items():
            for p in pre.pre_tokenize([Piece(tr.normalizer.normalize_str(chunk))]):
                if p.text:
                    want[p.text] = want.get(p.text, 0) + n
        assert list(tr.words().items()) == list(want.items())


def test_long_chunks_are_counted_piecewise_as_a_whole() -> None:
    """``feed`` splits text longer than its piece size at line ends; the chunk counts (and their first-appearance
    order) are those of the whole text, also for lines longer than a piece and text without a final newline."""
    from collections import Counter

    from app.engine.training import wordpiece

    rng = random.Random(5)
    words = ["a", "bb", "ccc", "日本", "x\u00e9", "\u0e01\u0e02"]
    lines = [" ".join(rng.choice(words) for _ in range(rng.choice([3, 40, 30_000]))) for _ in range(60)]
    text = "\n".join(lines) + "\r\n\t" + "tail" * 20_000
    assert len(text) > 8 * wordpiece._PIECE
    tr = WordPieceTrainer(vocab_size=100)
    tr.feed(text)
    want = Counter(wordpiece._CHUNK.findall(text))
    assert list(tr._chunks.items()) == list(want.items())


@pytest.mark.skipif(not compiled.available(), reason=f"no compiled trainer: {compiled.IMPORT_ERROR}")
@pytest.mark.parametrize("score", ["wordpiece", "count"])
def test_compiled_learner_equals_python_on_varied_corpora(score: str) -> None:
    """Runs of one symbol (overlapping pairs like ``a a a``), ``#`` inside words, symbols re-created by a second
    path (``ab`` + ``##c`` and ``a`` + ``##bc``), long words and word lists larger than one rewrite's neighbourhood:
    the compiled loop (which updates only the pairs next to merged occurrences) picks the Python loop's merges."""
    for seed in range(40):
        rng = random.Random(seed)
        alphabet = rng.choice(["ab", "aab", "abc#", "aabbcde", "xyz##", "a"])
        words = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))): rng.randint(1, 30)
                 for _ in range(rng.randint(3, 150))}
        mf = rng.choice([1, 2, 3])
        size = N_SPECIAL + 2 * len(alphabet) + rng.randint(0, 200)
        want = learn_wordpiece(words, vocab_size=size, min_frequency=mf, score=score, backend="python")
        assert learn_wordpiece(words, vocab_size=size, min_frequency=mf, score=score, backend="native") == want, seed


@pytest.mark.parametrize("lowercase", [True, False])
def test_words_follow_canonical_reordering_across_characters(lowercase: bool) -> None:
    """Accent stripping runs NFD over the whole text: marks that are kept (not Mn) but have a combining class are
    reordered across characters (U+1D16D, class 226, before U+1D165, class 216). The trainer's words are those of
    the normalizer over each whole chunk, and those of Hugging Face's own BertNormalizer + BertPreTokenizer."""
    from tokenizers import normalizers, pre_tokenizers

    from app.engine.pipeline.base import Piece
    from app.engine.pipeline.bert import BertPreTokenizer

    rng = random.Random(11)
    alphabet = "ab \u0301\u0316\U0001d165\U0001d16d\u302e\u302f\u1b44e\u00e9,"
    text = "\n".join("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20))) for _ in range(300)) + "\n"
    tr = WordPieceTrainer(vocab_size=100, lowercase=lowercase, strip_accents=True)
    tr.feed(text)
    pre = BertPreTokenizer()
    want: dict[str, int] = {}
    for chunk, n in tr._chunks.items():
        for p in pre.pre_tokenize([Piece(tr.normalizer.normalize_str(chunk))]):
            if p.text:
                want[p.text] = want.get(p.text, 0) + n
    got = tr.words()
    assert list(got.items()) == list(want.items())
    hf_norm = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=True)
    hf: dict[str, int] = {}
    for line in text.splitlines():
        for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(hf_norm.normalize_str(line)):
            hf[w] = hf.get(w, 0) + 1
    assert got == hf


def test_training_a_wordpiece_tokenizer_does_not_load_the_serving_engine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Start-up is part of a training's cost: the wordpiece kind imports its own modules only (the package names
    of ``app.engine`` and ``app.engine.training`` resolve on first use), not the encoders or the other trainers."""
    import subprocess
    import sys

    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\nhello there\n" * 20, encoding="utf-8")
    code = (
        "import sys\n"
        "from app.engine.training import train_to_store\n"
        f"train_to_store([{str(corpus)!r}], name='w', store_dir={str(tmp_path / 's')!r}, kind='wordpiece',"
        " vocab_size=40, quiet=True)\n"
        "print(sorted(m for m in ('app.engine.encoding', 'app.engine.registry', 'app.engine.pipeline.pipeline',"
        " 'app.engine.training.byte_bpe', 'app.engine.training.unigram', 'app.engine.training.sentencepiece')"
        " if m in sys.modules))\n"
    )
    from tests.conftest import REPO_ROOT

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert out.stdout.strip() == "[]", out.stdout
    assert (tmp_path / "s" / "w.tokenizer.json").is_file()
