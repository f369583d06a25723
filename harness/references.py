"""Reference implementations, built from the bundled artifacts with each family's own reference library: the
test suite compares the engine with them and the benchmarks time against them. Nothing here touches the network.

* tiktoken 0.14 encodings (:func:`reference_encoding`): ranks from the bundled ``.tiktoken`` files through
  tiktoken's own parser (its download cache disabled, the manifest's sha256 as the expected hash); pattern strings
  and special-token tables from tiktoken's own constructor functions in ``tiktoken_ext.openai_public``, called with
  the loader replaced by a stub; Llama 3 uses Meta's pattern and special-token list
  (``llama_models/llama3/tokenizer.py``). ``tiktoken.get_encoding`` is never called.
* Hugging Face ``tokenizers`` for the bundled ``tokenizer.json`` files (:func:`hf_json_reference`, special-token
  matching off, as the service's rule demands; :func:`hf_with_dropout`), for GGUF vocabularies
  (:func:`hf_unigram_reference`, :func:`hf_bert`, :func:`hf_qwen2`).
* ``sentencepiece`` straight from a bundled ``.model``, or from a ``ModelProto`` rebuilt from a GGUF ``llama``/``t5``
  vocabulary (pieces, scores, types, normalizer flags and charsmap copied over; built with the ``sentencepiece``
  package's own generated message classes, so the reference side shares no code with the engine);
  ``mistral-common``'s ``Tekkenizer`` for tekken files.
* :func:`recount_merges`: WordPiece merges recomputed from the definition alone.

Moved here from ``tests/engine/exactness/reference.py``, ``tests/engine/pipeline/reference.py``,
``tests/engine/families/references.py`` and ``bench/train/wordpiece_score.py`` so that tests and benchmarks share
them without importing each other.
"""

from __future__ import annotations

import functools
import lzma
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any
from unittest import mock

import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public
import tokenizers

from app.engine.pipeline.gguf_kv import read_kv
from app.engine.registry import get_store
from app.engine.store import Store

#: Meta's Llama 3 pre-tokenizer (``Tokenizer.pat_str`` in llama_models/llama3/tokenizer.py).
META_LLAMA3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"""
    r"""\s+(?!\S)|\s+"""
)

#: Meta's Llama 3.1 special tokens, in id order from 128000 (256 of them).
_LLAMA3_NAMED = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|step_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
]
META_LLAMA3_SPECIALS: dict[str, int] = {
    name: 128000 + i
    for i, name in enumerate(
        _LLAMA3_NAMED + [f"<|reserved_special_token_{2 + k}|>" for k in range(256 - len(_LLAMA3_NAMED))]
    )
}


@dataclass(frozen=True)
class ReferenceSpec:
    """What tiktoken (or Meta) defines for one encoding: its pattern string and special-token table."""

    pat_str: str
    special_tokens: dict[str, int]


def _openai_constructor(name: str) -> dict[str, Any]:
    """Call tiktoken's own constructor for ``name`` with every loader stubbed out (no file, no network)."""
    constructor = openai_public.ENCODING_CONSTRUCTORS[name]
    with (
        mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *a, **k: {}),
        mock.patch.object(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: {}),
    ):
        return constructor()


@cache
def reference_spec(name: str) -> ReferenceSpec:
    """The reference pattern and special tokens of one of :data:`TOKENIZERS`."""
    if name == "llama3":
        return ReferenceSpec(META_LLAMA3_PATTERN, dict(META_LLAMA3_SPECIALS))
    params = _openai_constructor(name)
    return ReferenceSpec(params["pat_str"], dict(params["special_tokens"]))


@contextmanager
def _no_tiktoken_cache() -> Iterator[None]:
    """Disable tiktoken's file cache (``TIKTOKEN_CACHE_DIR=""``) so it reads exactly the path it is given."""
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""
    try:
        yield
    finally:
        if old is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


@cache
def reference_ranks(artifact: str, sha256: str) -> dict[bytes, int]:
    """Ranks of a bundled artifact parsed by tiktoken's own loader (hash-checked by tiktoken)."""
    path = get_store().directory / artifact
    with _no_tiktoken_cache():
        return tiktoken.load.load_tiktoken_bpe(str(path), expected_hash=sha256)


@cache
def reference_encoding(name: str) -> tiktoken.Encoding:
    """A ``tiktoken.Encoding`` for ``name`` built from our artifact and the reference pattern/special tokens."""
    spec = get_store().spec(name)
    ref = reference_spec(name)
    ranks = reference_ranks(spec.artifact_path.name, spec.sha256)
    return tiktoken.Encoding(
        f"reference-{name}", pat_str=ref.pat_str, mergeable_ranks=ranks, special_tokens=ref.special_tokens
    )


@functools.cache
def hf_json_reference(name: str) -> tokenizers.Tokenizer:
    """Hugging Face's tokenizer for the bundled file of ``name``, special-token matching off."""
    spec = Store.load().spec(name)
    tok = tokenizers.Tokenizer.from_str(lzma.decompress(spec.artifact_path.read_bytes()).decode("utf-8"))
    tok.encode_special_tokens = True
    return tok


@functools.cache
def _hf_dropout_instance(name: str) -> tokenizers.Tokenizer:
    """Hugging Face's tokenizer for the bundled ``tokenizer.json`` of ``name``: an instance of its own, since
    :func:`hf_with_dropout` changes its model."""
    tok = tokenizers.Tokenizer.from_str(lzma.decompress(Store.load().spec(name).artifact_path.read_bytes()).decode())
    tok.encode_special_tokens = True
    return tok


def hf_with_dropout(name: str, dropout: float | None) -> tokenizers.Tokenizer:
    """That tokenizer with its BPE model's ``dropout`` set (Hugging Face's own option)."""
    tok = _hf_dropout_instance(name)
    tok.model.dropout = dropout
    return tok


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


@lru_cache(maxsize=1)
def hf_bert() -> Any:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    kv = gguf_kv("bge-small-en-v1.5")
    vocab = {}
    for i, (t, kind) in enumerate(zip(kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"], strict=True)):
        vocab[t if kind == 3 else t[1:] if t.startswith("\u2581") else "##" + t] = i
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    return tok


def hf_qwen2() -> Any:
    """Hugging Face ``tokenizers`` for the bundled GGUF ``qwen2`` vocabulary (its ``tokenizer.json`` as the engine
    rebuilds it from the GGUF keys, added tokens matched plainly, special-token matching off)."""
    import json

    from tokenizers import Tokenizer

    from app.engine.pipeline.gguf import _byte_level_doc

    doc = _byte_level_doc(gguf_kv("qwen2"), "qwen2")
    for a in doc["added_tokens"]:
        a.update(single_word=False, lstrip=False, rstrip=False)
    hf = Tokenizer.from_str(json.dumps({"version": "1.0", "truncation": None, "padding": None, **doc}))
    hf.encode_special_tokens = True
    return hf


def recount_merges(words: Mapping[str, int], min_frequency: int,
                   by_count: bool = False) -> Iterator[tuple[str, int, int, int]]:
    """Merges by the definition alone, every count recomputed from the segmented words before each one: yields
    (new piece, count(ab), count(a), count(b)) until no pair reaches ``min_frequency`` (a merge may repeat a piece
    already known). The seed's score count(ab) / (count(a) * count(b)), or count(ab) with ``by_count``; ties to the
    higher pair count, then the smaller strings by code point. Shares nothing with the learner but the words."""
    segs = [([w[0]] + ["##" + c for c in w[1:]], f) for w, f in words.items()]
    while True:
        sym: Counter[str] = Counter()
        pair: Counter[tuple[str, str]] = Counter()
        for seg, f in segs:
            for s in seg:
                sym[s] += f
            for p in zip(seg, seg[1:], strict=False):
                pair[p] += f
        cands = [(-(c if by_count else c / (sym[a] * sym[b])), -c, a, b) for (a, b), c in pair.items()
                 if c >= min_frequency]
        if not cands:
            return
        _, negc, a, b = min(cands)
        new = a + b[2:] if b.startswith("##") else a + b
        yield new, -negc, sym[a], sym[b]
        nxt = []
        for seg, f in segs:
            merged, i = [], 0
            while i < len(seg):
                if i + 1 < len(seg) and seg[i] == a and seg[i + 1] == b:
                    merged.append(new)
                    i += 2
                else:
                    merged.append(seg[i])
                    i += 1
            nxt.append((merged, f))
        segs = nxt
