"""Byte-level training end to end: artifact + manifest in a store, loaded by the ordinary engine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine import RankBPETokenizer, get_tokenizer, reset
from app.engine.artifacts import parse_tiktoken
from app.engine.bpe import byte_pair_split
from app.engine.errors import ManifestError
from app.engine.patterns import CL100K, PATTERNS
from app.engine.store import Store
from app.engine.training import train_byte_bpe, train_to_store
from app.engine.training.corpus import count_pretokens

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    reset()
    yield
    reset()


@pytest.fixture(scope="module")
def corpus_files() -> list[Path]:
    """Real text shipped in the repository: this project's Python sources and docs (about 0.5 MB)."""
    files = sorted((REPO / "app").rglob("*.py")) + sorted(REPO.glob("*.md")) + sorted((REPO / "docs").glob("*.md"))
    assert sum(f.stat().st_size for f in files) > 50_000
    return files


def test_training_is_deterministic(tmp_path: Path, corpus_files: list[Path]) -> None:
    outs = []
    for run in ("a", "b"):
        report = train_to_store(corpus_files, name="det", store_dir=tmp_path / run, vocab_size=700, quiet=True,
                                special_tokens=["<|end|>"])
        outs.append((report.spec.artifact_path.read_bytes(), (tmp_path / run / "manifest.json").read_bytes()))
    assert outs[0] == outs[1]
    lex = train_to_store(corpus_files, name="det", store_dir=tmp_path / "c", vocab_size=700, quiet=True,
                         special_tokens=["<|end|>"], tie_break="lexicographic")
    assert lex.spec.artifact_path.read_bytes() != outs[0][0]  # the tie rule is real and changes the result


def test_artifact_ranks_are_bytes_then_merges(tmp_path: Path, corpus_files: list[Path]) -> None:
    counts = count_pretokens(corpus_files, CL100K)
    result = train_byte_bpe(counts, vocab_size=600)
    report = train_to_store(corpus_files, name="r", store_dir=tmp_path, vocab_size=600, quiet=True)
    ranks = parse_tiktoken(report.spec.artifact_path.read_bytes())
    assert ranks == result.ranks
    assert [tok for tok, r in sorted(ranks.items(), key=lambda kv: kv[1])][:256] == [bytes([b]) for b in range(256)]
    learned = [tok for tok, r in sorted(ranks.items(), key=lambda kv: kv[1])][256:]
    assert learned == [a + b for a, b in result.merges]  # one rank per merge, in merge order (no reuse here)
    assert len(ranks) == 600


def test_loads_through_get_tokenizer_and_round_trips(tmp_path: Path, corpus_files: list[Path]) -> None:
    train_to_store(corpus_files, name="mine", store_dir=tmp_path, vocab_size=800, quiet=True,
                   special_tokens=["<|endoftext|>", "<|pad|>"])
    tokenizer = get_tokenizer("mine", store_dir=tmp_path)
    assert isinstance(tokenizer, RankBPETokenizer)
    assert tokenizer.n_vocab == 802
    assert tokenizer.special_tokens == {"<|endoftext|>": 800, "<|pad|>": 801}
    text = "def train_to_store(files):\n    return 'naïve café — 日本語 🙂'\n"
    ids = tokenizer.encode(text, suffix=["<|endoftext|>"])
    assert ids[-1] == 800
    assert tokenizer.decode(ids[:-1]) == text
    assert len(ids) - 1 < len(text.encode())  # it learned something
    assert tokenizer.encode("<|endoftext|>") != [800]  # special strings in text stay text


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=200))
def test_round_trips_arbitrary_text(trained_store: Path, text: str) -> None:
    tokenizer = get_tokenizer("rt", store_dir=trained_store)
    scrubbed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert tokenizer.decode(tokenizer.encode(text)) == scrubbed


@pytest.fixture(scope="module")
def trained_store(tmp_path_factory: pytest.TempPathFactory, corpus_files: list[Path]) -> Path:
    store = tmp_path_factory.mktemp("rt")
    train_to_store(corpus_files, name="rt", store_dir=store, vocab_size=500, quiet=True)
    return store


@pytest.mark.parametrize("tie_break", ["first-seen", "lexicographic"])
@pytest.mark.parametrize("pattern_id", ["cl100k", "gpt2"])
def test_encoding_training_words_gives_training_segmentation(
    corpus_files: list[Path], tie_break: str, pattern_id: str
) -> None:
    pattern = PATTERNS[pattern_id]
    counts = count_pretokens(corpus_files, pattern)
    result = train_byte_bpe(counts, vocab_size=1500, tie_break=tie_break, keep_segmentation=True)
    tokenizer = RankBPETokenizer("seg", pattern=pattern, mergeable_ranks=result.ranks, special_tokens={}, cache_size=0)
    mismatches = []
    for piece, seg in result.segmentation.items():
        got = [piece] if piece in result.ranks else byte_pair_split(piece, result.ranks)
        if got != seg:
            mismatches.append(piece)
    assert not mismatches
    # and through the public encoder, on the pieces' text
    sample = list(counts)[:2000]
    for text in sample:
        assert [tokenizer.token_bytes(t) for t in tokenizer.encode(text)] == result.segmentation[text.encode()]


def test_manifest_merge_replace_and_custom_pattern(tmp_path: Path, corpus_files: list[Path]) -> None:
    store = tmp_path / "new" / "store"  # created on demand
    train_to_store(corpus_files[:5], name="one", store_dir=store, vocab_size=300, quiet=True)
    train_to_store(corpus_files[:5], name="two", store_dir=store, vocab_size=300, quiet=True,
                   pattern_regex=r"\w+|\s+|[^\w\s]+")
    first_two = (store / "two.tiktoken").read_bytes()
    train_to_store(corpus_files[:5], name="two", store_dir=store, vocab_size=320, quiet=True, pattern="gpt2")
    doc = json.loads((store / "manifest.json").read_text())
    assert [e["name"] for e in doc["tokenizers"]] == ["one", "two"]
    one, two = doc["tokenizers"]
    assert one["pattern"] == "cl100k" and two["pattern"] == "gpt2" and "pattern_regex" not in two
    assert two["vocab_size"] == 320 and (store / "two.tiktoken").read_bytes() != first_two
    loaded = Store.load(store)
    assert loaded.names() == ["one", "two"]
    train_to_store(corpus_files[:5], name="three", store_dir=store, vocab_size=300, quiet=True,
                   pattern_regex=r"\w+|\s+|[^\w\s]+")
    entry = json.loads((store / "manifest.json").read_text())["tokenizers"][2]
    assert entry["pattern_regex"] == r"\w+|\s+|[^\w\s]+" and "pattern" not in entry
    tokenizer = get_tokenizer("three", store_dir=store)
    assert tokenizer.decode(tokenizer.encode("x = y + 1")) == "x = y + 1"


def test_bad_options_raise(tmp_path: Path, corpus_files: list[Path]) -> None:
    files = corpus_files[:2]
    with pytest.raises(ValueError):
        train_to_store(files, name="../evil", store_dir=tmp_path, vocab_size=300, quiet=True)
    with pytest.raises(ValueError):
        train_to_store(files, name="x", store_dir=tmp_path, vocab_size=100, quiet=True)
    with pytest.raises(ValueError):
        train_to_store(files, name="x", store_dir=tmp_path, vocab_size=300, quiet=True, pattern="nope")
    with pytest.raises(ValueError):
        train_to_store(files, name="x", store_dir=tmp_path, vocab_size=300, quiet=True, pattern_regex="(")
    with pytest.raises(ValueError):
        train_to_store(files, name="x", store_dir=tmp_path, vocab_size=300, quiet=True, special_tokens=["a", "a"])
    with pytest.raises(OSError):
        train_to_store([tmp_path / "missing.txt"], name="x", store_dir=tmp_path, vocab_size=300, quiet=True)
    assert not (tmp_path / "manifest.json").exists()


def test_name_that_is_an_alias_is_refused(tmp_path: Path, corpus_files: list[Path]) -> None:
    train_to_store(corpus_files[:2], name="base", store_dir=tmp_path, vocab_size=300, quiet=True)
    doc = json.loads((tmp_path / "manifest.json").read_text())
    doc["tokenizers"][0]["aliases"] = ["nick"]
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ManifestError):
        train_to_store(corpus_files[:2], name="nick", store_dir=tmp_path, vocab_size=300, quiet=True)
