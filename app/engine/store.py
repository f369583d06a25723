"""The tokenizer store: a directory of frozen artifacts and the ``manifest.json`` that describes them.

Manifest schema (``format_version`` 1)::

    {"format_version": 1,
     "tokenizers": [
        {"name": "cl100k_base",            # canonical name, unique in the store
         "aliases": [],                    # other names that resolve to it
         "kind": "byte_bpe",               # the family (KINDS): byte_bpe, char_bpe, bpe, wordpiece, unigram, wordlevel
         "artifact": "cl100k_base.tiktoken",   # file name, relative to the store directory
         "format": "tiktoken",             # which loader reads it (FORMATS; app.engine.loaders picks by this)
         "compression": null,              # null, or "xz": the file is stored compressed …
         "sha256": "…",                    # … and this is the sha256 of the published (decompressed) bytes
         "pattern": "cl100k",              # tiktoken format: a named pattern (app.engine.patterns) …
         "pattern_regex": null,            # … or a regular expression of its own (exactly one of the two)
         "special_tokens": {"<|endoftext|>": 100257},   # string -> id; decode names an id by its first string
                                           #   (formats that carry their own special tokens leave this empty)
         "template": {"prefix": [], "suffix": []},   # special names add_special_tokens=True puts around a text
                                           #   (tiktoken format; other formats take it from the artifact)
         "vocab_size": 100277,             # highest id + 1, checked at load
         "reference": "tiktoken 0.14.0",   # the library (and version) whose ids these equal, as tested
         "tokenizer_json": null,           # gguf format only: run the vocabulary as this model's Hugging Face
                                           #   tokenizer.json does (app.engine.pipeline.gguf.TOKENIZER_JSON), not
                                           #   with SentencePiece's rules as llama.cpp does
         "source": "…", "license": "MIT", "license_file": "licenses/…",
         "models": ["gpt-4", …],           # model names that use this tokenizer
         "description": "…"}]}

The bundled ``tokenizers_store`` package is always there; a store directory given by the environment variable
``TOKENIZER_STORE`` (or passed in) is *added* to it (:meth:`Store.combine`): its tokenizers join the bundled ones.
A name or alias of the added store that the bundled one already has is refused, unless it is the very same
artifact (same sha256: a copy of the bundled store) or ``TOKENIZER_STORE_OVERRIDE`` is true (the added store wins).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import defaults
from .artifact_cache import ArtifactCache
from .artifact_limits import MAX_IDS
from .artifacts import VerifiedArtifact, read_verified, verify_artifact
from .defaults import OVERRIDE_ENV, STORE_ENV
from .errors import ArtifactError, ManifestError, UnknownTokenizerError
from .patterns import resolve_pattern

MANIFEST_FILE = "manifest.json"
FORMAT_VERSION = 1
KINDS = ("byte_bpe", "char_bpe", "bpe", "wordpiece", "unigram", "wordlevel")
#: Artifact formats a store may hold; :data:`app.engine.loaders.LOADERS` has one loader for each.
FORMATS = ("tiktoken", "char_bpe", "hf_json", "sentencepiece", "gguf", "tekken")
DEFAULT_FORMAT = {"byte_bpe": "tiktoken", "char_bpe": "char_bpe"}
COMPRESSIONS = ("xz",)


def bundled_store_dir() -> Path:
    """The store shipped with the package (``tokenizers_store/``)."""
    import tokenizers_store

    return Path(tokenizers_store.__file__).resolve().parent


def default_store_dir() -> Path:
    """``$TOKENIZER_STORE`` if set and non-empty (added to the bundled store), else the bundled store."""
    return defaults.store_dir() or bundled_store_dir()


@dataclass(frozen=True)
class TokenizerSpec:
    """One manifest entry, validated. Paths are resolved against the store directory."""

    name: str
    artifact_path: Path
    sha256: str
    kind: str = "byte_bpe"
    format: str = "tiktoken"
    pattern: str = ""
    pattern_id: str | None = None
    aliases: tuple[str, ...] = ()
    special_tokens: Mapping[str, int] = field(default_factory=dict)
    vocab_size: int = 0
    source: str = ""
    license: str = ""
    license_file: str | None = None
    models: tuple[str, ...] = ()
    description: str = ""
    compression: str | None = None
    template: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    reference: str = ""
    tokenizer_json: str | None = None

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any], store_dir: Path) -> TokenizerSpec:
        """Validate one manifest entry. Raises :class:`ManifestError` naming the entry and the field."""
        if not isinstance(entry, Mapping):
            raise ManifestError(f"manifest entry is not an object: {entry!r:.80}")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ManifestError(f"manifest entry without a valid 'name': {dict(entry)!r:.200}")

        def need(key: str, typ: type | tuple[type, ...]) -> Any:
            value = entry.get(key)
            if not isinstance(value, typ):
                raise ManifestError(f"manifest entry {name!r}: field {key!r} is missing or has the wrong type")
            return value

        kind = entry.get("kind", "byte_bpe")
        if kind not in KINDS:
            raise ManifestError(f"manifest entry {name!r}: kind must be one of {KINDS}, not {kind!r}")
        fmt = entry.get("format", DEFAULT_FORMAT.get(kind))
        if fmt not in FORMATS:
            raise ManifestError(f"manifest entry {name!r}: format must be one of {FORMATS}, not {fmt!r}")
        if (kind in DEFAULT_FORMAT or fmt in DEFAULT_FORMAT.values()) and fmt != DEFAULT_FORMAT.get(kind):
            raise ManifestError(f"manifest entry {name!r}: kind {kind!r} and format {fmt!r} do not go together "
                                f"(byte_bpe is read from tiktoken files, char_bpe from char_bpe files)")
        compression = entry.get("compression")
        if compression is not None and compression not in COMPRESSIONS:
            raise ManifestError(f"manifest entry {name!r}: compression must be null or one of {COMPRESSIONS}")
        template = entry.get("template") or {}
        if not isinstance(template, dict) or set(template) - {"prefix", "suffix"} or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in template.values()
        ):
            raise ManifestError(f"manifest entry {name!r}: template must be {{'prefix': [names], 'suffix': [names]}}")
        artifact = need("artifact", str)
        if Path(artifact).is_absolute() or ".." in Path(artifact).parts:
            raise ManifestError(f"manifest entry {name!r}: artifact must be a path inside the store")
        specials = entry.get("special_tokens", {}) or {}
        if not isinstance(specials, dict) or not all(
            isinstance(k, str) and k and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in specials.items()
        ):
            raise ManifestError(f"manifest entry {name!r}: special_tokens must map non-empty strings to ids >= 0")
        vocab_size = entry.get("vocab_size", 0)
        if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or not 0 <= vocab_size < MAX_IDS:
            raise ManifestError(f"manifest entry {name!r}: vocab_size must be an integer in 0..{MAX_IDS - 1}, "
                                f"not {str(vocab_size)[:40]}")
        if any(v >= MAX_IDS for v in specials.values()):
            raise ManifestError(f"manifest entry {name!r}: special_tokens ids must be below {MAX_IDS}")
        for key in ("aliases", "models"):
            listed = entry.get(key) or []
            if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
                raise ManifestError(f"manifest entry {name!r}: {key} must be a list of strings")
        reference = entry.get("reference", "")
        if not isinstance(reference, str):
            raise ManifestError(f"manifest entry {name!r}: reference must be a string")
        tokenizer_json = entry.get("tokenizer_json")
        if tokenizer_json is not None and (not isinstance(tokenizer_json, str) or fmt != "gguf"):
            raise ManifestError(f"manifest entry {name!r}: tokenizer_json must be a string, and only for format gguf")
        regex, pattern_id = "", None  # the classic char_bpe kind splits on whitespace and needs no pattern
        if fmt == "tiktoken" or entry.get("pattern") is not None or entry.get("pattern_regex") is not None:
            try:
                regex, pattern_id = resolve_pattern(entry.get("pattern"), entry.get("pattern_regex"))
            except (KeyError, ValueError) as exc:
                raise ManifestError(f"manifest entry {name!r}: {exc.args[0]}") from None
        return cls(
            name=name,
            artifact_path=store_dir / artifact,
            sha256=need("sha256", str).lower(),
            kind=kind,
            format=fmt,
            pattern=regex,
            pattern_id=pattern_id,
            aliases=tuple(need("aliases", list)) if "aliases" in entry else (),
            special_tokens=dict(specials),
            vocab_size=vocab_size,
            source=str(entry.get("source", "")),
            license=str(entry.get("license", "")),
            license_file=entry.get("license_file"),
            models=tuple(entry.get("models", ()) or ()),
            description=str(entry.get("description", "")),
            compression=compression,
            template=(tuple(template.get("prefix", ())), tuple(template.get("suffix", ()))),
            reference=reference,
            tokenizer_json=tokenizer_json,
        )

    def read_artifact(self) -> bytes:
        """The artifact's published bytes, decompressed if stored compressed, sha256-verified. Raises
        :class:`ArtifactError` naming the file (and both hashes on a mismatch)."""
        return read_verified(self.artifact_path, self.sha256, self.compression)

    def verify_artifact(self, cache: ArtifactCache | None) -> VerifiedArtifact:
        """The artifact verified, its published bytes read (decompressed) only when asked for where ``cache`` has
        seen these compressed bytes verified before (:func:`app.engine.artifacts.verify_artifact`). Raises as
        :meth:`read_artifact` does."""
        return verify_artifact(self.artifact_path, self.sha256, self.compression, cache)

    def check_vocab_size(self, n_vocab: int) -> None:
        """Raise :class:`ArtifactError` if the manifest states a ``vocab_size`` other than the loaded ``n_vocab``."""
        if self.vocab_size and self.vocab_size != n_vocab:
            raise ArtifactError(
                str(self.artifact_path), f"manifest says vocab_size {self.vocab_size}, artifact gives {n_vocab}"
            )

    def to_entry(self, store_dir: Path) -> dict[str, Any]:
        """The manifest entry for this spec (inverse of :meth:`from_entry`)."""
        entry: dict[str, Any] = {
            "name": self.name,
            "aliases": list(self.aliases),
            "kind": self.kind,
            "artifact": str(self.artifact_path.relative_to(store_dir)),
            "format": self.format,
            "sha256": self.sha256,
        }
        if self.compression is not None:
            entry["compression"] = self.compression
        if self.pattern_id is not None:
            entry["pattern"] = self.pattern_id
        elif self.pattern:
            entry["pattern_regex"] = self.pattern
        if any(self.template):
            entry["template"] = {"prefix": list(self.template[0]), "suffix": list(self.template[1])}
        if self.tokenizer_json is not None:
            entry["tokenizer_json"] = self.tokenizer_json
        entry.update(
            special_tokens=dict(self.special_tokens),
            vocab_size=self.vocab_size,
            reference=self.reference,
            source=self.source,
            license=self.license,
            license_file=self.license_file,
            models=list(self.models),
            description=self.description,
        )
        return entry


class Store:
    """The validated manifest of one store directory: specs by name, with aliases resolved.

    Loading the manifest does not read the artifacts; :func:`app.engine.load_encoding` does (and verifies them).
    """

    def __init__(self, directory: Path, specs: list[TokenizerSpec]) -> None:
        self.directory = directory
        self._specs: dict[str, TokenizerSpec] = {}
        self._names: dict[str, str] = {}
        for spec in specs:
            for key in (spec.name, *spec.aliases):
                if key in self._names:
                    raise ManifestError(f"{directory / MANIFEST_FILE}: name or alias {key!r} is used twice")
                self._names[key] = spec.name
            self._specs[spec.name] = spec

    @classmethod
    def load(cls, directory: Path | str | None = None) -> Store:
        """Read and validate ``manifest.json`` in ``directory`` (default: :func:`default_store_dir`).

        Raises :class:`ManifestError` if the manifest is missing, not JSON, or breaks the schema.
        """
        store_dir = Path(directory).expanduser().resolve() if directory is not None else default_store_dir()
        path = store_dir / MANIFEST_FILE
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ManifestError(f"{path}: no manifest (is {STORE_ENV} pointing at a tokenizer store?)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ManifestError(f"{path}: cannot read manifest: {exc}") from None
        if not isinstance(raw, dict) or raw.get("format_version") != FORMAT_VERSION:
            raise ManifestError(f"{path}: expected an object with format_version {FORMAT_VERSION}")
        entries = raw.get("tokenizers")
        if not isinstance(entries, list):
            raise ManifestError(f"{path}: 'tokenizers' must be a list")
        return cls(store_dir, [TokenizerSpec.from_entry(e, store_dir) for e in entries])

    @classmethod
    def combine(cls, stores: list[Store], *, override: bool = False) -> Store:
        """One store holding the tokenizers of ``stores`` in order (the bundled one first); its ``directory`` is the
        last one's. A later tokenizer whose name or an alias is already taken replaces the earlier one if both have
        the same name and sha256 (the same artifact) or ``override`` is true; otherwise :class:`ManifestError`
        names both manifests (a trained ``cl100k_base`` must not silently shadow the real one)."""
        specs: dict[str, tuple[TokenizerSpec, Path]] = {}
        owner: dict[str, str] = {}  # name or alias -> canonical name
        for store in stores:
            for spec in store:
                for key in (spec.name, *spec.aliases):
                    taken = owner.get(key)
                    if taken is None or taken not in specs:
                        continue
                    old, old_dir = specs[taken]
                    if not override and not (old.name == spec.name and old.sha256 == spec.sha256):
                        raise ManifestError(
                            f"{store.directory / MANIFEST_FILE}: tokenizer {spec.name!r} would shadow {old.name!r} of "
                            f"{old_dir / MANIFEST_FILE} (name or alias {key!r}); rename it, or set {OVERRIDE_ENV}=true "
                            "to let it replace that one")
                    del specs[taken]
                specs[spec.name] = (spec, store.directory)
                for key in (spec.name, *spec.aliases):
                    owner[key] = spec.name
        return cls(stores[-1].directory, [spec for spec, _ in specs.values()])

    def __iter__(self) -> Iterator[TokenizerSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> list[str]:
        """Canonical names, in manifest order."""
        return list(self._specs)

    def known_names(self) -> list[str]:
        """Canonical names and aliases, sorted."""
        return sorted(self._names)

    def resolve(self, name_or_alias: str) -> str:
        """The canonical name for a name or alias; raises :class:`UnknownTokenizerError` listing the known ones."""
        try:
            return self._names[name_or_alias]
        except (KeyError, TypeError):
            raise UnknownTokenizerError(str(name_or_alias), self.known_names()) from None

    def spec(self, name_or_alias: str) -> TokenizerSpec:
        """The spec for a name or alias; raises :class:`UnknownTokenizerError`."""
        return self._specs[self.resolve(name_or_alias)]


def override_enabled() -> bool:
    """``$TOKENIZER_STORE_OVERRIDE``: may an added store replace bundled tokenizers of the same name?"""
    return defaults.store_override()


def write_manifest(directory: Path, specs: list[TokenizerSpec]) -> Path:
    """Write ``manifest.json`` for ``specs`` into ``directory`` (atomically; stable key order)."""
    path = directory / MANIFEST_FILE
    doc = {"format_version": FORMAT_VERSION, "tokenizers": [s.to_entry(directory) for s in specs]}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
