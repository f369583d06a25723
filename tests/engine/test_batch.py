"""``encode_batch`` / ``count_batch`` of every bundled tokenizer on threads: the ids of per-text calls, whichever
path a family's batch takes (the compiled core's own C threads for byte-level rank BPE, a thread pool over GIL-free
compiled calls otherwise), on hostile texts, added-token strings, lone surrogates and a batch large enough for the
compiled core to start its threads."""

from __future__ import annotations

import random

import pytest

from app.engine import get_tokenizer, list_tokenizers

PIECES = ["a", "A", "中", "日本語", "\u0301", "1", "123456", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000",
          "'s", "'LL", "😀", "\x00", "hello", " world", "Привет", " Việt", "ﬀ", "İ", "\ufeff", "x\u0301y",
          "ＡＢＣ", "▁", " ▁x", "<0x0A>"]  # fmt: skip


def batch_texts(name: str) -> list[str]:
    """Hostile short texts (the tokenizer's own special-token strings glued in, lone surrogates, empty ones),
    chat-sized lines, a few 10 KB documents and long runs: ~200 KB in all, so the C batch starts threads."""
    rng = random.Random(name)
    specials = list(get_tokenizer(name).special_tokens)[:20] or ["<|endoftext|>"]
    pieces = [*PIECES, *specials]
    texts = ["", "hello world", "a\ud800b", "\udfff", " \n  \n", f"x{specials[0]}y", specials[-1]]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    texts += ["".join(rng.choice(PIECES) for _ in range(rng.randint(20, 120))) for _ in range(200)]
    texts += ["".join(rng.choice(pieces) for _ in range(2_500)) for _ in range(8)]
    texts += ["a" * 20_000, " " * 5_000 + "x", "中" * 6_000, "🙂" * 3_000, "ab" * 6_000]
    return texts


@pytest.mark.parametrize("name", list_tokenizers())
def test_batches_on_threads_equal_per_text_calls(name: str) -> None:
    tokenizer = get_tokenizer(name)
    texts = batch_texts(name)
    want = [tokenizer.encode(t) for t in texts]
    counts = [len(ids) for ids in want]
    for threads in (1, 2):
        assert tokenizer.encode_batch(texts, num_threads=threads) == want, (name, threads)
        assert tokenizer.count_batch(texts, num_threads=threads) == counts, (name, threads)
    assert tokenizer.count_batch(tuple(texts[:50]), num_threads=2) == counts[:50]  # any sequence
