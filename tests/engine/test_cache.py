"""The pre-token cache: bounded, counted, thread-safe, and invisible in the output."""

from __future__ import annotations

import random
import threading

import pytest

from app.engine import Store, get_tokenizer, load_encoding
from app.engine.cache import MAX_CACHED_PIECE_CHARS, PieceCache


def _words(n: int, seed: int = 0, longest: int = 12) -> str:
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzäöüßжщ語"
    return " ".join("".join(rng.choice(alphabet) for _ in range(rng.randint(3, longest))) for _ in range(n))


def test_output_is_identical_with_the_cache_on_or_off() -> None:
    spec = Store.load().spec("cl100k_base")
    cached, uncached = load_encoding(spec, cache_size=64), load_encoding(spec, cache_size=0)
    text = _words(3000)
    assert cached.encode(text) == uncached.encode(text)
    assert cached.encode(text) == uncached.encode(text)  # second pass: served from the cache
    assert uncached.cache_stats().hits == 0 and uncached.cache_stats().size == 0


def test_counters_and_the_size_bound() -> None:
    calls: list[str] = []

    def compute(piece: str) -> tuple[int, ...]:
        calls.append(piece)
        return (len(piece),)

    cache = PieceCache(compute, max_size=2)
    assert cache.lookup("ab") == (2,)
    assert cache.lookup("ab") == (2,)
    cache.lookup("cd")
    cache.lookup("ef")  # evicts "ab", the least recently used
    cache.lookup("ab")
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.size, stats.max_size) == (1, 4, 2, 2)
    assert calls == ["ab", "cd", "ef", "ab"]
    long_piece = "x" * (MAX_CACHED_PIECE_CHARS + 1)
    cache.lookup(long_piece)
    assert cache.stats().size == 2  # long pieces bypass the cache
    cache.clear()
    assert cache.stats() == type(stats)(0, 0, 0, 2)
    with pytest.raises(ValueError):
        PieceCache(compute, max_size=-1)


def test_concurrent_use_gives_the_same_ids() -> None:
    tokenizer = load_encoding(Store.load().spec("o200k_base"), cache_size=128)  # small: constant eviction
    texts = [_words(400, seed) for seed in range(8)]
    expected = [load_encoding(Store.load().spec("o200k_base"), cache_size=0).encode(t) for t in texts]
    results: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(3):
                results[i] = tokenizer.encode(texts[i])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [results[i] for i in range(len(texts))] == expected
    assert tokenizer.cache_stats().size <= 128


def test_cache_size_env(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.engine.cache import CACHE_SIZE_ENV, DEFAULT_CACHE_SIZE, default_cache_size

    monkeypatch.delenv(CACHE_SIZE_ENV, raising=False)
    assert default_cache_size() == DEFAULT_CACHE_SIZE
    monkeypatch.setenv(CACHE_SIZE_ENV, "0")
    assert default_cache_size() == 0
    monkeypatch.setenv(CACHE_SIZE_ENV, "-5")
    with pytest.raises(ValueError):
        default_cache_size()


@pytest.mark.parametrize("cache_size", [1, 2, 3, 5, 6, 7])
def test_tiny_and_odd_sized_caches_are_invisible_in_the_output(cache_size: int) -> None:
    # the compiled cache is four-way: a piece may sit in its slot i or in i ^ 1, i ^ 2, i ^ 3; with a number of
    # slots that is not a multiple of four the last set is partial, and one slot is a cache of one piece
    spec = Store.load().spec("cl100k_base")
    cached, uncached = load_encoding(spec, cache_size=cache_size), load_encoding(spec, cache_size=0)
    text = " qzxvб" * 100 + " " + _words(2000, seed=cache_size)  # one piece again and again, then churn
    for _ in range(2):
        assert cached.encode(text) == uncached.encode(text)
    stats = cached.cache_stats()
    assert stats.hits > 0 and 0 < stats.size <= cache_size


def test_pieces_that_share_a_slot_both_stay_cached() -> None:
    # a cycle over a few hundred distinct pieces in a cache eight times larger: with four ways, conflicts are rare
    # enough that the later passes are (nearly) all hits (a direct-mapped table missed 7.5 % here, two ways 0-2 %);
    # words of at most 8 characters (24 bytes, 8 ids) always fit a slot
    tokenizer = load_encoding(Store.load().spec("cl100k_base"), cache_size=4096)
    text = _words(512, seed=99, longest=8)
    tokenizer.count(text)
    before = tokenizer.cache_stats()
    for _ in range(4):
        tokenizer.count(text)
    after = tokenizer.cache_stats()
    misses, hits = after.misses - before.misses, after.hits - before.hits
    assert hits > 0 and misses <= 0.005 * (hits + misses)


@pytest.mark.parametrize(("piece", "fits"), [
    ("internationalizationinternationalization", True),  # 40 bytes and 4 ids: a slot's 56 bytes exactly
    ("Antidisestablishmentarianism", True),  # 28 bytes and 6 ids
    ("мыслительная", True),  # 24 bytes and 5 ids
    ("MississippiMississippiMississippi", False),  # 33 bytes and 6 ids: 4 bytes too many
    ("Kraftfahrzeughaftpflichtversicherung", False),  # 36 bytes and 11 ids
])
def test_pieces_are_cached_when_their_bytes_and_ids_fit_a_slot(piece: str, fits: bool) -> None:
    # byte-level patterns keep a run of letters as one piece; a slot of the compiled cache is one 64-byte line whose
    # 56 bytes hold the piece's bytes, then (from the next multiple of four) its ids (it held a fixed 48 bytes and 16
    # ids in 120 bytes, slower on cold documents); a piece that does not fit is merged again each time, the same ids
    spec = Store.load().spec("cl100k_base")
    cached, uncached = load_encoding(spec, cache_size=4096), load_encoding(spec, cache_size=0)
    ids = uncached.encode(piece)
    assert ((len(piece.encode()) + 3) // 4 * 4 + 4 * len(ids) <= 56) == fits  # the case under test
    assert cached.encode(piece) == ids
    before = cached.cache_stats()
    assert cached.encode(piece) == ids
    after = cached.cache_stats()
    assert (after.hits - before.hits, after.misses - before.misses) == ((1, 0) if fits else (0, 1))
    longer = piece * 3  # past any slot: never cached, same ids
    for _ in range(2):
        assert cached.encode(longer) == uncached.encode(longer)


@pytest.mark.parametrize(("name", "word", "looked_up", "hit"), [
    ("mistral-v1", "internationalization", True, True),  # "▁" + 20 code points, 2 ids: past the 12 of fixed slots
    ("mistral-v1", "electroencephalography", True, False),  # 23 code points and 5 ids: 12 bytes too many
    ("gemma3", "internationalization", True, True),  # 20 code points, 2 ids
    ("gemma3", "electroencephalography", True, True),  # 22 code points and 3 ids: the 64 bytes exactly
    ("gemma3", "Kraftfahrzeughaftpflichtversicherung", False, False),  # 36 code points: no slot holds it
])
def test_segment_caches_keep_long_words_that_split_into_few_ids(name: str, word: str, looked_up: bool,
                                                                 hit: bool) -> None:
    # word_cache.h's segment slots (SentencePiece BPE, gemma3) are one 64-byte line holding the segment's code
    # points, then its ids: a long word that is one or two tokens fits as well as a short one that is many
    spec = Store.load().spec(name)
    cached, uncached = load_encoding(spec, cache_size=4096), load_encoding(spec, cache_size=0)
    ids = uncached.encode(word)
    assert cached.encode(word) == ids
    before = cached.cache_stats()
    assert cached.encode(word) == ids
    after = cached.cache_stats()
    expected = (1, 0) if hit else (0, 1) if looked_up else (0, 0)
    assert (after.hits - before.hits, after.misses - before.misses) == expected


@pytest.mark.parametrize("word", ["abc", "Hello", "tokenizer", "x", "слово"])
def test_a_piece_cut_from_a_segment_is_found_as_a_whole_segment(word: str) -> None:
    # SentencePiece BPE hashes a whole segment while it scans for its end (spbpe.c's segment_scan) and a piece cut
    # out of a segment with wc_seg_hash (word_cache.h): "▁word," is cut into "▁word" and ","; the cached
    # "▁word" is then the whole segment of "word", found only if both hashes agree
    spec = Store.load().spec("mistral-v1")
    cached, uncached = load_encoding(spec, cache_size=4096), load_encoding(spec, cache_size=0)
    assert cached.encode(word + ",") == uncached.encode(word + ",")
    before = cached.cache_stats()
    assert (before.hits, before.misses, before.size) == (0, 2, 2)  # the segment, then its piece "▁word"
    assert cached.encode(word) == uncached.encode(word)
    after = cached.cache_stats()
    assert (after.hits - before.hits, after.misses - before.misses) == (1, 0)


@pytest.mark.parametrize("name", ["gemma3", "mistral-v1", "xlm-roberta-sentencepiece"])
@pytest.mark.parametrize("slots", [1, 3])
def test_two_way_word_caches_of_every_size_are_invisible_in_the_output(name: str, slots: int) -> None:
    # word_cache.h's slots (gemma3's segment cache, SentencePiece BPE's, Unigram's word cache): one slot, and an
    # odd count whose last slot has no partner; a repeated word, then many distinct ones
    spec = Store.load().spec(name)
    cached = load_encoding(spec, cache_size=slots, unigram_word_cache=slots)
    uncached = load_encoding(spec, cache_size=0, unigram_word_cache=0)
    text = " qzxvб" * 100 + " " + _words(1500, seed=slots)
    for _ in range(2):
        assert cached.encode(text) == uncached.encode(text)
    stats = cached.cache_stats()
    assert stats.hits > 0 and 0 < stats.size <= slots


@pytest.mark.parametrize("name", ["cl100k_base", "qwen3", "gemma3", "bge-small-en-v1.5"])
def test_committing_the_cache_keeps_its_entries_and_the_ids(name: str) -> None:
    tokenizer = get_tokenizer(name)
    text = _words(200, seed=7)
    ids = tokenizer.encode(text)
    before = tokenizer.cache_stats()
    committed = tokenizer.commit_cache()
    if name in ("cl100k_base", "qwen3"):  # the compiled rank core's piece cache: its hints and slots, every byte
        assert committed >= before.max_size * (4 + 64)
    else:  # caches written when they are built: nothing to commit
        assert committed == 0
    assert tokenizer.cache_stats() == before  # entries and counters untouched
    assert tokenizer.encode(text) == ids
    if name in ("cl100k_base", "qwen3"):
        after = tokenizer.cache_stats()
        assert after.hits > before.hits and after.size == before.size  # served from the entries kept
