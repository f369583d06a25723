"""SentencePiece ``.model`` tokenizers (mistral-v1/v3/v7) against the ``sentencepiece`` package on the same files:
ids and decoded text on hostile strings and a seeded sample of real multilingual text; the loader's rules for
control and user-defined pieces, the template, offsets and errors."""

from __future__ import annotations

import random

import pytest

from app.engine import get_tokenizer
from app.engine.errors import ArtifactError
from app.engine.pipeline.sentencepiece import parse_model, positions_of_types
from harness.texts import sample

from .references import artifact_bytes, sentencepiece_reference

NAMES = ["mistral-v1", "mistral-v3", "mistral-v7"]


@pytest.mark.parametrize("name", NAMES)
def test_ids_and_decode_equal_sentencepiece(name: str) -> None:
    ref, tok = sentencepiece_reference(name), get_tokenizer(name)
    texts = sample(60, 120, seed=hash(name) % 1000)
    mismatches = [t for t in texts if tok.encode(t) != ref.encode(t)]
    assert not mismatches, f"{len(mismatches)}/{len(texts)} differ, first {mismatches[0][:80]!r}"
    for t in texts:
        ids = ref.encode(t)
        assert tok.decode(ids) == ref.decode(ids), t[:80]


@pytest.mark.parametrize("name", NAMES)
def test_lossless_round_trip(name: str) -> None:
    """Identity normalization, byte fallback, no whitespace folding: every text comes back exactly — except the
    character ``▁`` itself, which is how these models write a space (documented loss, as in sentencepiece)."""
    tok = get_tokenizer(name)
    for t in sample(20, 60, seed=7):
        assert tok.decode(tok.encode(t)) == t.replace("\u2581", " ")
    assert tok.decode(tok.encode("a\u2581b")) == "a b"


@pytest.mark.parametrize("name", NAMES)
def test_control_pieces_never_from_text_but_by_name(name: str) -> None:
    tok, ref = get_tokenizer(name), sentencepiece_reference(name)
    text = "<s>[INST] hi [/INST]</s><unk>"
    ids = tok.encode(text)
    assert ids == ref.encode(text)
    assert not any(tok.is_special(i) for i in ids)
    assert tok.encode("hi", prefix=["<s>"], suffix=["</s>"]) == [1, *ref.encode("hi"), 2]
    assert tok.encode("hi", add_special_tokens=True) == ref.encode("hi", add_bos=True)
    assert tok.template.describe() == "<s> $text"


def test_user_defined_pieces_match_in_text_as_sentencepiece() -> None:
    tok, ref = get_tokenizer("mistral-v7"), sentencepiece_reference("mistral-v7")
    for text in ("[REF]", "a[REF]b", "x [REFERENCE_DOC_3] y", "[/REF][REF]"):
        assert tok.encode(text) == ref.encode(text)
    assert 750 in tok.encode("a[REF]b")  # the user-defined piece [REF], matched whole
    assert not tok.is_special(750)


def test_offsets_cover_the_text() -> None:
    tok = get_tokenizer("mistral-v1")
    text = "Héllo  wörld 日本\n"
    ids, spans = tok.encode_with_offsets(text)
    assert ids == tok.encode(text)
    assert len(spans) == len(ids)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a <= b for a, b in spans)


def test_malformed_model_is_an_artifact_error() -> None:
    with pytest.raises(ArtifactError, match="not a SentencePiece model"):
        parse_model(b"\xff\xff\xff\xff not a proto", "x.model")
    with pytest.raises(ArtifactError):
        parse_model(b"", "empty.model")
    data = artifact_bytes("mistral-v1")
    assert len(parse_model(data, "v1").pieces) == 32000


def test_space_symbol_split_is_exact_and_used() -> None:
    """The cut before word-initial ``▁`` (for caching) only where no piece could span it; ids are the whole-text
    BPE's."""
    from app.engine.pipeline.models.sp_bpe import SentencePieceBPE
    from app.engine.pipeline.sp_split import SpaceSymbolSplit, splits_exactly

    tok = get_tokenizer("mistral-v3")
    assert isinstance(tok.pre_tokenizer, SpaceSymbolSplit)  # type: ignore[attr-defined]
    model = tok.model  # type: ignore[attr-defined]
    assert isinstance(model, SentencePieceBPE)
    normalize = tok.normalizer.normalize_str  # type: ignore[attr-defined]
    for text in sample(10, 40, seed=13):
        assert tok.encode(text) == model.tokenize(normalize(text))
    assert not splits_exactly(["a\u2581b"]) and splits_exactly(["\u2581\u2581", "\u2581ab"])
    assert not splits_exactly(["\u2581", "\n\u2581"]) and not splits_exactly(["ab\u2581\u2581"])
    assert splits_exactly(["\u2581\u2581a", "", "x"]) and splits_exactly([])


@pytest.mark.parametrize("name", ["mistral-v1", "llama2", "xlm-roberta-sentencepiece"])
def test_backend_argument_reaches_the_model(name: str) -> None:
    """``backend=`` picks the model's backend for SentencePiece BPE and Unigram alike (the Unigram builder once
    dropped it, so ``backend="python"`` still ran the compiled core and the two could not be compared in one
    process)."""
    from app.engine.pipeline.compiled import UNIGRAM

    python = get_tokenizer(name, backend="python")
    assert python.backend == "python" and python.model.backend == "python"  # type: ignore[attr-defined]
    if UNIGRAM.module is not None:
        native = get_tokenizer(name, backend="native")
        assert native.backend == "native" and native.model.backend == "native"  # type: ignore[attr-defined]
        text = "ｆｕｌｌ  wïdth \u2581 日本語 \x00 ﬁ"
        assert python.encode(text) == native.encode(text) == sentencepiece_reference(name).encode(text)


@pytest.mark.parametrize("seed", range(5))
def test_positions_of_types_is_the_plain_scan(seed: int) -> None:
    rng = random.Random(seed)
    common = rng.randint(0, 6)  # (the first half: every type as often; the second: most pieces of one type)
    types = bytes(rng.randint(0, 6) if seed % 2 or rng.random() < 0.02 else common
                  for _ in range(rng.randint(0, 400 if seed % 2 else 4000)))
    for kinds in [(), (1,), (2, 3), (0, 6, 300), tuple(range(7)), (common,), tuple({0, 1, 2} - {common})]:
        for negate in (False, True):
            assert positions_of_types(types, kinds, negate=negate) == [
                i for i, t in enumerate(types) if (t in kinds) != negate]


def test_splits_exactly_is_the_per_piece_check() -> None:
    """The one search over the joined pieces decides as a search in every piece would, NULs in pieces included."""
    import re

    from app.engine.pipeline.sp_split import splits_exactly

    crossing = re.compile("[^\u2581]\u2581")
    rng = random.Random(7)
    for _ in range(5000):
        items = ["".join(rng.choice("a\u2581\0") for _ in range(rng.randint(0, 4))) for _ in range(rng.randint(0, 5))]
        assert splits_exactly(items) == (not any(crossing.search(p) for p in items)), items
        assert splits_exactly(iter(items)) == splits_exactly(items)
