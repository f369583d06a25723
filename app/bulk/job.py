"""Run a bulk job on Ray Data and summarise it.

The driver plans the chunks (:mod:`.sources`; large ones, shrinking towards the end so the workers finish together),
makes a Ray dataset of their descriptors (one block each, so a retry redoes one chunk), and maps it through an actor
pool of :class:`~.runner.ChunkWorker` — one CPU and one encoding per actor, which reads, tokenizes and writes its
chunk itself (read -> tokenize -> write fused in one task: no rows cross the object store). Ray restarts an actor
that died (a killed or crashed worker process) and retries its chunk up to ``max_retries`` times; since each chunk
writes one part file by atomic rename, the output holds every row exactly once whichever attempt finished. The
driver collects one small result per chunk, never the rows.

Ray: an existing ``ray.init()`` in this process is used as it is; otherwise ``address`` (e.g. ``ray://head:10001``
or ``auto``), else ``$RAY_ADDRESS``, else a local Ray started for the job (``num_cpus`` CPUs, default all) and shut
down after it. On a cluster every node needs this package installed (and the same store path when ``store`` is
set; the bundled store is found on each node by itself), and the input and output paths must be visible to all;
a cluster with Ray's token authentication on needs its token on the driver too (see Ray's security docs).
``ray://`` addresses go through Ray Client (the ``client`` part of the ``bulk`` extra).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from genai_prices import Usage

from app.core.billing import load_pricer, price_target
from app.core.model_table import MODELS_FILE, ModelInfo, ModelTable
from app.engine import get_store
from app.pricing.money import money

from .errors import BulkError, ChunkError
from .runner import MODES, RESERVED, ChunkResult, ChunkWorker, part_name
from .sources import Chunk, check_unchanged, fingerprint, input_files, plan_chunks

SUMMARY_FILE = "_summary.json"
DEFAULT_CHUNK_BYTES = 32 << 20
MIN_CHUNK_BYTES = 64 << 10
#: Bad rows listed in the summary (all are counted; each part file has every bad row with its error).
MAX_BAD_LISTED = 1000


@dataclass
class BulkOptions:
    """One job. Exactly one of ``tokenizer`` and ``model``; ``keep`` None keeps every input column but ``column``."""

    inputs: Sequence[str]
    output: str
    mode: str = "count"
    column: str = "text"
    messages_column: str | None = None  # count conversations (lists of messages) of this column instead of text
    tokenizer: str | None = None
    model: str | None = None
    keep: Sequence[str] | None = None
    store: str | None = None
    models_file: str | None = None
    address: str | None = None
    num_cpus: int | None = None
    workers: int | None = None
    chunk_bytes: int | None = None
    overwrite: bool = False
    progress: bool = True
    max_retries: int = 3
    worker_class: type[ChunkWorker] = ChunkWorker


def resolve_model(name: str, store_dir: Path, models_file: str | None) -> ModelInfo:
    """The model table's entry for ``name`` (``models_file``, else ``<store>/models.json``), else a bare entry
    from a manifest ``models`` list. Raises :class:`BulkError` for an unknown model."""
    path = Path(models_file) if models_file else store_dir / MODELS_FILE
    table = ModelTable.load(path) if models_file or path.is_file() else ModelTable.empty()
    info = table.get(name)
    if info is not None:
        return info
    for spec in get_store(store_dir):
        if name in spec.models:
            return ModelInfo(name=name, tokenizer=spec.name)
    known = sorted({*table.names(), *(m for spec in get_store(store_dir) for m in spec.models)})
    raise BulkError(f"unknown model {name!r}; known models: {', '.join(known)}")


def corpus_cost(model: ModelInfo, tokens: int) -> dict[str, Any]:
    """The corpus's tokens priced as input to ``model`` at its base input rate from genai-prices (a corpus is many
    requests, each taken to be below the first long-context tier); amounts are exact decimal strings."""
    pricer = load_pricer()
    target = price_target(pricer, model)
    out: dict[str, Any] = {"model": model.name, "currency": "USD", "input_per_million": None, "input_cost": None,
                           "price_source": None, "price_as_of": pricer.data.provenance.version,
                           "price_unavailable": target.reason}
    if target.provider is None or target.model is None:
        return out
    rate = pricer.quote(target.provider, target.model, Usage(input_tokens=1)).rate("input_tokens")
    if rate is None:
        out["price_unavailable"] = f"{target.provider.id} {target.model.id} has no input-token price"
        return out
    out.update(input_per_million=money(rate), input_cost=money(rate * tokens / Decimal(1_000_000)),
               price_source=f"genai-prices: {target.provider.id} {target.model.id}", price_unavailable=None)
    return out


def _prepare_output(output: Path, overwrite: bool) -> None:
    if output.exists() and not output.is_dir():
        raise BulkError(f"{output}: the output must be a directory, and this is a file")
    if output.is_dir() and any(output.iterdir()):
        if not overwrite:
            raise BulkError(f"{output}: output directory is not empty (use --overwrite to replace a bulk output)")
        strays = [p for p in output.iterdir() if not (p.name.startswith("part-") or p.name == SUMMARY_FILE
                                                      or p.name.startswith(".part-"))]
        if strays:
            raise BulkError(f"{output}: holds files that are not a bulk output ({strays[0].name}); not overwriting")
        for p in output.iterdir():
            p.unlink()


def chunk_plan(files: list[tuple[Path, str]], workers: int, chunk_bytes: int | None = None) -> list[Chunk]:
    """The job's chunks: ``chunk_bytes`` as given, else large ones (each chunk is one Ray task; up to
    :data:`DEFAULT_CHUNK_BYTES`, about four per worker for small inputs) that shrink towards the end of the input
    so that ``workers`` workers finish together."""
    if chunk_bytes:
        return plan_chunks(files, chunk_bytes)
    total = sum(p.stat().st_size for p, _ in files)
    size = min(DEFAULT_CHUNK_BYTES, max(MIN_CHUNK_BYTES, total // (4 * workers) + 1))
    return plan_chunks(files, size, spread=workers)


def _start_ray(opts: BulkOptions) -> tuple[Any, bool]:
    """``(ray, started_here)``."""
    try:
        import ray
    except ImportError:
        raise BulkError("bulk needs Ray Data: pip install -e '.[bulk]' (ray[data], pyarrow)") from None
    if ray.is_initialized():
        return ray, False
    address = opts.address or os.environ.get("RAY_ADDRESS", "").strip() or "local"
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                              "configure_logging": True}
    if address == "local":
        kwargs["num_cpus"] = opts.num_cpus
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError, OSError) as exc:  # no cluster there, or a bad address
        first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise BulkError(f"cannot start or reach Ray at {address!r}: {first}") from None
    return ray, True


def run_bulk(opts: BulkOptions) -> dict[str, Any]:
    """Run the job; returns the summary (also written to ``<output>/_summary.json``). Raises :class:`BulkError`
    for a job that cannot start or whose input files changed (size or modification time) while it ran, the
    engine's errors for an unknown tokenizer, and Ray's error for a chunk that still fails after ``max_retries``
    retries."""
    if opts.mode not in MODES:
        raise BulkError(f"mode must be one of {', '.join(MODES)}, not {opts.mode!r}")
    if (opts.tokenizer is None) == (opts.model is None):
        raise BulkError("give exactly one of --tokenizer and --model")
    clash = sorted(set(opts.keep or ()) & set(RESERVED))
    if clash:
        raise BulkError(f"--keep names output columns of the job itself: {', '.join(clash)}")
    store_dir = get_store(opts.store).directory
    model = resolve_model(opts.model, store_dir, opts.models_file) if opts.model else None
    canonical = get_store(store_dir).resolve(model.tokenizer if model else opts.tokenizer or "")
    chat = _chat_spec(opts, model, store_dir)
    files = input_files(opts.inputs)
    before = fingerprint(files)  # size and mtime: a file changed while the job runs fails it (check_unchanged)
    output = Path(opts.output).expanduser().resolve()
    _prepare_output(output, opts.overwrite)

    t0 = time.perf_counter()
    ray, started = _start_ray(opts)
    try:
        output.mkdir(parents=True, exist_ok=True)  # only once Ray is up: a failed start leaves nothing behind
        workers = opts.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        chunks = chunk_plan(files, workers, opts.chunk_bytes)
        results = _run_chunks(ray, opts, chunks, workers, store_dir, canonical, output, chat)
        check_unchanged(before)
    finally:
        if started:
            ray.shutdown()
    seconds = time.perf_counter() - t0
    summary = _summary(opts, canonical, model, files, chunks, results, workers, seconds, output)
    (output / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return summary


def _chat_spec(opts: BulkOptions, model: ModelInfo | None, store_dir: Path) -> dict[str, Any] | None:
    """The model's chat framing spec when ``messages_column`` is set (checked), else None."""
    if opts.messages_column is None:
        return None
    if model is None:
        raise BulkError("--messages-column needs --model (the model decides how messages are framed)")
    if opts.mode != "count":
        raise BulkError("--messages-column counts conversations; use `bulk count`")
    if model.chat is None:
        raise BulkError(f"model {model.name!r} has no chat framing in the model table")
    from app.engine.chat import ChatFramings, ChatSpecError

    try:
        ChatFramings.from_store(store_dir).check(model.chat, f"model {model.name!r}")
    except ChatSpecError as exc:
        raise BulkError(str(exc)) from None
    return dict(model.chat)


def _run_chunks(ray: Any, opts: BulkOptions, chunks: list[Chunk], workers: int, store_dir: Path, tokenizer: str,
                output: Path, chat: dict[str, Any] | None) -> dict[int, ChunkResult]:
    if not chunks:
        return {}
    from ray.data import ActorPoolStrategy, DataContext
    from tqdm import tqdm

    from app.engine.store import bundled_store_dir

    ctx = DataContext.get_current()
    ctx.enable_progress_bars = False  # ours below counts input bytes; Ray's per-operator bars would interleave
    ctx.print_on_execution_start = False
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)  # "progress bars disabled"
    store = None if store_dir == bundled_store_dir() else str(store_dir)
    ds = ray.data.from_items([c.to_dict() for c in chunks], override_num_blocks=len(chunks))
    config = {"tokenizer": tokenizer, "store": store, "mode": opts.mode,
              "column": opts.messages_column or opts.column, "keep": None if opts.keep is None else list(opts.keep),
              "output": str(output), "chat": chat}
    with warnings.catch_warnings():
        # max_task_retries has no named parameter in Ray Data yet; without it a chunk that kills its worker every
        # time would be retried forever (Ray Data's default). Actors are restarted without limit (its default).
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*", category=DeprecationWarning)
        ds = ds.map_batches(
            _bound(opts.worker_class, config),
            batch_size=1,
            batch_format="numpy",
            compute=ActorPoolStrategy(size=min(workers, len(chunks))),
            num_cpus=1,
            max_task_retries=opts.max_retries,
        )
    results: dict[int, ChunkResult] = {}
    by_index = {c.index: c for c in chunks}
    with tqdm(total=sum(c.size for c in chunks), unit="B", unit_scale=True, desc=f"bulk {opts.mode}",
              disable=None if opts.progress else True) as bar:
        for row in ds.iter_rows():
            result = ChunkResult.from_json(str(row["result"]))
            if result.index not in results:  # one result per chunk, whichever attempt delivered it
                bar.update(by_index[result.index].size)
            results[result.index] = result
    missing = sorted(set(by_index) - set(results))
    if missing:
        raise BulkError(f"no result for {len(missing)} chunk(s), first {by_index[missing[0]].describe()}")
    for temp in output.glob(".part-*.tmp"):  # left by a worker that died while writing
        temp.unlink(missing_ok=True)
    strays = {p.name for p in output.glob("part-*.parquet")} - {part_name(i) for i in results}
    if strays:
        raise BulkError(f"{output}: unexpected part files {sorted(strays)[:3]}")
    return results


def _bound(cls: type[ChunkWorker], config: dict[str, Any]) -> type[ChunkWorker]:
    """``cls`` with its constructor arguments built in: Ray ships the class itself to each actor (and to a
    restarted one), with no constructor arguments to keep alive in the object store."""

    class Bound(cls):  # type: ignore[valid-type,misc]
        def __init__(self) -> None:
            super().__init__(**config)

    Bound.__name__ = Bound.__qualname__ = cls.__name__
    return Bound


def _summary(opts: BulkOptions, tokenizer: str, model: ModelInfo | None, files: list[tuple[Path, str]],
             chunks: list[Chunk], results: dict[int, ChunkResult], workers: int, seconds: float,
             output: Path) -> dict[str, Any]:
    ordered = [results[c.index] for c in chunks]
    rows = sum(r.rows for r in ordered)
    tokens = sum(r.tokens for r in ordered)
    n_bytes = sum(r.bytes for r in ordered)
    bad = [{"key": k, "error": e} for r in ordered for k, e in r.bad_samples][:MAX_BAD_LISTED]
    cost = corpus_cost(model, tokens) if model is not None else None
    input_bytes = sum(c.size for c in chunks)
    return {
        "command": opts.mode,
        "tokenizer": tokenizer,
        "model": None if model is None else model.name,
        "column": opts.messages_column or opts.column,
        "messages": opts.messages_column is not None,
        "inputs": [str(p) for p, _ in files],
        "output": str(output),
        "files": len(files),
        "chunks": len(chunks),
        "workers": workers,
        "rows": rows,
        "good_rows": sum(r.good for r in ordered),
        "bad_rows": sum(r.bad for r in ordered),
        "tokens": tokens,
        "bytes": n_bytes,
        "tokens_per_byte": tokens / n_bytes if n_bytes else None,
        "cost": cost,
        "seconds": round(seconds, 3),
        # CPU time the workers spent on chunks (reading, tokenizing, writing): what the job costs on any cluster
        "worker_cpu_seconds": round(sum(r.cpu_seconds for r in ordered), 3),
        "rows_per_second": round(rows / seconds, 1) if seconds > 0 else None,
        "input_mb_per_second": round(input_bytes / 1e6 / seconds, 2) if seconds > 0 else None,
        "bad_rows_listed": len(bad),
        "bad_row_samples": bad,
    }


def failure_message(exc: BaseException) -> str | None:
    """One line for a job that Ray stopped (a chunk that failed, or kept killing its worker past the retries):
    the failing chunk's :class:`~.errors.ChunkError` message (``<file> from line 13: OSError: …``) when the
    worker raised one, else the first line of Ray's error. None for an exception that is not Ray's."""
    if not type(exc).__module__.startswith("ray"):
        return None
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # Ray colours the remote traceback it carries as text
    found = re.findall(rf"{ChunkError.__name__}: (.+)", text)
    if found:
        return str(found[-1]).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first}"


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a few human-readable lines (the JSON file has everything)."""
    lines = [
        f"{summary['command']}: {summary['rows']} rows ({summary['bad_rows']} bad) from {summary['files']} file(s) "
        f"with {summary['tokenizer']} on {summary['workers']} worker(s) in {summary['seconds']:.2f} s",
        f"tokens: {summary['tokens']}   bytes: {summary['bytes']}   tokens/byte: "
        + ("-" if summary["tokens_per_byte"] is None else f"{summary['tokens_per_byte']:.4f}"),
    ]
    cost = summary["cost"]
    if cost is not None:
        if cost["input_cost"] is None:
            lines.append(f"cost: no price for {cost['model']}: {cost['price_unavailable']}")
        else:
            lines.append(f"cost: {cost['input_cost']} {cost['currency']} as input to {cost['model']} "
                         f"({cost['input_per_million']} per million tokens; {cost['price_source']}, "
                         f"{cost['price_as_of']})")
    for item in summary["bad_row_samples"][:10]:
        lines.append(f"bad row {item['key']}: {item['error']}")
    if summary["bad_rows"] > 10:
        lines.append(f"… {summary['bad_rows'] - 10} more bad rows (listed in {SUMMARY_FILE} and the part files)")
    lines.append(f"output: {summary['output']} (summary: {SUMMARY_FILE})")
    return "\n".join(lines)
