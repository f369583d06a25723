"""Streaming counting: chunked pre-tokenization gives exactly the pieces of the whole file."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import regex

from app.engine.patterns import PATTERNS
from app.engine.training.corpus import CorpusStats, count_pretokens, count_words, iter_chunks, iter_raw_chunks

TRICKY = (
    "Hello world.\nThe end!\n\n\nNext  paragraph\n  indented line\n.\n/path/to\n'll 's\nдругой текст\n"
    "日本語のテキスト。\nmixed123abc 4567\n\t\ttabs\n   \n\nx\r\ny\r\n\r\nz \n/\n.\n/x\n" * 3
    + "end without newline"
)


@pytest.mark.parametrize("pattern_id", sorted(PATTERNS))
@pytest.mark.parametrize("block", [1, 3, 7, 64])
def test_chunked_pieces_equal_whole_text_pieces(tmp_path: Path, pattern_id: str, block: int) -> None:
    path = tmp_path / "c.txt"
    path.write_text(TRICKY, encoding="utf-8")
    stats = CorpusStats()
    got = count_pretokens([path], PATTERNS[pattern_id], stats=stats, block_bytes=block, max_chunk_chars=10**9)
    expected = Counter(regex.findall(PATTERNS[pattern_id], TRICKY))
    assert got == expected
    assert list(got) == list(expected)  # corpus order (first appearance) is kept
    assert stats.chunks > 3  # it really was cut
    assert stats.forced_cuts == 0
    assert stats.bytes == len(TRICKY.encode())


def test_chunks_concatenate_to_the_file_and_cut_at_clean_points(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text(TRICKY, encoding="utf-8")
    chunks = list(iter_chunks([path], block_bytes=5))
    assert "".join(chunks) == TRICKY
    for chunk, following in zip(chunks, chunks[1:], strict=False):
        assert chunk.endswith("\n") and not chunk[-2].isspace()
        assert following[0].isalnum()


def test_forced_cut_when_no_clean_point(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    text = "  indented\n" * 50
    path.write_text(text, encoding="utf-8")
    stats = CorpusStats()
    chunks = list(iter_chunks([path], stats=stats, block_bytes=16, max_chunk_chars=40))
    assert "".join(chunks) == text
    assert stats.forced_cuts > 0


def test_invalid_utf8_becomes_replacement_and_files_are_separate(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_bytes(b"caf\xc3\xa9 \xff\xfe ok\nlast")
    b.write_bytes(b"word\n")
    got = count_pretokens([a, b], PATTERNS["gpt2"], block_bytes=2)
    text_a = b"caf\xc3\xa9 \xff\xfe ok\nlast".decode("utf-8", errors="replace")
    assert got == Counter(regex.findall(PATTERNS["gpt2"], text_a)) + Counter(["word", "\n"])
    assert "lastword" not in got  # pieces never span files


def test_count_words_splits_on_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_text("low low lower\nnewest\tnewest\n  widest\u2003low\n", encoding="utf-8")
    assert count_words([path], block_bytes=3) == Counter({"low": 3, "lower": 1, "newest": 2, "widest": 1})


FRAGMENTS = ["\n", "\n\n", " ", "  ", "\t", "\r\n", ".", "/", "'s", "'LL", "a", "Word", "123", "4", "é", "日本",
             "!?", " \n", "\n/", "x\n", "-", "\u2028", "\x1c", "\u00a0"]


@pytest.mark.parametrize("seed", range(20))
def test_random_texts_chunk_exactly(tmp_path: Path, seed: int) -> None:
    import random

    rng = random.Random(seed)
    text = "".join(rng.choice(FRAGMENTS) for _ in range(400))
    path = tmp_path / "r.txt"
    path.write_text(text, encoding="utf-8", newline="")
    for pattern in PATTERNS.values():
        got = count_pretokens([path], pattern, block_bytes=rng.randint(1, 40), max_chunk_chars=10**9)
        assert got == Counter(regex.findall(pattern, text))


RAW_FRAGMENTS = [b"\n", b"\r\n", b" ", b"a", b"word", b"\xc3\xa9", b"\xe6\x97\xa5", b"\xf0\x9f\x99\x82", b"\xff",
                 b"\xe6\x97", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x96\x81", b"\r", b"\x80"]


@pytest.mark.parametrize("seed", range(30))
def test_raw_chunks_are_the_chunks_undecoded(tmp_path: Path, seed: int) -> None:
    """iter_raw_chunks gives iter_chunks(exact_cuts=False)'s chunks (and stats), some as the bytes they decode from:
    whole lines, invalid UTF-8, split sequences, lines longer than 4 * max_chunk_chars (decoded in pieces)."""
    import random

    rng = random.Random(seed)
    files = []
    for k in range(rng.randint(1, 3)):
        data = b"".join(rng.choice(RAW_FRAGMENTS) for _ in range(rng.randint(0, 300)))
        if seed % 3 == 0:  # a line with no newline for long: the text path's forced, decoded cuts
            data += b"x\xe6\x97\xa5" * rng.randint(5, 40)
        files.append(tmp_path / f"f{k}.txt")
        files[-1].write_bytes(data)
    opts = dict(block_bytes=rng.randint(1, 64), max_chunk_chars=rng.choice([4, 16, 10**9]))
    s_text, s_raw = CorpusStats(), CorpusStats()
    want = list(iter_chunks(files, exact_cuts=False, stats=s_text, **opts))  # type: ignore[arg-type]
    got = list(iter_raw_chunks(files, stats=s_raw, **opts))  # type: ignore[arg-type]
    assert [c.decode("utf-8", errors="replace") if isinstance(c, bytes) else c for c in got] == want
    assert s_raw == s_text
    assert any(isinstance(c, bytes) for c in got) or not any(want)
