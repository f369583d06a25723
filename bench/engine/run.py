"""Engine benchmark: ours vs tiktoken, Hugging Face tokenizers, bpe-openai and quicktok.

``python -m bench.engine.run`` (full; ~10–20 min on 2 shared cores with the pure-Python engine)
``python -m bench.engine.run --quick --out-dir /tmp/x`` (smoke test: tiny inputs, about half a minute)

What it measures, per encoding (cl100k_base primary, o200k_base secondary):

* **identity first**: every engine's ids are compared with ours on every corpus, every chat message and every
  hostile input (at the smallest size) before anything is timed; an engine that differs on an input is not
  timed on it and the table says so.
* **throughput**: single-thread ``encode`` of each corpus (English prose, source code, one corpus per script),
  MB/s (10^6 UTF-8 bytes) and tokens/s. Medians of ``--runs`` (>= 5) runs; each run visits every corpus and,
  per corpus, every engine in an order rotated from run to run (round-robin interleaving). Ours is timed cold
  (``clear_cache()`` just before) and warm (right after, same text), and ``count`` warm and cold.
  Times are the calling thread's CPU time (``time.thread_time``), which other processes on shared cores do not
  inflate; wall-clock medians are in the JSON too.
* **chat**: per-call latency p50/p99 over the chat corpus (100 B – 2 KiB messages), median over runs.
* **hostile**: doubling test per generator and engine: n, 2n, 4n, 8n characters; the time ratio per doubling is
  ~2 for linear scaling, ~4 for quadratic. A size is only run if 4x the previous call's time stays under
  ``--max-call`` seconds, so a quadratic peer cannot hang the run (skipped sizes are reported).
* **batch**: ``encode_batch`` wall-clock throughput with 1 and 2 threads over ~8 KiB documents.
* **load & memory**: fresh subprocesses (``bench.engine.loadmem``) loading every bundled encoding with ours, and
  the same encodings with tiktoken: seconds from start to loaded, and resident memory (VmRSS / VmHWM).

Outputs ``RESULTS.md`` (tables with ratios ours/peer) in ``--out-dir`` (default ``bench/engine``), a summary
JSON in ``bench/results/engine.json`` and a raw dump in ``bench/results/raw/`` (gitignored); in ``--quick`` mode
or with ``--out-dir``, everything goes to ``--out-dir``.
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
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import corpora
from bench.engine import peers
from bench.engine.peers import Engine, Unavailable

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "bench" / "engine"
RESULTS_DIR = REPO / "bench" / "results"

Timing = dict[str, float]  # {"cpu": s, "wall": s}


def _timed(fn: Callable[..., object], *args: Any) -> Timing:
    """CPU (calling thread) and wall seconds of one ``fn(*args)`` call, garbage collector paused."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        c0, w0 = time.thread_time(), time.perf_counter()
        fn(*args)
        c1, w1 = time.thread_time(), time.perf_counter()
    finally:
        if gc_was:
            gc.enable()
    return {"cpu": c1 - c0, "wall": w1 - w0}


def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def _rotate(items: list[Any], k: int) -> list[Any]:
    if not items:
        return items
    k %= len(items)
    return items[k:] + items[:k]


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- identity


def check_identity(engines: list[Engine], inputs: dict[str, str]) -> dict[str, dict[str, str]]:
    """``{engine: {input: "ok" | reason}}``, comparing each engine's ids with the first engine's (ours)."""
    ref = engines[0]
    out: dict[str, dict[str, str]] = {e.name: {} for e in engines}
    for key, text in inputs.items():
        want = ref.encode(text)
        for e in engines:
            try:
                got = e.encode(text)
            except Exception as ex:  # noqa: BLE001 - a crashing peer is a result, not a harness failure
                out[e.name][key] = f"raised {type(ex).__name__}: {ex}"[:200]
                continue
            if got == want:
                out[e.name][key] = "ok"
            else:
                i = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                         min(len(got), len(want)))
                out[e.name][key] = f"differs at token {i} ({len(got)} vs {len(want)} tokens)"
            if e.count is not None and out[e.name][key] == "ok" and e.count(text) != len(want):
                out[e.name][key] = f"count {e.count(text)} != {len(want)}"
    return out


# --------------------------------------------------------------------------- sections


def bench_throughput(engines: list[Engine], texts: dict[str, str], ident: dict[str, dict[str, str]],
                     runs: int) -> dict[str, Any]:
    """Per corpus and engine variant: lists of timings over ``runs`` interleaved runs."""
    samples: dict[str, dict[str, list[Timing]]] = {c: {} for c in texts}
    for r in range(runs):
        _log(f"throughput run {r + 1}/{runs}")
        for corpus, text in texts.items():
            for e in _rotate(engines, r):
                if ident[e.name].get(corpus) != "ok":
                    continue
                s = samples[corpus]
                if e.is_ours:
                    assert e.clear_cache is not None and e.count is not None
                    e.clear_cache()
                    s.setdefault(f"{e.name}|cold", []).append(_timed(e.encode, text))
                    s.setdefault(f"{e.name}|warm", []).append(_timed(e.encode, text))
                    s.setdefault(f"{e.name}|count-warm", []).append(_timed(e.count, text))
                    e.clear_cache()
                    s.setdefault(f"{e.name}|count-cold", []).append(_timed(e.count, text))
                else:
                    s.setdefault(e.name, []).append(_timed(e.encode, text))
    ref = engines[0]
    out: dict[str, Any] = {}
    for corpus, text in texts.items():
        nbytes = len(text.encode("utf-8"))
        ntok = len(ref.encode(text))
        rows = {}
        for variant, ts in samples[corpus].items():
            cpu, wall = _median([t["cpu"] for t in ts]), _median([t["wall"] for t in ts])
            rows[variant] = {"cpu_s": cpu, "wall_s": wall, "mb_s": nbytes / cpu / 1e6 if cpu > 0 else None,
                             "tok_s": ntok / cpu if cpu > 0 else None,
                             "wall_mb_s": nbytes / wall / 1e6 if wall > 0 else None, "n": len(ts),
                             "cpu_all": [t["cpu"] for t in ts]}
        out[corpus] = {"bytes": nbytes, "tokens": ntok, "engines": rows}
    return out


def bench_chat(engines: list[Engine], msgs: list[str], ident: dict[str, dict[str, str]], runs: int
               ) -> dict[str, Any]:
    """Per-call latency in µs over all messages, both the calling thread's CPU time and wall clock; p50/p99/mean
    per run, then the median over runs. Ours runs twice per run: cache cleared first (cold), then again (warm)."""
    per: dict[str, list[dict[str, float]]] = {}
    cpu_ns, wall_ns = time.thread_time_ns, time.perf_counter_ns
    for r in range(runs):
        _log(f"chat run {r + 1}/{runs}")
        for e in _rotate(engines, r):
            if ident[e.name].get("chat") != "ok":
                continue
            modes = ["cold", "warm"] if e.is_ours else [""]
            for mode in modes:
                if mode == "cold":
                    assert e.clear_cache is not None
                    e.clear_cache()
                cpu: list[float] = []
                wall: list[float] = []
                tokenizer = e.encode
                gc.disable()
                try:
                    for m in msgs:
                        c0, w0 = cpu_ns(), wall_ns()
                        tokenizer(m)
                        w1, c1 = wall_ns(), cpu_ns()
                        cpu.append((c1 - c0) / 1000)
                        wall.append((w1 - w0) / 1000)
                finally:
                    gc.enable()
                key = f"{e.name}|{mode}" if mode else e.name
                per.setdefault(key, []).append({
                    "p50": _pct(cpu, 0.5), "p99": _pct(cpu, 0.99), "mean": statistics.fmean(cpu),
                    "wall_p50": _pct(wall, 0.5), "wall_p99": _pct(wall, 0.99), "wall_mean": statistics.fmean(wall)})
    total = sum(len(m.encode("utf-8")) for m in msgs)
    fields = ("p50", "p99", "mean", "wall_p50", "wall_p99", "wall_mean")
    return {
        "messages": len(msgs), "bytes": total,
        "engines": {k: {**{f"{f}_us": _median([x[f] for x in v]) for f in fields}, "n": len(v)}
                    for k, v in per.items()},
    }


def _repeat(fn: Callable[[str], object], text: str, loops: int, clear: Callable[[], None] | None) -> None:
    for _ in range(loops):
        if clear is not None:
            clear()
        fn(text)


def bench_hostile(engines: list[Engine], n0: int, steps: int, reps: int, max_call: float,
                  min_sample: float = 0.02) -> dict[str, Any]:
    """Doubling test. Identity is checked at the smallest size. Each engine gets a loop count, fixed at the
    smallest size, that makes one sample last >= ``min_sample`` CPU seconds (sub-millisecond calls are otherwise
    timer noise); times are per call. A size runs only while the previous size's per-call time x 4 x loops stays
    under ``max_call`` seconds. ``growth`` = (t(last) / t(first)) ** (1 / doublings), the mean ratio per doubling."""
    out: dict[str, Any] = {}
    ref = engines[0]
    for gen_name, gen in corpora.HOSTILE.items():
        _log(f"hostile {gen_name}")
        sizes = [n0 * 2**k for k in range(steps)]
        small = gen(sizes[0])
        want = ref.encode(small)
        res: dict[str, Any] = {}
        active = []
        loops: dict[str, int] = {}
        for e in engines:
            if e.encode(small) == want:
                active.append(e)
                one = _timed(_repeat, e.encode, small, 3, e.clear_cache)["cpu"] / 3
                loops[e.name] = max(1, min(1000, int(min_sample / max(one, 1e-7)) + 1))
                res[e.name] = {"times_s": [], "sizes": [], "loops": loops[e.name]}
            else:
                res[e.name] = {"identity": f"ids differ at n={sizes[0]}"}
        for n in sizes:
            text = gen(n)
            times: dict[str, list[float]] = {}
            for r in range(reps):
                for e in _rotate(active, r):
                    k = loops[e.name]
                    times.setdefault(e.name, []).append(_timed(_repeat, e.encode, text, k, e.clear_cache)["cpu"] / k)
            for e in list(active):
                t = _median(times[e.name])
                res[e.name]["times_s"].append(t)
                res[e.name]["sizes"].append(n)
                if t * 4 * loops[e.name] > max_call and n != sizes[-1]:
                    res[e.name]["stopped"] = f"stopped after n={n}: {t:.2f}s x 4 > {max_call}s budget"
                    active.remove(e)
        for v in res.values():
            ts = v.get("times_s", [])
            v["ratios"] = [b / a if a > 0 else None for a, b in zip(ts, ts[1:], strict=False)]
            v["growth"] = (ts[-1] / ts[0]) ** (1 / (len(ts) - 1)) if len(ts) > 1 and ts[0] > 0 else None
        out[gen_name] = res
    return out


def bench_batch(engines: list[Engine], docs: list[str], runs: int) -> dict[str, Any]:
    """Wall-clock ``batch(docs, threads)`` throughput for 1 and 2 threads; medians over interleaved runs.

    Also records the cores the process actually got (process CPU seconds / wall seconds): a 2-thread speed-up
    can only show when that reaches ~2, i.e. when the machine has two idle cores."""
    total = sum(len(d.encode("utf-8")) for d in docs)
    usable = [e for e in engines if e.batch is not None]
    load_before = _loadavg()
    for e in usable:  # warm-up (and ours' cache), untimed
        assert e.batch is not None
        e.batch(docs, 1)
    samples: dict[str, list[float]] = {}
    cores: dict[str, list[float]] = {}
    for r in range(runs):
        _log(f"batch run {r + 1}/{runs}")
        for e in _rotate(usable, r):
            for threads in (1, 2):
                p0, w0 = time.process_time(), time.perf_counter()
                e.batch(docs, threads)
                p1, w1 = time.process_time(), time.perf_counter()
                samples.setdefault(f"{e.name}|{threads}", []).append(w1 - w0)
                cores.setdefault(f"{e.name}|{threads}", []).append((p1 - p0) / (w1 - w0) if w1 > w0 else 0.0)
    res: dict[str, Any] = {}
    for e in usable:
        t1, t2 = _median(samples[f"{e.name}|1"]), _median(samples[f"{e.name}|2"])
        res[e.name] = {"mb_s_1t": total / t1 / 1e6, "mb_s_2t": total / t2 / 1e6, "speedup_2t": t1 / t2,
                       "cores_1t": _median(cores[f"{e.name}|1"]), "cores_2t": _median(cores[f"{e.name}|2"])}
    return {"docs": len(docs), "bytes": total, "engines": res, "loadavg_before": load_before,
            "loadavg_after": _loadavg()}


def bench_load_memory(reps: int, backends: list[str | None]) -> dict[str, Any]:
    """Fresh-process load time and RSS: ours (each backend) vs tiktoken with the same byte-level encodings."""
    from app.engine import get_store

    specs = [[s.name, str(s.artifact_path), s.pattern, dict(s.special_tokens)]
             for s in get_store() if s.kind == "byte_bpe"]
    kinds: list[tuple[str, list[str]]] = [("python (bare)", ["none"])]
    for b in backends:
        kinds.append(("ours" if b is None else f"ours-{b}", ["ours", b or "default"]))
    kinds.append(("tiktoken", ["tiktoken", json.dumps(specs)]))
    samples: dict[str, list[dict[str, Any]]] = {}
    for r in range(reps):
        _log(f"load/memory run {r + 1}/{reps}")
        for label, args in _rotate(kinds, r):
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "bench.engine.loadmem", *args], cwd=REPO,
                               capture_output=True, text=True, timeout=600)
            wall = time.perf_counter() - t0
            if p.returncode != 0:
                samples.setdefault(label, []).append({"error": p.stderr[-500:]})
                continue
            d = json.loads(p.stdout.strip().splitlines()[-1])
            d["process_wall_s"] = wall
            samples.setdefault(label, []).append(d)
    res: dict[str, Any] = {}
    for label, ds in samples.items():
        ok = [d for d in ds if "error" not in d]
        if not ok:
            res[label] = {"error": ds[0]["error"]}
            continue
        res[label] = {k: _median([d[k] for d in ok]) for k in ("load_s", "process_wall_s", "rss_kib", "hwm_kib")}
        res[label]["encodings"] = ok[0]["encodings"]
    return res


# --------------------------------------------------------------------------- report


def _f(x: float | None, nd: int = 1) -> str:
    if x is None or x != x:
        return "—"
    return f"{x:.{nd}f}"


def _r(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "—"
    return f"{a / b:.2f}"


def render(summary: dict[str, Any]) -> str:
    """Markdown report of a summary produced by :func:`run`."""
    m = summary["meta"]
    lines = [
        "# Engine benchmark results",
        "",
        f"- command: `{m['command']}`",
        f"- date: {m['date']} · commit {m['commit']} · mode: "
        + ("QUICK (smoke test, not a measurement)" if m["quick"] else "full"),
        f"- machine: {m['machine']} — {m['machine_note']}",
        f"- load average at start / end: {m['loadavg_start']} / {m.get('loadavg_end', '?')}",
        f"- versions: {', '.join(f'{k} {v}' for k, v in m['versions'].items())}",
        f"- runs: {m['runs']} interleaved (medians); throughput = UTF-8 bytes (10^6) or tokens per second of the "
        "calling thread's CPU time",
        "",
    ]
    lines += _targets(summary)
    if m.get("unavailable"):
        lines += ["## Engines not timed", ""]
        for u in m["unavailable"]:
            lines.append(f"- **{u['name']}** ({u['encoding']}): {u['reason']}")
        lines.append("")
    for enc_name, tokenizer in summary["encodings"].items():
        engines: list[str] = tokenizer["engines"]
        ours_names = [e for e in engines if e.startswith("ours")]
        peer_names = [e for e in engines if not e.startswith("ours")]
        lines += [f"## {enc_name}", ""]
        tp = tokenizer.get("throughput")
        if tp:
            variants: list[tuple[str, str]] = []
            for o in ours_names:
                variants += [(f"{o}|cold", f"{o} cold"), (f"{o}|warm", f"{o} warm"),
                             (f"{o}|count-cold", f"{o} count cold"), (f"{o}|count-warm", f"{o} count warm")]
            variants += [(p, p) for p in peer_names]
            for key, title in (("mb_s", "Throughput, MB/s"), ("tok_s", "Tokens/s")):
                scale = 1e-6 if key == "tok_s" else 1.0
                lines += [f"### {title} ({'millions' if key == 'tok_s' else '10^6 bytes'} per CPU-second, one thread)",
                          "", "| corpus | KiB | tokens | " + " | ".join(v[1] for v in variants) + " |",
                          "|---|---:|---:|" + "---:|" * len(variants)]
                meds: dict[str, list[float]] = {}
                for corpus, c in tp.items():
                    cells = []
                    for v, _ in variants:
                        row = c["engines"].get(v)
                        if row and row[key]:
                            cells.append(_f(row[key] * scale, 2 if key == "tok_s" else 1))
                            meds.setdefault(v, []).append(row[key] * scale)
                        else:
                            cells.append(_ident_cell(tokenizer, v.split("|")[0], corpus))
                    lines.append(f"| {corpus} | {c['bytes'] / 1024:.0f} | {c['tokens']} | " + " | ".join(cells) + " |")
                lines.append("| **median** | | | " + " | ".join(
                    f"**{_f(_median(meds.get(v, [])), 2 if key == 'tok_s' else 1)}**" for v, _ in variants) + " |")
                lines.append("")
            # ratios
            for o in ours_names:
                lines += [f"### Ratios {o} / peer (throughput; cold → warm cache of ours)", "",
                          "| corpus | " + " | ".join(f"{o} / {p}" for p in peer_names)
                          + f" | {o} count/encode (warm) |",
                          "|---|" + "---:|" * (len(peer_names) + 1)]
                ratio_meds: dict[str, list[float]] = {}
                for corpus, c in tp.items():
                    e = c["engines"]
                    cold, warm = e.get(f"{o}|cold", {}).get("mb_s"), e.get(f"{o}|warm", {}).get("mb_s")
                    cells = []
                    for p in peer_names:
                        pm = e.get(p, {}).get("mb_s")
                        if pm and cold and warm:
                            cells.append(f"{cold / pm:.2f} → {warm / pm:.2f}")
                            ratio_meds.setdefault(p, []).append(cold / pm)
                            ratio_meds.setdefault(p + "|w", []).append(warm / pm)
                        else:
                            cells.append(_ident_cell(tokenizer, p, corpus))
                    cw = e.get(f"{o}|count-warm", {}).get("mb_s")
                    cells.append(_r(cw, warm))
                    lines.append(f"| {corpus} | " + " | ".join(cells) + " |")
                lines.append("| **median** | " + " | ".join(
                    f"**{_f(_median(ratio_meds.get(p, [])), 2)} → {_f(_median(ratio_meds.get(p + '|w', [])), 2)}**"
                    for p in peer_names) + " | |")
                lines.append("")
        chat = tokenizer.get("chat")
        if chat:
            lines += [f"### Chat messages: per-call latency ({chat['messages']} messages, "
                      f"{chat['bytes'] / chat['messages']:.0f} B mean; µs, median of runs)", "",
                      "CPU = the calling thread's CPU time per call; wall = wall clock, which includes preemption "
                      "by other processes on the shared cores (it dominates wall p99).", "",
                      "| engine | CPU p50 µs | CPU p99 µs | CPU mean µs | wall p50 µs | wall p99 µs "
                      "| speed vs ours warm (engine CPU p50 / ours CPU p50) |",
                      "|---|---:|---:|---:|---:|---:|---:|"]
            e = chat["engines"]
            bases = {o: e.get(f"{o}|warm", {}).get("p50_us") for o in ours_names}
            lines[-2] = lines[-2].replace("| speed vs ours warm (engine CPU p50 / ours CPU p50) |", "| " + " | ".join(
                f"engine p50 / {o} warm p50" for o in ours_names) + " |")
            lines[-1] = "|---|" + "---:|" * (5 + len(ours_names))
            for k, v in e.items():
                ratios = " | ".join(_r(v["p50_us"], bases[o]) for o in ours_names)
                lines.append(f"| {k.replace('|', ' ')} | {_f(v['p50_us'])} | {_f(v['p99_us'])} | {_f(v['mean_us'])} "
                             f"| {_f(v['wall_p50_us'])} | {_f(v['wall_p99_us'])} | {ratios} |")
            for name, verdict in tokenizer["identity"].items():
                if verdict.get("chat", "ok") != "ok":
                    lines.append(f"| {name} | not timed: {verdict['chat']} |" + " |" * (4 + len(ours_names)))
            lines.append("")
        host = tokenizer.get("hostile")
        if host:
            lines += ["### Hostile inputs: doubling test (CPU ms per call at n, 2n, 4n, 8n chars; ratio per doubling: "
                      "~2 linear, ~4 quadratic; growth = mean ratio per doubling, linear if < 2.4)", "",
                      "| input | engine | sizes | ms per call | ratios | growth | verdict |",
                      "|---|---|---|---|---|---:|---|"]
            for gen, res in host.items():
                for name, v in res.items():
                    if "identity" in v:
                        lines.append(f"| {gen} | {name} | | | | | not timed: {v['identity']} |")
                        continue
                    growth = v.get("growth")
                    verdict = ("linear" if growth is not None and growth < 2.4 else
                               "superlinear" if growth is not None else "—")
                    if v.get("stopped"):
                        verdict += f"; {v['stopped']}"
                    lines.append(f"| {gen} | {name} | {', '.join(str(s) for s in v['sizes'])} | "
                                 f"{', '.join(_f(t * 1000, 3) for t in v['times_s'])} | "
                                 f"{', '.join(_f(x, 2) for x in v['ratios'])} | {_f(growth, 2)} | {verdict} |")
            lines.append("")
        batch = tokenizer.get("batch")
        if batch:
            lines += [f"### Batch: encode_batch over {batch['docs']} documents ({batch['bytes'] / 1e6:.2f} MB), "
                      f"wall clock; load average before / after: {batch.get('loadavg_before', '?')} / "
                      f"{batch.get('loadavg_after', '?')}", "",
                      "| engine | MB/s 1 thread | MB/s 2 threads | 2 threads / 1 thread | cores obtained, 1 thread "
                      "| cores obtained, 2 threads |",
                      "|---|---:|---:|---:|---:|---:|"]
            for name, v in batch["engines"].items():
                lines.append(f"| {name} | {_f(v['mb_s_1t'])} | {_f(v['mb_s_2t'])} | {_f(v['speedup_2t'], 2)} "
                             f"| {_f(v.get('cores_1t'), 2)} | {_f(v.get('cores_2t'), 2)} |")
            lines += ["", "Cores obtained = process CPU seconds / wall seconds. A 2-thread speed-up can only show when "
                      "the 2-thread run obtains ~2 cores; on a machine shared with other work it cannot.", "",
                      "HF tokenizers is left out here: its batch API runs on its own Rayon pool "
                      "(pinned to 1 thread in this process for the single-call timings).", ""]
    lm = summary.get("load_memory")
    if lm:
        lines += ["## Load time and resident memory (fresh process, every bundled byte-level encoding loaded)", "",
                  "| process | load s (start → loaded, imports included) | process wall s | RSS MiB | peak RSS MiB "
                  "| encodings |", "|---|---:|---:|---:|---:|---|"]
        for label, v in lm.items():
            if "error" in v:
                lines.append(f"| {label} | error: {v['error'][:120]} | | | | |")
                continue
            lines.append(f"| {label} | {_f(v['load_s'], 2)} | {_f(v['process_wall_s'], 2)} | "
                         f"{_f(v['rss_kib'] / 1024)} | {_f(v['hwm_kib'] / 1024)} | {', '.join(v['encodings'])} |")
        lines += ["", "Ours verifies each artifact's sha256 while loading; tiktoken's `load_tiktoken_bpe` without "
                  "`expected_hash` does not.", ""]
    if summary.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in summary["notes"]] + [""]
    return "\n".join(lines)


def _throughput_ratios(tp: dict[str, Any], variant: str, peer: str) -> list[float]:
    """Per-corpus MB/s ratios ``variant / peer`` over the corpora where both were timed."""
    xs = []
    for c in tp.values():
        a, b = c["engines"].get(variant, {}).get("mb_s"), c["engines"].get(peer, {}).get("mb_s")
        if a and b:
            xs.append(a / b)
    return xs


def _targets(summary: dict[str, Any]) -> list[str]:
    """The issue's targets, evaluated per ours engine on each encoding (cold-cache throughput: peers have none)."""
    out = ["## Targets (issue 4) — cold cache of ours; warm in brackets", "",
           "| encoding | engine | median / tiktoken (>= 4) | min corpus / tiktoken (>= 2) | median / bpe-openai "
           "| median / quicktok (>= 1) | count / encode, min (>= 1) | hostile: worst growth per doubling (~2) "
           "| batch 2 threads / 1 (>= 1.8) | RSS / tiktoken (<= 1) | load time / tiktoken (<= 1) |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lm = summary.get("load_memory", {})
    for enc_name, tokenizer in summary["encodings"].items():
        tp = tokenizer.get("throughput", {})
        for o in [e for e in tokenizer["engines"] if e.startswith("ours")]:
            def ratios(peer: str, mode: str, o: str = o, tp: dict[str, Any] = tp) -> list[float]:
                return _throughput_ratios(tp, f"{o}|{mode}", peer)

            def cell(xs_cold: list[float], xs_warm: list[float], fn: Callable[[list[float]], float]) -> str:
                if not xs_cold:
                    return "—"
                return f"{fn(xs_cold):.2f} ({fn(xs_warm):.2f})"

            med = statistics.median
            tt = cell(ratios("tiktoken", "cold"), ratios("tiktoken", "warm"), med)
            tmin = cell(ratios("tiktoken", "cold"), ratios("tiktoken", "warm"), min)
            bo = cell(ratios("bpe-openai", "cold"), ratios("bpe-openai", "warm"), med)
            qt = cell(ratios("quicktok", "cold"), ratios("quicktok", "warm"), med)
            if qt == "—":
                qt = "not comparable"
            ce = [c["engines"][f"{o}|count-{m}"]["mb_s"] / c["engines"][f"{o}|{m}"]["mb_s"]
                  for c in tp.values() for m in ("cold", "warm") if f"{o}|{m}" in c["engines"]]
            host = [res[o]["growth"] for res in tokenizer.get("hostile", {}).values()
                    if res.get(o, {}).get("growth") is not None]
            batch = tokenizer.get("batch", {}).get("engines", {}).get(o, {}).get("speedup_2t")
            mem = lm.get(o, {}).get("rss_kib"), lm.get("tiktoken", {}).get("rss_kib")
            load = lm.get(o, {}).get("load_s"), lm.get("tiktoken", {}).get("load_s")
            out.append(f"| {enc_name} | {o} | {tt} | {tmin} | {bo} | {qt} | {_f(min(ce), 2) if ce else '—'} "
                       f"| {_f(max(host), 2) if host else '—'} | {_f(batch, 2)} | {_r(*mem)} | {_r(*load)} |")
    out += ["", "Batch 2-thread speed-up needs two idle cores; with other work on the machine (see the load "
            "average above and in the batch section) it understates what the engine can do.", ""]
    return out


def _ident_cell(tokenizer: dict[str, Any], engine: str, corpus: str) -> str:
    v = tokenizer.get("identity", {}).get(engine, {}).get(corpus)
    if v is None or v == "ok":
        return "—"
    return "≠ ids"


# --------------------------------------------------------------------------- driver


def _machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _commit() -> str:
    """HEAD's short hash, plus a warning when ``app/`` (the code under test) has uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "?"
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "app"], cwd=REPO, capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return head + (f" (+ uncommitted changes in {len(dirty.splitlines())} file(s) under app/)" if dirty else "")


def _docs(texts: dict[str, str], chunk: int, limit: int) -> list[str]:
    out: list[str] = []
    size = 0
    for text in texts.values():
        pos = 0
        while pos < len(text) and size < limit:
            end = text.find("\n", pos + chunk)
            end = len(text) if end < 0 else end + 1
            out.append(text[pos:end])
            size += len(out[-1].encode("utf-8"))
            pos = end
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the selected sections; returns the summary (also written to disk by :func:`main`)."""
    quick = args.quick
    max_bytes = args.max_bytes or (4096 if quick else None)
    texts = corpora.bench_texts(args.data_dir, max_bytes)
    texts = {k: v for k, v in texts.items() if v}
    chat = corpora.load_chat(args.data_dir)[: (40 if quick else None)]
    versions = {d: peers._version(d) or "—"
                for d in ("tiktoken", "tokenizers", "bpe-openai", "quicktok-v1", "regex")}
    summary: dict[str, Any] = {
        "meta": {
            "command": args.command_line, "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": _commit(), "quick": quick, "machine": _machine(), "machine_note": args.machine_note,
            "loadavg_start": _loadavg(), "versions": versions, "runs": args.runs, "unavailable": [],
        },
        "encodings": {},
        "notes": [],
    }
    cache_dir = (args.data_dir or corpora.DATA_DIR) / "hf"
    sections = set(args.sections)
    for enc_name in args.encodings:
        _log(f"== {enc_name}: building engines")
        built = peers.all_engines(enc_name, cache_dir, args.peers)
        engines = [e for e in built if isinstance(e, Engine)]
        for u in built:
            if isinstance(u, Unavailable):
                summary["meta"]["unavailable"].append({"name": u.name, "encoding": u.encoding, "reason": u.reason})
        if not engines or not engines[0].is_ours:
            raise SystemExit(f"our engine could not be built for {enc_name}: {built[0]}")
        ident = check_identity(engines, texts)
        ref = engines[0]
        chat_ids = [ref.encode(m) for m in chat]
        for e in engines:
            bad = [i for i, m in enumerate(chat) if e.encode(m) != chat_ids[i]]
            ident[e.name]["chat"] = "ok" if not bad else f"ids differ on {len(bad)}/{len(chat)} messages"
        enc_res: dict[str, Any] = {"engines": [e.name for e in engines], "identity": ident}
        primary = enc_name == args.encodings[0]
        if "throughput" in sections:
            enc_res["throughput"] = bench_throughput(engines, texts, ident, args.runs)
        if "chat" in sections:
            enc_res["chat"] = bench_chat(engines, chat, ident, args.runs)
        if "hostile" in sections and (primary or args.all_sections_every_encoding):
            enc_res["hostile"] = bench_hostile(engines, args.hostile_n, 4, 3 if not quick else 1, args.max_call)
        if "batch" in sections and (primary or args.all_sections_every_encoding):
            docs = _docs(texts, 256 if quick else 8192, 32 * 1024 if quick else 2 * 1024 * 1024)
            enc_res["batch"] = bench_batch(engines, docs, args.runs)
        summary["encodings"][enc_name] = enc_res
        for name, verdicts in ident.items():
            differing = {k: v for k, v in verdicts.items() if v != "ok"}
            if differing:
                summary["notes"].append(f"{enc_name}: {name} ids not identical to ours on {len(differing)} input(s): "
                                        + "; ".join(f"{k}: {v}" for k, v in list(differing.items())[:4]))
    if "memory" in sections:
        backends = peers.our_backends()  # quick: the first (the compiled one) only; the Python one loads for 8 s
        summary["load_memory"] = bench_load_memory(1 if quick else 3, backends[:1] if quick else backends)
    summary["meta"]["loadavg_end"] = _loadavg()
    summary["notes"] += [
        "HF tokenizers: tokenizer.json built by bench/engine/peers.py from our ranks (merges derived from ranks, "
        "ignore_merges, isolating Split + ByteLevel without regex). Oniguruma reads cl100k's `\\p{N}{1,3}+` as a "
        "repeated interval, so the Split regex uses `\\p{N}{1,3}` (same splits: the interval ends its alternative). "
        "HF keeps its own word cache across calls, so its repeated runs are warm.",
        "bpe-openai is timed through its raw binding `_bindings.PyTokenizer.encode` with its wheel's own data.",
        "quicktok is the PyPI distribution quicktok-v1 (import name quicktok), `encode_ordinary` with its wheel's "
        "own data; its batch API returns flat numpy arrays instead of lists of ids (less Python object work).",
        "Hostile inputs: ours is timed with a cleared cache before every call.",
    ]
    return summary


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; see the module docstring."""
    ap = argparse.ArgumentParser(prog="python -m bench.engine.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke test: tiny inputs, 2 runs, cl100k only")
    ap.add_argument("--runs", type=int, default=None, help="interleaved runs (default 5; quick 2)")
    ap.add_argument("--encodings", nargs="+", default=None, help="default: cl100k_base o200k_base (quick: cl100k)")
    ap.add_argument("--peers", nargs="*", default=None,
                    help="restrict peers (tiktoken hf-tokenizers bpe-openai quicktok); default all")
    ap.add_argument("--sections", nargs="+", default=["throughput", "chat", "hostile", "batch", "memory"])
    ap.add_argument("--all-sections-every-encoding", action="store_true",
                    help="also run hostile and batch on the secondary encodings")
    ap.add_argument("--max-bytes", type=int, default=None, help="cut each corpus to this many bytes")
    ap.add_argument("--hostile-n", type=int, default=None, help="smallest hostile size (default 16384; quick 256)")
    ap.add_argument("--max-call", type=float, default=8.0, help="per-call time budget for the doubling test, s")
    ap.add_argument("--data-dir", type=Path, default=None, help="corpora directory (default bench/.data)")
    ap.add_argument("--out-dir", type=Path, default=None, help="where RESULTS.md and the JSON go")
    ap.add_argument("--machine-note", default="2 cores shared with ~5 other concurrently working helpers; "
                    "CPU-time medians reduce but do not remove their effect (cache, frequency)")
    args = ap.parse_args(argv)
    args.command_line = "python -m bench.engine.run" + ("" if not (argv or sys.argv[1:]) else
                                                        " " + " ".join(argv if argv is not None else sys.argv[1:]))
    args.runs = args.runs or (2 if args.quick else 5)
    args.encodings = args.encodings or (["cl100k_base"] if args.quick else ["cl100k_base", "o200k_base"])
    args.hostile_n = args.hostile_n or (256 if args.quick else 16384)
    summary = run(args)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    if args.out_dir is not None or args.quick:
        out_dir = args.out_dir or Path("/tmp/bench-engine-quick")
        md_path, json_path, raw_path = out_dir / "RESULTS.md", out_dir / "engine.json", out_dir / f"raw-{stamp}.json"
    else:
        md_path = DEFAULT_OUT / "RESULTS.md"
        json_path, raw_path = RESULTS_DIR / "engine.json", RESULTS_DIR / "raw" / f"engine-{stamp}.json"
    for p in (md_path, json_path, raw_path):
        p.parent.mkdir(parents=True, exist_ok=True)
    raw_path.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    slim = json.loads(json.dumps(summary, default=str))
    for tokenizer in slim["encodings"].values():
        for c in tokenizer.get("throughput", {}).values():
            for row in c["engines"].values():
                row.pop("cpu_all", None)
    json_path.write_text(json.dumps(slim, indent=1) + "\n")
    md_path.write_text(render(summary))
    _log(f"wrote {md_path}, {json_path}, {raw_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
