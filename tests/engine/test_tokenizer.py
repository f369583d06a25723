"""The Tokenizer protocol, the loader table and the rules every family keeps (template, prefix/suffix, parts)."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from app.engine import (
    LOADERS,
    ArtifactError,
    Special,
    Store,
    Tokenizer,
    UnknownSpecialTokenError,
    get_encoding,
    load_all,
    load_encoding,
)
from app.engine.char_bpe import CharBPEEncoding
from app.engine.store import FORMATS, write_manifest


def test_every_format_has_exactly_one_loader() -> None:
    assert set(LOADERS) == set(FORMATS)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base", "o200k_harmony", "llama3"])
def test_bundled_tokenizers_implement_the_protocol(name: str) -> None:
    enc = get_encoding(name)
    assert isinstance(enc, Tokenizer)
    assert enc.added_tokens == {}


def test_llama3_template_adds_begin_of_text_outside_the_named_specials() -> None:
    enc = get_encoding("llama3")
    text = enc.encode("Hello")
    assert enc.template.describe() == "<|begin_of_text|> $text"
    assert enc.encode("Hello", add_special_tokens=True) == [128000, *text]
    assert enc.encode("Hello", add_special_tokens=True, suffix=["<|eot_id|>"]) == [128000, *text, 128009]
    assert enc.count("Hello", add_special_tokens=True, prefix=["<|eot_id|>"]) == 2 + len(text)
    parts = enc.encode_parts([Special("<|start_header_id|>"), "user"], add_special_tokens=True)
    assert parts == [128000, 128006, *enc.encode("user")]


def test_default_is_no_template_and_text_stays_text() -> None:
    enc = get_encoding("llama3")
    assert enc.encode("<|begin_of_text|>") == enc.encode("<|begin_of_text|>", add_special_tokens=False)
    assert 128000 not in enc.encode("<|begin_of_text|>")
    cl = get_encoding("cl100k_base")
    assert cl.template.describe() == "$text"
    assert cl.encode("hi", add_special_tokens=True) == cl.encode("hi")


def test_unknown_prefix_name_raises_before_encoding() -> None:
    with pytest.raises(UnknownSpecialTokenError, match="<|nope|>"):
        get_encoding("cl100k_base").count("hi", prefix=["<|nope|>"])


def test_load_all_loads_only_the_names_asked_for() -> None:
    loaded = load_all(names=["r50k_base", "llama3"])
    assert list(loaded) == ["gpt2", "llama3"]


def test_compressed_artifact_is_verified_against_the_published_bytes(store_copy: Path) -> None:
    store = Store.load(store_copy)
    spec = store.spec("gpt2")
    published = spec.artifact_path.read_bytes()
    packed = store_copy / "gpt2.tiktoken.xz"
    packed.write_bytes(lzma.compress(published, format=lzma.FORMAT_XZ))
    spec.artifact_path.unlink()
    specs = [s if s.name != "gpt2" else type(s)(**{**s.__dict__, "artifact_path": packed, "compression": "xz"})
             for s in store]
    write_manifest(store_copy, specs)
    reloaded = Store.load(store_copy).spec("gpt2")
    assert reloaded.compression == "xz"
    assert load_encoding(reloaded).encode("hello world") == get_encoding("gpt2").encode("hello world")
    packed.write_bytes(lzma.compress(published + b"x", format=lzma.FORMAT_XZ))
    with pytest.raises(ArtifactError, match="sha256 mismatch"):
        load_encoding(reloaded)
    packed.write_bytes(published[:1000])
    with pytest.raises(ArtifactError, match="not a valid xz file"):
        load_encoding(reloaded)


def test_char_bpe_is_served_from_the_engine_not_from_training() -> None:
    assert CharBPEEncoding.__module__ == "app.engine.char_bpe"
    from app.engine.training import char_bpe as training_char_bpe

    assert training_char_bpe.CharBPEEncoding is CharBPEEncoding
