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
from .native import resolve_backend
from .store import Store, TokenizerSpec, default_store_dir

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


def reset() -> None:
    """Forget every memoised store and encoding (for tests and for reloading a changed store)."""
    with _lock:
        _stores.clear()
        _encodings.clear()
