"""``python -m app cache build|verify``: fill and check the compiled artifact cache (:mod:`app.engine.artifact_cache`).

``cache build`` loads every tokenizer of the configured store (``TOKENIZER_STORE``, ``--store``; the names of
``TOKENIZER_TOKENIZERS`` or ``--tokenizers`` only) through the cache directory (``TOKENIZER_ARTIFACT_CACHE``,
``--dir``), so every compiled file exists afterwards; every artifact's sha256 is checked on the way, as ``verify``
does. A file already there is verified and kept. It exits 2 with one line when the directory cannot be written or an
artifact fails (an image build or an init container then fails, as ``verify`` makes it fail).

``cache verify`` changes nothing: it verifies every file of the directory (digest, key, layout) and loads every
tokenizer with a read-only view of the cache; exit 1 when a file is damaged or a tokenizer's compiled files are
missing (``cache build`` fixes both), 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from app.core.config import Settings
from app.engine.artifact_cache import ArtifactCache
from app.engine.loaders import LoadOptions, load_tokenizer
from app.engine.registry import get_store
from app.engine.store import Store, TokenizerSpec, bundled_store_dir
from app.engine.training.store_entry import progress_bar, progress_enabled

from ._io import CliError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("cache", help="build or verify the compiled artifact cache (TOKENIZER_ARTIFACT_CACHE)")
    actions = p.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    for name, handler, text in (
        ("build", cmd_build, "compile every tokenizer of the store into the cache directory"),
        ("verify", cmd_verify, "verify every file of the cache directory and that no tokenizer lacks one"),
    ):
        q = actions.add_parser(name, help=text)
        q.add_argument("--dir", help="cache directory (TOKENIZER_ARTIFACT_CACHE, default "
                       "$XDG_CACHE_HOME/tokenizer-service/compiled)")
        q.add_argument("--store", help="tokenizer store directory (TOKENIZER_STORE, default: bundled store)")
        q.add_argument("--tokenizers", help="comma-separated names (TOKENIZER_TOKENIZERS, default: all)")
        q.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
        q.set_defaults(handler=handler)


def _setup(args: argparse.Namespace) -> tuple[Path, Store, list[TokenizerSpec], Settings]:
    settings = Settings.from_env(store=Path(args.store).expanduser() if args.store else None,
                                 tokenizers=args.tokenizers)
    directory = Path(args.dir).expanduser().absolute() if args.dir else settings.artifact_cache_dir()
    if directory is None:
        raise CliError("the artifact cache is off (TOKENIZER_ARTIFACT_CACHE=off); pass --dir DIR")
    store = get_store(settings.store or bundled_store_dir(), override=settings.store_override)
    names = settings.tokenizer_names()
    wanted = None if names is None else {store.resolve(n) for n in names}  # UnknownTokenizerError: exit 2
    specs = [store.spec(n) for n in store.names() if wanted is None or n in wanted]
    return directory, store, specs, settings


def _load_all(specs: list[TokenizerSpec], cache: ArtifactCache, settings: Settings, quiet: bool,
              desc: str) -> list[tuple[str, float, int]]:
    """Load each spec through ``cache``; per tokenizer (name, seconds, files missing from the cache)."""
    options = LoadOptions(cache_size=settings.cache_size, backend=settings.engine,
                          unigram_word_cache=settings.unigram_word_cache, artifact_cache=cache)
    bar = progress_bar(progress_enabled(quiet), len(specs), desc, "tok")
    out = []
    try:
        for spec in specs:
            if bar is not None:
                bar.set_postfix_str(spec.name)
            before = cache.misses + cache.rebuilt
            start = time.perf_counter()
            load_tokenizer(spec, options)  # ArtifactError (one line, exit 2) for a bad artifact
            out.append((spec.name, time.perf_counter() - start, cache.misses + cache.rebuilt - before))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return out


def _size(paths: list[Path]) -> float:
    return sum(p.stat().st_size for p in paths) / 2**20


def cmd_build(args: argparse.Namespace) -> int:
    directory, store, specs, settings = _setup(args)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create the cache directory {directory}: {exc.strerror or exc}") from None
    cache = ArtifactCache(directory)
    cache.clean_temp()
    start = time.perf_counter()
    _load_all(specs, cache, settings, args.quiet, "cache build")
    if cache.write_errors:
        raise CliError(f"cannot write the artifact cache: {cache.write_error}")
    files = cache.files()
    print(f"cache {directory}: {len(specs)} tokenizers of {store.directory}, {cache.misses + cache.rebuilt} files "
          f"built ({cache.rebuilt} replaced damaged ones), {cache.hits} reused; {len(files)} files, "
          f"{_size(files):.1f} MiB ({time.perf_counter() - start:.1f}s)")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    directory, store, specs, settings = _setup(args)
    if not directory.is_dir():
        raise CliError(f"{directory}: no such cache directory (run `python -m app cache build`)")
    cache = ArtifactCache(directory, read_only=True)
    bad = 0
    files = cache.files()
    stale = len(cache.all_files()) - len(files)
    for path in files:
        reason = cache.check(path)
        if reason is not None:
            bad += 1
            print(f"FAIL {path.name}: {reason}")
    loads = _load_all(specs, cache, settings, args.quiet, "cache verify")
    missing = [(name, n) for name, _, n in loads if n]
    for name, n in missing:
        print(f"MISSING {name}: {n} compiled file(s) absent or unusable")
    note = f" ({stale} files of other format versions ignored)" if stale else ""
    print(f"cache {directory}: {len(files) - bad} of {len(files)} files verified{note}; "
          f"{len(specs) - len(missing)} of {len(specs)} tokenizers of {store.directory} load from it alone")
    sys.stdout.flush()
    return 1 if bad or missing else 0
