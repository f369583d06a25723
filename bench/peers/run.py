"""The exact tokenizer libraries next to ours on every bundled tokenizer, in one run (issue 28, part 1).

``python -m bench.peers.run`` (full: every tokenizer of :data:`bench.peers.libraries.TOKENIZERS`)
``python -m bench.peers.run --quick --tokenizers cl100k_base --out-dir /tmp/x`` (smoke: tiny inputs, one round)

Per tokenizer, in a child process pinned to one CPU (``os.sched_setaffinity``) with every library's thread pool
set to one thread (:data:`CHILD_ENV`):

1. **exactness first**: the reference library's ids (:data:`bench.peers.libraries.REFERENCE`) on every text of
   both workloads (:mod:`bench.peers.workloads`); ours and each peer compared with them on all texts. A peer that
   differs, raises or cannot load is reported with its first mismatch and never timed or ranked.
2. **timing**: ``--runs`` rounds; each round visits ours, the reference and every exact peer in an order rotated
   from round to round; each visit builds a **fresh instance** (untimed), then times one pass over the 10 KB
   documents (**cold**: the instance's first calls), a second pass (**warm**), then one pass over the 50–200 B
   lines, one Python call per line (the instance has just encoded the documents). Times are the calling thread's
   CPU time (``time.thread_time``, via ``bench.families.word_cache.cpu_pass``), which the other processes on a
   shared machine do not inflate; the whole process's CPU time and wall time of each pass are recorded too, and a
   library whose process CPU time exceeds its thread's (work on another thread) is flagged. Medians over rounds.
   The cold pass includes whatever a library builds lazily on its first call (fastokens: up to 0.25 s) unless
   ``--first-call`` times one short call on each fresh instance first, apart.

Writes ``RESULTS.md`` (the issue's peer table, the lines table, every library's version, loading call and
exactness, load averages before and after) and ``results.json`` into ``--out-dir`` (default ``bench/peers``).
A child that dies (a peer that aborts the process) is re-run without the library it was in, which is reported.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "bench" / "peers"

#: Environment of the child processes: one worker thread for every library that has a pool.
CHILD_ENV = {"RAYON_NUM_THREADS": "1", "FASTOKENS_BPE_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
             "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "POLARS_MAX_THREADS": "1",
             "BENCH_CORPORA_OFFLINE": "1", "RUST_BACKTRACE": "0"}
#: A library's process CPU time may exceed its thread's by this factor before it is flagged (interpreter noise).
OTHER_THREADS_TOLERANCE = 1.10


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- exactness


def first_mismatch(got: Sequence[int], want: Sequence[int]) -> int | None:
    """Index of the first differing id (the shorter length if one is a prefix of the other), None if equal."""
    if list(got) == list(want):
        return None
    return next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))


def check(encode: Callable[[str], Any], workloads: dict[str, list[str]],
          want: dict[str, list[list[int]]]) -> dict[str, Any]:
    """Compare ``encode`` with the reference ids on every text: ``{"exact": True, "texts": n}`` or
    ``{"exact": False, "mismatch": {...}}`` describing the first differing text (workload, index, token position,
    the ids around it, the text near it), or ``{"exact": False, "error": ...}`` if it raised."""
    from bench.peers.libraries import as_ids

    n = 0
    for wname, texts in workloads.items():
        for i, text in enumerate(texts):
            try:
                got = as_ids(encode(text))
            except BaseException as e:  # noqa: BLE001 - a Rust panic is a BaseException; the peer is reported
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                return {"exact": False, "error": f"{wname} text {i}: raised {type(e).__name__}: {e}"[:300]}
            at = first_mismatch(got, want[wname][i])
            if at is not None:
                ref = want[wname][i]
                return {"exact": False, "mismatch": {
                    "workload": wname, "text": i, "token": at, "got": got[at:at + 5], "want": ref[at:at + 5],
                    "tokens": [len(got), len(ref)],
                    "near": text[max(0, len(text) * at // max(1, len(ref)) - 20):][:60]}}
            n += 1
    return {"exact": True, "texts": n}


# --------------------------------------------------------------------------- timing


def timed_pass(encode: Callable[[str], Any], texts: list[str]) -> dict[str, float]:
    """One pass of ``encode`` over ``texts``, garbage collector paused: this thread's CPU seconds
    (``cpu_pass``), the process's CPU seconds and wall seconds."""
    from bench.families.word_cache import cpu_pass

    gc.collect()
    gc.disable()
    try:
        p0, w0 = time.process_time(), time.perf_counter()
        cpu = cpu_pass(encode, texts)
        proc, wall = time.process_time() - p0, time.perf_counter() - w0
    finally:
        gc.enable()
    return {"cpu": cpu, "process": proc, "wall": wall}


#: The one short call ``--first-call`` times on a fresh instance before its documents (lazy initialisation).
FIRST_CALL_TEXT = "Hello, world."


def time_engines(engines: dict[str, Callable[[], Callable[[str], Any]]], workloads: dict[str, list[str]],
                 runs: int, first_call: bool = False) -> dict[str, dict[str, list[dict[str, float]]]]:
    """``{engine: {"docs_cold"|"docs_warm"|"lines": [pass timings per round]}}``: each round builds a fresh
    instance of every engine (order rotated per round), times the documents twice, then the lines. With
    ``first_call``, one call on :data:`FIRST_CALL_TEXT` is timed first (``"first_call"``), so the cold pass no longer
    includes whatever a library builds lazily on its first call."""
    kinds = ["first_call"] if first_call else []
    out: dict[str, dict[str, list[dict[str, float]]]] = {
        e: {k: [] for k in [*kinds, "docs_cold", "docs_warm", "lines"]} for e in engines}
    names = list(engines)
    for r in range(runs):
        k = r % len(names)
        for e in names[k:] + names[:k]:
            _log(f"round {r + 1}/{runs}: {e}")
            print(f"PEER {e}", file=sys.stderr, flush=True)
            tokenizer = engines[e]()
            if first_call:
                out[e]["first_call"].append(timed_pass(tokenizer, [FIRST_CALL_TEXT]))
            out[e]["docs_cold"].append(timed_pass(tokenizer, workloads["docs"]))
            out[e]["docs_warm"].append(timed_pass(tokenizer, workloads["docs"]))
            out[e]["lines"].append(timed_pass(tokenizer, workloads["lines"]))
            del tokenizer
    return out


def summarize(samples: dict[str, list[dict[str, float]]], workloads: dict[str, list[str]]) -> dict[str, Any]:
    """Medians per pass kind: MB/s (10^6 UTF-8 bytes per CPU second), µs per call, and the process/thread CPU
    ratio."""
    out: dict[str, Any] = {}
    for kind, passes in samples.items():
        texts = {"lines": workloads["lines"], "first_call": [FIRST_CALL_TEXT]}.get(kind, workloads["docs"])
        nbytes = sum(len(t.encode("utf-8")) for t in texts)
        cpu = statistics.median(p["cpu"] for p in passes)
        out[kind] = {"mb_s": nbytes / cpu / 1e6 if cpu > 0 else None, "us_per_call": cpu / len(texts) * 1e6,
                     "wall_mb_s": nbytes / statistics.median(p["wall"] for p in passes) / 1e6,
                     "process_over_thread": statistics.median(p["process"] / p["cpu"] for p in passes if p["cpu"]),
                     "cpu_s": [p["cpu"] for p in passes]}
    return out


# --------------------------------------------------------------------------- child: one tokenizer


def run_child(args: argparse.Namespace) -> dict[str, Any]:
    """Measure one tokenizer (``args.child``) in this process, pinned to ``args.cpu``."""
    os.sched_setaffinity(0, {args.cpu})
    from bench.peers import libraries, workloads
    from bench.peers.artifacts import Artifacts

    name = args.child
    texts = workloads.corpora_texts(args.data_dir, args.max_corpora)
    wl = {"docs": workloads.documents(texts, args.docs_per_corpus), "lines": workloads.lines(texts, args.lines)}
    art = Artifacts(args.work_dir)
    skip = set(args.skip or [])
    libs = [lib for lib in args.libraries if lib not in skip]
    if libraries.REFERENCE[name] not in libs:
        libs.insert(0, libraries.REFERENCE[name])
    cands = libraries.candidates(name, art, libs)
    result: dict[str, Any] = {"tokenizer": name, "reference": libraries.REFERENCE[name], "libraries": {},
                              "workloads": {k: {"texts": len(v), "bytes": sum(len(t.encode()) for t in v)}
                                            for k, v in wl.items()}}
    ref_peer = next(p for p in cands if p.library == libraries.REFERENCE[name])
    if isinstance(ref_peer, libraries.Missing):
        raise SystemExit(f"{name}: reference {ref_peer.library} unavailable: {ref_peer.reason}")
    ref = ref_peer.load()
    want = {k: [libraries.as_ids(ref(t)) for t in v] for k, v in wl.items()}
    engines: dict[str, Callable[[], Callable[[str], Any]]] = {}
    ours = libraries.ours(name)
    for peer in [ours, *cands]:
        row: dict[str, Any] = {"version": peer.version}
        if isinstance(peer, libraries.Missing):
            row.update(status="not measured", reason=peer.reason)
            result["libraries"][peer.library] = row
            continue
        row["call"] = peer.call
        print(f"PEER {peer.library}", file=sys.stderr, flush=True)
        _log(f"{name}: checking {peer.library}")
        try:
            t0 = time.perf_counter()
            tokenizer = peer.load()
            row["load_s"] = time.perf_counter() - t0
        except BaseException as e:  # noqa: BLE001 - a loader that fails or panics is a result
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            row.update(status="does not load", reason=f"{type(e).__name__}: {e}"[:300])
            result["libraries"][peer.library] = row
            continue
        row.update(check(tokenizer, wl, want) if peer is not ref_peer else {"exact": True, "texts": None})
        row["status"] = "exact" if row["exact"] else "not exact"
        del tokenizer
        result["libraries"][peer.library] = row
        if row["exact"]:
            engines[peer.library] = peer.load
    timings = time_engines(engines, wl, args.runs, args.first_call)
    for lib, samples in timings.items():
        result["libraries"][lib]["timing"] = summarize(samples, wl)
    return result


# --------------------------------------------------------------------------- parent: every tokenizer


def _child_cmd(args: argparse.Namespace, name: str, out: Path, skip: list[str], cpu: int) -> list[str]:
    cmd = [sys.executable, "-m", "bench.peers.run", "--child", name, "--child-out", str(out), "--cpu", str(cpu),
           "--runs", str(args.runs), "--docs-per-corpus", str(args.docs_per_corpus), "--lines", str(args.lines),
           "--work-dir", str(args.work_dir), "--libraries", ",".join(args.libraries)]
    if args.first_call:
        cmd.append("--first-call")
    if args.max_corpora:
        cmd += ["--max-corpora", str(args.max_corpora)]
    if args.data_dir:
        cmd += ["--data-dir", str(args.data_dir)]
    if skip:
        cmd += ["--skip", ",".join(skip)]
    return cmd


def measure(args: argparse.Namespace, name: str, cpu: int) -> dict[str, Any]:
    """Run the child for ``name`` pinned to ``cpu``; if it dies inside a library, record that and run it again
    without it."""
    crashed: dict[str, str] = {}
    for _ in range(4):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "result.json"
            proc = subprocess.Popen(_child_cmd(args, name, out, list(crashed), cpu), cwd=REPO,
                                    env={**os.environ, **CHILD_ENV}, stderr=subprocess.PIPE, text=True)
            assert proc.stderr is not None
            err: list[str] = []
            for line in proc.stderr:  # relayed as it comes (progress), kept to find a crashing library
                err.append(line)
                if not line.startswith("PEER "):
                    sys.stderr.write(f"{name}: {line}" if args.jobs > 1 else line)
            proc.wait()
            stderr = "".join(err)
            if proc.returncode == 0 and out.exists():
                result: dict[str, Any] = json.loads(out.read_text())
                result["cpu"] = cpu
                for lib, why in crashed.items():
                    result["libraries"][lib] = {"version": _version(lib), "status": "crashes the process",
                                                "reason": why}
                return result
        peer = [ln.split(" ", 1)[1].strip() for ln in err if ln.startswith("PEER ")]
        tail = " | ".join(ln.strip() for ln in err[-3:])[-300:]
        if not peer or peer[-1] == "ours" or peer[-1] in crashed:
            raise SystemExit(f"{name}: child failed (exit {proc.returncode}): {stderr[-2000:]}")
        crashed[peer[-1]] = f"exit {proc.returncode}: {tail}"
        _log(f"{name}: child died in {peer[-1]} (exit {proc.returncode}); again without it")
    raise SystemExit(f"{name}: too many crashing libraries: {crashed}")


def run_all(args: argparse.Namespace, names: list[str],
            progress: Callable[[list[dict[str, Any]]], object]) -> list[dict[str, Any]]:
    """:func:`measure` every tokenizer, ``args.jobs`` children at a time, each on its own CPU (the last ``jobs``
    CPUs allowed, ``args.cpu`` first); results in the order of ``names``."""
    import queue
    from concurrent.futures import ThreadPoolExecutor

    allowed = sorted(os.sched_getaffinity(0), reverse=True)
    cpus: queue.Queue[int] = queue.Queue()
    for c in [args.cpu, *(c for c in allowed if c != args.cpu)][:args.jobs]:
        cpus.put(c)
    done: dict[str, dict[str, Any]] = {}

    def one(name: str) -> None:
        cpu = cpus.get()
        try:
            _log(f"{name} ... (CPU {cpu})")
            done[name] = measure(args, name, cpu)
            progress([done[n] for n in names if n in done])
        finally:
            cpus.put(cpu)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for f in [pool.submit(one, n) for n in names]:
            f.result()
    return [done[n] for n in names]


def _version(lib: str) -> str:
    from bench.peers.libraries import version

    return version(lib)


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# --------------------------------------------------------------------------- report


def ranked(result: dict[str, Any], kind: str) -> list[tuple[str, float]]:
    """Exact, timed libraries other than ours, fastest first, by ``kind``'s MB/s."""
    rows = [(lib, r["timing"][kind]["mb_s"]) for lib, r in result["libraries"].items()
            if lib != "ours" and r.get("exact") and "timing" in r and r["timing"][kind]["mb_s"]]
    return sorted(rows, key=lambda x: -x[1])


def _lib(result: dict[str, Any], lib: str) -> str:
    return f"{lib} {result['libraries'][lib].get('version', '')}".strip()


def peer_table(results: list[dict[str, Any]], kind: str) -> list[str]:
    """The issue's table for one pass kind: tokenizer | reference | fastest exact peer | ours | ours/fastest."""
    per_call = kind == "lines"
    unit = "µs/call (MB/s)" if per_call else "MB/s"
    lines = [f"| tokenizer | reference, {unit} | fastest exact peer, {unit} | ours, {unit} | ours / fastest |",
             "|---|---:|---|---:|---:|"]

    def cell(lib: str, r: dict[str, Any]) -> str:
        t = r["libraries"][lib]["timing"][kind]
        return f"{t['us_per_call']:.2f} ({t['mb_s']:.1f})" if per_call else f"{t['mb_s']:.1f}"

    for r in results:
        ref, order = r["reference"], ranked(r, kind)
        ours = r["libraries"]["ours"]
        ref_cell = f"{_lib(r, ref)}: {cell(ref, r)}" if "timing" in r["libraries"][ref] else f"{ref}: —"
        if "timing" not in ours:
            lines.append(f"| {r['tokenizer']} | {ref_cell} | — | not timed | — |")
            continue
        mark = "" if ours.get("exact") else " (NOT EXACT)"
        if order:
            best, mb = order[0]
            ratio = ours["timing"][kind]["mb_s"] / mb
            lines.append(f"| {r['tokenizer']} | {ref_cell} | {_lib(r, best)}: {cell(best, r)} | "
                         f"{cell('ours', r)}{mark} | {ratio:.2f}x |")
        else:
            lines.append(f"| {r['tokenizer']} | {ref_cell} | — | {cell('ours', r)}{mark} | — |")
    return lines


def library_table(results: list[dict[str, Any]]) -> list[str]:
    """Every library on every tokenizer: status, cold/warm/lines MB/s, load seconds, first mismatch or reason."""
    lines = ["| tokenizer | library | status | docs cold MB/s | docs warm MB/s | lines µs/call | load s | "
             "exactness / note |", "|---|---|---|---:|---:|---:|---:|---|"]
    for r in results:
        for lib, row in r["libraries"].items():
            t = row.get("timing")
            nums = (f"{t['docs_cold']['mb_s']:.1f} | {t['docs_warm']['mb_s']:.1f} | {t['lines']['us_per_call']:.2f}"
                    if t else "— | — | —")
            load = f"{row['load_s']:.2f}" if "load_s" in row else "—"
            if row.get("exact"):
                note = f"equal on {row['texts']} texts" if row.get("texts") else "the reference"
                if t and "first_call" in t:
                    note += f"; first call {t['first_call']['us_per_call'] / 1e3:.2f} ms"
                if t and max(t[k]["process_over_thread"] for k in t if k != "first_call") > OTHER_THREADS_TOLERANCE:
                    note += "; WORK ON OTHER THREADS (process CPU > thread CPU): figures undercount"
            elif "mismatch" in row:
                m = row["mismatch"]
                note = (f"first mismatch: {m['workload']} text {m['text']}, token {m['token']}: {m['got']} vs "
                        f"{m['want']} ({m['tokens'][0]} vs {m['tokens'][1]} tokens) near {m['near']!r}")
            else:
                note = row.get("error") or row.get("reason", "")
            note = note.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {r['tokenizer']} | {_lib(r, lib)} | {row['status']} | {nums} | {load} | {note} |")
    return lines


def calls_table(results: list[dict[str, Any]]) -> list[str]:
    """The loading call of each library, per tokenizer (``{file}``: the artifact path, see bench/peers/artifacts)."""
    lines = ["| tokenizer | library | loading call (fresh instance) -> timed encode |", "|---|---|---|"]
    for r in results:
        for lib, row in r["libraries"].items():
            if "call" in row:
                lines.append(f"| {r['tokenizer']} | {lib} | `{row['call'].replace('{file}', r['tokenizer'])}` |")
    return lines


def render(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    versions = ", ".join(f"{k} {v or 'not installed'}" for k, v in meta["versions"].items())
    wl = meta["workloads"]
    out = [
        "# Peer libraries vs ours, every bundled tokenizer (issue 28, part 1)", "",
        "```", meta["command"], "```", "",
        f"Commit {meta['commit']}, {meta['machine']}, {meta['started']} – {meta['finished']} UTC. "
        f"One thread pinned to one CPU ({meta['jobs']} tokenizer(s) at a time, each child on its own CPU), "
        f"{meta['runs']} interleaved rounds (medians), a fresh instance per round. "
        f"Documents: {wl['docs']['texts']} x 10 KB ({wl['docs']['bytes']:,} B); "
        f"lines: {wl['lines']['texts']} of 50–200 B ({wl['lines']['bytes']:,} B). "
        "Times are the calling thread's CPU time (`time.thread_time`).", "",
        f"Load before: `{meta['uptime_before']}`  ", f"Load after: `{meta['uptime_after']}`", "",
        f"Versions: {versions}.", "",
    ]
    if meta.get("note"):
        out += [meta["note"], ""]
    cold = ("a fresh instance's first pass over them, after one timed call on a short text"
            if meta.get("first_call") else "a fresh instance's first pass, its lazy initialisation included")
    out += [f"## 10 KB documents, cold ({cold}), MB/s", "", *peer_table(results, "docs_cold"),
            "", "## 10 KB documents, warm (the same instance's second pass), MB/s", "",
            *peer_table(results, "docs_warm"), "",
            "## Chat-sized lines (50–200 B), one Python call each, after the documents", "",
            *peer_table(results, "lines"), "",
            "## Every library: exactness, speed, load time", "",
            "Only exact libraries are timed or ranked; the reference is exact by definition. Load seconds are wall "
            "time of one fresh instance during the exactness check.", "", *library_table(results), "",
            "## Loading calls", "", *calls_table(results), ""]
    return "\n".join(out)


#: Where the hand-written part of RESULTS.md starts (lazy initialisation, ``bench.peers.profile`` and ``perf``
#: findings): a new run keeps it.
KEPT_SECTION = "## Notes kept across runs"


def kept_sections(path: Path) -> str:
    """The part of an existing report from :data:`KEPT_SECTION` to its end ("" if none)."""
    if not path.exists():
        return ""
    text = path.read_text()
    at = text.find(KEPT_SECTION)
    return "\n" + text[at:] if at >= 0 else ""


# --------------------------------------------------------------------------- CLI


def parse(argv: list[str] | None) -> argparse.Namespace:
    from bench.peers.libraries import LIBRARIES, TOKENIZERS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokenizers", default=",".join(TOKENIZERS))
    p.add_argument("--libraries", default=",".join(LIBRARIES), help="peer libraries (PyPI names) to try")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--docs-per-corpus", type=int, default=8, help="10 KB documents per corpus (12 corpora)")
    p.add_argument("--lines", type=int, default=400, help="chat-sized lines")
    p.add_argument("--max-corpora", type=int, default=None, help="use only the first N corpora")
    p.add_argument("--cpu", type=int, default=None, help="the CPU to pin to (default: the last one allowed)")
    p.add_argument("--first-call", action="store_true",
                   help="time one short call on each fresh instance before its cold pass (lazy initialisation)")
    p.add_argument("--jobs", type=int, default=1, help="tokenizers measured at once, each child on its own CPU")
    p.add_argument("--quick", action="store_true", help="smoke test: 1 round, 3 corpora, 1 document each, 20 lines")
    p.add_argument("--out-dir", type=Path, default=None, help=f"where RESULTS.md/results.json go ({DEFAULT_OUT})")
    p.add_argument("--work-dir", type=Path, default=None, help="artifact files for the peers (default: a temp dir)")
    p.add_argument("--data-dir", type=Path, default=None, help="bench.corpora data directory")
    p.add_argument("--note", default="", help="a paragraph for the report (e.g. the machine's state)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--skip", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.libraries = [x for x in args.libraries.split(",") if x]
    args.skip = [x for x in (args.skip or "").split(",") if x]
    if args.quick:
        args.runs, args.docs_per_corpus, args.lines, args.max_corpora = 1, 1, 20, args.max_corpora or 3
    if args.cpu is None:
        args.cpu = max(os.sched_getaffinity(0))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.child:
        args.child_out.write_text(json.dumps(run_child(args)))
        return 0
    from bench.peers.libraries import LIBRARIES, version

    out_dir = args.out_dir or (Path(tempfile.mkdtemp(prefix="bench-peers-")) if args.quick else DEFAULT_OUT)
    out_dir.mkdir(parents=True, exist_ok=True)
    own_work = args.work_dir is None
    args.work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-peers-files-"))
    shown = [a for a in (sys.argv[1:] if argv is None else argv)]
    meta: dict[str, Any] = {
        "command": "python -m bench.peers.run " + " ".join(shown), "commit": _commit(), "cpu": args.cpu,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"), "uptime_before": _uptime(),
        "runs": args.runs, "jobs": args.jobs, "quick": args.quick, "note": args.note, "first_call": args.first_call,
        "versions": {lib: version(lib) for lib in LIBRARIES},
    }
    names = args.tokenizers.split(",")
    results = run_all(args, names, lambda done: (out_dir / "results.json").write_text(
        json.dumps({"meta": meta, "results": done}, indent=1) + "\n"))
    meta.update(uptime_after=_uptime(), finished=dt.datetime.now(dt.UTC).strftime("%H:%M"),
                workloads=results[0]["workloads"] if results else {})
    report = render(results, meta)
    (out_dir / "RESULTS.md").write_text(report + "\n" + kept_sections(out_dir / "RESULTS.md"))
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    if own_work:
        import shutil

        shutil.rmtree(args.work_dir, ignore_errors=True)
    print(report)
    _log(f"wrote {out_dir / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
