"""The service's per-process state (settings, verified encodings, model table, thread limiters) and its lookup.

:meth:`ServiceState.load` is the readiness gate: it loads and sha256-verifies every artifact of the store
(``TOKENIZER_LOAD=lazy``: verifies them, and :class:`TokenizerTable` loads each on first use) and validates the model
table, raising on the first problem (:class:`~app.engine.errors.ArtifactError` or
:class:`~app.engine.errors.ManifestError` naming the file, :class:`~app.core.model_table.ModelTableError` naming the
file and entry). The app factory runs it at start-up; ``serve`` runs it before starting uvicorn so that a broken
store stops the process with a clear message.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import anyio
from fastapi import Request

from app.core.config import Settings
from app.core.model_table import MODELS_FILE, ModelInfo, ModelTable, ModelTableError
from app.core.priced_models import NoPublicTokenizer, priced_model
from app.engine import Store, Tokenizer, get_store, get_tokenizer, load_all
from app.engine.chat import ChatFramings, ChatSpecError
from app.engine.defaults import ARTIFACT_CACHE_OFF
from app.engine.errors import UnknownTokenizerError
from app.engine.registry import open_artifact_cache
from app.engine.store import bundled_store_dir
from app.pricing.data import load_price_data
from app.pricing.pricer import Pricer

from .batching import BatchThreads
from .errors import ApiError

#: The text :meth:`ServiceState.warm` counts: letters, digits, punctuation, spaces and a non-ASCII word.
WARM_TEXT = "Warm-up: 12 tokens, déjà vu!\n"


class TokenizerTable(Mapping[str, Tokenizer]):
    """The tokenizers a process serves, by canonical name in manifest order.

    Eager (``TOKENIZER_LOAD=eager``): every one loaded up front. Lazy: a tokenizer is loaded by its first lookup
    (``table[name]``, ``get``, ``values()``), thread-safe (the engine's registry loads each once, under its lock);
    ``name in table`` and iteration never load. :meth:`loaded` is what is loaded so far."""

    def __init__(self, names: Iterable[str], load: Callable[[str], Tokenizer],
                 on_load: Callable[[Tokenizer], None] | None = None) -> None:
        self._names = list(names)
        self._known = frozenset(self._names)
        self._load = load
        self._loaded: dict[str, Tokenizer] = {}
        self._lock = threading.Lock()
        self.on_load = on_load

    @classmethod
    def of(cls, tokenizers: Mapping[str, Tokenizer]) -> TokenizerTable:
        """A table of tokenizers already loaded."""
        table = cls(tokenizers, tokenizers.__getitem__)
        table._loaded.update(tokenizers)
        return table

    def __getitem__(self, name: str) -> Tokenizer:
        tokenizer = self._loaded.get(name)
        if tokenizer is not None:
            return tokenizer
        if name not in self._known:
            raise KeyError(name)
        tokenizer = self._load(name)
        with self._lock:
            first = name not in self._loaded
            self._loaded[name] = tokenizer
        if first and self.on_load is not None:
            self.on_load(tokenizer)
        return tokenizer

    def __contains__(self, name: object) -> bool:
        return name in self._known

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def loaded(self) -> list[Tokenizer]:
        """The tokenizers loaded so far, in manifest order (all of them when eager)."""
        return [self._loaded[n] for n in self._names if n in self._loaded]


@dataclass
class ServiceState:
    """Everything a request handler needs. Built once per worker process; read-only while serving."""

    settings: Settings
    store: Store
    tokenizers: TokenizerTable
    models: ModelTable
    manifest_models: dict[str, str]
    chat: ChatFramings = field(default_factory=lambda: ChatFramings({}))
    prices: Pricer | None = None
    ready: bool = False
    limiter: anyio.CapacityLimiter | None = None
    bulk_limiter: anyio.CapacityLimiter | None = None
    #: Threads of large ``texts`` batches (:mod:`app.api.batching`; the app sets the configured limit at start-up).
    batch_threads: BatchThreads = field(default_factory=lambda: BatchThreads(1))
    _lookalikes: dict[str, Callable[[str], int]] = field(default_factory=dict)
    _manifest_infos: dict[str, ModelInfo] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, settings: Settings) -> ServiceState:
        """Load and verify every tokenizer of the store and the model table (see the module docstring)."""
        store = get_store(settings.store or bundled_store_dir(), override=settings.store_override)
        artifact_cache = settings.artifact_cache_dir() or ARTIFACT_CACHE_OFF
        if settings.load == "lazy":
            tokenizers = cls._verified(store, settings, artifact_cache)
        else:
            tokenizers = TokenizerTable.of(load_all(
                store.directory, settings.tokenizer_names(), backend=settings.engine, cache_size=settings.cache_size,
                unigram_word_cache=settings.unigram_word_cache, artifact_cache=artifact_cache))
        models_path = settings.models_file
        framings_dir = store.directory
        if models_path is None:  # the added store's table, else the bundled one (with the chat templates it names)
            framings_dir = next((d for d in (store.directory, bundled_store_dir()) if (d / MODELS_FILE).is_file()),
                                store.directory)
            models_path = framings_dir / MODELS_FILE if (framings_dir / MODELS_FILE).is_file() else None
        models = ModelTable.load(Path(models_path)) if models_path is not None else ModelTable.empty()
        for key, info in models.entries().items():
            try:
                store.resolve(info.tokenizer)
            except UnknownTokenizerError:
                raise ModelTableError(
                    f"{models.path}: model {key!r} names tokenizer {info.tokenizer!r}, which the store "
                    f"{store.directory} does not hold (known: {', '.join(store.known_names())})"
                ) from None
        if settings.tokenizers is not None:  # serve only the models of the tokenizers this process loads
            models = models.only(lambda info: store.resolve(info.tokenizer) in tokenizers)
        manifest_models = {m: spec.name for spec in store for m in spec.models if spec.name in tokenizers}
        try:
            chat = ChatFramings.from_store(framings_dir)
            for key, info in models.entries().items():
                if info.chat is not None:
                    chat.check(info.chat, f"{models.path}: model {key!r}")
        except ChatSpecError as exc:
            raise ModelTableError(str(exc)) from None
        prices = Pricer(load_price_data(settings.price_data_file))  # PriceDataError names the file
        return cls(settings=settings, store=store, tokenizers=tokenizers, models=models,
                   manifest_models=manifest_models, chat=chat, prices=prices)

    @staticmethod
    def _verified(store: Store, settings: Settings, artifact_cache: Path | str) -> TokenizerTable:
        """``TOKENIZER_LOAD=lazy``: every configured artifact's sha256 checked now (raises ArtifactError naming the
        file), its tokenizer loaded on first use (verified again then, as every load is). Checked through the
        compiled artifact cache (:meth:`~app.engine.store.TokenizerSpec.verify_artifact`): an ``xz`` artifact whose
        compressed bytes the cache has seen decompress to the published bytes is hashed, not decompressed, and one
        decompressed now leaves that record for its first use."""
        names = settings.tokenizer_names()
        wanted = None if names is None else {store.resolve(n) for n in names}
        chosen = [name for name in store.names() if wanted is None or name in wanted]
        cache = open_artifact_cache(artifact_cache)
        for name in chosen:
            store.spec(name).verify_artifact(cache)

        def load(name: str) -> Tokenizer:
            return get_tokenizer(name, store.directory, backend=settings.engine, cache_size=settings.cache_size,
                                 unigram_word_cache=settings.unigram_word_cache, artifact_cache=artifact_cache)

        return TokenizerTable(chosen, load)

    def warm(self) -> None:
        """Run one short count through every loaded tokenizer, so that what a tokenizer builds on first use (lazy
        tables, compiled patterns, first-call paths) is built at start-up rather than by the first request. Lazy:
        only those already loaded."""
        for tokenizer in self.tokenizers.loaded():
            tokenizer.count(WARM_TEXT)

    def commit_caches(self) -> int:
        """Fault in this process's pre-token cache memory of every loaded tokenizer, contents unchanged (see
        :meth:`~app.engine.tokenizer.Tokenizer.commit_cache`); returns the bytes covered. Once per serving process,
        after any fork: the first requests then pay no page faults for it (a fresh 2 MiB page is 0.3-0.5 ms)."""
        return sum(tokenizer.commit_cache() for tokenizer in self.tokenizers.loaded())

    # ------------------------------------------------------------------ resolution

    def tokenizer(self, name: str) -> Tokenizer:
        """The tokenizer for a name or alias; raises :class:`UnknownTokenizerError` (-> 422), also for a tokenizer
        of the store that this process does not load (``TOKENIZER_TOKENIZERS``)."""
        canonical = self.store.resolve(name)
        tokenizer = self.tokenizers.get(canonical)
        if tokenizer is None:
            raise UnknownTokenizerError(name, sorted(self.tokenizers))
        return tokenizer

    def model(self, name: str) -> ModelInfo:
        """The model table's entry, else an entry from a manifest ``models`` list (priced as the price data's OpenAI
        model of that name where there is one), else a model only the price data knows; raises ApiError 422."""
        info = self.models.resolve(name) if name not in self.manifest_models else self.models.get(name)
        if info is not None:
            return info
        tokenizer = self.manifest_models.get(name)
        if tokenizer is None:
            derived = self._priced_model(name)
            if derived is not None:
                return derived
            known = sorted({*self.models.names(), *self.manifest_models})
            raise ApiError(422, "unknown_model", f"unknown model {name!r}; known models: {', '.join(known)}",
                           {"name": name, "known": known})
        return self._manifest_model(name, tokenizer)

    def _manifest_model(self, name: str, tokenizer: str) -> ModelInfo:
        """A bare entry for a manifest's model name; an OpenAI model of the price data with the same encoding gets
        its provider and context window from the price data (so it is priced), memoised."""
        info = self._manifest_infos.get(name)
        if info is None:
            info = ModelInfo(name=name, tokenizer=tokenizer)
            try:
                derived = priced_model(self.prices, name)
            except NoPublicTokenizer:
                derived = None
            if derived is not None and self._canonical(derived.tokenizer) == self._canonical(tokenizer):
                info = replace(derived, tokenizer=tokenizer)
            self._manifest_infos[name] = info
        return info

    def _canonical(self, name: str) -> str | None:
        try:
            return self.store.resolve(name)
        except UnknownTokenizerError:
            return None

    def _priced_model(self, name: str) -> ModelInfo | None:
        """A model the table lacks (:func:`app.core.priced_models.priced_model`): an OpenAI model of the price data
        with its tiktoken encoding; 422 ``no_public_tokenizer`` (details name the field ``model`` and the provider's
        counting endpoint) for another priced model or a name with a provider's prefix (Claude, Gemini), 422
        ``unknown_tokenizer`` for an encoding this process does not load. None if it is unknown."""
        try:
            info = priced_model(self.prices, name)
        except NoPublicTokenizer as exc:
            raise ApiError(422, "no_public_tokenizer", str(exc), exc.details()) from None
        if info is None:
            return None
        try:
            canonical: str | None = self.store.resolve(info.tokenizer)
        except UnknownTokenizerError:
            canonical = None
        if canonical not in self.tokenizers:
            raise ApiError(422, "unknown_tokenizer", f"model {name!r} uses {info.tokenizer} (tiktoken's model "
                           f"table), which this service does not load", {"name": name, "tokenizer": info.tokenizer})
        return info

    def models_of(self, canonical: str) -> list[str]:
        """Model names (table and manifest) that resolve to the tokenizer ``canonical``."""
        names = {m for m, t in self.manifest_models.items() if t == canonical}
        names |= {m for m, info in self.models.entries().items() if self.store.resolve(info.tokenizer) == canonical}
        return sorted(names)

    def lookalike_counter(self, tokenizer: Tokenizer) -> Callable[[str], int]:
        """A function counting non-overlapping occurrences of ``tokenizer``'s special-token strings in a text.

        When every special token looks like ``<|name|>`` (all bundled tokenizers), candidates ``<|...|>`` are found
        with one simple regex and checked against the set of names, which stays fast on texts full of markers;
        otherwise an alternation of the names, longest first.
        """
        with self._lock:
            counter = self._lookalikes.get(tokenizer.name)
            if counter is None:
                counter = self._lookalikes[tokenizer.name] = _lookalike_counter(list(tokenizer.special_tokens))
            return counter


_MARKER = re.compile(r"<\|[^|]+\|>")


def _lookalike_counter(names: list[str]) -> Callable[[str], int]:
    if not names:
        return lambda text: 0
    if all(_MARKER.fullmatch(n) for n in names):
        known = frozenset(names)
        candidates = re.compile(r"<\|[^|]{1,%d}\|>" % max(map(len, names)))  # noqa: UP031
        return lambda text: sum(1 for m in candidates.finditer(text) if m.group() in known) if "<|" in text else 0
    alternation = re.compile("|".join(map(re.escape, sorted(names, key=len, reverse=True))))
    return lambda text: sum(1 for _ in alternation.finditer(text))


def get_service(request: Request) -> ServiceState:
    """The state of the app serving ``request``; 503 while it is still starting or already stopping."""
    svc: ServiceState | None = getattr(request.app.state, "service", None)
    if svc is None or not svc.ready:
        raise ApiError(503, "not_ready", "the service is not ready")
    return svc
