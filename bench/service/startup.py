"""Start-up and memory of the service next to the reference libraries, and the first request vs the tenth (issue 29).

``python -m bench.service.startup [--reps 3] [--workers 1,2] [--sets store,one] [--one cl100k_base]
[--load-requests 3000] [--json PATH]``

For each tokenizer set (``store``: every tokenizer of the bundled store; ``one``: the comma-separated ``--one`` alone,
through ``TOKENIZER_TOKENIZERS``) and each worker count, a fresh ``python -m app serve`` (started by
:func:`harness.server.start`) is timed from just before its process starts to ``/readyz`` 200 with every worker's
start-up complete (polled every 50 ms). Then, per process of the tree (the supervisor, and the workers when there
are several), RSS, PSS and USS (private clean + dirty) come from ``/proc/<pid>/smaps_rollup``; the total is the sum of
PSS over the tree (the memory the tree costs). With one worker, each loaded tokenizer then gets ``--requests``
``POST /count`` of a short text in a row on one connection (the text ends in the request's number, so no request
repeats an earlier one's text), and the first and the tenth are timed client-side. The client is a plain socket
sending prebuilt request bytes (no HTTP library whose own first use would be timed), and one ``GET /healthz`` on the
same connection before them keeps the connection's set-up out of the first. The control: the first tokenizer's
request again in the now warm process after :data:`PAUSE_S` seconds idle (median of :data:`PAUSES`), since a request
after any pause also pays the machine's wake-up (idle CPU, cold caches), which no start-up work can remove.

Memory is measured twice per server: idle (just ready) and after load: ``--load-requests`` ``POST /count`` spread
round-robin over every loaded tokenizer, with distinct texts (so the caches fill), sent over 8 concurrent
keep-alive connections (several workers: the kernel hands connections to both), so the pages a worker dirties by
serving (refcounts, caches, copy-on-write of shared pages) show in its USS. With several workers the report gives
each worker's USS (its unique memory: what one more worker costs) and the tree's total PSS next to one worker's.

The framework's own start-up is the floor of every ready time: each repetition also starts the stock floor app
(:mod:`bench.service.floor_app`: FastAPI, one route returning a constant) on the stock uvicorn CLI, one worker, and
times it the same way, from just before its process starts to its first ``GET /healthz`` 200 (same polling).

Next to it, fresh child processes (:mod:`bench.engine.loadmem`) load the same tokenizers as a library in one process
(``ours``) and the reference libraries on the equivalent files (``refs``: tiktoken for rank files and tekken's ranks,
Hugging Face ``tokenizers`` for ``tokenizer.json``, ``sentencepiece`` for ``.model``; files written once by
:class:`bench.peers.artifacts.Artifacts` into ``--work-dir``, not timed). Every figure is the median over ``--reps``.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, BinaryIO

from bench.engine.loadmem import smaps_kib
from bench.service.run import start as start_process
from bench.service.run import stop, wait_ready
from harness.server import REPO_ROOT, free_port, serve_env, start

TEXT = "Hello, world! How many tokens is this short sentence?"
#: The control of the first-request figures: requests after this many seconds idle, this many times (see
#: :func:`measure_service`).
PAUSE_S = 0.5
PAUSES = 3


def _log(msg: str) -> None:
    print(f"[startup] {msg}", file=sys.stderr, flush=True)


def store_names() -> list[str]:
    """Every tokenizer of the bundled store, in manifest order."""
    from app.engine import get_store

    return list(get_store().names())


def reference_files(names: list[str], work_dir: Path) -> dict[str, list[list[Any]]]:
    """The ``refs`` argument of :mod:`bench.engine.loadmem` for ``names``: each tokenizer in the reference library
    that reads its format (GGUF: the SentencePiece model or ``tokenizer.json`` the test suite rebuilds)."""
    from bench.peers.artifacts import Artifacts

    a = Artifacts(work_dir)
    refs: dict[str, list[list[Any]]] = {"tiktoken": [], "tokenizers": [], "sentencepiece": []}
    for name in names:
        fmt = a.fmt(name)
        if fmt == "tiktoken":
            refs["tiktoken"].append([name, str(a.tiktoken(name)), a.pattern(name), a.special_tokens(name)])
        elif fmt == "tekken":
            path, pattern, _ = a.tekken_ranks(name)
            refs["tiktoken"].append([name, str(path), pattern, {}])
        elif fmt == "hf_json" or name in ("qwen2", "bge-small-en-v1.5"):
            refs["tokenizers"].append([name, str(a.tokenizer_json(name))])
        else:  # SentencePiece models and GGUF llama / unigram vocabularies
            refs["sentencepiece"].append([name, str(a.sentencepiece_model(name))])
    return refs


def run_loadmem(*args: str) -> dict[str, Any]:
    """One fresh ``bench.engine.loadmem`` child; its JSON line."""
    p = subprocess.run([sys.executable, "-m", "bench.engine.loadmem", *args], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"loadmem {args[0]} failed:\n{p.stderr[-2000:]}")
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def _process_tree(server_pid: int, workers: list[int]) -> dict[str, dict[str, int]]:
    procs = {"supervisor": smaps_kib(server_pid)}
    for i, pid in enumerate(workers):
        if pid != server_pid:
            procs[f"worker{i + 1}"] = smaps_kib(pid)
    return procs


def exchange(sock: socket.socket, reader: BinaryIO, request: bytes) -> bytes:
    """Send one HTTP/1.1 request on a keep-alive connection and read its answer (Content-Length bodies only);
    raises RuntimeError unless the status is 200."""
    sock.sendall(request)
    status = reader.readline()
    length = 0
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = reader.read(length)
    if b" 200 " not in status:
        raise RuntimeError(f"{status!r}: {body[:300]!r}")
    return body


def count_request(name: str, text: str) -> bytes:
    body = json.dumps({"tokenizer": name, "text": text}).encode()
    return (b"POST /count HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body))


def load_traffic(port: int, names: list[str], total: int, connections: int = 8) -> float:
    """``total`` ``POST /count`` round-robin over ``names`` (distinct texts), over ``connections`` concurrent
    keep-alive connections; returns the seconds it took."""
    import threading

    errors: list[BaseException] = []

    def one(k: int) -> None:
        try:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                reader = sock.makefile("rb")
                for i in range(k, total, connections):
                    exchange(sock, reader, count_request(names[i % len(names)], f"{TEXT} load {i} {i * 7919}"))
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(k,)) for k in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"load traffic failed: {errors[0]!r}")
    return time.perf_counter() - t0


def measure_service(names: list[str], whole_store: bool, workers: int, requests: int, log_dir: Path,
                    load_requests: int = 0) -> dict[str, Any]:
    """One fresh server loading ``names`` (``whole_store``: no ``TOKENIZER_TOKENIZERS``, i.e. every tokenizer):
    ready time, per-process memory and (one worker) first vs ``requests``-th ``/count`` of each of ``names``."""
    env = {"TOKENIZER_TOKENIZERS": "" if whole_store else ",".join(names), "TOKENIZER_LOG_LEVEL": "info"}
    t0 = time.perf_counter()
    server = start(log_dir / f"serve-{workers}w.log", "--workers", str(workers), env=env, ready_timeout=600,
                   poll=0.05)
    ready_s = time.perf_counter() - t0
    try:
        procs = _process_tree(server.pid, server.workers() if workers > 1 else [])
        out: dict[str, Any] = {"ready_s": ready_s, "processes": procs,
                               "total_pss_kib": sum(p["pss"] for p in procs.values())}
        if workers == 1 and requests > 0:
            assert server.port is not None
            with socket.create_connection(("127.0.0.1", server.port)) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                reader = sock.makefile("rb")
                exchange(sock, reader, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
                per: dict[str, list[float]] = {}
                for name in names:
                    times = []
                    for i in range(requests):
                        body = json.dumps({"tokenizer": name, "text": f"{TEXT} {i}"}).encode()
                        raw = (b"POST /count HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                               b"content-length: %d\r\n\r\n%s" % (len(body), body))
                        t = time.perf_counter()
                        exchange(sock, reader, raw)
                        times.append(time.perf_counter() - t)
                    per[name] = times
                # The control: the same request in the now warm process after PAUSE_S idle, the gap readiness
                # polling leaves before the first request (a request after a pause also pays the machine's wake-up)
                paused = []
                for i in range(PAUSES):
                    time.sleep(PAUSE_S)
                    body = json.dumps({"tokenizer": names[0], "text": f"{TEXT} {i}"}).encode()
                    raw = (b"POST /count HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                           b"content-length: %d\r\n\r\n%s" % (len(body), body))
                    t = time.perf_counter()
                    exchange(sock, reader, raw)
                    paused.append(time.perf_counter() - t)
            out["requests_ms"] = {n: [x * 1e3 for x in ts] for n, ts in per.items()}
            out["after_pause_ms"] = _med([x * 1e3 for x in paused])
        if load_requests > 0:
            assert server.port is not None
            out["load_s"] = load_traffic(server.port, names, load_requests)
            after = _process_tree(server.pid, server.workers() if workers > 1 else [])
            out["after_load"] = {"processes": after, "total_pss_kib": sum(p["pss"] for p in after.values())}
        return out
    finally:
        server.stop()


def measure_floor(log_dir: Path, poll: float = 0.05) -> dict[str, Any]:
    """The stock floor app on the stock uvicorn CLI (see the module docstring): seconds from just before its
    process starts to its first ``GET /healthz`` 200, polled every ``poll`` s as ours is, and its memory then.
    Raises RuntimeError if it exits or does not answer within 120 s."""
    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", "bench.service.floor_app:app", "--host", "127.0.0.1", "--port",
           str(port), "--no-access-log"]
    t0 = time.perf_counter()
    proc = start_process(cmd, serve_env(), log_dir / "floor.log")
    try:
        wait_ready(f"http://127.0.0.1:{port}", proc, timeout=120, poll=poll)
        ready_s = time.perf_counter() - t0
        return {"ready_s": ready_s, "processes": {"supervisor": smaps_kib(proc.pid)}}
    finally:
        stop(proc)


def _med(xs: list[float]) -> float:
    return float(statistics.median(xs))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement, ``args.reps`` times (configurations rotated), medians in ``summary``."""
    all_names = store_names()
    sets = {"store": all_names, "one": args.one.split(",")}
    work = Path(args.work_dir)
    samples: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for rep in range(args.reps):
            _log(f"rep {rep + 1}/{args.reps}: the stock floor app")
            samples.setdefault("floor|stock", []).append(measure_floor(Path(tmp)))
            for set_name in args.sets:
                names = sets[set_name]
                refs = json.dumps(reference_files(names, work))
                _log(f"rep {rep + 1}/{args.reps} {set_name}: libraries")
                samples.setdefault(f"{set_name}|refs", []).append(run_loadmem("refs", refs))
                samples.setdefault(f"{set_name}|ours-lib", []).append(
                    run_loadmem("ours", "default", ",".join(names)))
                for w in args.workers:
                    _log(f"rep {rep + 1}/{args.reps} {set_name}: serve --workers {w}")
                    samples.setdefault(f"{set_name}|serve{w}", []).append(
                        measure_service(names, set_name == "store", w, args.requests, Path(tmp),
                                        args.load_requests))
    return {"samples": samples, "summary": summarize(samples, args.requests)}


def summarize(samples: dict[str, list[dict[str, Any]]], requests: int) -> dict[str, Any]:
    """Medians over the repetitions."""
    out: dict[str, Any] = {}
    for key, ds in samples.items():
        if key.endswith(("|refs", "|ours-lib")):
            out[key] = {"load_s": _med([d["load_s"] for d in ds]),
                        **{k: _med([d["smaps"][k] for d in ds]) for k in ("rss", "pss", "uss")},
                        "tokenizers": len(ds[0]["encodings"])}
            continue
        if key == "floor|stock":
            out[key] = {"ready_s": _med([d["ready_s"] for d in ds]),
                        **{k: _med([d["processes"]["supervisor"][k] for d in ds]) for k in ("rss", "pss", "uss")}}
            continue
        s: dict[str, Any] = {"ready_s": _med([d["ready_s"] for d in ds]),
                             "total_pss_kib": _med([d["total_pss_kib"] for d in ds]),
                             "processes": {p: {k: _med([d["processes"][p][k] for d in ds])
                                               for k in ("rss", "pss", "uss")} for p in ds[0]["processes"]}}
        if "after_load" in ds[0]:
            s["after_load"] = {
                "total_pss_kib": _med([d["after_load"]["total_pss_kib"] for d in ds]),
                "processes": {p: {k: _med([d["after_load"]["processes"][p][k] for d in ds])
                                  for k in ("rss", "pss", "uss")} for p in ds[0]["after_load"]["processes"]}}
        if "requests_ms" in ds[0]:
            names = list(ds[0]["requests_ms"])
            s["first_ms"] = {n: _med([d["requests_ms"][n][0] for d in ds]) for n in names}
            s["last_ms"] = {n: _med([d["requests_ms"][n][requests - 1] for d in ds]) for n in names}
            s["after_pause_ms"] = _med([d["after_pause_ms"] for d in ds])
        out[key] = s
    return out


def _mib(kib: float) -> str:
    return f"{kib / 1024:,.0f}"


def render(summary: dict[str, Any], requests: int) -> str:
    """The report: start-up and memory table, then first vs last request per tokenizer."""
    lines = ["| set | what | ready / load s | RSS MiB | PSS MiB | USS MiB |", "|---|---|---:|---:|---:|---:|"]
    for key, s in summary.items():
        set_name, what = key.split("|")
        if key == "floor|stock":
            lines.append(f"| - | the stock floor app (FastAPI, uvicorn CLI, 1 worker) | {s['ready_s']:.2f} "
                         f"| {_mib(s['rss'])} | {_mib(s['pss'])} | {_mib(s['uss'])} |")
            continue
        if "load_s" in s:
            label = ("reference libraries" if what == "refs" else "ours as a library") + f" ({s['tokenizers']})"
            lines.append(f"| {set_name} | {label} | {s['load_s']:.2f} | {_mib(s['rss'])} | {_mib(s['pss'])} "
                         f"| {_mib(s['uss'])} |")
            continue
        for proc, m in s["processes"].items():
            ready = f"{s['ready_s']:.2f}" if proc == "supervisor" else ""
            who = "the one process" if len(s["processes"]) == 1 else proc
            label = f"{what.replace('serve', 'serve, ')} worker(s): {who}"
            lines.append(f"| {set_name} | {label} | {ready} | {_mib(m['rss'])} | {_mib(m['pss'])} | {_mib(m['uss'])} |")
        lines.append(f"| {set_name} | {what.replace('serve', 'serve, ')} worker(s): total PSS | | | "
                     f"{_mib(s['total_pss_kib'])} | |")
        if "after_load" in s:
            for proc, m in s["after_load"]["processes"].items():
                who = "the one process" if len(s["processes"]) == 1 else proc
                label = f"{what.replace('serve', 'serve, ')} worker(s), after load: {who}"
                lines.append(f"| {set_name} | {label} | | {_mib(m['rss'])} | {_mib(m['pss'])} | {_mib(m['uss'])} |")
            lines.append(f"| {set_name} | {what.replace('serve', 'serve, ')} worker(s), after load: total PSS | | | "
                         f"{_mib(s['after_load']['total_pss_kib'])} | |")
    floor = summary.get("floor|stock")
    for set_name in sorted({k.split("|")[0] for k in summary} - {"floor"}):
        one, two = summary.get(f"{set_name}|serve1"), summary.get(f"{set_name}|serve2")
        if one and two:
            lines.append(f"\n{set_name}: total PSS, 1 worker {_mib(one['total_pss_kib'])} MiB, 2 workers "
                         f"{_mib(two['total_pss_kib'])} MiB: 2 workers / 1 worker = "
                         f"{two['total_pss_kib'] / one['total_pss_kib']:.2f}x (idle)")
            uss = ", ".join(f"{p} {_mib(m['uss'])}" for p, m in two["processes"].items() if p != "supervisor")
            lines.append(f"{set_name}: USS (unique memory) per worker, 2 workers, idle: {uss} MiB")
            if "after_load" in one and "after_load" in two:
                a1, a2 = one["after_load"], two["after_load"]
                lines.append(f"{set_name}: after load, total PSS 1 worker {_mib(a1['total_pss_kib'])} MiB, 2 workers "
                             f"{_mib(a2['total_pss_kib'])} MiB: {a2['total_pss_kib'] / a1['total_pss_kib']:.2f}x")
                uss = ", ".join(f"{p} {_mib(m['uss'])}" for p, m in a2["processes"].items() if p != "supervisor")
                lines.append(f"{set_name}: USS per worker, 2 workers, after load: {uss} MiB")
        refs = summary.get(f"{set_name}|refs")
        if one and refs:
            lines.append(f"{set_name}: ready (1 worker) / reference libraries' load = "
                         f"{one['ready_s'] / refs['load_s']:.2f}x")
        if one and floor:
            lines.append(f"{set_name}: ready (1 worker) {one['ready_s']:.2f} s = the stock floor app's "
                         f"{floor['ready_s']:.2f} s + {one['ready_s'] - floor['ready_s']:.2f} s")
    for key, s in summary.items():
        if "first_ms" in s:
            lines += ["", f"{key}: POST /count ({len(TEXT)} B), first vs request {requests} after readiness, ms",
                      "", f"| tokenizer | first | #{requests} | first / #{requests} |", "|---|---:|---:|---:|"]
            ratios = []
            for n, first in s["first_ms"].items():
                last = s["last_ms"][n]
                ratios.append(first / last)
                lines.append(f"| {n} | {first:.2f} | {last:.2f} | {first / last:.1f}x |")
            lines.append(f"| median over tokenizers | {_med(list(s['first_ms'].values())):.2f} "
                         f"| {_med(list(s['last_ms'].values())):.2f} | {_med(ratios):.1f}x |")
            first_name = next(iter(s["first_ms"]))
            lines.append(f"\nThe process's first /count ({first_name}) {s['first_ms'][first_name]:.2f} ms; the same "
                         f"request in the warm process after {PAUSE_S:g} s idle (median of {PAUSES}): "
                         f"{s['after_pause_ms']:.2f} ms; its #{requests} in a burst: {s['last_ms'][first_name]:.2f} ms")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--workers", default="1,2", help="comma-separated worker counts (default 1,2)")
    p.add_argument("--sets", default="store,one", help="store, one or both (default both)")
    p.add_argument("--one", default="cl100k_base", help="the tokenizer(s) of the `one` set (comma-separated)")
    p.add_argument("--requests", type=int, default=10, help="/count requests per tokenizer (1 worker); 0: none")
    p.add_argument("--load-requests", type=int, default=3000,
                   help="/count requests over every tokenizer before the second memory reading; 0: none")
    p.add_argument("--work-dir", default=str(Path(tempfile.gettempdir()) / "bench-startup-refs"),
                   help="where the reference libraries' files are written (kept between runs)")
    p.add_argument("--json", help="write samples and summary here")
    args = p.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",")]
    args.sets = [s for s in args.sets.split(",") if s]
    if (args.requests < 0 or args.load_requests < 0 or any(w < 1 for w in args.workers)
            or not set(args.sets) <= {"store", "one"}):
        p.error("bad --requests, --load-requests, --workers or --sets")
    result = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    print(render(result["summary"], args.requests))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
