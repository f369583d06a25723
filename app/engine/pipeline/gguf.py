"""GGUF vocabularies (llama.cpp, Ollama) as tokenizers of the families they describe.

``tokenizer.ggml.model`` names the family; each becomes the same pipeline a file of that family would give:

* ``llama`` — SentencePiece BPE by piece score with byte fallback (Llama 2, Phi-3, Mistral v1 conversions):
  :func:`app.engine.pipeline.sentencepiece.build_pipeline`; dummy prefix from ``tokenizer.ggml.add_space_prefix``
  (default on), no whitespace folding (``tokenizer.ggml.remove_extra_whitespaces``, default off).
* ``t5`` — SentencePiece Unigram with the stored precompiled charsmap (T5, XLM-R conversions), same builder;
  ``remove_extra_whitespaces`` defaults to on, as in SentencePiece.
* ``bert`` — WordPiece. The file marks word *starts* with ``▁`` and stores continuations bare; they are turned
  back into BERT's convention (bare starts, ``##`` continuations). Normalization is BERT-uncased's (lowercase,
  accents stripped, CJK isolated, text cleaned), pre-tokenization BERT's, template ``[CLS] $text [SEP]``.
* ``gpt2`` — byte-level BPE with the stored merges; the split regex, normalizer, ``ignore_merges`` and whether a
  BOS comes first by default follow the pre-tokenizer type ``tokenizer.ggml.pre`` (only the types of
  :data:`BYTE_LEVEL_PRE` are accepted: ``qwen2``, ``llama-bpe``, ``gpt-2``).

Token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte. Control tokens are special (never
from text). ``add_special_tokens=True`` adds what ``tokenizer.ggml.add_bos_token``/``add_eos_token`` ask (BERT:
CLS/SEP; byte-level: a BOS only, by default where the pre-tokenizer type has one). Any other model type is refused
by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .. import patterns
from ..artifact_cache import ArtifactCache
from ..errors import ArtifactError
from ..store import TokenizerSpec
from ..tokenizer import Tokenizer
from .derived import derive, derive_for
from .gguf_kv import GGUFFormatError, dump_kv, read_kv, restore_kv
from .models.unigram import UnigramVocab
from .sentencepiece import SentencePieceVocab, build_pipeline, positions_of_types
from .sp_types import CONTROL, UNKNOWN, UNUSED

SUPPORTED_MODELS = ("llama", "t5", "bert", "gpt2")

class BytePre(NamedTuple):
    """How a byte-level vocabulary of one ``tokenizer.ggml.pre`` type splits and merges, as the named model's own
    ``tokenizer.json`` does (llama.cpp's vectors for the type are made from that file)."""

    regex: str  #: the ``Split`` regex (pieces isolated), then ``ByteLevel``
    normalizer: str | None  #: a Unicode normal form first, or none
    ignore_merges: bool  #: a piece that is itself a token is that token (BPE ``ignore_merges``)
    add_bos: bool  #: ``add_special_tokens=True`` puts the BOS token first when the file does not say


#: ``tokenizer.ggml.pre`` -> :class:`BytePre` for byte-level (``gpt2``) vocabularies.
BYTE_LEVEL_PRE: dict[str, BytePre] = {
    "qwen2": BytePre(patterns.QWEN2, "NFC", False, False),
    # Llama 3 / 3.1 / 3.2 / 3.3: Meta's expression, no normalizer, ignore_merges and a BOS as its tokenizer.json.
    "llama-bpe": BytePre(patterns.LLAMA3, None, True, True),
    # GPT-2: Hugging Face's ByteLevel(use_regex) expression; tiktoken's possessive form splits the same.
    "gpt-2": BytePre(patterns.GPT2, None, False, False),
}


def _get(kv: dict[str, Any], key: str, default: Any = None) -> Any:
    return kv.get(f"tokenizer.ggml.{key}", default)


#: The :attr:`~app.engine.pipeline.sentencepiece.SentencePieceVocab.origin` of :func:`_sentencepiece_vocab`'s
#: pieces and scores (change the version when they change).
_SENTENCEPIECE_ORIGIN = "gguf-kv/sentencepiece.v1"


def _sentencepiece_vocab(kv: dict[str, Any], model: str, source: str) -> SentencePieceVocab:
    tokens: list[str] = _get(kv, "tokens")
    scores = _get(kv, "scores") or [0.0] * len(tokens)
    types = _get(kv, "token_type") or [1] * len(tokens)
    if not (len(tokens) == len(scores) == len(types)):
        raise ArtifactError(source, "GGUF tokens, scores and token types differ in length")
    bos, eos, unk = _get(kv, "bos_token_id"), _get(kv, "eos_token_id"), _get(kv, "unknown_token_id")
    return SentencePieceVocab(
        pieces=list(tokens), scores=list(map(float, scores)), types=list(map(int, types)),
        model_type="bpe" if model == "llama" else "unigram", byte_fallback=6 in types,
        charsmap=_get(kv, "precompiled_charsmap") or b"", add_dummy_prefix=bool(_get(kv, "add_space_prefix", True)),
        remove_extra_whitespaces=bool(_get(kv, "remove_extra_whitespaces", model == "t5")),
        bos_id=bos, eos_id=eos, unk_id=unk,
        add_bos=bool(_get(kv, "add_bos_token", model == "llama")), add_eos=bool(_get(kv, "add_eos_token", False)),
        origin=_SENTENCEPIECE_ORIGIN)


def _bert_doc(kv: dict[str, Any], source: str) -> dict[str, Any]:
    """An equivalent ``tokenizer.json`` document for a GGUF ``bert`` vocabulary."""
    tokens: list[str] = _get(kv, "tokens")
    types = _get(kv, "token_type") or [1] * len(tokens)
    vocab: dict[str, int] = {}
    added = []
    for i, (token, kind) in enumerate(zip(tokens, types, strict=True)):
        if kind == CONTROL:
            vocab.setdefault(token, i)
            added.append({"id": i, "content": token, "special": True, "normalized": False})
        elif token.startswith("\u2581"):
            vocab.setdefault(token[1:], i)
        else:
            vocab.setdefault("##" + token, i)
    unk, cls_id, sep = _get(kv, "unknown_token_id"), _get(kv, "cls_token_id"), _get(kv, "seperator_token_id")
    if unk is None or cls_id is None or sep is None:
        raise ArtifactError(source, "GGUF bert vocabulary lacks the unknown, CLS or separator token id")
    return {
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {"type": "WordPiece", "unk_token": tokens[unk], "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
        "post_processor": {"type": "BertProcessing", "cls": [tokens[cls_id], cls_id], "sep": [tokens[sep], sep]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
    }


def _ids_of_types(types: Sequence[int], n: int, kinds: tuple[int, ...]) -> list[int]:
    """``[i for i in range(n) if types[i] in kinds]``, as one scan in C when the types fit bytes."""
    if type(types) is list and all(0 <= k < 256 for k in kinds):
        try:
            packed = bytes(types[:n])
        except (ValueError, TypeError):
            pass
        else:
            return positions_of_types(packed, kinds)
    return [i for i in range(n) if types[i] in kinds]


#: The :attr:`~app.engine.pipeline.models.unigram.UnigramVocab.origin` of :func:`_xlm_roberta_doc`'s vocabulary
#: (part of the compiled model's cache key: change the version when the pieces or scores it derives change).
_XLM_ROBERTA_ORIGIN = "gguf-kv/xlm-roberta-doc.v1"


def _xlm_roberta_doc(kv: dict[str, Any], source: str) -> dict[str, Any]:
    """The ``tokenizer.json`` published with ``xlm-roberta-base`` (and the XLM-R models made from it) for a GGUF
    ``t5`` vocabulary converted from it, as ``transformers``' 4.x converter wrote it (``convert_slow_tokenizer.py``:
    ``XLMRobertaConverter`` over ``SpmConverter``): the Unigram vocabulary with the fairseq ids (``<s> <pad> </s>
    <unk>`` first, ``<mask>`` last, all scored 0.0; unknown id 3), normalizer ``Precompiled`` (the stored charsmap)
    then runs of two or more spaces to one space — nothing stripped, so trailing whitespace is a ``▁`` token —,
    pre-tokenizer ``Metaspace`` (``▁`` for spaces, prepended, split before each ``▁``), template ``<s> $A </s>``.
    The GGUF's padding entries after the last non-unused piece (llama.cpp pads to the model's embedding count)
    are not part of that file and are left out. The vocabulary is a
    :class:`~app.engine.pipeline.models.unigram.UnigramVocab` (reads as the file's pairs). Raises
    :class:`ArtifactError` for a vocabulary without the unknown, BOS or EOS ids or without a charsmap."""
    import base64

    tokens: list[str] = _get(kv, "tokens")
    scores = _get(kv, "scores") or [0.0] * len(tokens)
    types = _get(kv, "token_type") or [1] * len(tokens)
    unk, bos, eos = _get(kv, "unknown_token_id"), _get(kv, "bos_token_id"), _get(kv, "eos_token_id")
    charsmap = _get(kv, "precompiled_charsmap")
    n = len(tokens)
    if not all(isinstance(i, int) and 0 <= i < n for i in (unk, bos, eos)) or not charsmap:
        raise ArtifactError(source, "GGUF t5 vocabulary lacks the unknown, BOS or EOS id or the charsmap that "
                                    "its tokenizer.json needs")
    while n and types[n - 1] == UNUSED:
        n -= 1
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": tokens[i] == "<mask>", "rstrip": False,
              "normalized": False, "special": True} for i in _ids_of_types(types, n, (CONTROL, UNKNOWN))]
    return {
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(bytes(charsmap)).decode()},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        "pre_tokenizer": metaspace,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": tokens[bos], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": tokens[eos], "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": tokens[bos], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": tokens[eos], "type_id": 0}},
                     {"SpecialToken": {"id": tokens[eos], "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}},
                     {"SpecialToken": {"id": tokens[eos], "type_id": 0}}],
            "special_tokens": {tokens[i]: {"id": tokens[i], "ids": [i], "tokens": [tokens[i]]} for i in (bos, eos)}},
        "decoder": dict(metaspace),
        "model": {"type": "Unigram", "unk_id": unk, "byte_fallback": False,  # (piece, score) pairs, as columns
                  "vocab": UnigramVocab(tokens[:n], list(map(float, scores[:n])), origin=_XLM_ROBERTA_ORIGIN)},
    }


#: ``tokenizer_json`` (manifest) -> the builder of the ``tokenizer.json`` document a GGUF ``t5`` vocabulary was
#: converted from, for vocabularies whose users run that file (text-embeddings-inference, sentence-transformers,
#: vLLM) rather than llama.cpp.
TOKENIZER_JSON: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {"xlm-roberta": _xlm_roberta_doc}


def _byte_level_doc(kv: dict[str, Any], source: str) -> dict[str, Any]:
    """An equivalent ``tokenizer.json`` document for a GGUF ``gpt2`` vocabulary."""
    pre = _get(kv, "pre", "default")
    if pre not in BYTE_LEVEL_PRE:
        raise ArtifactError(source, f"GGUF byte-level pre-tokenizer type {pre!r} is not supported "
                                    f"(supported: {', '.join(sorted(BYTE_LEVEL_PRE))})")
    how = BYTE_LEVEL_PRE[pre]
    tokens: list[str] = _get(kv, "tokens")
    types = _get(kv, "token_type") or [1] * len(tokens)
    merges = _get(kv, "merges")
    if not merges:
        raise ArtifactError(source, "GGUF gpt2 vocabulary has no merges")
    if len(types) != len(tokens):
        raise ValueError("GGUF tokens and token types differ in length")  # (as zip(strict=True) raised)
    vocab = dict(zip(tokens, range(len(tokens)), strict=True))  # (in C; a repeated token keeps its first id below)
    if len(vocab) != len(tokens):
        vocab = {}
        for i, token in enumerate(tokens):
            vocab.setdefault(token, i)
    added = [{"id": i, "content": tokens[i], "special": True, "normalized": False}
             for i in _ids_of_types(types, len(tokens), (CONTROL,))]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    post: dict[str, Any] = byte_level
    bos = _get(kv, "bos_token_id")
    if bool(_get(kv, "add_bos_token", how.add_bos)) and bos is not None:
        if not isinstance(bos, int) or isinstance(bos, bool) or not 0 <= bos < len(tokens):
            raise ArtifactError(source, f"GGUF bos_token_id {bos!r} is not an id of the vocabulary")
        name = tokens[bos]
        post = {"type": "Sequence", "processors": [byte_level, {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": name, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [], "special_tokens": {name: {"id": name, "ids": [bos], "tokens": [name]}}}]}
    return {
        "added_tokens": added,
        "normalizer": None if how.normalizer is None else {"type": how.normalizer},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": how.regex}, "behavior": "Isolated", "invert": False},
            dict(byte_level)]},
        "model": {"type": "BPE", "vocab": vocab, "merges": list(merges), "ignore_merges": how.ignore_merges},
        "post_processor": post,
        "decoder": dict(byte_level),
    }


def from_gguf(data: bytes | Callable[[], bytes], name: str, *, source: str = "vocab.gguf",
              spec: TokenizerSpec | None = None, cache_size: int | None = None, backend: str | None = None,
              word_cache: int | None = None, tokenizer_json: str | None = None,
              artifact_cache: ArtifactCache | None = None) -> Tokenizer:
    """The tokenizer a GGUF file's vocabulary describes (``data``: the file's bytes, or a function reading them,
    called only when they are needed). ``artifact_cache``: see
    :func:`~app.engine.pipeline.hf_json.from_hf_json` (keyed by ``spec.sha256``; unused without ``spec``).
    ``tokenizer_json``: a key of :data:`TOKENIZER_JSON`, to
    run a ``t5`` vocabulary as that model's Hugging Face ``tokenizer.json`` does (None: SentencePiece's rules, as
    llama.cpp runs it). ``word_cache``: see :func:`app.engine.pipeline.sentencepiece.build_pipeline`. Raises
    :class:`ArtifactError` naming ``source`` for a malformed file, a missing vocabulary, an unsupported model type
    or a ``tokenizer_json`` that does not fit it. With a cache the header comes from it too (part ``"gguf-kv"``,
    :func:`~app.engine.pipeline.gguf_kv.dump_kv`)."""
    derived = derive_for(artifact_cache, None if spec is None else spec.sha256)
    try:
        kv = derive(derived, "gguf-kv", lambda: read_kv(data() if callable(data) else data), dump_kv, restore_kv)
    except GGUFFormatError as exc:
        raise ArtifactError(source, str(exc)) from None
    model = _get(kv, "model")
    if model is None or not _get(kv, "tokens"):
        raise ArtifactError(source, "GGUF file has no tokenizer vocabulary (tokenizer.ggml.model / tokens)")
    if model not in SUPPORTED_MODELS:
        raise ArtifactError(source, f"GGUF tokenizer model {model!r} is not supported "
                                    f"(supported: {', '.join(SUPPORTED_MODELS)})")
    if tokenizer_json is not None:
        build = TOKENIZER_JSON.get(tokenizer_json)
        if build is None or model != "t5":
            raise ArtifactError(source, f"GGUF {model!r} vocabulary cannot be run as the tokenizer.json of "
                                        f"{tokenizer_json!r} (known: t5 as {', '.join(sorted(TOKENIZER_JSON))})")
        from .hf_json import from_hf_json

        return from_hf_json(build(kv, source), name, source=source, spec=spec, cache_size=cache_size,
                            backend=backend, artifact_cache=artifact_cache)
    if model in ("llama", "t5"):
        return build_pipeline(name, _sentencepiece_vocab(kv, model, source), source=source, cache_size=cache_size,
                              spec=spec, backend=backend, word_cache=word_cache, derived=derived)
    from .hf_json import from_hf_json

    doc = _bert_doc(kv, source) if model == "bert" else _byte_level_doc(kv, source)
    return from_hf_json(doc, name, source=source, spec=spec, cache_size=cache_size, backend=backend,
                        artifact_cache=artifact_cache)


def load_gguf(spec: TokenizerSpec, *, cache_size: int | None = None, backend: str | None = None,
              word_cache: int | None = None, artifact_cache: ArtifactCache | None = None) -> Tokenizer:
    """The loader of manifest format ``gguf``: a verified GGUF file's vocabulary (``artifact_cache``: where its
    expensive derivations are stored, see :mod:`app.engine.artifact_cache`)."""
    tok = from_gguf(spec.verify_artifact(artifact_cache).read, spec.name, source=str(spec.artifact_path), spec=spec,
                    cache_size=cache_size, backend=backend, word_cache=word_cache,
                    tokenizer_json=spec.tokenizer_json, artifact_cache=artifact_cache)
    spec.check_vocab_size(tok.n_vocab)
    return tok
