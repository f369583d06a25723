"""Process-wide access to encodings: ``get_encoding(name)`` loads, verifies and memoises.

Loading is lazy and thread-safe: the first call for a tokenizer reads and verifies its artifact under a lock;
later calls return the same object. :func:`load_all` loads every tokenizer of a store up front (the service does
this before it reports ready).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from .encoding import Encoding
from .errors import ArtifactError
from .native import resolve_backend
from .store import MANIFEST_FILE, Store, TokenizerSpec, bundled_store_dir, default_store_dir

_lock = threading.RLock()
_stores: dict[Path, Store] = {}
_encodings: dict[tuple[Path, str, str], Any] = {}


def get_store(store_dir: Path | str | None = None) -> Store:
    """The (memoised) :class:`Store` of ``store_dir``, default :func:`default_store_dir`."""
    directory = Path(store_dir).expanduser().resolve() if store_dir is not None else default_store_dir()
    with _lock:
        store = _stores.get(directory)
        if store is None:
            store = _stores[directory] = Store.load(directory)
        return store


def load_encoding(spec: TokenizerSpec, *, cache_size: int | None = None, backend: str | None = None) -> Any:
    """Load the tokenizer a spec describes (not memoised): an :class:`Encoding` for ``byte_bpe``, a
    :class:`~app.engine.training.char_bpe.CharBPEEncoding` for ``char_bpe``. Raises ``ArtifactError``.

    ``backend`` (``"native"``, ``"python"`` or None for ``$TOKENIZER_ENGINE``/the default) applies to
    ``byte_bpe`` encodings; see :func:`app.engine.native.resolve_backend`."""
    if spec.kind == "char_bpe":
        from .training.char_bpe import CharBPEEncoding

        return CharBPEEncoding.from_spec(spec, cache_size=cache_size)
    return Encoding.from_spec(spec, cache_size=cache_size, backend=backend)


def get_encoding(name: str, store_dir: Path | str | None = None, *, backend: str | None = None) -> Encoding:
    """The encoding called ``name`` (a canonical name or an alias) in the store, memoised per backend.

    ``backend``: ``"native"`` (the compiled core), ``"python"`` (the pure-Python reference) or None
    (``$TOKENIZER_ENGINE``, else native when available). Both give identical ids.

    Raises :class:`~app.engine.errors.UnknownTokenizerError` (listing the known names) for an unknown name and
    :class:`~app.engine.errors.ArtifactError` if its artifact is missing or fails verification, ``ValueError``
    for an unknown backend.
    """
    store = get_store(store_dir)
    canonical = store.resolve(name)
    resolved = resolve_backend(backend)
    key = (store.directory, canonical, resolved)
    enc = _encodings.get(key)
    if enc is not None:
        return enc  # type: ignore[no-any-return]
    with _lock:
        enc = _encodings.get(key)
        if enc is None:
            enc = _encodings[key] = load_encoding(store.spec(canonical), backend=resolved)
        return enc  # type: ignore[no-any-return]


def list_encodings(store_dir: Path | str | None = None) -> list[str]:
    """Canonical tokenizer names of the store, in manifest order."""
    return get_store(store_dir).names()


def load_all(store_dir: Path | str | None = None) -> dict[str, Encoding]:
    """Load and verify every tokenizer of the store; raises on the first failure."""
    return {name: get_encoding(name, store_dir) for name in list_encodings(store_dir)}


def pickle_reference(enc: Any) -> tuple[Any, tuple[Any, ...]]:
    """``__reduce__`` of a store-loaded encoding: a reference (name, store, sha256, backend), never the ranks.

    Unpickling calls :func:`restore_encoding`, which loads (and verifies) the encoding by name from the same store
    on the other side: the bundled store of *that* installation when it came from a bundled store, else the same
    directory path. Raises ``TypeError`` for an encoding not loaded from a store (nothing to reconstruct it from).
    """
    spec = getattr(enc, "spec", None)
    if spec is None:
        raise TypeError(f"cannot pickle {enc!r}: it was not loaded from a tokenizer store (no name to reload it by)")
    artifact = spec.artifact_path.resolve()
    bundled = bundled_store_dir()
    if artifact.is_relative_to(bundled):
        store: str | None = None
    else:
        store = str(next((p for p in artifact.parents if (p / MANIFEST_FILE).is_file()), artifact.parent))
    backend = enc.backend if spec.kind == "byte_bpe" else None
    return restore_encoding, (spec.name, store, spec.sha256, backend)


def restore_encoding(name: str, store_dir: str | None, sha256: str, backend: str | None) -> Any:
    """The unpickled encoding: ``name`` from ``store_dir`` (None: the bundled store), through :func:`get_encoding`
    (loaded once per process, sha256-verified). Raises :class:`ArtifactError` when that store's artifact for
    ``name`` is not the one that was pickled (another sha256), rather than silently tokenizing differently."""
    enc = get_encoding(name, bundled_store_dir() if store_dir is None else store_dir, backend=backend)
    if enc.spec is not None and enc.spec.sha256 != sha256:
        raise ArtifactError(str(enc.spec.artifact_path), f"the pickled encoding {name!r} was built from another "
                            "artifact", expected=sha256, actual=enc.spec.sha256)
    return enc


def reset() -> None:
    """Forget every memoised store and encoding (for tests and for reloading a changed store)."""
    with _lock:
        _stores.clear()
        _encodings.clear()
