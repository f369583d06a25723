"""The classic kind end to end: artifact, store entry, CharBPEEncoding's RankBPETokenizer-like surface."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine import Special, get_tokenizer, reset
from app.engine.errors import ArtifactError, InvalidTokenIdError, UnknownSpecialTokenError
from app.engine.training import CharBPEEncoding, CharBPEModel, train_char_bpe, train_to_store
from app.engine.training.char_bpe import UNK_ID

TEXT = "low low low low low lower lower newest newest newest newest newest newest widest widest widest\n"


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    reset()
    yield
    reset()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    train_to_store([corpus], name="classic", store_dir=tmp_path / "store", vocab_size=19, kind="char",
                   min_frequency=1, special_tokens=["<s>", "</s>"], quiet=True)
    return tmp_path / "store"


def test_store_entry_and_loading(store: Path) -> None:
    doc = json.loads((store / "manifest.json").read_text())
    (entry,) = doc["tokenizers"]
    assert entry["kind"] == "char_bpe" and entry["format"] == "char_bpe"
    assert "pattern" not in entry and "pattern_regex" not in entry
    tokenizer = get_tokenizer("classic", store_dir=store)
    assert isinstance(tokenizer, CharBPEEncoding)
    # 19 ordinary ids: <unk>, </w>, 10 characters (d e i l n o r s t w), 7 merges; then 2 specials
    assert tokenizer.n_vocab == 21 and entry["vocab_size"] == 21
    assert tokenizer.special_tokens == {"<s>": 19, "</s>": 20}
    assert tokenizer.model.merge_strings[:5] == [("e", "s"), ("es", "t"), ("est", "</w>"), ("l", "o"), ("lo", "w")]


def test_encode_decode_round_trip_and_unknowns(store: Path) -> None:
    tokenizer = get_tokenizer("classic", store_dir=store)
    vocab = tokenizer.model.vocab
    ids = tokenizer.encode("lowest  newer\n\twide")
    assert [vocab[i] for i in ids][:2] == ["low", "est</w>"]
    assert tokenizer.decode(ids) == "lowest newer wide"  # whitespace runs become one space
    unk = tokenizer.encode("low!")
    assert UNK_ID in unk and tokenizer.decode(unk) == "low\ufffd"
    assert tokenizer.count("lowest  newer") == len(tokenizer.encode("lowest  newer"))
    assert tokenizer.encode("") == [] and tokenizer.decode([]) == ""


def test_specials_only_by_name(store: Path) -> None:
    tokenizer = get_tokenizer("classic", store_dir=store)
    ids = tokenizer.encode("low", prefix=["<s>"], suffix=["</s>"])
    assert ids[0] == 19 and ids[-1] == 20
    assert tokenizer.decode(ids) == "<s>low </s>"
    assert tokenizer.decode(ids, skip_special=True) == "low"
    assert 19 not in tokenizer.encode("<s> low")  # the string is text: unknown characters
    assert tokenizer.encode_parts([Special("<s>"), "low", Special("</s>")]) == ids
    assert tokenizer.is_special(20) and not tokenizer.is_special(2)
    with pytest.raises(UnknownSpecialTokenError):
        tokenizer.encode("x", prefix=["<nope>"])
    with pytest.raises(InvalidTokenIdError):
        tokenizer.decode([0, 21])
    with pytest.raises(InvalidTokenIdError):
        tokenizer.decode([-1])


def test_offsets_batches_and_cache(store: Path) -> None:
    tokenizer = get_tokenizer("classic", store_dir=store)
    text = " lowest newest"
    ids, spans = tokenizer.encode_with_offsets(text)
    assert ids == tokenizer.encode(text)
    assert [text[s:e] for s, e in spans] == ["low", "est", "new", "est"]
    ids, spans = tokenizer.encode_with_offsets("low")
    assert [tokenizer.model.vocab[i] for i in ids] == ["low", "</w>"] and spans == [(0, 3), (3, 3)]
    want = [tokenizer.encode("low"), tokenizer.encode("newest")]
    assert tokenizer.encode_batch(["low", "newest"], num_threads=2) == want
    assert tokenizer.count_batch(["low", "newest lowest"]) == [2, 4]
    assert tokenizer.decode_batch([tokenizer.encode("low")]) == ["low"]
    tokenizer.clear_cache()
    tokenizer.encode("low low")
    stats = tokenizer.cache_stats()
    assert stats.misses == 1 and stats.hits == 1


def test_long_words_use_the_heap_merge_with_the_same_result() -> None:
    model = train_char_bpe({"abab": 5, "aab": 3, "ba": 4, "abba": 2}, num_merges=10, min_frequency=1)
    tokenizer = CharBPEEncoding("t", model, cache_size=0)
    import random

    rng = random.Random(7)
    for _ in range(50):
        word = "".join(rng.choice("abx") for _ in range(rng.randint(65, 200)))
        assert list(tokenizer.encode(word)) == [model.vocab.index(s) if s != "<unk>" else 0
                                          for s in model.segment_in_order(word)]


def test_artifact_round_trip_and_corruption(tmp_path: Path) -> None:
    model = train_char_bpe({"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}, num_merges=4, min_frequency=1)
    data = model.to_artifact()
    again = CharBPEModel.from_artifact(data)
    assert again.to_artifact() == data
    assert again.merge_strings == model.merge_strings
    doc = json.loads(data)
    doc["merges"][1] = [doc["merges"][1][1], doc["merges"][1][0], doc["merges"][1][2]]
    with pytest.raises(ArtifactError):
        CharBPEModel.from_artifact(json.dumps(doc).encode())
    with pytest.raises(ArtifactError):
        CharBPEModel.from_artifact(b"{not json")


def test_tampered_artifact_fails_verification(store: Path) -> None:
    path = store / "classic.char_bpe.json"
    path.write_bytes(path.read_bytes().replace(b'"low"', b'"lox"'))
    with pytest.raises(ArtifactError):
        get_tokenizer("classic", store_dir=store)
