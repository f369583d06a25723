"""The 2-CPU target of the bulk bench: Ray Data on 2 CPUs against the single-process loop, in interleaved rounds.

    python -m bench.bulk.ratio --mb 1000 --rounds 3          # the 1 GB rows of bench.bulk.run
    python -m bench.bulk.ratio --mb 1000 --repeat 3 --rounds 2  # the same JSONL three times over (3 GB)

Each round runs, one after the other: the loop (``bench.bulk.run.bench_loop``: one process, the job's own chunk
plan and :class:`~app.bulk.runner.ChunkWorker`, JSONL -> Parquet), Ray with 1 CPU and with 2 CPUs *warm* (a fresh
process and Ray; a one-row job first, which starts Ray Data's own service actors, as on a running cluster; then the
timed job) and Ray with 2 CPUs *cold* (the timed job is the first one of its Ray). ``ray.init`` is not timed; the
one-row job's time is reported as the cold fixed cost. Every method's token total is checked equal. The input is
read once before every method, so that none pays for the disk (on a shared machine the file may have been evicted
from the page cache in between).

With ``--profile``, the 2-CPU warm job also reports the CPU seconds of every process of its Ray session by role
(the driver, the two workers, Ray Data's service actors, raylet and GCS, the rest of Ray), sampled from ``/proc``
(Linux only) every 0.1 s: where the job's CPU goes. Ratios are per round (loop seconds / Ray seconds), medians
reported with the 1-minute load average of the machine (shared: other jobs run on it).

Writes ``bench/results/bulk-ratio.json`` (or ``--out``) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .run import DATA, ROOT, TOKENIZER, bench_loop, make_rows, write_inputs

RESULTS = ROOT / "bench" / "results" / "bulk-ratio.json"

_RAY = """
import json, os, sys, threading, time, ray
sys.path.insert(0, {root!r})
from app.bulk.job import BulkOptions, run_bulk
from bench.bulk.ratio import ProcSampler
t0 = time.perf_counter(); ray.init(address="local", num_cpus={cpus}, include_dashboard=False, logging_level="ERROR")
init = time.perf_counter() - t0
def job(path, out):
    return run_bulk(BulkOptions(inputs=[path], output=out, mode="count", tokenizer={tokenizer!r}, keep=[],
                                overwrite=True, progress=False))
fixed = job({one_row!r}, {out!r} + "-one")["seconds"] if {warm!r} else None
sampler = ProcSampler(os.getpid()) if {profile!r} else None
if sampler: sampler.start()
s = job({path!r}, {out!r})
roles = sampler.stop() if sampler else None
print(json.dumps({{"tokens": s["tokens"], "seconds": s["seconds"], "init": init, "cpu": s["worker_cpu_seconds"],
                  "chunks": s["chunks"], "fixed": fixed, "roles": roles}}))
"""


class ProcSampler:
    """CPU seconds of every descendant of ``root`` (and ``root`` itself), sampled from ``/proc`` every ``every``
    seconds on a thread; :meth:`stop` returns the CPU each spent since :meth:`start`, summed by role."""

    def __init__(self, root: int, every: float = 0.1) -> None:
        import threading

        self.root, self.every = root, every
        self.first: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._tick = os.sysconf("SC_CLK_TCK")

    def _scan(self) -> dict[int, tuple[int, str, float]]:
        out: dict[int, tuple[int, str, float]] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            out[int(name)] = (int(fields[1]), cmd, (int(fields[11]) + int(fields[12])) / self._tick)
        return out

    def _sample(self, baseline: bool = False) -> None:
        procs = self._scan()
        mine = {self.root}
        grew = True
        while grew:  # descendants of root
            grew = False
            for pid, (ppid, _, _) in procs.items():
                if ppid in mine and pid not in mine:
                    mine.add(pid)
                    grew = True
        for pid in mine & procs.keys():
            _, cmd, cpu = procs[pid]
            self.first.setdefault(pid, cpu if baseline else 0.0)  # a process started later: all its CPU counts
            self.last[pid] = (cmd, cpu)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def start(self) -> None:
        self._sample(baseline=True)  # what every process already had: not counted
        self._thread.start()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self._sample()
        roles: dict[str, float] = {}
        for pid, (cmd, cpu) in self.last.items():
            spent = cpu - self.first.get(pid, 0.0)
            role = self.role(pid, cmd)
            roles[role] = round(roles.get(role, 0.0) + spent, 2)
        return dict(sorted(roles.items(), key=lambda kv: -kv[1]))

    def role(self, pid: int, cmd: str) -> str:
        if pid == self.root:
            return "driver"
        if "MapWorker" in cmd:
            return "workers (ChunkWorker actors)"
        if any(name in cmd for name in ("_StatsActor", "_AutoscalingCoordinatorActor", "ActorLocationTracker")):
            return "Ray Data service actors"
        if "raylet" in cmd or "gcs_server" in cmd:
            return "raylet + GCS"
        return "other Ray processes (idle workers, agents, log monitor)"


def bench_ray(path: Path, cpus: int, *, warm: bool, profile: bool = False) -> dict[str, Any]:
    """One timed job in a fresh process and Ray (see the module docstring)."""
    code = _RAY.format(root=str(ROOT), cpus=cpus, tokenizer=TOKENIZER, one_row=str(DATA / "one-row.jsonl"),
                       out=str(DATA / f"out-ratio-{cpus}"), warm=warm, profile=profile, path=str(path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["load_1min"] = round(os.getloadavg()[0], 1)
    return out


def warm_page_cache(path: Path) -> float:
    """Read ``path`` once (into the OS page cache) so that no method pays for the disk: on a shared machine the
    file may have been evicted since the last method ran. Returns the seconds it took."""
    t0 = time.perf_counter()
    with path.open("rb") as f:
        while f.read(1 << 24):
            pass
    return time.perf_counter() - t0


def repeated_input(jsonl: Path, repeat: int) -> Path:
    """``jsonl`` written ``repeat`` times over into one file (the same rows again: more bytes, same content)."""
    if repeat == 1:
        return jsonl
    target = DATA / f"{jsonl.stem}-x{repeat}.jsonl"
    if not target.exists() or target.stat().st_size != repeat * jsonl.stat().st_size:
        with target.open("wb") as out:
            for _ in range(repeat):
                with jsonl.open("rb") as f:
                    while block := f.read(1 << 24):
                        out.write(block)
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=1000.0, help="MB of text in the rows (default 1000)")
    ap.add_argument("--repeat", type=int, default=1, help="the JSONL this many times over in one file (default 1)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold 2-CPU job")
    ap.add_argument("--profile", action="store_true", help="CPU seconds by process role of the 2-CPU warm job")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    jsonl = DATA / "rows.jsonl"
    if not jsonl.exists() or not (DATA / "one-row.jsonl").exists():
        rows = make_rows(args.mb)
        write_inputs(rows)
        write_inputs(rows[:1], "one-row")
    path = repeated_input(jsonl, args.repeat)
    size = path.stat().st_size
    started = os.getloadavg()
    results: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=ROOT, check=False).stdout.strip(),
        "machine": f"{os.cpu_count()} CPUs, load average at start {started[0]:.1f} {started[1]:.1f} {started[2]:.1f}",
        "input": str(path.relative_to(ROOT)), "input_bytes": size, "repeat": args.repeat, "rounds": [],
    }
    methods = ["loop", "ray 1 CPU warm", "ray 2 CPU warm", *([] if args.no_cold else ["ray 2 CPU cold"])]
    tokens = None
    for r in range(args.rounds):
        round_: dict[str, Any] = {}
        for method in methods:
            warm_page_cache(path)
            if method == "loop":
                t, s, cpu = bench_loop(path)
                got = {"tokens": t, "seconds": s, "cpu": cpu, "load_1min": round(os.getloadavg()[0], 1)}
            else:
                cpus = 2 if "2 CPU" in method else 1
                got = bench_ray(path, cpus, warm="warm" in method, profile=args.profile and method == "ray 2 CPU warm")
            tokens = tokens if tokens is not None else got["tokens"]
            assert got["tokens"] == tokens, (method, got["tokens"], tokens)
            round_[method] = got
            print(f"round {r + 1} {method}: {got['seconds']:.2f} s (load {got['load_1min']})", flush=True)
        results["rounds"].append(round_)
    results["tokens"] = tokens
    summary: dict[str, Any] = {}
    for method in methods:
        secs = [rnd[method]["seconds"] for rnd in results["rounds"]]
        cpu = statistics.median(rnd[method]["cpu"] for rnd in results["rounds"])
        summary[method] = {"median_s": round(statistics.median(secs), 2), "best_s": round(min(secs), 2),
                           "mb_per_s": round(size / 1e6 / statistics.median(secs), 1),
                           "mb_per_cpu_s": round(size / 1e6 / cpu, 1) if cpu else None,
                           "loads": [rnd[method]["load_1min"] for rnd in results["rounds"]]}
        if method != "loop":
            ratios = [rnd["loop"]["seconds"] / rnd[method]["seconds"] for rnd in results["rounds"]]
            summary[method]["loop_ratio_median"] = round(statistics.median(ratios), 2)
            summary[method]["loop_ratios"] = [round(x, 2) for x in ratios]
    fixed = [rnd[m]["fixed"] for rnd in results["rounds"] for m in methods if m != "loop" and rnd[m]["fixed"]]
    results["summary"] = summary
    results["cold_fixed_cost_s"] = round(statistics.median(fixed), 2) if fixed else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")

    print(f"\n{path.name}: {size / 1e6:.0f} MB of JSONL, {tokens} tokens ({TOKENIZER}); {results['machine']}; "
          f"commit {results['commit']}\n")
    print("| method | median s | best s | MB/s (median) | MB per CPU-s | loop / this (per round) | load |")
    print("|---|---:|---:|---:|---:|---|---|")
    for method, m in summary.items():
        ratio = "" if method == "loop" else f"{m['loop_ratio_median']}x ({', '.join(map(str, m['loop_ratios']))})"
        print(f"| {method} | {m['median_s']} | {m['best_s']} | {m['mb_per_s']} | {m['mb_per_cpu_s']} | {ratio} "
              f"| {', '.join(map(str, m['loads']))} |")
    print(f"\ncold fixed cost (a one-row job, the first of its Ray): {results['cold_fixed_cost_s']} s")
    for rnd in results["rounds"]:
        roles = rnd.get("ray 2 CPU warm", {}).get("roles")
        if roles:
            print("CPU seconds by process, 2-CPU warm job:", roles)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
