"""Reference tokenizers for the family tests, built from the same bundled artifacts with the reference libraries.

* ``sentencepiece`` straight from a bundled ``.model``, or from a ``ModelProto`` rebuilt from a GGUF ``llama``/``t5``
  vocabulary (pieces, scores, types, normalizer flags and charsmap copied over; built with the ``sentencepiece``
  package's own generated message classes, so the reference side shares no code with the engine);
* ``mistral-common``'s ``Tekkenizer`` for tekken files;
* llama.cpp's ``.inp``/``.out`` vectors (``data/``), which llama.cpp produced from Hugging Face tokenizers.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from app.engine.pipeline.gguf_kv import read_kv
from app.engine.registry import get_store

DATA = Path(__file__).resolve().parent / "data"


def artifact_bytes(name: str) -> bytes:
    """The published bytes of a bundled tokenizer's artifact (decompressed)."""
    return get_store().spec(name).read_artifact()


@cache
def gguf_kv(name: str) -> dict[str, Any]:
    return read_kv(artifact_bytes(name))


@cache
def sentencepiece_reference(name: str) -> Any:
    """A ``sentencepiece.SentencePieceProcessor`` for a bundled ``.model`` or GGUF ``llama``/``t5`` tokenizer."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    spec = get_store().spec(name)
    if spec.format == "sentencepiece":
        return spm.SentencePieceProcessor(model_proto=artifact_bytes(name))
    kv = gguf_kv(name)
    model = kv["tokenizer.ggml.model"]
    proto = pb.ModelProto()
    for piece, score, kind in zip(kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"],
                                  kv["tokenizer.ggml.token_type"], strict=True):
        proto.pieces.add(piece=piece, score=score, type=kind)
    unk = kv["tokenizer.ggml.unknown_token_id"]
    # sentencepiece wants exactly one UNKNOWN piece: the file's unknown id; other "unknown"-typed padding entries
    # become unused (never matched, as in the engine).
    for i, p in enumerate(proto.pieces):
        if p.type == 2 and i != unk:
            p.type = 5
    proto.pieces[unk].type = 2
    ts = proto.trainer_spec
    ts.model_type = pb.TrainerSpec.BPE if model == "llama" else pb.TrainerSpec.UNIGRAM
    ts.byte_fallback = any(p.type == 6 for p in proto.pieces)
    ts.unk_id = unk
    ts.bos_id = kv.get("tokenizer.ggml.bos_token_id", -1)
    ts.eos_id = kv.get("tokenizer.ggml.eos_token_id", -1)
    ts.pad_id = kv.get("tokenizer.ggml.padding_token_id", -1)
    ts.vocab_size = len(proto.pieces)
    ns = proto.normalizer_spec
    ns.name = "gguf"
    ns.add_dummy_prefix = bool(kv.get("tokenizer.ggml.add_space_prefix", True))
    ns.remove_extra_whitespaces = bool(kv.get("tokenizer.ggml.remove_extra_whitespaces", model == "t5"))
    ns.escape_whitespaces = True
    ns.precompiled_charsmap = kv.get("tokenizer.ggml.precompiled_charsmap", b"")
    return spm.SentencePieceProcessor(model_proto=proto.SerializeToString())


@cache
def tekken_reference(name: str) -> Any:
    import tempfile

    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tekken.json"
        path.write_bytes(artifact_bytes(name))
        return Tekkenizer.from_file(path)


def llama_cpp_vectors(stem: str) -> list[tuple[str, list[int]]]:
    """``(text, expected ids)`` from ``data/<stem>.inp`` / ``.out`` (llama.cpp's test-tokenizer-0 format)."""
    texts = (DATA / f"{stem}.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")[:-1]
    lines = (DATA / f"{stem}.out").read_text(encoding="utf-8").split("\n")
    assert len(lines) >= len(texts)
    return [(t, [int(v) for v in lines[i].split()]) for i, t in enumerate(texts)]


@cache
def hf_unigram_reference(name: str) -> Any:
    """A Hugging Face ``tokenizers`` tokenizer for a bundled GGUF ``t5`` (Unigram) vocabulary, assembled as
    ``transformers`` converts a SentencePiece Unigram model (``SpmConverter``): the precompiled charsmap, right
    strip, runs of spaces to one ``▁``, ``Metaspace`` (prefix always), Unigram over every piece. Hugging Face
    applies the charsmap per grapheme, not by longest match as ``sentencepiece`` does, so the two can differ on
    rare input; for timing on ordinary text (the bench checks equality before it times)."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    kv = gguf_kv(name)
    vocab = list(zip(kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"], strict=True))
    tok = Tokenizer(models.Unigram(vocab, kv["tokenizer.ggml.unknown_token_id"], False))
    steps = [normalizers.Strip(left=False, right=True), normalizers.Replace(Regex(" {2,}"), "\u2581")]
    charsmap = kv.get("tokenizer.ggml.precompiled_charsmap", b"")
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(bytes(charsmap)), *steps] if charsmap else steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    return tok


@cache
def hf_xlm_roberta_reference() -> Any:
    """A Hugging Face ``tokenizers`` tokenizer assembled from the bundled XLM-R vocabulary exactly as the
    ``tokenizer.json`` published with ``xlm-roberta-base`` defines it, which ``transformers`` 4.x's
    ``convert_slow_tokenizer.py`` wrote (``XLMRobertaConverter`` over ``SpmConverter``): Unigram over the
    fairseq-ordered pieces (unknown id 3; the GGUF's padding after ``<mask>`` left out), normalizer
    ``Sequence[Precompiled(charsmap), Replace(Regex(" {2,}"), " ")]`` (no strip), pre-tokenizer
    ``Metaspace(replacement="▁", add_prefix_space=True)`` (``prepend_scheme="always"``, split), ``<s> <pad> </s>
    <unk>`` and ``<mask>`` (``lstrip``) special added tokens, template ``<s> $A </s>``, decoder ``Metaspace``.
    Built with the library's own components (no code shared with the engine); special tokens are never matched in
    text (``encode_special_tokens``), as the service's rule."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    kv = gguf_kv("xlm-roberta")
    tokens, scores = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"]
    n = tokens.index("<mask>") + 1
    tok = Tokenizer(models.Unigram(list(zip(tokens[:n], scores[:n], strict=True)), 3, False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(bytes(kv["tokenizer.ggml.precompiled_charsmap"])),
        normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.add_special_tokens([AddedToken(t, normalized=False) for t in ("<s>", "<pad>", "</s>", "<unk>")]
                           + [AddedToken("<mask>", lstrip=True, normalized=False)])
    tok.encode_special_tokens = True
    return tok
