"""``TOKENIZER_LOAD=lazy`` next to eager: whole store, 2 workers; ready time, memory, first ``/count`` per tokenizer.

``python -m bench.service.lazy_check lazy [WORKERS] [cold]`` (or ``eager``; ``WORKERS`` default 2; ``cold``: drop the
kernel's page cache first, ``sync`` and ``/proc/sys/vm/drop_caches``, root only, so the interpreter, the packages, the
store and the artifact cache are read from disk: the "cold disk" start of a fresh node) prints one JSON line:
seconds to ready (from just before the process starts to ``/readyz`` 200 with every worker's start-up complete,
polled every 10 ms), each process's PSS
and USS (MiB) at readiness and the tree's total PSS, then two ``POST /count`` for each of cl100k_base, xlm-roberta
and gemma3 on one connection (lazy: the first loads the tokenizer in the worker that answers), timed client-side,
then memory again. Results: bench/service/RESULTS.md.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.engine.loadmem import smaps_kib
from bench.service.startup import count_request, exchange
from harness.server import Server, start

NAMES = ("cl100k_base", "xlm-roberta", "gemma3")


def memory(server: Server) -> dict[str, Any]:
    """PSS and USS of every process of the server (one worker: the one process), MiB, and their total PSS."""
    workers = [p for p in server.workers() if p != server.pid]  # (one worker: the server serves itself)
    procs = {"supervisor": smaps_kib(server.pid), **{f"worker{i + 1}": smaps_kib(p) for i, p in enumerate(workers)}}
    return {"processes": {k: {m: v[m] // 1024 for m in ("pss", "uss")} for k, v in procs.items()},
            "total_pss_mib": sum(v["pss"] for v in procs.values()) // 1024}


def drop_page_cache() -> None:
    """Write back dirty pages and drop the kernel's clean page cache (needs root: ``PermissionError`` otherwise)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def main(mode: str, workers: int = 2, cold: bool = False) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        if cold:
            drop_page_cache()
        t0 = time.perf_counter()
        server = start(Path(tmp) / "serve.log", "--workers", str(workers), "--load", mode,
                       env={"TOKENIZER_TOKENIZERS": ""}, ready_timeout=600, poll=0.01)
        try:
            out: dict[str, Any] = {"mode": mode, "workers": workers, "disk": "cold" if cold else "warm",
                                   "ready_s": round(time.perf_counter() - t0, 3),
                                   "idle": memory(server), "count_ms": {}}
            assert server.port is not None
            with socket.create_connection(("127.0.0.1", server.port)) as sock:
                reader = sock.makefile("rb")
                for name in NAMES:
                    for which in ("first", "second"):
                        t = time.perf_counter()
                        exchange(sock, reader, count_request(name, f"{which} use"))
                        out["count_ms"][f"{name} {which}"] = round((time.perf_counter() - t) * 1e3, 2)
            out["after"] = memory(server)
        finally:
            server.stop()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "lazy", int(sys.argv[2]) if len(sys.argv) > 2 else 2,
                          len(sys.argv) > 3 and sys.argv[3] == "cold"))
