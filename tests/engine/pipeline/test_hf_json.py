"""The ``tokenizer.json`` loader: refusals name the component and the file, the fast-path hook, store loading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.engine.artifact_cache import ArtifactCache
from app.engine.errors import ArtifactError
from app.engine.pipeline import Pipeline, hf_json
from app.engine.pipeline.added import AddedToken
from app.engine.pipeline.base import Model
from app.engine.pipeline.byte_level_ranks import is_rank_ordered_byte_level_bpe
from app.engine.pipeline.hf_json import from_hf_json
from app.engine.store import TokenizerSpec

from .reference import HF_JSON, ours, reference


def tiny(**overrides: Any) -> dict[str, Any]:
    """A small byte-level BPE tokenizer.json."""
    doc: dict[str, Any] = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [
            {"id": 6, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
             "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {"a": 0, "b": 1, "Ġ": 2, "ab": 3, "Ġab": 4, "abab": 5},
                  "merges": ["a b", "Ġ ab", "ab ab"]},
    }  # fmt: skip
    doc.update(overrides)
    return doc


def test_tiny_file_loads_and_matches_hf() -> None:
    import tokenizers

    doc = tiny()
    tok = from_hf_json(json.dumps(doc), "tiny", backend="python")
    ref = tokenizers.Tokenizer.from_str(json.dumps(doc))
    ref.encode_special_tokens = True
    for text in ["ab", "abab ab", " ab<s>ab", "ba"]:
        assert tok.encode(text) == ref.encode(text, add_special_tokens=False).ids
    assert tok.special_tokens == {"<s>": 6}
    assert tok.encode("<s>") != [6]  # special tokens are never read from text
    assert tok.encode("ab", prefix=["<s>"]) == [6, 3]


@pytest.mark.parametrize(("section", "config", "named"), [
    ("normalizer", {"type": "NoSuchNormalizer"}, "NoSuchNormalizer"),
    ("pre_tokenizer", {"type": "Sequence", "pretokenizers": [{"type": "UnicodeScripts"}]}, "UnicodeScripts"),
    ("decoder", {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True}, "CTC"),
    ("post_processor", {"type": "ByteLevel", "trim_offsets": True, "brand_new_option": 1}, "brand_new_option"),
])  # fmt: skip
def test_unsupported_component_or_option_is_refused(section: str, config: dict[str, Any], named: str,
                                                    tmp_path: Path) -> None:
    path = tmp_path / "their.tokenizer.json"
    path.write_text(json.dumps(tiny(**{section: config})))
    with pytest.raises(ArtifactError) as info:
        hf_json.load_hf_json_file(path, "theirs")
    assert named in str(info.value) and str(path) in str(info.value)


def test_added_token_flags_are_read_and_unknown_options_refused() -> None:
    added = [{"id": 6, "content": "<s>", "special": True, "normalized": False},
             {"id": 7, "content": "ba", "single_word": True, "lstrip": 1, "rstrip": 0},
             {"id": 8, "content": "x"}]
    tok = from_hf_json(json.dumps(tiny(added_tokens=added)), "t")
    assert isinstance(tok, Pipeline)
    assert tok.added_vocabulary == [
        AddedToken(content="<s>", id=6, special=True, normalized=False),
        AddedToken(content="ba", id=7, single_word=True, lstrip=True, rstrip=False, normalized=True),
        AddedToken(content="x", id=8, normalized=True)]
    with pytest.raises(ArtifactError, match=r"added_tokens\[1\]: option\(s\) \['extra'\] not supported"):
        from_hf_json(json.dumps(tiny(added_tokens=[added[0], {**added[1], "extra": 1}])), "t")


def test_bpe_options_that_cannot_be_exact_are_refused() -> None:
    model = dict(tiny()["model"], dropout=0.1)
    with pytest.raises(ArtifactError, match="dropout"):
        from_hf_json(json.dumps(tiny(model=model)), "x")
    model = dict(tiny()["model"], merges=["a c"])
    with pytest.raises(ArtifactError, match="merge 0"):
        from_hf_json(json.dumps(tiny(model=model)), "x")
    with pytest.raises(ArtifactError, match="not a tokenizer.json"):
        from_hf_json(b"{not json", "x")


def test_rank_ordered_byte_level_bpe_detection() -> None:
    assert is_rank_ordered_byte_level_bpe(tiny())
    disordered = dict(tiny()["model"], merges=["a b", "ab ab", "Ġ ab"])  # abab (5) before Ġab (4)
    assert not is_rank_ordered_byte_level_bpe(tiny(model=disordered))
    assert not is_rank_ordered_byte_level_bpe(tiny(decoder={"type": "Fuse"}))


def test_fast_models_are_offered_the_built_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every entry of the loader's FAST_MODELS table is offered the file and its model; a declining builder keeps
    the model, an accepting one replaces it, and the tokenizer is a Pipeline either way."""
    seen: list[tuple[str, Model]] = []

    def decline(doc: dict[str, Any], model: Model, name: str, spec: TokenizerSpec | None,
                cache: ArtifactCache | None) -> None:
        seen.append((name, model))
        return None

    def accept(doc: dict[str, Any], model: Model, name: str, spec: TokenizerSpec | None,
               cache: ArtifactCache | None) -> Model:
        seen.append((name, model))
        return model

    monkeypatch.setattr(hf_json, "FAST_MODELS", [decline])
    tok = from_hf_json(json.dumps(tiny()), "tiny")
    assert isinstance(tok, Pipeline) and seen == [("tiny", tok.model)]
    from_hf_json(json.dumps(tiny()), "tiny", backend="python")
    assert len(seen) == 1  # backend="python" is never offered a fast model
    monkeypatch.setattr(hf_json, "FAST_MODELS", [decline, accept, decline])
    tok = from_hf_json(json.dumps(tiny()), "tiny2")
    assert isinstance(tok, Pipeline) and [n for n, _ in seen] == ["tiny", "tiny2", "tiny2"]  # the first that accepts


@pytest.mark.parametrize("name", HF_JSON)
def test_bundled_files_load_from_the_store(name: str) -> None:
    tok = ours(name)
    assert tok.spec is not None and tok.spec.format == "hf_json" and tok.spec.compression == "xz"
    assert tok.n_vocab == reference(name).get_vocab_size(with_added_tokens=True)
