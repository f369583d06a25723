"""GGUF vocabularies: llama.cpp's expected ids (``data/*.inp``/``*.out``, produced by llama.cpp from Hugging Face
tokenizers) for every bundled GGUF that ships them, ``sentencepiece`` on a model rebuilt from the GGUF's own pieces
for the SentencePiece-style ones (llama2, phi-3, xlm-roberta), the header reader against the ``gguf`` package's,
and refusal of what is not supported."""

from __future__ import annotations

import hashlib
import lzma
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from app.engine import get_tokenizer
from app.engine.errors import ArtifactError
from app.engine.pipeline.gguf import from_gguf
from app.engine.pipeline.gguf_kv import read_kv
from harness.texts import SPECIAL_STRINGS, sample

from .references import DATA, artifact_bytes, llama_cpp_vectors, sentencepiece_reference

VECTORS = {"llama2": "ggml-vocab-llama-spm.gguf", "phi-3": "ggml-vocab-phi-3.gguf",
           "bge-small-en-v1.5": "ggml-vocab-bert-bge.gguf", "qwen2": "ggml-vocab-qwen2.gguf"}


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_llama_cpp_vectors(name: str) -> None:
    tok = get_tokenizer(name)
    cases = llama_cpp_vectors(VECTORS[name])
    assert len(cases) >= 40
    wrong = [(text, expected, tok.encode(text)) for text, expected in cases if tok.encode(text) != expected]
    assert not wrong, f"{len(wrong)}/{len(cases)} differ; first {wrong[0]!r}"


@pytest.mark.parametrize("name", ["llama2", "phi-3", "xlm-roberta-sentencepiece"])
def test_equal_to_sentencepiece_on_the_same_vocabulary(name: str) -> None:
    ref, tok = sentencepiece_reference(name), get_tokenizer(name)
    texts = [t for t in sample(50, 100, seed=11) if not any(s in t for s in SPECIAL_STRINGS)]
    wrong = [t for t in texts if tok.encode(t) != ref.encode(t)]
    assert not wrong, f"{len(wrong)}/{len(texts)} differ; first {wrong[0][:80]!r}"
    for t in texts[:80]:
        ids = ref.encode(t)
        assert tok.decode(ids) == ref.decode(ids)


def test_xlm_roberta_controls_and_padding_never_match_text() -> None:
    """Its control pieces score 0.0 (the best score): a search that let them match would turn the text ``<s>``
    into id 0. The padding entries from 250,002 are never produced either."""
    tok = get_tokenizer("xlm-roberta-sentencepiece")
    ids = tok.encode("<s> <pad> </s> <unk> <mask> [PAD250001]")
    assert not any(tok.is_special(i) for i in ids) and max(ids) < 250002
    assert tok.encode("hi", add_special_tokens=True) == [0, *tok.encode("hi"), 2]


def test_phi3_templates_and_user_defined_end_of_text() -> None:
    tok = get_tokenizer("phi-3")
    assert tok.template.describe() == "<s> $text"
    assert tok.special_token_id("<|user|>") == 32010
    # </s> is user-defined in this file: matched in text, as SentencePiece does (and kept a normal token).
    assert 2 in tok.encode("hi</s>") and not tok.is_special(2)


def test_bert_template_and_documented_loss() -> None:
    tok = get_tokenizer("bge-small-en-v1.5")
    assert tok.template.describe() == "[CLS] $text [SEP]"
    ids = tok.encode("Héllo, WORLD!", add_special_tokens=True)
    assert ids[0] == 101 and ids[-1] == 102
    assert tok.decode(ids, skip_special=True) == "hello, world!"  # lowercased, accents stripped
    assert tok.encode("z" * 101) == [100]  # over 100 characters: one [UNK]


def test_header_reader_equals_gguf_package(tmp_path: Path) -> None:
    from gguf import GGUFReader

    path = tmp_path / "phi-3.gguf"
    path.write_bytes(artifact_bytes("phi-3"))
    reader = GGUFReader(path)
    ours = read_kv(artifact_bytes("phi-3"))
    keys = {k for k in reader.fields if not k.startswith("GGUF.")}
    assert set(ours) == keys and len(keys) > 10
    for key in keys:
        theirs = reader.fields[key].contents()
        assert ours[key] == (bytes(theirs) if isinstance(ours[key], bytes) else theirs), key


def _gguf_file(tmp_path: Path, model: str, *, pre: str | None = None, bos: int | None = None) -> bytes:
    """A GGUF file holding only a tokenizer: ``model``, tokens ``a b ab`` and the merge ``a b``, optionally a
    pre-tokenizer type and a BOS id."""
    from gguf import GGUFWriter

    path = tmp_path / "x.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_string("tokenizer.ggml.model", model)
    writer.add_array("tokenizer.ggml.tokens", ["a", "b", "ab"])
    writer.add_array("tokenizer.ggml.merges", ["a b"])
    if pre is not None:
        writer.add_string("tokenizer.ggml.pre", pre)
    if bos is not None:
        writer.add_uint32("tokenizer.ggml.bos_token_id", bos)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path.read_bytes()


#: Byte-level GGUF vocabularies of llama.cpp (``data/<stem>.xz``, see ``data/README.md``) -> the bundled
#: tiktoken-format tokenizer of the same vocabulary.
BYTE_LEVEL_FILES = {"ggml-vocab-llama-bpe.gguf": "llama3", "ggml-vocab-gpt-2.gguf": "gpt2"}
#: sha256 of their published bytes.
BYTE_LEVEL_SHA256 = {
    "ggml-vocab-llama-bpe.gguf": "97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e",
    "ggml-vocab-gpt-2.gguf": "cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac",
}


@cache
def _test_gguf(stem: str, backend: str) -> Any:
    data = lzma.decompress((DATA / f"{stem}.xz").read_bytes())
    assert hashlib.sha256(data).hexdigest() == BYTE_LEVEL_SHA256[stem]
    return from_gguf(data, stem.removesuffix(".gguf"), source=stem, backend=backend)


@pytest.mark.parametrize("backend", ["native", "python"])
@pytest.mark.parametrize("stem", sorted(BYTE_LEVEL_FILES))
def test_byte_level_pre_types_equal_llama_cpp_and_tiktoken(stem: str, backend: str) -> None:
    """``llama-bpe`` (Llama 3: ignore_merges, BOS) and ``gpt-2``: llama.cpp's vectors, and the ids of the bundled
    tiktoken-format tokenizer of the same vocabulary on the families' hostile and multilingual sample."""
    tok, ref = _test_gguf(stem, backend), get_tokenizer(BYTE_LEVEL_FILES[stem])
    cases = llama_cpp_vectors(stem)
    assert len(cases) >= 40
    wrong = [(text, expected, tok.encode(text)) for text, expected in cases if tok.encode(text) != expected]
    assert not wrong, f"{len(wrong)}/{len(cases)} differ; first {wrong[0]!r}"
    texts = sample(40, 120, seed=17)
    wrong_texts = [t for t in texts if tok.encode(t) != ref.encode(t)]
    assert not wrong_texts, f"{len(wrong_texts)}/{len(texts)} differ; first {wrong_texts[0][:80]!r}"
    for t in texts[:60]:
        assert tok.decode(ref.encode(t)) == t


def test_byte_level_bos_follows_the_pre_type_and_the_file() -> None:
    """llama.cpp adds a BOS for ``llama-bpe`` unless ``tokenizer.ggml.add_bos_token`` says otherwise; ``gpt-2``
    and ``qwen2`` add none. Control tokens are special: their text in caller text stays text."""
    llama, gpt2 = _test_gguf("ggml-vocab-llama-bpe.gguf", "native"), _test_gguf("ggml-vocab-gpt-2.gguf", "native")
    assert llama.encode("hi", add_special_tokens=True) == [128000, *llama.encode("hi")]
    assert gpt2.encode("hi", add_special_tokens=True) == gpt2.encode("hi")
    assert get_tokenizer("qwen2").encode("hi", add_special_tokens=True) == get_tokenizer("qwen2").encode("hi")
    assert llama.encode("<|begin_of_text|>") == get_tokenizer("llama3").encode("<|begin_of_text|>")
    assert 128000 not in llama.encode("<|begin_of_text|>")


def test_unsupported_pre_tokenizer_type_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="'falcon' is not supported \\(supported: gpt-2, llama-bpe, qwen2\\)"):
        from_gguf(_gguf_file(tmp_path, "gpt2", pre="falcon"), "x", source="x.gguf")


def test_bos_outside_the_vocabulary_is_an_artifact_error(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="bos_token_id 7 is not an id of the vocabulary"):
        from_gguf(_gguf_file(tmp_path, "gpt2", pre="llama-bpe", bos=7), "x", source="x.gguf")


def test_unsupported_model_type_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="'rwkv' is not supported"):
        from_gguf(_gguf_file(tmp_path, "rwkv"), "x", source="x.gguf")


def test_malformed_gguf_is_an_artifact_error() -> None:
    with pytest.raises(ArtifactError, match="not a GGUF file"):
        from_gguf(b"GGML" + bytes(40), "x")
    data = artifact_bytes("llama2")
    with pytest.raises(ArtifactError):
        from_gguf(data[:5000], "x", source="truncated.gguf")


def test_byte_level_repeated_token_keeps_its_first_id(tmp_path: Path) -> None:
    """A token repeated in a byte-level vocabulary is its first id (as ``setdefault`` over the ids gives); control
    tokens are special tokens, never matched in text."""
    from gguf import GGUFWriter

    path = tmp_path / "dup.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_string("tokenizer.ggml.model", "gpt2")
    writer.add_string("tokenizer.ggml.pre", "gpt-2")
    writer.add_array("tokenizer.ggml.tokens", ["a", "b", "ab", "a", "<c>", "ab"])
    writer.add_array("tokenizer.ggml.token_type", [1, 1, 1, 1, 3, 1])
    writer.add_array("tokenizer.ggml.merges", ["a b"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    for backend in ("native", "python"):
        tok = from_gguf(path.read_bytes(), "dup", source="dup.gguf", backend=backend)
        assert tok.encode("ab") == [2] and tok.encode("a") == [0] and tok.encode("ba") == [1, 0]
        assert tok.special_tokens == {"<c>": 4}
        assert 4 not in tok.encode("<c>")
