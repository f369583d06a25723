"""This service against the framework's floor (``bench/service/floor_app.py``: a FastAPI route that reads the body
and returns a constant), measured in the same run, against two floors:

* ``stock``, the floor a user compares with (issue 29): the floor app served by the stock uvicorn CLI
  (``python -m uvicorn bench.service.floor_app:app --workers N``, its default protocol classes: uvloop and httptools
  when installed; access log off, as ours);
* ``same``: the floor app served with this service's own uvicorn options (:func:`app.cli.prefork.uvicorn_options`:
  our header-limit protocol class, no server header), so the difference from ours is the app alone.

All run at the same time with the same worker count; every cell (endpoint x text size) is measured in interleaved
rounds, rotating which server goes first, with the same request bodies (cl100k_base, slices of the mixed benchmark
corpus, a different body per request in turn). The load generator is ``wrk`` (``-t2 -c16 --latency`` by default)
when it is installed, else ``bench/service/loadgen.py``.

    python -m bench.service.floor [--workers 2] [--threads 2] [--connections 16] [--seconds 3] [--rounds 5]
                                  [--out FILE.md]

Reported per cell: median req/s over rounds for each server, ours over each floor, and the median over rounds of
each server's p99 latency with ours over each floor. The issue's targets (against ``stock``): /count 200 B >= 0.9x
with p99 <= 1.2x; 4 KB >= 0.7x.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from harness.server import free_port

from .loadgen import http_post, run_load
from .run import REPO, mixed_corpus, slices, stop, wait_ready

CELLS = (("/count", "200 B", 200), ("/count", "4 KB", 4096), ("/encode", "200 B", 200))
SERVERS = ("ours", "stock", "same")
FLOORS = ("stock", "same")


@dataclass
class Sample:
    rps: float
    p99_ms: float
    errors: int


_LUA = """
local bodies = {%s}
local i = 0
request = function()
  i = i %% #bodies + 1
  return wrk.format("POST", "%s", {["Content-Type"] = "application/json"}, bodies[i])
end
"""


def _lua_string(s: str) -> str:
    return '"' + "".join(c if c.isalnum() or c in " .,:{}_" else f"\\{ord(c):03d}" for c in s) + '"'


def _ms(value: str, unit: str) -> float:
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]


def wrk_load(port: int, path: str, bodies: list[bytes], connections: int, seconds: float, tmp: Path,
             threads: int = 2) -> Sample:
    """One wrk run; p99 from its ``--latency`` distribution, errors = non-2xx + socket errors."""
    script = tmp / "bodies.lua"
    script.write_text(_LUA % (", ".join(_lua_string(b.decode()) for b in bodies), path))
    cmd = ["wrk", f"-t{min(threads, connections)}", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency",
           "-s", str(script), f"http://127.0.0.1:{port}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s|m)\b", out)
    errors = sum(int(n) for n in re.findall(r"(?:Non-2xx or 3xx responses|connect|read|write|timeout)\s*:?\s+(\d+)",
                                            out))
    return Sample(rps, _ms(*p99.groups()) if p99 else float("nan"), errors)  # type: ignore[arg-type]


def loadgen_load(port: int, path: str, bodies: list[bytes], connections: int, seconds: float) -> Sample:
    res = run_load("127.0.0.1", port, [http_post(path, b) for b in bodies], connections, seconds)
    return Sample(res.rps, res.percentile(0.99) * 1e3, res.errors)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="wrk threads")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--client", choices=("wrk", "loadgen"), default="wrk" if shutil.which("wrk") else "loadgen")
    ap.add_argument("--set", action="append", default=[], metavar="TOKENIZER_X=VALUE",
                    help="a setting for this service (repeatable), e.g. TOKENIZER_INLINE_BYTES=65536")
    ap.add_argument("--data-dir", type=Path, help="benchmark corpora directory (default bench/.data)")
    ap.add_argument("--compare", type=Path, metavar="CHECKOUT",
                    help="also measure the service of another checkout (e.g. a git worktree of an older commit, "
                    "its compiled core built) in the same run, as 'other'")
    ap.add_argument("--out", type=Path, help="also write the Markdown table here")
    args = ap.parse_args(argv)

    corpus = mixed_corpus(2**20, args.data_dir)
    bodies = {label: [json.dumps({"tokenizer": "cl100k_base", "text": t}).encode() for t in slices(corpus, n, 16)]
              for _, label, n in CELLS}
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENIZER_") and k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = str(REPO)
    ours_env = {**env, **dict(item.split("=", 1) for item in args.set)}
    servers = SERVERS + (("other",) if args.compare else ())
    ports = {name: free_port() for name in servers}
    w = str(args.workers)
    cmds = {
        "ours": [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(ports["ours"]),
                 "--workers", w, "--no-access-log", "--log-level", "warning"],
        "stock": [sys.executable, "-m", "uvicorn", "bench.service.floor_app:app", "--host", "127.0.0.1", "--port",
                  str(ports["stock"]), "--workers", w, "--no-access-log", "--log-level", "warning"],
        "same": [sys.executable, "-m", "bench.service.floor_app", "--port", str(ports["same"]), "--workers", w],
    }
    cwd = {name: REPO for name in SERVERS}
    if args.compare:
        cmds["other"] = [*cmds["ours"][:7], str(ports["other"]), *cmds["ours"][8:]]
        cwd["other"] = args.compare.resolve()
    samples: dict[tuple[str, str, str], list[Sample]] = {}
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        for name, cmd in cmds.items():
            proc = subprocess.Popen(cmd, cwd=cwd[name], stdout=open(tmp / f"{name}.log", "wb"),  # noqa: SIM115
                                    stderr=subprocess.STDOUT,
                                    env={**(ours_env if name == "ours" else env), "PYTHONPATH": str(cwd[name])})
            stack.callback(stop, proc)
            wait_ready(f"http://127.0.0.1:{ports[name]}", proc)
        load_avg = os.getloadavg()
        for r in range(args.rounds):
            for path, label, _ in CELLS:
                for name in servers[r % len(servers):] + servers[:r % len(servers)]:
                    def go(seconds: float, name: str = name, path: str = path, label: str = label) -> Sample:
                        if args.client == "wrk":
                            return wrk_load(ports[name], path, bodies[label], args.connections, seconds, tmp,
                                            args.threads)
                        return loadgen_load(ports[name], path, bodies[label], args.connections, seconds)
                    go(1)  # warm-up
                    s = go(args.seconds)
                    samples.setdefault((path, label, name), []).append(s)
                    print(f"round {r + 1} {path:8s} {label:6s} {name:6s} {s.rps:9.1f} req/s p99 {s.p99_ms:7.2f} ms "
                          f"errors {s.errors}", flush=True)
    table = render(samples, args, load_avg, servers)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")
    return 0


def render(samples: dict[tuple[str, str, str], list[Sample]], args: argparse.Namespace,
           load_avg: tuple[float, float, float], servers: tuple[str, ...] = SERVERS) -> str:
    other = "other" in servers
    client = f"wrk -t{min(args.threads, args.connections)}" if args.client == "wrk" else args.client
    lines = [
        f"Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs (shared; load average "
        f"{load_avg[0]:.1f} at start); {args.workers} workers each; {args.connections} connections; client "
        f"{client}; {args.rounds} interleaved rounds x {args.seconds:g} s per cell"
        + (f"; ours with {', '.join(args.set)}" if args.set else "")
        + (f"; other = the service of {args.compare}" if other else "") + ".",
        "",
        "| endpoint | text | ours req/s | stock req/s | ours/stock | same req/s | ours/same | ours p99 ms "
        "| stock p99 ms | p99 ours/stock | same p99 ms | p99 ours/same "
        + ("| other req/s | other/stock | other p99 ms " if other else "") + "| errors |",
        "|---|---|" + "---:|" * 10 + ("---:|---:|---:|" if other else "") + "---:|",
    ]

    def med(name: str, path: str, label: str) -> tuple[float, float]:
        runs = samples[(path, label, name)]
        return statistics.median(s.rps for s in runs), statistics.median(s.p99_ms for s in runs)

    for path, label, _ in CELLS:
        (o, op), (st, stp), (sa, sap) = (med(name, path, label) for name in ("ours", "stock", "same"))
        errors = sum(s.errors for name in servers for s in samples[(path, label, name)])
        extra = ""
        if other:
            x, xp = med("other", path, label)
            extra = f"| {x:.0f} | {x / st:.2f}x | {xp:.2f} "
        lines.append(f"| {path} | {label} | {o:.0f} | {st:.0f} | {o / st:.2f}x | {sa:.0f} | {o / sa:.2f}x | {op:.2f} "
                     f"| {stp:.2f} | {op / stp:.2f}x | {sap:.2f} | {op / sap:.2f}x {extra}| {errors} |")
    lines += ["", "stock: the floor app on the stock uvicorn CLI (uvloop + httptools); same: the floor app with our "
              "uvicorn options and protocol class. req/s and p99: medians over rounds; ratios of those medians."]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
