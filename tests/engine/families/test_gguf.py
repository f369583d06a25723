"""GGUF vocabularies: llama.cpp's expected ids (``data/*.inp``/``*.out``, produced by llama.cpp from Hugging Face
tokenizers) for every bundled GGUF that ships them, ``sentencepiece`` on a model rebuilt from the GGUF's own pieces
for the SentencePiece-style ones (llama2, phi-3, xlm-roberta), the header reader against the ``gguf`` package's,
and refusal of what is not supported."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine import get_encoding
from app.engine.errors import ArtifactError
from app.engine.pipeline.gguf import from_gguf
from app.engine.pipeline.gguf_kv import read_kv

from .references import artifact_bytes, llama_cpp_vectors, sentencepiece_reference
from .texts import SPECIAL_STRINGS, sample

VECTORS = {"llama2": "ggml-vocab-llama-spm.gguf", "phi-3": "ggml-vocab-phi-3.gguf",
           "bge-small-en-v1.5": "ggml-vocab-bert-bge.gguf", "qwen2": "ggml-vocab-qwen2.gguf"}


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_llama_cpp_vectors(name: str) -> None:
    tok = get_encoding(name)
    cases = llama_cpp_vectors(VECTORS[name])
    assert len(cases) >= 40
    wrong = [(text, expected, tok.encode(text)) for text, expected in cases if tok.encode(text) != expected]
    assert not wrong, f"{len(wrong)}/{len(cases)} differ; first {wrong[0]!r}"


@pytest.mark.parametrize("name", ["llama2", "phi-3", "xlm-roberta"])
def test_equal_to_sentencepiece_on_the_same_vocabulary(name: str) -> None:
    ref, tok = sentencepiece_reference(name), get_encoding(name)
    texts = [t for t in sample(50, 100, seed=11) if not any(s in t for s in SPECIAL_STRINGS)]
    wrong = [t for t in texts if tok.encode(t) != ref.encode(t)]
    assert not wrong, f"{len(wrong)}/{len(texts)} differ; first {wrong[0][:80]!r}"
    for t in texts[:80]:
        ids = ref.encode(t)
        assert tok.decode(ids) == ref.decode(ids)


def test_xlm_roberta_controls_and_padding_never_match_text() -> None:
    """Its control pieces score 0.0 (the best score): a search that let them match would turn the text ``<s>``
    into id 0. The padding entries from 250,002 are never produced either."""
    tok = get_encoding("xlm-roberta")
    ids = tok.encode("<s> <pad> </s> <unk> <mask> [PAD250001]")
    assert not any(tok.is_special(i) for i in ids) and max(ids) < 250002
    assert tok.encode("hi", add_special_tokens=True) == [0, *tok.encode("hi"), 2]


def test_phi3_templates_and_user_defined_end_of_text() -> None:
    tok = get_encoding("phi-3")
    assert tok.template.describe() == "<s> $text"
    assert tok.special_token_id("<|user|>") == 32010
    # </s> is user-defined in this file: matched in text, as SentencePiece does (and kept a normal token).
    assert 2 in tok.encode("hi</s>") and not tok.is_special(2)


def test_bert_template_and_documented_loss() -> None:
    tok = get_encoding("bge-small-en-v1.5")
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


def _gguf_file(tmp_path: Path, model: str) -> bytes:
    from gguf import GGUFWriter

    path = tmp_path / "x.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_string("tokenizer.ggml.model", model)
    writer.add_array("tokenizer.ggml.tokens", ["a", "b"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path.read_bytes()


def test_unsupported_model_type_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="'rwkv' is not supported"):
        from_gguf(_gguf_file(tmp_path, "rwkv"), "x", source="x.gguf")


def test_malformed_gguf_is_an_artifact_error() -> None:
    with pytest.raises(ArtifactError, match="not a GGUF file"):
        from_gguf(b"GGML" + bytes(40), "x")
    data = artifact_bytes("llama2")
    with pytest.raises(ArtifactError):
        from_gguf(data[:5000], "x", source="truncated.gguf")
