"""Service settings, read from environment variables with the ``TOKENIZER_`` prefix.

Every setting has a default, so the service starts with no configuration at all. A setting is the upper-cased
field name with the prefix: ``max_body_bytes`` is ``TOKENIZER_MAX_BODY_BYTES``. Booleans accept
``1/true/yes/on`` and ``0/false/no/off`` (any case). A malformed value raises :class:`SettingsError` naming the
variable, so a typo stops the process at start-up instead of being ignored.

The service reads its settings once (``create_app``, ``serve``; a worker's header limits in :mod:`app.api.protocol`)
and passes them down as arguments. ``TOKENIZER_STORE``, ``TOKENIZER_STORE_OVERRIDE``, ``TOKENIZER_ENGINE``,
``TOKENIZER_CACHE_SIZE``, ``TOKENIZER_UNIGRAM_WORD_CACHE`` and ``TOKENIZER_ARTIFACT_CACHE`` are also the
library's own defaults when it is used without the service (:mod:`app.engine.defaults`, the one engine module that
reads the environment); they are listed here so that one table documents every knob.
``docs/configuration.md`` is generated from :data:`FIELDS_DOC` by :func:`settings_table`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from app.engine.defaults import resolve_artifact_cache

PREFIX = "TOKENIZER_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class SettingsError(ValueError):
    """An environment variable with a value of the wrong type or out of range."""


def _doc(text: str, **kwargs: Any) -> Any:
    """A dataclass field with its documentation in the metadata."""
    return field(metadata={"doc": text}, **kwargs)


@dataclass(frozen=True)
class Settings:
    """Typed, validated service settings. Build with :meth:`from_env`; sizes in bytes, times in seconds."""

    store: Path | None = _doc(
        "A tokenizer store directory (manifest.json + artifacts) added to the bundled store: its tokenizers join the "
        "bundled ones; a name or alias the bundled store already has is refused at start-up unless it is the same "
        "artifact (same sha256) or `TOKENIZER_STORE_OVERRIDE` is true. Default: the bundled store alone.",
        default=None,
    )
    store_override: bool = _doc(
        "Let the added store (`TOKENIZER_STORE`) replace bundled tokenizers of the same name or alias (read by the "
        "engine).",
        default=False,
    )
    tokenizers: str | None = _doc(
        "Comma-separated tokenizer names or aliases this process loads and serves (a sidecar needs only its "
        "model's); readiness covers exactly those. Unset: every tokenizer of the store.",
        default=None,
    )
    models_file: Path | None = _doc(
        "Model table (model -> tokenizer, chat framing, context window, maximum output, whose price applies). "
        "Default: `models.json` in the store directory if it exists; a store without one resolves models through "
        "the manifest's `models` lists only.",
        default=None,
    )
    price_data_file: Path | None = _doc(
        "A newer genai-prices data file (the JSON list of providers genai-prices publishes as "
        "`prices/data.json`) to use instead of the snapshot bundled in the pinned genai-prices package; validated "
        "at start-up (a file that does not parse or whose prices do not compute stops the process). Never "
        "fetched: prices change only when the operator replaces this file. Unset: the bundled snapshot.",
        default=None,
    )
    default_model: str | None = _doc(
        "The model the compatibility routes (`/tokenize`, `/detokenize`, `/tokenizer_info`, "
        "`/v1/responses/input_tokens`, `/v1/messages/count_tokens`, llama.cpp's routes) use when a request names "
        "none, as a sidecar next to one inference server serves one model. Unset: `model` is required.",
        default=None,
    )
    allow_request_chat_template: bool = _doc(
        "Let vLLM-shaped `/tokenize` requests supply their own `chat_template` (rendered in the same Jinja sandbox "
        "as the bundled templates). Off: such a request is a 422.",
        default=False,
    )
    host: str = _doc("Address `serve` binds to.", default="127.0.0.1")
    port: int = _doc("TCP port `serve` binds to.", default=8000)
    uds: Path | None = _doc(
        "Unix domain socket path; when set, `serve` listens there instead of host:port.", default=None
    )
    workers: int = _doc(
        "Number of worker processes. Above 1, `serve` loads and verifies the store once, then forks the workers, "
        "which share the loaded tokenizers' memory (a worker that dies is replaced by a new fork), and Prometheus "
        "multiprocess mode is on.",
        default=1,
    )
    auth_token: str | None = _doc(
        "Bearer token required on every route (docs included) except /healthz, /readyz, the playground page / "
        "and its /static/ files (it asks for the token) and (unless `TOKENIZER_METRICS_AUTH`) /metrics. "
        "Unset: no authentication.",
        default=None,
    )
    metrics_auth: bool = _doc("Require the bearer token on /metrics too.", default=False)
    max_body_bytes: int = _doc(
        "Largest request body accepted, counted on the raw stream (413 above).", default=16 * 2**20
    )
    max_batch_size: int = _doc(
        "Most texts in one `texts` batch, id lists in one decode `batch`, `parts`, or chat `messages`.",
        default=1024
    )
    max_decode_ids: int = _doc("Most token ids in one /decode request (all lists together).", default=4 * 2**20)
    max_text_chars: int = _doc("Most characters in one request's texts together (413 above).", default=16 * 2**20)
    max_detail_tokens: int = _doc(
        "Most tokens in one request that returns per-token details (413 above, decided before that work): /encode "
        "with `return_tokens` or `return_offsets` (`messages` included), vLLM's /tokenize with `return_token_strs`, "
        "TEI's /tei/{model}/tokenize. Those add an object and a pair per token (about 36 bytes of JSON each), so "
        "this bounds the response (about 10 MB at the default) and the longest moment its construction holds the "
        "worker's GIL (about 0.1 s at the default on a 2-core machine). Ids alone are not limited by it.",
        default=2**18,
    )
    engine: str | None = _doc(
        "Tokenizer backend: `native` (compiled core) or `python` (reference engine). Unset: native when the compiled "
        "core is available (read by the engine, and by the trainer for its compiled counter and merge learner).",
        default=None,
    )
    cache_size: int = _doc(
        "Pre-token LRU entries per tokenizer (read by the engine; 0 disables the cache).", default=16384
    )
    unigram_word_cache: int = _doc(
        "Slots (128 bytes each) of the compiled word cache of SentencePiece Unigram models such as "
        "xlm-roberta-sentencepiece; 0: off (read by the engine; also off when `TOKENIZER_CACHE_SIZE` is 0). "
        "Ids are the same either way: a cached word's path is reused only where a rounding-error bound proves "
        "it is what the float32 search would find. It pays only once warm: about 0.85x on a cold pass, "
        "1.1-1.4x on one that is never cleared (`python -m bench.families.word_cache`).",
        default=0,
    )
    artifact_cache: str | None = _doc(
        "Directory of the compiled artifact cache: what is slow to derive from an artifact (rank tables, the proof "
        "that a merge list is rank BPE …) is stored there once, keyed by the artifact's sha256, and mapped into "
        "memory by later loads (shared by workers). Every file is verified on use; a damaged one is rebuilt; a "
        "directory that cannot be written only costs speed. `off` disables it. Unset: "
        "`$XDG_CACHE_HOME/tokenizer-service/compiled` (else `~/.cache/…`). Fill it ahead with "
        "`python -m app cache build` (docs/deployment.md).",
        default=None,
    )
    threads: int = _doc("Threads for tokenization of ordinary requests (per worker).", default=8)
    bulk_threads: int = _doc(
        "Threads for requests larger than `TOKENIZER_BULK_BYTES` (per worker), so big requests queue among "
        "themselves and never hold up small ones.",
        default=2,
    )
    bulk_bytes: int = _doc("Body size from which a request counts as bulk.", default=256 * 2**10)
    inline_bytes: int = _doc(
        "Bodies up to this size are tokenized on the event loop: a thread hop costs more than their work (at most "
        "a few hundred microseconds for 16 KiB), which stalls other requests on the worker by no more than that; "
        "except a tokenizer with an artifact regex that is not one of the bundled named patterns, which always runs "
        "on the thread pool with a time bound (docs/limits-artifacts.md).",
        default=16 * 2**10,
    )
    header_timeout: float = _doc(
        "Seconds a client has to send a request's headers (from connecting, or from the request's first byte); then "
        "408 and the connection is closed. 0: no limit.",
        default=10.0,
    )
    max_header_bytes: int = _doc(
        "Largest request line plus headers of one request, in bytes (431 and the connection closed above; counted "
        "as they arrive, so an endless header is cut off at the limit).",
        default=32 * 2**10,
    )
    max_headers: int = _doc("Most header fields in one request (431 above).", default=100)
    body_timeout: float = _doc(
        "Seconds a client has to send a request's whole body; then 408 and the connection is closed. 0: no limit.",
        default=60.0,
    )
    load: str = _doc(
        "When tokenizers are loaded. `eager`: all of them at start-up, once, before anything listens (with several "
        "workers, in the `serve` process before the workers are forked, so they share that memory). `lazy`: start-up "
        "only sha256-verifies every configured artifact (through the compiled artifact cache: an `xz` artifact "
        "whose compressed bytes it has seen verified is hashed, not decompressed again) and validates the model "
        "table (`/readyz` still means every "
        "artifact is verified), and a tokenizer is loaded when a request first uses it: start-up is quicker and a "
        "process holds only the tokenizers it is asked for, but each worker loads its own copy (no sharing), the "
        "first request for a tokenizer pays for its load (about 2 s for the largest on an idle machine, 3.6-5.5 s "
        "measured on a loaded one; on the event loop for a small body, holding up that worker meanwhile), and "
        "`GET /tokenizers`, which describes every tokenizer, loads them all.",
        default="eager",
    )
    graceful_timeout: float = _doc(
        "Seconds `serve` waits for in-flight requests on SIGTERM; at the deadline, workers still busy are killed "
        "(0: no limit).",
        default=30.0,
    )
    log_level: str = _doc("Log level: critical, error, warning, info, debug, trace.", default="info")
    access_log: bool = _doc("Log one line per request (uvicorn's access log).", default=True)
    batch_threads: int = _doc(
        "Threads one large `texts` batch of /count or /encode may tokenize on (the engine's batch path: the compiled "
        "core's own threads, GIL released), per worker: a request at or above `TOKENIZER_BATCH_BYTES` gets up to "
        "this many while no other such request holds them, and always at least its own thread (the pool thread it "
        "runs on), so a worker's tokenizing threads stay within `TOKENIZER_THREADS` + `TOKENIZER_BULK_THREADS` + "
        "this - 1. 0: the CPUs the process may use, at most 4; 1: no extra threads (the batch path still runs, "
        "on the request's thread).",
        default=0,
    )
    batch_bytes: int = _doc(
        "Smallest `texts` batch (UTF-8 bytes of its texts together) that /count and /encode tokenize on the batch "
        "path and its threads; smaller ones text by text. Below 64 KiB a second thread has little to share: the "
        "compiled core gives each thread at least ~32 KiB of text, so it would start none. Requests with "
        "`sample` or `return_offsets` always go text by text (0: every `texts` batch of two or more texts takes "
        "the batch path).",
        default=64 * 2**10,
    )

    def __post_init__(self) -> None:
        positive = (
            "port",
            "workers",
            "max_body_bytes",
            "max_batch_size",
            "max_decode_ids",
            "max_text_chars",
            "max_detail_tokens",
            "max_header_bytes",
            "max_headers",
            "threads",
            "bulk_threads",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise SettingsError(f"{PREFIX}{name.upper()} must be >= 1, not {getattr(self, name)}")
        for name in ("cache_size", "unigram_word_cache", "bulk_bytes", "inline_bytes", "graceful_timeout",
                     "header_timeout", "body_timeout", "batch_threads", "batch_bytes"):
            if getattr(self, name) < 0:
                raise SettingsError(f"{PREFIX}{name.upper()} must be >= 0, not {getattr(self, name)}")
        if self.engine is not None and self.engine.lower() not in ("native", "python"):
            raise SettingsError(f"{PREFIX}ENGINE must be native or python, not {self.engine!r}")
        if self.load not in ("eager", "lazy"):
            raise SettingsError(f"{PREFIX}LOAD must be eager or lazy, not {self.load!r}")
        if self.log_level.lower() not in ("critical", "error", "warning", "info", "debug", "trace"):
            raise SettingsError(f"{PREFIX}LOG_LEVEL must be a log level name, not {self.log_level!r}")

    def artifact_cache_dir(self) -> Path | None:
        """The compiled artifact cache's directory (None: ``TOKENIZER_ARTIFACT_CACHE=off``)."""
        return resolve_artifact_cache(self.artifact_cache)

    def tokenizer_names(self) -> list[str] | None:
        """The names of ``TOKENIZER_TOKENIZERS`` (None: every tokenizer of the store)."""
        if self.tokenizers is None:
            return None
        return [n.strip() for n in self.tokenizers.split(",") if n.strip()]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``environ`` (default ``os.environ``); ``overrides`` (already typed) win over it.

        Empty variables count as unset. Raises :class:`SettingsError` for a malformed value.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(PREFIX + f.name.upper(), "").strip()
            if raw:
                values[f.name] = _parse(f.name, str(f.type), raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def env(self) -> dict[str, str]:
        """The ``TOKENIZER_*`` variables that reproduce these settings (``serve`` hands them to its workers)."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            out[PREFIX + f.name.upper()] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out


def _parse(name: str, type_name: str, raw: str) -> Any:
    var = PREFIX + name.upper()
    try:
        if type_name.startswith("bool"):
            low = raw.lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError(raw)
        if type_name.startswith("int"):
            return int(raw.replace("_", ""))
        if type_name.startswith("float"):
            return float(raw)
        if type_name.startswith("Path"):
            return Path(raw).expanduser()
        return raw
    except ValueError:
        raise SettingsError(f"{var}={raw!r} is not a valid {type_name.split(' ')[0]}") from None


def settings_table() -> str:
    """A Markdown table of every setting: variable, default, meaning."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for f in fields(Settings):
        default = f.default
        shown = "unset" if default is None else (str(default).lower() if isinstance(default, bool) else str(default))
        rows.append(f"| `{PREFIX}{f.name.upper()}` | `{shown}` | {f.metadata['doc']} |")
    return "\n".join(rows)
