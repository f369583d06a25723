"""One loader per artifact format, picked from :data:`LOADERS` by a manifest entry's ``format``.

A loader turns a verified :class:`~app.engine.store.TokenizerSpec` into a :class:`~app.engine.tokenizer.Tokenizer`.
Each reads the artifact through :meth:`TokenizerSpec.read_artifact` (sha256 of the published bytes checked on every
load) and raises :class:`~app.engine.errors.ArtifactError` naming the file for anything it cannot load exactly —
an unknown component included, never a silent approximation. Family modules are imported on first use, so a
process that serves only tiktoken-format tokenizers never imports the pipeline code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .artifact_cache import ArtifactCache
from .errors import ArtifactError, EngineError
from .store import TokenizerSpec
from .tokenizer import Tokenizer

#: What a loader may raise on a malformed artifact that its own checks did not name (the last line of defence:
#: every such failure becomes an :class:`ArtifactError`, one line in the CLI, a refusal to start in ``serve``).
_MALFORMED = (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError, MemoryError)


@dataclass(frozen=True)
class LoadOptions:
    """Settings a loader needs, passed down from the caller (never re-read from the environment here).

    ``cache_size``: pre-token cache entries (None: ``$TOKENIZER_CACHE_SIZE`` or the default);
    ``backend``: ``"native"``, ``"python"`` or None (see :func:`app.engine.native.resolve_backend`);
    ``unigram_word_cache``: slots of the compiled word cache of SentencePiece Unigram models (None:
    ``$TOKENIZER_UNIGRAM_WORD_CACHE`` or 0; other families ignore it); ``artifact_cache``: where the expensive
    derivations of an artifact are stored compiled and mapped from (:mod:`app.engine.artifact_cache`; None: derive
    everything on every load). Defaults: :mod:`app.engine.defaults`."""

    cache_size: int | None = None
    backend: str | None = None
    unigram_word_cache: int | None = None
    artifact_cache: ArtifactCache | None = None


Loader = Callable[[TokenizerSpec, LoadOptions], Tokenizer]


def _tiktoken(spec: TokenizerSpec, options: LoadOptions) -> Tokenizer:
    from .encoding import RankBPETokenizer

    return RankBPETokenizer.from_spec(spec, cache_size=options.cache_size, backend=options.backend,
                                      artifact_cache=options.artifact_cache)


def _char_bpe(spec: TokenizerSpec, options: LoadOptions) -> Tokenizer:
    from .char_bpe import CharBPEEncoding

    return CharBPEEncoding.from_spec(spec, cache_size=options.cache_size)


def _hf_json(spec: TokenizerSpec, options: LoadOptions) -> Tokenizer:
    from .pipeline.hf_json import load_hf_json

    return load_hf_json(spec, cache_size=options.cache_size, backend=options.backend,
                        artifact_cache=options.artifact_cache)


def _sentencepiece(spec: TokenizerSpec, options: LoadOptions) -> Tokenizer:
    from .pipeline.sentencepiece import load_sentencepiece

    return load_sentencepiece(spec, cache_size=options.cache_size, backend=options.backend,
                              word_cache=options.unigram_word_cache, artifact_cache=options.artifact_cache)


def _gguf(spec: TokenizerSpec, options: LoadOptions) -> Tokenizer:
    from .pipeline.gguf import load_gguf

    return load_gguf(spec, cache_size=options.cache_size, backend=options.backend,
                     word_cache=options.unigram_word_cache, artifact_cache=options.artifact_cache)


def _tekken(spec: TokenizerSpec, options: LoadOptions) -> Tokenizer:
    from .tekken import load_tekken

    return load_tekken(spec, cache_size=options.cache_size, backend=options.backend,
                       artifact_cache=options.artifact_cache)


#: format -> loader. Every format of :data:`app.engine.store.FORMATS` has exactly one entry (tested).
LOADERS: dict[str, Loader] = {
    "tiktoken": _tiktoken,
    "char_bpe": _char_bpe,
    "hf_json": _hf_json,
    "sentencepiece": _sentencepiece,
    "gguf": _gguf,
    "tekken": _tekken,
}


def load_tokenizer(spec: TokenizerSpec, options: LoadOptions | None = None) -> Tokenizer:
    """Load the tokenizer ``spec`` describes with the loader of its format (not memoised; see
    :func:`app.engine.get_tokenizer`). Raises :class:`~app.engine.errors.ArtifactError` (also for any unexpected
    ``ValueError``, ``RecursionError`` … of a malformed file)."""
    try:
        return LOADERS[spec.format](spec, options or LoadOptions())
    except EngineError:
        raise
    except _MALFORMED as exc:
        raise ArtifactError(str(spec.artifact_path), f"cannot load: {type(exc).__name__}: {str(exc)[:200]}") from None

