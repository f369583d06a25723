"""SentencePiece ``.model`` files as :class:`~app.engine.pipeline.pipeline.Pipeline` tokenizers.

The file is a serialized ``ModelProto`` (protocol buffers, proto2). It is parsed with the ``protobuf`` package
from a message schema declared here (the fields this loader reads, numbered as SentencePiece's published
``sentencepiece_model.proto``; other fields are skipped by the parser), so the runtime does not depend on the
``sentencepiece`` package.

What the pipeline does, as ``sentencepiece`` does:

* normalizer: :class:`~app.engine.pipeline.sp_normalizer.SentencePieceNormalizer` from the ``NormalizerSpec``
  (precompiled charsmap with SentencePiece's longest-match semantics; dummy prefix; extra whitespace removal;
  ``▁`` for spaces; ``treat_whitespace_as_suffix``) and the user-defined pieces, which are never rewritten;
* no pre-tokenizer of SentencePiece's own: the model sees the whole normalized text (``split_by_whitespace`` only
  shapes training). For BPE vocabularies where it is provably exact the text is cut before word-initial ``▁``
  (:mod:`app.engine.pipeline.sp_split`), which lets the pipeline cache words;
* model: BPE by piece score (:class:`~app.engine.pipeline.models.sp_bpe.SentencePieceBPE`; compiled, with the
  normalization and the cut done in the same C call when there is no charsmap) or Unigram in 32-bit floats
  (:class:`~app.engine.pipeline.models.unigram.Unigram`), with byte fallback and unknown handling;
* control pieces (``<s>``, ``</s>``, ``[INST]`` …) are special tokens: never matched in text, by name only.
  User-defined pieces are matched in text, as SentencePiece does.
* ``add_special_tokens=True`` adds BOS before the text (the piece at ``bos_id`` when it is a control piece): the
  convention of Llama- and Mistral-style models, whose SentencePiece models store no add-BOS flag of their own;
  EOS is not added.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import compress
from typing import Any

from ..artifact_cache import ArtifactCache, Compiled
from ..cache import default_cache_size
from ..errors import ArtifactError
from ..specials import Template
from ..store import TokenizerSpec
from .added import AddedToken
from .base import Span
from .charsmap import CharsMapError, load_charsmap
from .derived import Derive, array_bytes, compiled, derive, derive_for, pack_strings, read_array, unpack_strings
from .models.sp_bpe import SentencePieceBPE
from .models.unigram import Unigram, word_cache_size
from .pipeline import Pipeline
from .sp_decoder import SentencePieceDecoder
from .sp_normalizer import SentencePieceNormalizer
from .sp_split import SpaceSymbolSplit
from .sp_types import BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED

_MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


@lru_cache(maxsize=1)
def _model_proto_class() -> Any:
    """The ``ModelProto`` message class, built from a descriptor declared in code (enums as ``int32``, which has
    the same wire encoding)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="tokenizer_service_sentencepiece_model.proto",
                                             package="tokenizer_service.sentencepiece", syntax="proto2")
    label_opt = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    label_rep = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    kinds = {"string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
             "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
             "float": descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
             "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
             "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
             "message": descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE}

    def message(name: str, fields: Sequence[tuple[str, int, str, str | None, bool]]) -> descriptor_pb2.DescriptorProto:
        msg = descriptor_pb2.DescriptorProto(name=name)
        for fname, number, kind, default, repeated in fields:
            f = msg.field.add(name=fname, number=number, type=kinds["message" if kind[0].isupper() else kind],
                              label=label_rep if repeated else label_opt)
            if kind[0].isupper():
                f.type_name = f".tokenizer_service.sentencepiece.{kind}"
            if default is not None:
                f.default_value = default
        return msg

    fdp.message_type.extend([
        message("TrainerSpec", [
            ("model_type", 3, "int32", "1", False), ("vocab_size", 4, "int32", "8000", False),
            ("max_sentencepiece_length", 20, "int32", "16", False),
            ("split_by_unicode_script", 21, "bool", "true", False), ("split_by_whitespace", 22, "bool", "true", False),
            ("split_by_number", 23, "bool", "true", False), ("treat_whitespace_as_suffix", 24, "bool", "false", False),
            ("split_digits", 25, "bool", "false", False),
            ("byte_fallback", 35, "bool", "false", False), ("unk_id", 40, "int32", "0", False),
            ("bos_id", 41, "int32", "1", False), ("eos_id", 42, "int32", "2", False),
            ("pad_id", 43, "int32", "-1", False), ("unk_surface", 44, "string", " \u2047 ", False),
        ]),
        message("NormalizerSpec", [
            ("name", 1, "string", None, False), ("precompiled_charsmap", 2, "bytes", None, False),
            ("add_dummy_prefix", 3, "bool", "true", False), ("remove_extra_whitespaces", 4, "bool", "true", False),
            ("escape_whitespaces", 5, "bool", "true", False),
        ]),
        message("Piece", [
            ("piece", 1, "string", None, False), ("score", 2, "float", None, False),
            ("type", 3, "int32", "1", False),
        ]),
        message("ModelProto", [
            ("pieces", 1, "Piece", None, True), ("trainer_spec", 2, "TrainerSpec", None, False),
            ("normalizer_spec", 3, "NormalizerSpec", None, False),
        ]),
    ])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tokenizer_service.sentencepiece.ModelProto"))


def positions_of_types(packed: bytes, kinds: Collection[int], *, negate: bool = False) -> list[int]:
    """The positions in ``packed`` (one piece type per byte) whose type is in ``kinds`` (with ``negate``: is not),
    in order, from one ``bytes.translate`` and one ``compress`` in C; a rare type (at most 1 in 32, such as the
    control or byte pieces) is found by ``bytes.find`` instead. ``kinds`` outside 0..255 never match."""
    wanted = set(kinds)
    if not negate:
        present = [k for k in wanted if 0 <= k < 256]
        if sum(map(packed.count, present)) * 32 <= len(packed):
            found: list[int] = []
            for k in present:
                at = packed.find(k)
                while at >= 0:
                    found.append(at)
                    at = packed.find(k, at + 1)
            return sorted(found) if len(present) > 1 else found
    hit, miss = (b"\0", b"\1") if negate else (b"\1", b"\0")
    flags = packed.translate(bytes((hit if k in wanted else miss)[0] for k in range(256)))
    return list(compress(range(len(flags)), flags))


@dataclass
class SentencePieceVocab:
    """Everything a SentencePiece-style tokenizer is built from (a ``.model`` file or a GGUF ``llama``/``t5``
    vocabulary)."""

    pieces: list[str]
    scores: list[float]
    types: list[int]
    model_type: str  #: "bpe" or "unigram"
    byte_fallback: bool = False
    charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    treat_whitespace_as_suffix: bool = False
    unk_surface: str = " \u2047 "
    bos_id: int | None = None
    eos_id: int | None = None
    add_bos: bool = True
    add_eos: bool = False
    unk_id: int | None = None  #: default: the one piece of type UNKNOWN
    extra_special: dict[int, str] = field(default_factory=dict)  #: more special ids (non-control) by id
    #: The name of the deterministic derivation of ``pieces`` and ``scores`` from the artifact (the key of a
    #: compiled Unigram model in the artifact cache, see :class:`Unigram`), or None.
    origin: str | None = None
    _types_packed: bytes | None | bool = field(default=False, init=False, repr=False, compare=False)

    def ids_of(self, kind: int) -> list[int]:
        """The ids of the pieces of type ``kind``, in order."""
        return self.ids_where((kind,))

    def ids_where(self, kinds: Collection[int], *, negate: bool = False) -> list[int]:
        """The ids of the pieces whose type is in ``kinds`` (with ``negate``: is not), in order. One scan in C
        over the types as bytes when every type fits a byte (a vocabulary of 250,000 pieces is scanned several
        times per load)."""
        packed = self._packed_types()
        wanted = set(kinds)
        if packed is None or not all(0 <= k < 256 for k in wanted):
            return [i for i, t in enumerate(self.types) if (t in wanted) != negate]
        return positions_of_types(packed, wanted, negate=negate)

    def _packed_types(self) -> bytes | None:
        """:attr:`types` as bytes (None when some type is outside 0..255), made once."""
        if self._types_packed is False:
            self._types_packed = None
            if type(self.types) in (list, tuple):  # (bytes() of an array would give its raw bytes)
                try:
                    self._types_packed = bytes(self.types)
                except (ValueError, TypeError):
                    pass
        return self._types_packed  # type: ignore[return-value]


def parse_model(data: bytes, source: str) -> SentencePieceVocab:
    """Parse a serialized ``ModelProto``; raises :class:`ArtifactError` naming ``source``."""
    from google.protobuf.message import DecodeError

    proto = _model_proto_class()()
    try:
        proto.ParseFromString(data)
    except DecodeError as exc:
        raise ArtifactError(source, f"not a SentencePiece model: {exc}") from None
    if not proto.pieces:
        raise ArtifactError(source, "not a SentencePiece model: no pieces")
    ts, ns = proto.trainer_spec, proto.normalizer_spec
    kind = _MODEL_TYPES.get(ts.model_type, str(ts.model_type))
    if kind not in ("bpe", "unigram"):
        raise ArtifactError(source, f"SentencePiece model type {kind!r} is not supported (only bpe and unigram)")
    n = len(proto.pieces)
    return SentencePieceVocab(
        pieces=[p.piece for p in proto.pieces], scores=[p.score for p in proto.pieces],
        types=[p.type for p in proto.pieces], model_type=kind, byte_fallback=ts.byte_fallback,
        charsmap=ns.precompiled_charsmap, add_dummy_prefix=ns.add_dummy_prefix,
        remove_extra_whitespaces=ns.remove_extra_whitespaces, escape_whitespaces=ns.escape_whitespaces,
        treat_whitespace_as_suffix=ts.treat_whitespace_as_suffix, unk_surface=ts.unk_surface,
        bos_id=ts.bos_id if 0 <= ts.bos_id < n else None, eos_id=ts.eos_id if 0 <= ts.eos_id < n else None,
    )


class FixedTemplate:
    """A post-processor that only adds fixed special tokens around the text (offsets unchanged)."""

    def __init__(self, template: Template) -> None:
        self._template = template

    def template(self) -> Template:
        return self._template

    def adjust_offsets(self, tokens: list[str], spans: list[Span]) -> list[Span]:
        return spans


def build_pipeline(name: str, vocab: SentencePieceVocab, *, source: str, cache_size: int | None = None,
                   spec: TokenizerSpec | None = None, backend: str | None = None,
                   word_cache: int | None = None, derived: Derive | None = None) -> Pipeline:
    """The pipeline for ``vocab``. Raises :class:`ArtifactError` naming ``source`` for an inconsistent vocabulary
    (no unknown piece, a malformed charsmap). ``backend``: the model's (see :class:`SentencePieceBPE` and
    :class:`Unigram`); ``word_cache``: a Unigram model's word-cache slots (see :func:`word_cache_size`);
    ``derived``: the artifact's cache of derivations (the charsmap's table, the compiled BPE or Unigram model), or
    None."""
    unknown = vocab.ids_of(UNKNOWN)
    if vocab.unk_id is not None:
        unk_id = vocab.unk_id
    elif len(unknown) == 1:
        unk_id = unknown[0]
    else:
        raise ArtifactError(source, f"expected exactly one unknown piece, found {len(unknown)}")
    try:
        charsmap = load_charsmap(vocab.charsmap, derived) if vocab.charsmap else None
    except CharsMapError as exc:
        raise ArtifactError(source, str(exc)) from None
    user = vocab.ids_of(USER_DEFINED)
    model: SentencePieceBPE | Unigram
    split: SpaceSymbolSplit | None = None
    if vocab.model_type == "bpe":
        mergeable = vocab.ids_where((NORMAL, USER_DEFINED, UNUSED))
        model = SentencePieceBPE((), unk_id=unk_id, byte_fallback=vocab.byte_fallback, mergeable=mergeable,
                                 user_defined=user, unused=vocab.ids_of(UNUSED), backend=backend,
                                 cache_size=default_cache_size() if cache_size is None else cache_size,
                                 derived=derived, columns=(vocab.pieces, vocab.scores), origin=vocab.origin)
        if not vocab.treat_whitespace_as_suffix and model.splits_at_space():
            split = SpaceSymbolSplit()
    else:
        excluded = vocab.ids_where((NORMAL, USER_DEFINED), negate=True)
        model = Unigram((), unk_id=unk_id, byte_fallback=vocab.byte_fallback, excluded=excluded,
                        user_defined=user, float32=True, cache_size=word_cache_size(cache_size, word_cache),
                        backend=backend, derived=derived, columns=(vocab.pieces, vocab.scores), origin=vocab.origin)
    normalizer = SentencePieceNormalizer(
        charsmap, add_dummy_prefix=vocab.add_dummy_prefix, remove_extra_whitespaces=vocab.remove_extra_whitespaces,
        escape_whitespaces=vocab.escape_whitespaces, treat_whitespace_as_suffix=vocab.treat_whitespace_as_suffix,
        user_defined=[vocab.pieces[i] for i in user])
    special_ids = vocab.ids_of(CONTROL) + sorted(vocab.extra_special)
    added = [AddedToken(vocab.extra_special.get(i, vocab.pieces[i]), i, special=True) for i in special_ids]
    prefix = ((vocab.pieces[vocab.bos_id], vocab.bos_id),) if vocab.add_bos and vocab.bos_id in special_ids else ()
    suffix = ((vocab.pieces[vocab.eos_id], vocab.eos_id),) if vocab.add_eos and vocab.eos_id in special_ids else ()
    decoder = SentencePieceDecoder(
        byte_pieces=[vocab.pieces[i] for i in vocab.ids_of(BYTE)], control=[vocab.pieces[i] for i in special_ids],
        unk_piece=vocab.pieces[unk_id], unk_surface=vocab.unk_surface, add_dummy_prefix=vocab.add_dummy_prefix,
        remove_extra_whitespaces=vocab.remove_extra_whitespaces)
    return Pipeline(name=name, model=model, normalizer=normalizer, pre_tokenizer=split,
                    post_processor=FixedTemplate(Template(prefix, suffix)), decoder=decoder, added_tokens=added,
                    cache_size=cache_size, spec=spec)


#: The artifact cache part of a parsed ``.model`` file (:func:`load_sentencepiece`).
SP_VOCAB_PART = "sp-vocab"
#: :attr:`SentencePieceVocab.origin` of a ``.model`` file's pieces and scores (:func:`parse_model`'s, which the
#: ``sp-vocab`` part restores alike; change the version when they change).
SP_MODEL_ORIGIN = "sp-model.v1"
_SP_FLAGS = ("byte_fallback", "add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces",
             "treat_whitespace_as_suffix")


def _dump_vocab(vocab: SentencePieceVocab | None) -> Compiled:
    """What :func:`parse_model` read, as sections (pieces packed, scores as doubles: each is a float32's exact
    value) and ``meta``; a vocabulary whose pieces cannot be packed is stored as such (then parsed every time)."""
    assert vocab is not None  # (what the build gives)
    pieces = pack_strings(vocab.pieces)
    if pieces is None:
        return compiled({"packed": False}, {})
    meta = {"packed": True, "n": len(vocab.pieces), "model_type": vocab.model_type, "unk_surface": vocab.unk_surface,
            "bos_id": vocab.bos_id, "eos_id": vocab.eos_id, **{k: getattr(vocab, k) for k in _SP_FLAGS}}
    return compiled(meta, {"pieces": pieces, "scores": array_bytes(array("d", vocab.scores)),
                           "types": array_bytes(array("i", vocab.types)), "charsmap": vocab.charsmap})


def _restore_vocab(stored: Compiled) -> SentencePieceVocab | None:
    """The vocabulary :func:`_dump_vocab` stored (None: not packable, parse the file). Raises ``ValueError`` or
    ``TypeError`` for an inconsistent entry."""
    meta, sections = stored.meta, stored.sections
    if meta.get("packed") is False:
        return None
    n = meta["n"]
    if (meta.get("packed") is not True or type(n) is not int or meta["model_type"] not in ("bpe", "unigram")
            or type(meta["unk_surface"]) is not str or not all(type(meta[k]) is bool for k in _SP_FLAGS)
            or not all(i is None or (type(i) is int and 0 <= i < n) for i in (meta["bos_id"], meta["eos_id"]))):
        raise ValueError("sp-vocab: bad meta")
    return SentencePieceVocab(
        pieces=unpack_strings(sections["pieces"], n), scores=read_array(sections["scores"], "d", n).tolist(),
        types=read_array(sections["types"], "i", n).tolist(), model_type=meta["model_type"],
        charsmap=bytes(sections["charsmap"]), unk_surface=meta["unk_surface"], bos_id=meta["bos_id"],
        eos_id=meta["eos_id"], **{k: meta[k] for k in _SP_FLAGS})


def load_sentencepiece(spec: TokenizerSpec, *, cache_size: int | None = None, backend: str | None = None,
                       word_cache: int | None = None, artifact_cache: ArtifactCache | None = None) -> Pipeline:
    """The loader of manifest format ``sentencepiece``: a verified ``.model`` file as a pipeline (its expensive
    derivations from ``artifact_cache`` when given: the parsed file too, part ``"sp-vocab"``, with a compressed
    file verified through the cache's witness and not decompressed)."""
    source = str(spec.artifact_path)
    derived = derive_for(artifact_cache, spec.sha256)
    vocab: SentencePieceVocab | None = None
    if derived is None:
        vocab = parse_model(spec.read_artifact(), source)
    else:
        artifact = spec.verify_artifact(artifact_cache)
        def parse() -> SentencePieceVocab | None:
            return parse_model(artifact.read(), source)

        vocab = derive(derived, SP_VOCAB_PART, parse, _dump_vocab, _restore_vocab) or parse_model(artifact.read(),
                                                                                                   source)
        vocab.origin = SP_MODEL_ORIGIN
    pipeline = build_pipeline(spec.name, vocab, source=source, cache_size=cache_size, spec=spec, backend=backend,
                              word_cache=word_cache, derived=derived)
    spec.check_vocab_size(pipeline.n_vocab)
    return pipeline
