"""Process-wide access to tokenizers: ``get_tokenizer(name)`` loads, verifies and memoises.

Loading is lazy and thread-safe: the first call for a tokenizer reads and verifies its artifact under a lock;
later calls return the same object. :func:`load_all` loads the tokenizers of a store up front (all of them, or the
names given: a sidecar loads only its model's); the service does this before it reports ready.
"""

from __future__ import annotations

import copyreg
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from . import defaults
from .artifact_cache import ArtifactCache
from .cache import default_cache_size
from .errors import ArtifactError
from .loaders import LoadOptions, load_tokenizer  # also app.engine.load_tokenizer: see app/engine/__init__.py
from .native import resolve_backend
from .store import MANIFEST_FILE, Store, TokenizerSpec, bundled_store_dir, default_store_dir, override_enabled
from .tokenizer import Tokenizer

_lock = threading.RLock()
_stores: dict[Path, Store] = {}
_tokenizers: dict[tuple[Path, str, str, int, int], Tokenizer] = {}
_artifact_caches: dict[Path, ArtifactCache] = {}

#: ``artifact_cache`` arguments: a directory, ``"off"``, an :class:`ArtifactCache`, or None for the default
#: (``$TOKENIZER_ARTIFACT_CACHE``, see :func:`app.engine.defaults.artifact_cache_dir`).
CacheArg = ArtifactCache | Path | str | None


def open_artifact_cache(value: CacheArg = None) -> ArtifactCache | None:
    """The process's (memoised, so counters add up) :class:`ArtifactCache` of a directory; None when the cache is
    off (``"off"``, or ``$TOKENIZER_ARTIFACT_CACHE=off`` for None)."""
    if isinstance(value, ArtifactCache):
        return value
    directory = defaults.artifact_cache_dir() if value is None else defaults.resolve_artifact_cache(str(value))
    if directory is None:
        return None
    with _lock:
        return _artifact_caches.setdefault(directory, ArtifactCache(directory))


def get_store(store_dir: Path | str | None = None, *, override: bool | None = None) -> Store:
    """The (memoised) :class:`Store` of ``store_dir``, default :func:`default_store_dir`: any directory other than
    the bundled store is added to it (:meth:`Store.combine`; ``override``, default ``$TOKENIZER_STORE_OVERRIDE``,
    lets it replace bundled names; it applies when the directory is first loaded)."""
    directory = Path(store_dir).expanduser().resolve() if store_dir is not None else default_store_dir()
    bundled = bundled_store_dir()
    with _lock:
        store = _stores.get(directory)
        if store is None:
            own = Store.load(directory)
            if directory != bundled:
                base = _stores.get(bundled) or _stores.setdefault(bundled, Store.load(bundled))
                own = Store.combine([base, own], override=override_enabled() if override is None else override)
            store = _stores[directory] = own
        return store


def load_encoding(spec: TokenizerSpec, *, cache_size: int | None = None, backend: str | None = None,
                  unigram_word_cache: int | None = None, artifact_cache: CacheArg = None) -> Tokenizer:
    """Load the tokenizer a spec describes (not memoised), with the loader of its format
    (:data:`app.engine.loaders.LOADERS`). Raises ``ArtifactError``.

    ``backend`` (``"native"``, ``"python"`` or None for ``$TOKENIZER_ENGINE``/the default): see
    :func:`app.engine.native.resolve_backend`; families without a compiled path ignore it. ``unigram_word_cache``:
    see :class:`~app.engine.loaders.LoadOptions`; ``artifact_cache``: see :data:`CacheArg` (the ids never depend
    on it)."""
    return load_tokenizer(spec, LoadOptions(cache_size=cache_size, backend=backend,
                                            unigram_word_cache=unigram_word_cache,
                                            artifact_cache=open_artifact_cache(artifact_cache)))



def get_tokenizer(name: str, store_dir: Path | str | None = None, *, backend: str | None = None,
                 cache_size: int | None = None, unigram_word_cache: int | None = None,
                 artifact_cache: CacheArg = None) -> Tokenizer:
    """The tokenizer called ``name`` (a canonical name or an alias) in the store, memoised per backend and cache
    size. Every family implements :class:`~app.engine.tokenizer.Tokenizer`.

    ``backend``: ``"native"`` (the compiled core), ``"python"`` (the pure-Python reference) or None
    (``$TOKENIZER_ENGINE``, else native when available). Both give identical ids. ``cache_size`` and
    ``unigram_word_cache`` default to :mod:`app.engine.defaults` (see :class:`~app.engine.loaders.LoadOptions`).
    ``artifact_cache`` (:data:`CacheArg`) is used by the first load only and is not part of the memo key: ids are
    the same with or without it.

    Raises :class:`~app.engine.errors.UnknownTokenizerError` (listing the known names) for an unknown name and
    :class:`~app.engine.errors.ArtifactError` if its artifact is missing or fails verification, ``ValueError``
    for an unknown backend.
    """
    store = get_store(store_dir)
    canonical = store.resolve(name)
    resolved = resolve_backend(backend)
    if cache_size is None:
        cache_size = default_cache_size()
    if unigram_word_cache is None:  # resolved like the cache size, so the default and its explicit value share one
        unigram_word_cache = defaults.unigram_word_cache()
    key = (store.directory, canonical, resolved, cache_size, unigram_word_cache)
    tokenizer = _tokenizers.get(key)
    if tokenizer is not None:
        return tokenizer
    with _lock:
        tokenizer = _tokenizers.get(key)
        if tokenizer is None:
            tokenizer = _tokenizers[key] = load_encoding(store.spec(canonical), backend=resolved, cache_size=cache_size,
                                                  unigram_word_cache=unigram_word_cache,
                                                  artifact_cache=artifact_cache)
        return tokenizer


def list_tokenizers(store_dir: Path | str | None = None) -> list[str]:
    """Canonical tokenizer names of the store, in manifest order."""
    return get_store(store_dir).names()


def load_all(store_dir: Path | str | None = None, names: Iterable[str] | None = None, *,
             backend: str | None = None, cache_size: int | None = None,
             unigram_word_cache: int | None = None, artifact_cache: CacheArg = None) -> dict[str, Tokenizer]:
    """Load and verify the tokenizers of the store — every one, or only ``names`` (names or aliases), keyed by
    canonical name in manifest order; raises on the first failure (``UnknownTokenizerError`` for a name the store
    does not hold)."""
    store = get_store(store_dir)
    wanted = None if names is None else {store.resolve(n) for n in names}
    cache = open_artifact_cache(artifact_cache)  # resolved once for every load
    return {name: get_tokenizer(name, store.directory, backend=backend, cache_size=cache_size,
                               unigram_word_cache=unigram_word_cache,
                               artifact_cache=cache if cache is not None else defaults.ARTIFACT_CACHE_OFF)
            for name in store.names() if wanted is None or name in wanted}


def pickle_reference(tokenizer: Tokenizer) -> tuple[Callable[..., Tokenizer], tuple[str, str | None, str, str | None]]:
    """How a store-loaded tokenizer pickles: a reference (name, store, sha256, backend), never the ranks. Registered
    for :class:`~app.engine.tokenizer.Tokenizer` with :func:`copyreg.pickle` below, where ``Tokenizer.__reduce__``
    finds it (the base class imports nothing above it).

    Unpickling calls :func:`restore_tokenizer`, which loads (and verifies) the encoding by name from the same store
    on the other side: the bundled store of *that* installation when it came from a bundled store, else the same
    directory path. Raises ``TypeError`` for an encoding not loaded from a store (nothing to reconstruct it from).
    """
    spec = tokenizer.spec
    if spec is None:
        raise TypeError(f"cannot pickle {tokenizer!r}: it was not loaded from a tokenizer store (no name to reload it "
                        "by)")
    artifact = spec.artifact_path.resolve()
    bundled = bundled_store_dir()
    if artifact.is_relative_to(bundled):
        store: str | None = None
    else:
        store = str(next((p for p in artifact.parents if (p / MANIFEST_FILE).is_file()), artifact.parent))
    backend = tokenizer.backend if tokenizer.backend == "native" or spec.kind == "byte_bpe" else None
    return restore_tokenizer, (spec.name, store, spec.sha256, backend)


def restore_tokenizer(name: str, store_dir: str | None, sha256: str, backend: str | None) -> Tokenizer:
    """The unpickled encoding: ``name`` from ``store_dir`` (None: the bundled store), through :func:`get_tokenizer`
    (loaded once per process, sha256-verified). Raises :class:`ArtifactError` when that store's artifact for
    ``name`` is not the one that was pickled (another sha256), rather than silently tokenizing differently."""
    tokenizer = get_tokenizer(name, bundled_store_dir() if store_dir is None else store_dir, backend=backend)
    if tokenizer.spec is not None and tokenizer.spec.sha256 != sha256:
        raise ArtifactError(str(tokenizer.spec.artifact_path), f"the pickled encoding {name!r} was built from another "
                            "artifact", expected=sha256, actual=tokenizer.spec.sha256)
    return tokenizer


#: The old name, which pickles made before issue 25's renaming refer to.
restore_encoding = restore_tokenizer  # old name kept


def reset() -> None:
    """Forget every memoised store and encoding (for tests and for reloading a changed store)."""
    with _lock:
        _stores.clear()
        _tokenizers.clear()
        _artifact_caches.clear()


copyreg.pickle(Tokenizer, pickle_reference)  # type: ignore[type-abstract]  # found by Tokenizer.__reduce__
