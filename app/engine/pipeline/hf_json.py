"""The Hugging Face ``tokenizer.json`` loader: components built from tables keyed by each entry's ``type``.

Every section (``normalizer``, ``pre_tokenizer``, ``model``, ``post_processor``, ``decoder``) is looked up in its
table (:data:`NORMALIZERS` …); each entry names the builder (a component's ``from_hf``) and the configuration
keys it honours. A ``type`` that is not in its table, or a key the builder does not know, is refused with an
:class:`~app.engine.errors.ArtifactError` naming the component and the file: the service never runs an
approximation of a file. Other modules add their components with :func:`register`.

``truncation`` and ``padding`` are shapes of a batch request, not part of tokenization: they are not applied.

Fast models: every builder of :data:`FAST_MODELS` is offered the built model (not on the python backend), in
order; the first that accepts the file replaces the model with a faster one of the same ids (the compiled
byte-level rank BPE, :mod:`.models.byte_level_rank`). The tokenizer is always a :class:`Pipeline`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..artifact_cache import ArtifactCache
from ..artifact_limits import check_id, check_ids
from ..errors import ArtifactError
from ..store import TokenizerSpec
from ..tokenizer import Tokenizer
from . import bert
from . import decoders as dec
from . import normalizers as norm
from . import pre_tokenizers as pre
from . import processors as proc
from .added import AddedToken
from .base import Model
from .charsmap import Precompiled
from .derived import Derive, LazyVocab, derive_for
from .hf_doc import cached_hf_doc
from .json_numbers import serde_f64
from .models.bpe import BPE
from .models.byte_level_rank import byte_level_rank_bpe
from .models.unigram import Unigram, UnigramVocab
from .models.wordlevel import WordLevel
from .models.wordpiece import WordPiece
from .pipeline import Pipeline


@dataclass(frozen=True)
class Builder:
    """How to build one component ``type``: the constructor and the keys of its configuration it honours
    (``type`` itself is implied)."""

    build: Callable[[dict[str, Any]], Any]
    keys: frozenset[str] = frozenset()


def _b(build: Callable[[dict[str, Any]], Any], *keys: str) -> Builder:
    return Builder(build, frozenset(keys))


# ``Sequence`` entries are built by the loader itself (their members come from the same table).
NORMALIZERS: dict[str, Builder] = {
    "NFC": _b(norm.Unicode.from_hf), "NFD": _b(norm.Unicode.from_hf),
    "NFKC": _b(norm.Unicode.from_hf), "NFKD": _b(norm.Unicode.from_hf),
    "Lowercase": _b(norm.Lowercase.from_hf),
    "StripAccents": _b(norm.StripAccents.from_hf),
    "Replace": _b(norm.Replace.from_hf, "pattern", "content"),
    "Prepend": _b(norm.Prepend.from_hf, "prepend"),
    "Strip": _b(norm.Strip.from_hf, "strip_left", "strip_right"),
    "BertNormalizer": _b(bert.BertNormalizer.from_hf, "clean_text", "handle_chinese_chars", "strip_accents",
                         "lowercase"),
    "Precompiled": _b(Precompiled.from_hf, "precompiled_charsmap"),
}
PRE_TOKENIZERS: dict[str, Builder] = {
    # trim_offsets of a ByteLevel pre-tokenizer has no effect in Hugging Face (it is the processor's option).
    "ByteLevel": _b(pre.ByteLevel.from_hf, "add_prefix_space", "use_regex", "trim_offsets"),
    "Split": _b(pre.Split.from_hf, "pattern", "behavior", "invert"),
    "Metaspace": _b(pre.Metaspace.from_hf, "replacement", "prepend_scheme", "split", "add_prefix_space",
                    "str_rep"),
    "Whitespace": _b(pre.Whitespace.from_hf),
    "WhitespaceSplit": _b(pre.WhitespaceSplit.from_hf),
    "Punctuation": _b(pre.Punctuation.from_hf, "behavior"),
    "Digits": _b(pre.Digits.from_hf, "individual_digits"),
    "BertPreTokenizer": _b(bert.BertPreTokenizer.from_hf),
}
MODELS: dict[str, Builder] = {
    "BPE": _b(BPE.from_hf, "vocab", "merges", "dropout", "unk_token", "fuse_unk", "byte_fallback",
              "continuing_subword_prefix", "end_of_word_suffix", "ignore_merges"),
    "WordLevel": _b(WordLevel.from_hf, "vocab", "unk_token"),
    "Unigram": _b(Unigram.from_hf, "vocab", "unk_id", "byte_fallback"),
    "WordPiece": _b(WordPiece.from_hf, "vocab", "unk_token", "continuing_subword_prefix", "max_input_chars_per_word"),
}
PROCESSORS: dict[str, Builder] = {
    "TemplateProcessing": _b(proc.TemplateProcessing.from_hf, "single", "pair", "special_tokens"),
    "BertProcessing": _b(proc.BertProcessing.from_hf, "cls", "sep"),
    "RobertaProcessing": _b(proc.RobertaProcessing.from_hf, "cls", "sep", "trim_offsets", "add_prefix_space"),
    "ByteLevel": _b(proc.ByteLevelProcessor.from_hf, "add_prefix_space", "trim_offsets", "use_regex"),
}
DECODERS: dict[str, Builder] = {
    # add_prefix_space, trim_offsets and use_regex of a ByteLevel decoder have no effect on decoding.
    "ByteLevel": _b(dec.ByteLevelDecoder.from_hf, "add_prefix_space", "trim_offsets", "use_regex"),
    "Metaspace": _b(dec.MetaspaceDecoder.from_hf, "replacement", "prepend_scheme", "split", "add_prefix_space",
                    "str_rep"),
    "ByteFallback": _b(dec.ByteFallback.from_hf),
    "Fuse": _b(dec.Fuse.from_hf),
    "Strip": _b(dec.StripDecoder.from_hf, "content", "start", "stop"),
    "Replace": _b(dec.ReplaceDecoder.from_hf, "pattern", "content"),
    "BPEDecoder": _b(dec.BPEDecoder.from_hf, "suffix"),
    "WordPiece": _b(bert.WordPieceDecoder.from_hf, "prefix", "cleanup"),
}
_SEQUENCES: dict[str, tuple[dict[str, Builder], str, Callable[[list[Any]], Any]]] = {
    "normalizer": (NORMALIZERS, "normalizers", norm.NormalizerSequence),
    "pre_tokenizer": (PRE_TOKENIZERS, "pretokenizers", pre.PreTokenizerSequence),
    "post_processor": (PROCESSORS, "processors", proc.ProcessorSequence),
    "decoder": (DECODERS, "decoders", dec.DecoderSequence),
}
_TABLES = {"normalizer": NORMALIZERS, "pre_tokenizer": PRE_TOKENIZERS, "model": MODELS,
           "post_processor": PROCESSORS, "decoder": DECODERS}
_ADDED_KEYS = frozenset({"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"})


def register(section: str, type_name: str, build: Callable[[dict[str, Any]], Any], *keys: str) -> None:
    """Add (or replace) the builder of one component ``type`` in a section's table (``"normalizer"``,
    ``"pre_tokenizer"``, ``"model"``, ``"post_processor"``, ``"decoder"``)."""
    _TABLES[section][type_name] = Builder(build, frozenset(keys))


#: Builds a faster model of the same ids from a parsed file and the model built from it (tokenizer name and spec
#: given for its logs and tables; the artifact cache, used with ``spec.sha256`` as key, may be None), or None to
#: decline.
FastModel = Callable[[dict[str, Any], Model, str, "TokenizerSpec | None", "ArtifactCache | None"], "Model | None"]
#: The fast models offered every file, in order (the loader's explicit table; nothing registers itself).
FAST_MODELS: list[FastModel] = [byte_level_rank_bpe]


class _Refused(Exception):
    """Internal: a component or option this loader does not implement (message names it)."""


def _build(section: str, config: Any, where: str, backend: str | None = None, derived: Derive | None = None,
           excluded: frozenset[int] = frozenset()) -> Any:
    if not isinstance(config, dict) or not isinstance(config.get("type"), str):
        raise _Refused(f"{where}: expected an object with a 'type'")
    type_name = config["type"]
    if type_name == "Sequence" and section in _SEQUENCES:
        table, key, make = _SEQUENCES[section]
        members = config.get(key)
        if not isinstance(members, list) or set(config) - {"type", key}:
            raise _Refused(f"{where} Sequence: expected exactly the key {key!r} with a list")
        return make([_build(section, m, f"{where}[{i}]", derived=derived) for i, m in enumerate(members)])
    builder = _TABLES[section].get(type_name)
    if builder is None:
        raise _Refused(f"{where}: component {type_name!r} is not supported")
    unknown = set(config) - builder.keys - {"type"}
    if unknown:
        raise _Refused(f"{where} {type_name}: option(s) {sorted(unknown)} not supported")
    try:
        # models with a compiled core honour the backend; a BPE's is built when the pipeline asks for it, unless a
        # fast model (FAST_MODELS) wraps it and never does; a Unigram or WordPiece model is built with its excluded
        # ids at once
        if builder.build == BPE.from_hf:
            return BPE.from_hf(config, backend=backend, lazy_native=True, derived=derived)
        if builder.build == Unigram.from_hf:
            return Unigram.from_hf(config, backend=backend, excluded=excluded, derived=derived)
        if builder.build == WordPiece.from_hf:
            return WordPiece.from_hf(config, backend=backend, excluded=excluded)
        if builder.build == Precompiled.from_hf:  # its decoded table may come from the artifact cache
            return Precompiled.from_hf(config, derived=derived)
        return builder.build(config)
    except (KeyError, TypeError, ValueError) as exc:
        raise _Refused(f"{where} {type_name}: {exc}") from None


def _added_tokens(entries: Any) -> list[AddedToken]:
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise _Refused("added_tokens: expected a list")
    out = []
    known = _ADDED_KEYS.issuperset
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("content"), str) or not isinstance(e.get("id"), int):
            raise _Refused(f"added_tokens[{i}]: expected an object with 'id' and 'content'")
        if not known(e):
            raise _Refused(f"added_tokens[{i}]: option(s) {sorted(set(e) - _ADDED_KEYS)} not supported")
        get = e.get
        out.append(AddedToken(e["content"], e["id"], bool(get("special", False)), bool(get("single_word", False)),
                              bool(get("lstrip", False)), bool(get("rstrip", False)), bool(get("normalized", True))))
    return out


def check_hf_ids(doc: dict[str, Any], size: int | None, source: str) -> None:
    """Raise :class:`ArtifactError` if an id of the model's vocabulary or of ``added_tokens`` is outside
    :func:`~app.engine.artifact_limits.id_bound` of the file's ``size`` (before any table is allocated)."""
    vocab = doc["model"].get("vocab")
    if isinstance(vocab, LazyVocab):
        check_ids((vocab.min_id, vocab.max_id) if vocab.max_id >= 0 else (), "model.vocab id", size, source)
    elif isinstance(vocab, dict):
        values = vocab.values()
        ints = values if set(map(type, values)) <= {int} else [v for v in values if isinstance(v, int)]
        check_ids((min(ints), max(ints)) if ints else (), "model.vocab id", size, source)  # (min and max in C)
    elif isinstance(vocab, (list, UnigramVocab)):
        check_id(len(vocab), "model.vocab length", size, source)
    added = doc.get("added_tokens")
    if isinstance(added, list):
        check_ids((e["id"] for e in added if isinstance(e, dict) and isinstance(e.get("id"), int)),
                  "added_tokens id", size, source)


def _fast_model(doc: dict[str, Any], model: Model, name: str, spec: TokenizerSpec | None,
                artifact_cache: ArtifactCache | None) -> Model:
    """The first of :data:`FAST_MODELS` that accepts the file, else ``model``."""
    for build in FAST_MODELS:
        fast = build(doc, model, name, spec, artifact_cache)
        if fast is not None:
            return fast
    return model


def parse_hf_json(data: bytes | str, source: str) -> dict[str, Any]:
    """The document of a ``tokenizer.json``'s bytes, its ids checked against the file's size
    (:func:`check_hf_ids`). Raises :class:`ArtifactError` for invalid JSON or a document without a model."""
    try:
        doc = json.loads(data, parse_float=serde_f64)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ArtifactError(source, f"not a tokenizer.json (invalid JSON: {exc})") from None
    except RecursionError:
        raise ArtifactError(source, "not a tokenizer.json (JSON nested too deeply)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise ArtifactError(source, "not a tokenizer.json (no 'model' object)")
    check_hf_ids(doc, len(data), source)
    return doc


def from_hf_json(data: bytes | str | dict[str, Any], name: str, *, source: str = "tokenizer.json",
                 spec: TokenizerSpec | None = None, cache_size: int | None = None,
                 backend: str | None = None, artifact_cache: ArtifactCache | None = None,
                 checked: bool = False) -> Tokenizer:
    """Build the tokenizer a ``tokenizer.json`` describes. ``source`` names the file in errors. ``artifact_cache``:
    where expensive derivations are stored, keyed by ``spec.sha256`` (unused without ``spec``). ``checked``:
    ``data`` is a document :func:`parse_hf_json` returned (its ids already checked against the file's size).
    Raises :class:`~app.engine.errors.ArtifactError` for anything that cannot be loaded exactly."""
    doc = data if isinstance(data, dict) else parse_hf_json(data, source)
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise ArtifactError(source, "not a tokenizer.json (no 'model' object)")
    if isinstance(data, dict) and not checked:
        check_hf_ids(doc, None, source)
    derived = derive_for(artifact_cache, None if spec is None else spec.sha256)
    try:
        model_config = dict(doc["model"])
        if "type" not in model_config:  # very old files leave the model type implicit
            raise _Refused("model: no 'type'")
        parts = {section: None if doc.get(section) is None else _build(section, doc[section], section,
                                                                          derived=derived)
                 for section in ("normalizer", "pre_tokenizer", "post_processor", "decoder")}
        added = _added_tokens(doc.get("added_tokens"))
        model = _build("model", model_config, "model", backend, derived=derived,
                       excluded=frozenset(t.id for t in added if t.special))
        # a model that could match a special token's string in text must not
        model.exclude_from_text({t.id for t in added if t.special})
        if backend != "python":
            model = _fast_model(doc, model, name, spec, artifact_cache)
        pipeline = Pipeline(name=name, model=model, normalizer=parts["normalizer"],
                            pre_tokenizer=parts["pre_tokenizer"], post_processor=parts["post_processor"],
                            decoder=parts["decoder"], added_tokens=added, cache_size=cache_size, spec=spec)
    except _Refused as exc:
        raise ArtifactError(source, f"cannot load exactly: {exc}") from None
    except ValueError as exc:
        raise ArtifactError(source, f"cannot load exactly: {exc}") from None
    return pipeline


def load_hf_json(spec: TokenizerSpec, *, cache_size: int | None = None, backend: str | None = None,
                 artifact_cache: ArtifactCache | None = None) -> Tokenizer:
    """The loader of the ``hf_json`` format: read and verify the artifact, build it, check ``vocab_size``. With
    ``artifact_cache`` the artifact is verified through it (:meth:`TokenizerSpec.verify_artifact`: no decompression
    when the document is cached) and the parsed document comes from it (part ``"hf-doc"``,
    :func:`~app.engine.pipeline.hf_doc.cached_hf_doc`), and so do the components' expensive derivations."""
    artifact = spec.verify_artifact(artifact_cache)
    source = str(spec.artifact_path)
    derived = derive_for(artifact_cache, spec.sha256)
    doc: bytes | dict[str, Any] = (artifact.read() if derived is None
                                   else cached_hf_doc(artifact, source, derived, parse_hf_json))
    tok = from_hf_json(doc, spec.name, source=source, spec=spec, cache_size=cache_size, backend=backend,
                       artifact_cache=artifact_cache, checked=True)
    spec.check_vocab_size(tok.n_vocab)
    return tok


def load_hf_json_file(path: Path, name: str, *, cache_size: int | None = None) -> Tokenizer:
    """Build a tokenizer from a local ``tokenizer.json`` (no manifest): for ``import`` and tests."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ArtifactError(str(path), f"cannot read: {exc.strerror or exc}") from None
    return from_hf_json(data, name, source=str(path), cache_size=cache_size)

