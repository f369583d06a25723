"""The library's defaults from the environment: the one engine module that reads ``os.environ``.

Each function reads its variable when a caller leaves the matching argument unset (``backend=None``,
``cache_size=None``, ``store_dir=None`` …), so an explicit argument always wins and a process that sets a variable
before using the library (``serve`` exports its settings to its workers) is obeyed. The service itself passes its
:class:`app.core.config.Settings` down as arguments; these defaults serve the library used on its own (and the CLI).

- ``TOKENIZER_ENGINE`` (:func:`engine`): ``native``, ``python`` or unset (native when the compiled core is built);
- ``TOKENIZER_NATIVE_DISABLE`` (:func:`native_disabled`): anything but empty or ``0`` never imports the C cores;
- ``TOKENIZER_CACHE_SIZE`` (:func:`cache_size`): pre-token cache entries per tokenizer;
- ``TOKENIZER_UNIGRAM_WORD_CACHE`` (:func:`unigram_word_cache`): compiled Unigram word-cache slots (0: off);
- ``TOKENIZER_STORE`` (:func:`store_dir`): a store added to the bundled one;
- ``TOKENIZER_STORE_OVERRIDE`` (:func:`store_override`): the added store may replace bundled names;
- ``TOKENIZER_ARTIFACT_CACHE`` (:func:`artifact_cache_dir`): the compiled artifact cache's directory, or ``off``.

The same variables are fields of the service's settings (``docs/configuration.md``).
"""

from __future__ import annotations

import os
from pathlib import Path

ENGINE_ENV = "TOKENIZER_ENGINE"
DISABLE_ENV = "TOKENIZER_NATIVE_DISABLE"
CACHE_SIZE_ENV = "TOKENIZER_CACHE_SIZE"
WORD_CACHE_ENV = "TOKENIZER_UNIGRAM_WORD_CACHE"
STORE_ENV = "TOKENIZER_STORE"
OVERRIDE_ENV = "TOKENIZER_STORE_OVERRIDE"
ARTIFACT_CACHE_ENV = "TOKENIZER_ARTIFACT_CACHE"
#: The value of ``TOKENIZER_ARTIFACT_CACHE`` that disables the compiled artifact cache.
ARTIFACT_CACHE_OFF = "off"

#: Pre-token cache entries per tokenizer when ``TOKENIZER_CACHE_SIZE`` is unset.
DEFAULT_CACHE_SIZE = 16_384


def _raw(name: str) -> str:
    return os.environ.get(name, "").strip()


def engine() -> str:
    """``$TOKENIZER_ENGINE`` stripped and lower-cased (``""`` when unset); validated by
    :meth:`app.engine.native.OptionalExtension.resolve_backend`, which names the variable in its ``ValueError``."""
    return _raw(ENGINE_ENV).lower()


def native_disabled() -> bool:
    """``$TOKENIZER_NATIVE_DISABLE`` is set to anything but empty or ``0``."""
    return _raw(DISABLE_ENV) not in ("", "0")


def _count(name: str, default: int) -> int:
    raw = _raw(name)
    value = int(raw) if raw else default
    if value < 0:
        raise ValueError(f"{name} must be >= 0, not {value}")
    return value


def cache_size() -> int:
    """``$TOKENIZER_CACHE_SIZE`` (an integer >= 0), else :data:`DEFAULT_CACHE_SIZE`. Raises ``ValueError``."""
    return _count(CACHE_SIZE_ENV, DEFAULT_CACHE_SIZE)


def unigram_word_cache() -> int:
    """``$TOKENIZER_UNIGRAM_WORD_CACHE`` (an integer >= 0), else 0 (off). Raises ``ValueError``."""
    return _count(WORD_CACHE_ENV, 0)


def store_dir() -> Path | None:
    """``$TOKENIZER_STORE`` as an absolute path, or None when unset or empty."""
    raw = _raw(STORE_ENV)
    return Path(raw).expanduser().resolve() if raw else None


def store_override() -> bool:
    """``$TOKENIZER_STORE_OVERRIDE`` is ``1``, ``true``, ``yes`` or ``on`` (any case)."""
    return _raw(OVERRIDE_ENV).lower() in ("1", "true", "yes", "on")


def default_artifact_cache_dir() -> Path:
    """Where compiled artifacts go by default: ``$XDG_CACHE_HOME/tokenizer-service/compiled``, else
    ``~/.cache/tokenizer-service/compiled``."""
    base = _raw("XDG_CACHE_HOME")
    root = Path(base).expanduser() if base else Path.home() / ".cache"
    return root / "tokenizer-service" / "compiled"


def resolve_artifact_cache(value: str | None) -> Path | None:
    """The directory a ``TOKENIZER_ARTIFACT_CACHE`` value names: None for ``off`` (any case), the default
    (:func:`default_artifact_cache_dir`) for None or empty, else the path (``~`` expanded, made absolute)."""
    raw = (value or "").strip()
    if raw.lower() == ARTIFACT_CACHE_OFF:
        return None
    return Path(raw).expanduser().absolute() if raw else default_artifact_cache_dir()


def artifact_cache_dir() -> Path | None:
    """``$TOKENIZER_ARTIFACT_CACHE`` resolved by :func:`resolve_artifact_cache` (None: the cache is off)."""
    return resolve_artifact_cache(_raw(ARTIFACT_CACHE_ENV))
