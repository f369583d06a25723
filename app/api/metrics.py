"""Prometheus metrics of the service (names follow the conventions: base units, ``_seconds``, ``_total``).

Metric                                         type       labels
tokenizer_http_request_duration_seconds        histogram  endpoint, tokenizer, status
tokenizer_http_requests_in_flight              gauge      (none)
tokenizer_tokenize_duration_seconds            histogram  endpoint, tokenizer   (CPU part only)
tokenizer_tokens_total                         counter    endpoint, tokenizer   (ids returned, counted or decoded)
tokenizer_input_bytes_total                    counter    endpoint, tokenizer   (UTF-8 bytes of input text)
tokenizer_cache_hits_total / _misses_total     counter    tokenizer             (pre-token LRU lookups)
tokenizer_cache_entries / _max_entries         gauge      tokenizer
tokenizer_info                                 gauge=1    tokenizer, sha256, vocab_size, kind
tokenizer_price_data_info                      gauge=1    version, source, package_version, sha256, date
tokenizer_billed_tokens_total                  counter    model, kind           (priced in model blocks)
tokenizer_estimated_cost_usd_total             counter    model, kind           (kind: input, cached, output)

``endpoint`` is the route template (``/tokenizers/{name}``; ``other`` for unknown paths) and ``tokenizer`` the
canonical name, or empty when the request never resolved one, so no label value comes from user input; ``model``
is a model-table name or a price-data model id, never the caller's string.

Several workers: when ``PROMETHEUS_MULTIPROC_DIR`` is set (``serve`` sets it to a fresh directory when
``workers > 1``), prometheus-client keeps every value in per-process files and :func:`render` merges them, so a
scrape answered by any worker reports the whole service. ``serve``'s workers are forked from a supervisor that
imported this module: at the fork a child gets its own process id and reserves its own files, and the supervisor
removes its files before forking (:func:`release_process_files`) and the live gauges of a worker it reaps
(:func:`forget_process`). Gauges declare how to merge: ``livesum`` for in-flight
requests and cache entries (a worker that exits cleanly removes its files, see :func:`mark_process_dead`), ``max``
for the info metric. The engine's cache counters live inside each worker, so they are copied into counters as
deltas (:func:`sync_cache`) at every scrape and, for the tokenizers a request used (:func:`cache_used`), once a
second (:func:`flusher`) and at shutdown: in one process a scrape reads each tokenizer's ``cache_stats()`` as it
is; with several workers this is the only way the other workers' caches reach a scrape, at most a second late.

Two hazards of multiprocess mode are handled (:mod:`app.api.metrics_files`): a worker killed without a clean
shutdown would leave its in-flight requests counted for ever, so every scrape forgets the live gauges of processes
that no longer exist; and a full disk under the directory would turn a write to a sparse page into a SIGBUS, so each
worker reserves its files' blocks at start and before every new label set, and drops a label set it has no room
for (logged) rather than crash. A worker that cannot reserve even its initial files keeps its metrics to itself
(single-process mode, logged) instead of sharing them.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import struct
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from app.engine import Tokenizer

from .metrics_files import MetricFiles, entry_bytes, forget_dead_processes

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
log = logging.getLogger("app.api")


def multiprocess_enabled_at_import() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV, "").strip())


def _claim_files() -> MetricFiles | None:
    """This process's multiprocess files, reserved; None outside multiprocess mode (or when the disk is full)."""
    directory = os.environ.get(MULTIPROC_ENV, "").strip()
    if not directory:
        return None
    files = MetricFiles(directory)
    if files.reserve_initial():
        return files
    if "prometheus_client" not in sys.modules:  # its value class is chosen at import: still time to opt out
        os.environ.pop(MULTIPROC_ENV, None)
        log.error("no space for metrics files in %s: this worker's metrics are not shared with the others",
                  directory)
        return None
    return files


_files = _claim_files()  # before prometheus-client is imported and creates the first value

from prometheus_client import (  # noqa: E402
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST


def _after_fork_in_child() -> None:
    """A forked child (a pre-fork worker) is a new process for the metrics: its own process id, and its own files,
    reserved as a worker's are at start (the parent's belong to the parent)."""
    global _PID, _files
    _PID = os.getpid()
    if _files is not None:
        _files = _claim_files()


_PID = os.getpid()
os.register_at_fork(after_in_child=_after_fork_in_child)
if _files is not None and multiprocess_enabled_at_import():
    # prometheus-client asks for the process id on every update (a system call each, a dozen per request) to notice
    # a fork; the id kept here is refreshed by the fork itself, so it is the same value, distinct per process, as the
    # library requires of a process identifier.
    from prometheus_client import values as _values

    _values.ValueClass = _values.MultiProcessValue(lambda: _PID)

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

REQUEST_SECONDS = Histogram(
    "tokenizer_http_request_duration_seconds", "HTTP request latency, from the first byte read to the last sent.",
    ["endpoint", "tokenizer", "status"], buckets=_LATENCY_BUCKETS,
)
IN_FLIGHT = Gauge("tokenizer_http_requests_in_flight", "HTTP requests being served.", multiprocess_mode="livesum")
TOKENIZE_SECONDS = Histogram(
    "tokenizer_tokenize_duration_seconds", "Time spent tokenizing or decoding (excludes JSON and I/O).",
    ["endpoint", "tokenizer"], buckets=_LATENCY_BUCKETS,
)
TOKENS = Counter("tokenizer_tokens", "Tokens returned, counted or decoded.", ["endpoint", "tokenizer"])
INPUT_BYTES = Counter("tokenizer_input_bytes", "UTF-8 bytes of input text tokenized.", ["endpoint", "tokenizer"])
CACHE_HITS = Counter("tokenizer_cache_hits", "Pre-token cache lookups answered from the cache.", ["tokenizer"])
CACHE_MISSES = Counter("tokenizer_cache_misses", "Pre-token cache lookups that ran BPE.", ["tokenizer"])
CACHE_ENTRIES = Gauge("tokenizer_cache_entries", "Pre-tokens held in the cache (all workers).", ["tokenizer"],
                      multiprocess_mode="livesum")
CACHE_MAX_ENTRIES = Gauge("tokenizer_cache_max_entries", "Cache capacity in entries (all workers).", ["tokenizer"],
                          multiprocess_mode="livesum")
INFO = Gauge("tokenizer_info", "A loaded tokenizer and the sha256 of its verified artifact (value 1).",
             ["tokenizer", "sha256", "vocab_size", "kind"], multiprocess_mode="max")
PRICE_DATA = Gauge("tokenizer_price_data_info", "The price data in force (value 1): genai-prices version, source "
                   "(bundled or file), sha256 of the data, its date.",
                   ["version", "source", "package_version", "sha256", "date"], multiprocess_mode="max")
BILLED_TOKENS = Counter("tokenizer_billed_tokens", "Tokens priced in /count and /encode model blocks, by model and "
                        "kind (input, cached, output; output is the reserved maximum).", ["model", "kind"])
ESTIMATED_COST = Counter("tokenizer_estimated_cost_usd", "Estimated cost (USD) of the priced tokens, by model and "
                         "kind (input, cached, output).", ["model", "kind"])

_sync_lock = threading.Lock()
_last_seen: dict[str, tuple[int, int, int, int]] = {}
_children: dict[tuple[int, tuple[str, ...]], Any] = {}


class _Dropped:
    """Stands in for a label set that could not get disk space: every update is a no-op."""

    def inc(self, amount: float = 1) -> None: ...
    def dec(self, amount: float = 1) -> None: ...
    def set(self, value: float) -> None: ...
    def observe(self, amount: float) -> None: ...
    def inc_locked(self, amount: float = 1) -> None: ...
    def set_locked(self, value: float) -> None: ...
    def observe_locked(self, amount: float) -> None: ...


_DROPPED = _Dropped()
_child_lock = threading.Lock()
#: True inside :func:`rehearsal`: every labelled update is dropped.
_rehearsing = False


@contextmanager
def rehearsal() -> Iterator[None]:
    """Drop every labelled update made inside (the start-up rehearsal's requests, :mod:`app.api.rehearsal`), so no
    series counts a request nobody made; the in-flight gauge goes up and back down. For the start-up only, before
    the app serves: a request served meanwhile would not be counted either."""
    global _rehearsing
    _rehearsing = True
    try:
        yield
    finally:
        _rehearsing = False


def _room_for(metric: Any, labels: tuple[str, ...]) -> tuple[str, int]:
    """(file kind, bytes) that a new label set of ``metric`` adds to this process's multiprocess file."""
    from prometheus_client.mmap_dict import mmap_key

    names = list(metric._labelnames)
    if isinstance(metric, Histogram):
        key = mmap_key(metric._name, metric._name + "_bucket", [*names, "le"], [*labels, "+Inf"], metric._documentation)
        return "histogram", (len(metric._upper_bounds) + 1) * entry_bytes(key)
    if isinstance(metric, Counter):
        return "counter", entry_bytes(mmap_key(metric._name, metric._name + "_total", names, list(labels),
                                               metric._documentation))
    kind = "gauge_" + metric._multiprocess_mode
    return kind, entry_bytes(mmap_key(metric._name, metric._name, names, list(labels), metric._documentation))


def _child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, memoised (label lookups are a measurable share of a small request). In
    multiprocess mode a new label set first gets its disk space reserved; without room it is dropped."""
    if _rehearsing:
        return _DROPPED  # not memoised
    key = (id(metric), labels)
    child = _children.get(key)
    if child is None:
        with _child_lock:
            child = _children.get(key)
            if child is None:
                if _files is not None and multiprocess_enabled():
                    kind, nbytes = _room_for(metric, labels)
                    if not _files.ensure_room(kind, nbytes):
                        return _DROPPED  # not memoised: retried when space may have come back
                child = _children[key] = _fast(metric.labels(*labels))
    return child


_pack_value = struct.Struct("dd").pack  # (value, timestamp): prometheus-client's layout of a value in its files
#: Serialises this module's updates: each public update takes it once for all the values it writes (a request's
#: updates run on the event loop, the cache sync and billing also in pool threads).
_write_lock = threading.Lock()


class _Value:
    """An in-process value (prometheus-client's ``MutexValue``) updated directly: callers hold :data:`_write_lock`,
    so the value's own lock is not needed to serialise writers (a reader takes the float, atomic under the GIL)."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    def add(self, amount: float) -> None:
        self._value._value += amount

    def set(self, new: float) -> None:
        self._value._value = new


class _Library:
    """A value of a layout this module does not know: updated through the library's own methods."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    def add(self, amount: float) -> None:
        self._value.inc(amount)

    def set(self, new: float) -> None:
        self._value.set(new)


class _Slot:
    """One of prometheus-client's multiprocess values (``MmapedValue``), written in place: the new value goes straight
    into its 16 bytes of this process's memory-mapped file (the value, then the timestamp 0.0 that the library writes
    for every ``inc`` and untimed ``set``, as one slice assignment: the library's own way of writing them), instead
    of through the library's per-update lock, process-id check and key lookup. The value object's own float is
    updated too, so it reads back (``get``) what the file holds. Callers hold :data:`_write_lock`.

    The map and offset are looked up on first use and again after a fork (this module's process id changes), after
    letting the library re-open the new process's files. A file that grows is mapped anew by the library; the old
    map stays valid for this slot (a shared mapping of the same file, and the slot lies within its length)."""

    __slots__ = ("_map", "_pid", "_value", "_where")

    def __init__(self, value: Any) -> None:
        self._value = value
        self._pid = -1
        self._map: Any = None
        self._where = slice(0, 0)

    def _bind(self) -> None:
        self._value.get()  # runs the library's fork check: after a fork it re-opens and re-reads this process's files
        file = self._value._file
        pos = file._positions[self._value._key]
        self._map, self._where, self._pid = file._m, slice(pos, pos + 16), _PID

    def add(self, amount: float) -> None:
        if self._pid != _PID:
            self._bind()
        value = self._value
        new = value._value = value._value + amount
        self._map[self._where] = _pack_value(new, 0.0)

    def set(self, new: float) -> None:
        if self._pid != _PID:
            self._bind()
        self._value._value = new
        self._map[self._where] = _pack_value(new, 0.0)


def _writer(value: Any) -> _Value | _Library | _Slot:
    """How to update ``value`` (one of the library's value objects) with :data:`_write_lock` held."""
    try:
        if getattr(value, "_multiprocess", False):
            file = value._file
            file._positions[value._key]  # noqa: B018 -- the layout this module relies on
            file._m  # noqa: B018
            value._value + 0.0  # noqa: B018
            return _Slot(value)
        if hasattr(value, "_lock"):
            value._value + 0.0  # noqa: B018
            return _Value(value)
    except (AttributeError, KeyError, TypeError):
        pass
    return _Library(value)


class _FastHistogram:
    """A histogram child's ``observe`` straight on its values (the sum and one bucket; the bucket found by bisection
    over the same upper bounds, ``amount <= bound`` as the library does)."""

    __slots__ = ("_bounds", "_buckets", "_sum")

    def __init__(self, child: Any) -> None:
        self._bounds = list(child._upper_bounds)
        self._sum = _writer(child._sum)
        self._buckets = [_writer(b) for b in child._buckets]

    def observe(self, amount: float) -> None:
        with _write_lock:
            self.observe_locked(amount)

    def observe_locked(self, amount: float) -> None:
        """``observe`` for a caller holding :data:`_write_lock`."""
        self._sum.add(amount)
        self._buckets[bisect.bisect_left(self._bounds, amount)].add(1.0)


class _FastCounter:
    """A counter child's ``inc`` straight on its value (callers only add non-negative amounts)."""

    __slots__ = ("inc_locked",)

    def __init__(self, child: Any) -> None:
        self.inc_locked = _writer(child._value).add  # ``inc`` for a caller holding :data:`_write_lock`

    def inc(self, amount: float = 1) -> None:
        with _write_lock:
            self.inc_locked(amount)


class _FastGauge:
    """A gauge child's ``inc``/``dec``/``set`` straight on its value (livesum/max modes only, no timestamps)."""

    __slots__ = ("_value", "inc_locked", "set_locked")

    def __init__(self, child: Any) -> None:
        self._value = _writer(child._value)
        self.inc_locked = self._value.add  # ``inc`` for a caller holding :data:`_write_lock`
        self.set_locked = self._value.set  # ``set`` (of a float) for a caller holding :data:`_write_lock`

    def inc(self, amount: float = 1) -> None:
        with _write_lock:
            self._value.add(amount)

    def dec(self, amount: float = 1) -> None:
        with _write_lock:
            self._value.add(-amount)

    def set(self, value: float) -> None:
        with _write_lock:
            self._value.set(float(value))


class _Child:
    """A child of a layout this module does not know: its own methods (which lock), also as the ``*_locked`` ones."""

    __slots__ = ("_child",)

    def __init__(self, child: Any) -> None:
        self._child = child

    def inc(self, amount: float = 1) -> None:
        self._child.inc(amount)

    def dec(self, amount: float = 1) -> None:
        self._child.dec(amount)

    def set(self, value: float) -> None:
        self._child.set(float(value))

    def observe(self, amount: float) -> None:
        self._child.observe(amount)

    inc_locked, set_locked, observe_locked = inc, set, observe


def _fast(child: Any) -> Any:
    """``child`` with its updates skipping the library's per-call checks (a measurable share of a small request);
    the same values are written. Falls back to the library's own methods where its layout is not the expected one.
    Every update has a ``*_locked`` twin for callers that hold :data:`_write_lock` for several updates at once."""
    try:
        if isinstance(child, Histogram):
            return _FastHistogram(child)
        if isinstance(child, Counter):
            return _FastCounter(child)
        if isinstance(child, Gauge) and not child._is_most_recent:
            return _FastGauge(child)
    except AttributeError:
        pass
    return _Child(child)


def multiprocess_enabled() -> bool:
    """True when values are shared through ``$PROMETHEUS_MULTIPROC_DIR`` (several workers)."""
    return bool(os.environ.get(MULTIPROC_ENV))


def set_info(tokenizers: Iterable[Tokenizer]) -> None:
    """Publish the info metric and the cache gauges for every loaded tokenizer."""
    for tokenizer in tokenizers:
        spec = tokenizer.spec
        _child(INFO, tokenizer.name, spec.sha256 if spec else "", str(tokenizer.n_vocab),
               spec.kind if spec else "").set(1)
    sync_cache(tokenizers)


def set_price_info(provenance: Mapping[str, Any]) -> None:
    """Publish which price data is in force (:meth:`app.pricing.data.Provenance.as_dict`)."""
    _child(PRICE_DATA, str(provenance["version"]), str(provenance["source"]), str(provenance["package_version"]),
           str(provenance["sha256"]), str(provenance["date"] or "")).set(1)


def billing_updates(model: str, by_kind: Iterable[tuple[str, int, float]]) -> tuple[tuple[Any, float], ...]:
    """The counter updates of a model block's tokens and cost (USD) per kind, as ``(add, amount)`` pairs to apply
    with :func:`observe_billing` (a caller may keep them for a block it serves again; a label set dropped for want
    of disk space in multiprocess mode then stays dropped for that block). ``model`` must come from a bounded set
    (the model table's names or the price data's model ids, never a caller's string)."""
    out: list[tuple[Any, float]] = []
    for kind, tokens, cost in by_kind:
        if tokens:
            out.append((_child(BILLED_TOKENS, model, kind).inc_locked, tokens))
        if cost:
            out.append((_child(ESTIMATED_COST, model, kind).inc_locked, cost))
    return tuple(out)


#: Billing updates observed but not yet written (see :func:`observe_billing`).
_pending_billing: list[Sequence[tuple[Any, float]]] = []
#: :func:`observe_billing` writes the queue itself once it holds this many requests' updates.
BILLING_QUEUE = 256
#: Seconds between two runs of :func:`flush` by the app's flusher (:func:`flusher`).
FLUSH_SECONDS = 1.0


def observe_billing(updates: Sequence[tuple[Any, float]]) -> None:
    """Queue :func:`billing_updates` for :func:`flush_billing`, which writes them under one hold of the write lock.

    A request pays for one list append, not for its counter writes (they were 1.5 µs of a memoised block's 2.7). The
    queue is written when it holds :data:`BILLING_QUEUE` requests, before this process renders ``/metrics``, every
    :data:`FLUSH_SECONDS` by :func:`flusher` and when the app stops: a scrape served by another
    worker sees this worker's amounts at most that long after they were counted. Thread-safe (appends are atomic;
    writers take the lock)."""
    pending = _pending_billing
    pending.append(updates)
    if len(pending) >= BILLING_QUEUE:
        flush_billing()


def flush_billing() -> None:
    """Write the queued billing updates (:func:`observe_billing`). The same updates queued ``n`` times (a memoised
    block's, :func:`billing_updates` kept by the caller) are written once, as ``n`` times each amount: token counts
    exactly, a cost with one rounding instead of ``n``."""
    with _write_lock:
        n = len(_pending_billing)
        if not n:
            return
        batch = _pending_billing[:n]
        del _pending_billing[:n]  # appends made meanwhile sit after the first n and stay queued
        times: dict[int, list[Any]] = {}  # id -> [updates, how many times]; the batch keeps every id alive
        for updates in batch:
            seen = times.get(id(updates))
            if seen is None:
                times[id(updates)] = [updates, 1]
            else:
                seen[1] += 1
        for updates, k in times.values():
            for add, amount in updates:
                add(amount * k)


#: Tokenizers used since their cache counters were last copied (:func:`cache_used`), by name.
_caches_used: dict[str, Tokenizer] = {}


def cache_used(tokenizer: Tokenizer) -> None:
    """Note that ``tokenizer`` tokenized something: :func:`flush` copies its cache counters (:func:`sync_cache`) within
    :data:`FLUSH_SECONDS`, and a scrape of this process copies every loaded tokenizer's first. A request pays for
    one dict store instead of the copy. Thread-safe."""
    _caches_used[tokenizer.name] = tokenizer


def flush() -> None:
    """Write what requests left for later: the billing queue (:func:`flush_billing`) and the cache counters of the
    tokenizers used since the last flush (:func:`cache_used`)."""
    flush_billing()
    used: list[Tokenizer] = []
    while True:
        try:
            used.append(_caches_used.popitem()[1])  # atomic: a tokenizer noted meanwhile stays for the next flush
        except KeyError:
            break
    if used:
        sync_cache(used)


async def flusher() -> None:
    """Run :func:`flush` every :data:`FLUSH_SECONDS` until cancelled (the app's lifespan runs one per process)."""
    while True:
        await asyncio.sleep(FLUSH_SECONDS)
        flush()


def sync_cache(tokenizers: Iterable[Tokenizer]) -> None:
    """Copy the engine's cache counters into the metrics (as deltas since the last call; thread-safe).

    A counter that went backwards (the cache was cleared) counts from zero again.
    """
    with _sync_lock:
        for tokenizer in tokenizers:
            stats = tokenizer.cache_stats()
            seen = (stats.hits, stats.misses, stats.size, stats.max_size)
            last = _last_seen.get(tokenizer.name)
            if seen == last:
                continue
            last_hits, last_misses = (last[0], last[1]) if last else (0, 0)
            hits = stats.hits - last_hits if stats.hits >= last_hits else stats.hits
            misses = stats.misses - last_misses if stats.misses >= last_misses else stats.misses
            updates: list[tuple[Any, float]] = []
            if hits:
                updates.append((_child(CACHE_HITS, tokenizer.name).inc_locked, hits))
            if misses:
                updates.append((_child(CACHE_MISSES, tokenizer.name).inc_locked, misses))
            if last is None or last[2] != stats.size:
                updates.append((_child(CACHE_ENTRIES, tokenizer.name).set_locked, float(stats.size)))
            if last is None or last[3] != stats.max_size:
                updates.append((_child(CACHE_MAX_ENTRIES, tokenizer.name).set_locked, float(stats.max_size)))
            with _write_lock:
                for update, amount in updates:
                    update(amount)
            _last_seen[tokenizer.name] = seen


def prepare_series(endpoints: Iterable[str], tokenizers: Iterable[str]) -> None:
    """Create the label sets a successful request to each of ``endpoints`` with each of ``tokenizers`` updates (its
    latency with status 200, its tokenize time, tokens and input bytes), at zero, so that the first such request
    finds them made (creating one costs a fraction of a millisecond) and every series exists from start-up."""
    for tokenizer in tokenizers:
        for endpoint in endpoints:
            _child(REQUEST_SECONDS, endpoint, tokenizer, "200")
            _child(TOKENIZE_SECONDS, endpoint, tokenizer)
            _child(TOKENS, endpoint, tokenizer)
            _child(INPUT_BYTES, endpoint, tokenizer)


def request_started() -> None:
    """A request is in flight (:data:`IN_FLIGHT`)."""
    with _write_lock:
        in_flight.inc_locked(1.0)


def request_done(endpoint: str, tokenizer: str, status: int, seconds: float) -> None:
    """A request started with :func:`request_started` is answered: no longer in flight, and its latency observed."""
    hist = _child(REQUEST_SECONDS, endpoint, tokenizer, str(status))
    with _write_lock:
        in_flight.inc_locked(-1.0)
        hist.observe_locked(seconds)


def observe_request(endpoint: str, tokenizer: str, status: int, seconds: float) -> None:
    _child(REQUEST_SECONDS, endpoint, tokenizer, str(status)).observe(seconds)


def observe_work(endpoint: str, tokenizer: str, seconds: float, tokens: int, input_bytes: int) -> None:
    hist = _child(TOKENIZE_SECONDS, endpoint, tokenizer)
    count = _child(TOKENS, endpoint, tokenizer) if tokens else _DROPPED
    size = _child(INPUT_BYTES, endpoint, tokenizer) if input_bytes else _DROPPED
    with _write_lock:
        hist.observe_locked(seconds)
        count.inc_locked(tokens)
        size.inc_locked(input_bytes)


def render(tokenizers: Iterable[Tokenizer]) -> bytes:
    """The exposition text of every metric (merged over all workers in multiprocess mode)."""
    flush_billing()
    sync_cache(tokenizers)
    if multiprocess_enabled():
        from prometheus_client import multiprocess

        forget_dead_processes(os.environ[MULTIPROC_ENV])
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(REGISTRY)


def forget_process(pid: int) -> None:
    """Drop the live gauges of the exited process ``pid`` from the shared directory (a supervisor reaping a worker
    that was killed before its clean shutdown could do it, see :func:`mark_process_dead`)."""
    if multiprocess_enabled():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def release_process_files() -> None:
    """Remove this process's files from the shared directory: a pre-fork supervisor, which imports this module (and
    so gets files) but never serves, calls it before forking its workers, so that only workers have files."""
    if _files is not None:
        _files.remove()


def mark_process_dead() -> None:
    """Drop this worker's live gauges from the shared directory (call when the worker stops)."""
    if multiprocess_enabled():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid())


#: :data:`IN_FLIGHT` for the per-request updates (see :func:`_fast`).
in_flight = _fast(IN_FLIGHT)
