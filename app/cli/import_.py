"""``import``: add a local tokenizer file to a store (``python -m app import PATH --name NAME [--store DIR]``).

The file must load exactly (the same loader the service uses; a component we do not implement is refused). It
is hashed (sha256 of its bytes as given), copied into the store (xz-compressed when larger than
:data:`COMPRESS_FROM` bytes; the hash stays that of the original bytes) and described by a new manifest entry.
The store directory and its manifest are created when missing. Formats (recognised by content, not by name):
Hugging Face ``tokenizer.json``, Mistral tekken ``.json``, SentencePiece ``.model`` and GGUF (``.gguf``, its
vocabulary).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import re
import sys
from pathlib import Path

from app.engine.errors import ArtifactError, EngineError
from app.engine.loaders import LoadOptions, load_tokenizer
from app.engine.store import MANIFEST_FILE, Store, TokenizerSpec, default_store_dir, write_manifest
from app.engine.tokenizer import Tokenizer

#: Exceptions a malformed file may raise that the loaders' own checks did not name.
_MALFORMED = (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError, MemoryError)
#: Files above this size are stored xz-compressed.
COMPRESS_FROM = 1 << 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
#: tokenizer.json model type -> manifest kind.
_KINDS = {"BPE": "bpe", "WordPiece": "wordpiece", "Unigram": "unigram", "WordLevel": "wordlevel"}


class ImportError_(EngineError):
    """A file that cannot be imported (message names it)."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("import", help="add a local tokenizer file to a store (verified, hashed, manifest entry)")
    p.add_argument("path", type=Path,
                   help="the tokenizer file (tokenizer.json, tekken .json, SentencePiece .model or .gguf)")
    p.add_argument("--name", required=True, help="canonical name in the store (letters, digits, . _ -)")
    p.add_argument("--store", type=Path, help="store directory (default $TOKENIZER_STORE or the bundled store)")
    p.add_argument("--alias", action="append", default=[], help="another name that resolves to it (repeatable)")
    p.add_argument("--model", action="append", default=[], help="a model name that uses it (repeatable)")
    p.add_argument("--license", default="", help="licence of the file, recorded in the manifest")
    p.add_argument("--replace", action="store_true", help="replace an existing entry of the same name")
    p.set_defaults(handler=cmd_import)


#: format -> artifact file suffix in the store.
_SUFFIX = {"hf_json": ".tokenizer.json", "tekken": ".tekken.json", "sentencepiece": ".model", "gguf": ".gguf"}
#: GGUF ``tokenizer.ggml.model`` -> manifest kind.
_GGUF_KINDS = {"llama": "bpe", "gpt2": "bpe", "bert": "wordpiece", "t5": "unigram"}


def _detect(data: bytes, source: str) -> tuple[str, str]:
    """``(format, kind)`` of a tokenizer file, from its content."""
    if data[:4] == b"GGUF":
        from app.engine.pipeline.gguf import SUPPORTED_MODELS
        from app.engine.pipeline.gguf_kv import GGUFFormatError, read_kv

        try:
            model = read_kv(data).get("tokenizer.ggml.model")
        except GGUFFormatError as exc:
            raise ArtifactError(source, str(exc)) from None
        if model not in _GGUF_KINDS:
            raise ArtifactError(source, f"GGUF tokenizer model {model!r} is not supported "
                                        f"(supported: {', '.join(SUPPORTED_MODELS)})")
        return "gguf", _GGUF_KINDS[model]
    if data.lstrip()[:1] == b"{":
        try:
            doc = json.loads(data)
        except ValueError:
            raise ArtifactError(source, "not a tokenizer.json (invalid JSON)") from None
        except RecursionError:
            raise ArtifactError(source, "not a tokenizer.json (JSON nested too deeply)") from None
        if isinstance(doc, dict) and isinstance(doc.get("config"), dict) and isinstance(doc.get("vocab"), list):
            return "tekken", "bpe"
        model = doc.get("model") if isinstance(doc, dict) else None
        model_type = model.get("type") if isinstance(model, dict) else None
        kind = _KINDS.get(model_type) if isinstance(model_type, str) else None
        if kind is None:
            raise ArtifactError(source, f"model type {model_type!r} is not supported")
        return "hf_json", kind
    from app.engine.pipeline.sentencepiece import parse_model

    return "sentencepiece", parse_model(data, source).model_type


def _load_bytes(fmt: str, data: bytes, name: str, source: str) -> Tokenizer:
    """Build the tokenizer from the file's bytes (refuses anything not loadable exactly); returns it."""
    if fmt == "hf_json":
        from app.engine.pipeline.hf_json import from_hf_json

        return from_hf_json(data, name, source=source, backend="python")
    if fmt == "gguf":
        from app.engine.pipeline.gguf import from_gguf

        return from_gguf(data, name, source=source, backend="python")
    if fmt == "sentencepiece":
        from app.engine.pipeline.sentencepiece import build_pipeline, parse_model

        return build_pipeline(name, parse_model(data, source), source=source)
    from app.engine.encoding import RankBPETokenizer
    from app.engine.tekken import parse_tekken

    pattern, ranks, specials = parse_tekken(data, source)
    return RankBPETokenizer(name, pattern=pattern, mergeable_ranks=ranks, special_tokens=specials, backend="python")


def import_file(path: Path, name: str, store_dir: Path, *, aliases: tuple[str, ...] = (), models: tuple[str, ...] = (),
                license: str = "", replace: bool = False) -> TokenizerSpec:
    """Import ``path`` into ``store_dir`` under ``name``; returns the new manifest entry (already written and
    re-loaded from the store). Raises :class:`~app.engine.errors.EngineError` subclasses with one-line messages."""
    for n in (name, *aliases):
        if not _NAME.match(n):
            raise ImportError_(f"invalid name {n!r}: use letters, digits, '.', '_' and '-' (at most 128)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ArtifactError(str(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        fmt, kind = _detect(data, str(path))
        tok = _load_bytes(fmt, data, name, str(path))
    except EngineError:
        raise
    except _MALFORMED as exc:  # the last line of defence: one line naming the file, never a traceback
        raise ArtifactError(str(path), f"cannot load: {type(exc).__name__}: {str(exc)[:200]}") from None
    n_vocab = tok.n_vocab
    store_dir = store_dir.expanduser().resolve()
    existing: list[TokenizerSpec] = []
    if (store_dir / MANIFEST_FILE).exists():
        existing = list(Store.load(store_dir))
    taken = {n: s.name for s in existing for n in (s.name, *s.aliases)}
    clash = [n for n in (name, *aliases) if n in taken and not (replace and taken[n] == name)]
    if clash:
        raise ImportError_(f"{store_dir}: name or alias {clash[0]!r} is already used by {taken[clash[0]]!r} "
                           "(pass --replace to replace an entry of the same name)")
    compressed = len(data) > COMPRESS_FROM
    artifact = store_dir / (f"{name}{_SUFFIX[fmt]}" + (".xz" if compressed else ""))
    spec = TokenizerSpec(name=name, artifact_path=artifact, sha256=hashlib.sha256(data).hexdigest(), kind=kind,
                         format=fmt, compression="xz" if compressed else None, aliases=tuple(aliases),
                         vocab_size=n_vocab, source=f"imported from {path.name}", license=license,
                         models=tuple(models), description=f"{kind} {fmt} tokenizer imported from {path.name}")
    try:
        store_dir.mkdir(parents=True, exist_ok=True)
        tmp = artifact.with_name(artifact.name + ".tmp")
        tmp.write_bytes(lzma.compress(data, format=lzma.FORMAT_XZ, preset=9) if compressed else data)
        tmp.replace(artifact)
        write_manifest(store_dir, [s for s in existing if s.name != name] + [spec])
    except OSError as exc:
        raise ImportError_(f"{store_dir}: cannot write the store: {exc.strerror or exc}") from None
    stored = Store.load(store_dir).spec(name)
    load_tokenizer(stored, LoadOptions(backend="python"))  # the stored copy verifies and loads
    return stored


def cmd_import(args: argparse.Namespace) -> int:
    store_dir = args.store if args.store is not None else default_store_dir()
    spec = import_file(args.path, args.name, store_dir, aliases=tuple(args.alias), models=tuple(args.model),
                       license=args.license, replace=args.replace)
    print(f"imported {args.path} as {spec.name!r} ({spec.kind}, vocab_size {spec.vocab_size}, sha256 "
          f"{spec.sha256[:16]}…) into {spec.artifact_path.parent}", file=sys.stdout)
    return 0
