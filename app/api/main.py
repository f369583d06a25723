"""The app factory: ``create_app(settings)`` -> FastAPI application (uvicorn: ``app.api.main:create_app``).

Start-up (the lifespan) loads and verifies every artifact and the model table in a worker thread before the app
reports ready; a failure is logged with the file it names and aborts start-up. Before readiness it also warms what a
first request would otherwise pay for: one short count per tokenizer, the pages of every pre-token cache (faulted in
by this process, see :meth:`~app.engine.tokenizer.Tokenizer.commit_cache`), the routes' metric labels, the metric
series of ``/count`` and ``/encode`` per tokenizer, and a rehearsal of those requests that no metric counts
(:mod:`app.api.rehearsal`), so the first request after start-up pays for none of that. The
loaded state is then frozen out of the garbage collector (``gc.freeze``), which removes full-collection pauses from
request latency.
Shutdown marks the app not ready and removes this worker's live gauges from the metrics directory.

The gateway (:mod:`app.api.middleware`) is the outermost layer of every HTTP request: :class:`ServiceApp` hands
HTTP scopes to it first, and it calls the FastAPI stack (error middleware, routing, handlers) only for requests it
does not answer itself, so ``POST /encode``, ``/count`` and ``/decode`` pay for none of those layers.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from app.core.config import Settings
from app.engine import Tokenizer

from . import metrics
from .batching import BatchThreads, batch_thread_limit
from .deps import ServiceState
from .errors import install_handlers
from .middleware import GatewayMiddleware
from .openapi import build as build_openapi
from .rehearsal import rehearse
from .route_labels import RouteLabels
from .routes import api_router, pages

log = logging.getLogger("app.api")

#: The endpoints whose per-tokenizer metric series exist from start-up (the ones a sidecar's traffic is made of).
WARM_ENDPOINTS = ("/count", "/encode")

DESCRIPTION = """Exact tokenization (ids identical to tiktoken) for GPT-2, cl100k_base, o200k_base, o200k_harmony and
Llama 3.

* Text fields are **always ordinary text**: a special token's string inside text is encoded as plain characters.
  Special tokens enter only by name, through `special_tokens.prefix/suffix` or `parts[].special`.
* Every error has the shape `{"error": {"type", "message", "details"}}`; bad input is always a 4xx.
* `model` resolves through the model table (OpenAI models also by tiktoken's model rules); responses then carry
  the context window, whether the text fits, and the price of the counted prompt from genai-prices, broken down,
  as exact decimal strings (`POST /price` prices a request from its usage).
* `messages` (chat conversations) on `/count` and `/encode` are framed as the model frames them (OpenAI's published
  counting rules, Harmony for gpt-oss, the model's own chat template); `GET /models` says which models support it.
  `/tokenize`, `/detokenize` (vLLM) and `/tei/{model}/tokenize`, `/tei/{model}/decode` (TEI) answer in those shapes.
* Existing clients count unchanged: `/v1/responses/input_tokens` (OpenAI SDK), `/v1/messages/count_tokens`
  (Anthropic SDK), llama.cpp's `/tokenize` (`content`), `/detokenize`, `/apply-template`, vLLM's `/tokenizer_info`
  and LiteLLM's `/utils/token_counter`; each route's description states its differences from the original server
  (docs/compatibility.md has the table).
"""


def _configure_logging(level: str) -> None:
    logger = logging.getLogger("app")
    logger.setLevel(level.upper() if level.lower() != "trace" else "DEBUG")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False


class ServiceApp(FastAPI):
    """FastAPI with :class:`GatewayMiddleware` in front of the whole stack (see the module docstring)."""

    gateway: GatewayMiddleware

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope["app"] = self
            await self.gateway(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def stack(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The FastAPI application behind the gateway."""
        await super().__call__(scope, receive, send)


def create_app(settings: Settings | None = None, state: ServiceState | None = None) -> FastAPI:
    """Build the application. ``settings`` default: :meth:`Settings.from_env`. ``state``: a state already loaded
    with these settings (:meth:`ServiceState.load`; ``serve`` loads it once before forking its workers), which the
    lifespan then uses instead of loading its own; it must not have been started by another app's lifespan."""
    settings = settings or Settings.from_env()
    _configure_logging(settings.log_level)

    def _on_load(tokenizer: Tokenizer) -> None:
        tokenizer.commit_cache()
        metrics.set_info([tokenizer])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            svc = state if state is not None else await anyio.to_thread.run_sync(ServiceState.load, settings)
            await anyio.to_thread.run_sync(svc.warm)
            await anyio.to_thread.run_sync(svc.commit_caches)  # this process's pages (a forked worker: its own)
        except Exception as exc:
            log.error("cannot start: %s", exc)
            raise
        # What the first request would otherwise build before readiness: the metric label table of the routes and
        # the metric series of a successful /count and /encode per tokenizer (see docs/performance.md).
        if isinstance(app, ServiceApp):
            app.gateway.route_labels.templates()
        metrics.prepare_series(WARM_ENDPOINTS, svc.tokenizers)
        # The loaded vocabularies are large and live for the whole process: move them out of the collector's
        # reach, so full collections stay cheap instead of pausing every request for tens of milliseconds.
        gc.collect()
        gc.freeze()
        svc.limiter = anyio.CapacityLimiter(settings.threads)
        svc.bulk_limiter = anyio.CapacityLimiter(settings.bulk_threads)
        svc.batch_threads = BatchThreads(batch_thread_limit(settings.batch_threads))
        metrics.set_info(svc.tokenizers.loaded())
        svc.tokenizers.on_load = _on_load  # lazy: committed and published when loaded
        if svc.prices is not None:
            prov = svc.prices.data.provenance
            metrics.set_price_info(prov.as_dict())
            log.info("prices: %s, sha256 %s, date %s, latest price change %s (%d providers, %d models)",
                     prov.version, prov.sha256, prov.date or "-", prov.latest_price_change or "-", prov.providers,
                     prov.models)
        app.state.service = svc
        svc.ready = True
        sent, failed = await rehearse(app, svc.tokenizers.loaded(), settings.auth_token)
        if failed:
            log.warning("start-up rehearsal: %d of %d requests were not answered 200", failed, sent)
        if settings.load == "lazy":
            log.info("ready (lazy: each tokenizer is loaded on first use; every artifact verified): %s",
                     ", ".join(svc.tokenizers))
        else:
            log.info("ready: %s", ", ".join(f"{t.name} ({t.backend})" for t in svc.tokenizers.loaded()))
        flusher = asyncio.get_running_loop().create_task(metrics.flusher())
        try:
            yield
        finally:
            svc.ready = False
            flusher.cancel()
            with suppress(asyncio.CancelledError):
                await flusher
            metrics.flush()
            metrics.mark_process_dead()
            if state is None:
                # What this app loaded and froze goes back to the collector: a process that builds apps one after
                # another (tests, an embedding server) must not keep every earlier app's tokenizers for ever once
                # they become garbage. (A state passed in is the supervisor's: a worker that is shutting down
                # leaves it frozen, so no collection copies its shared pages.)
                gc.unfreeze()

    # No slash redirects: Starlette builds their Location from the request's Host header (an open redirect);
    # /encode/ is a 404 like any other unknown path.
    app = ServiceApp(title="tokenizer-service", version="0.1.0", description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None, redirect_slashes=False)  # offline docs: pages.install
    app.state.settings = settings
    app.include_router(api_router)
    pages.install(app)
    install_handlers(app)
    app.gateway = GatewayMiddleware(app.stack, settings, RouteLabels(app.routes))

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
