"""Instructions per request of this service's and the floor app's ASGI path, counted by callgrind (stable on a loaded
machine, unlike wall time): each app answers ``/count`` in-process (no sockets) on the floor bench's bodies, run
under ``valgrind --tool=callgrind`` with a small and a larger number of requests; the difference divided by the
difference in requests is the cost of one request (start-up and warm-up cancel out).

    python -m bench.service.instructions [--app ours|floor] [--bytes 200] [--path /count]

Multiprocess metrics mode is on (a fresh ``PROMETHEUS_MULTIPROC_DIR``), as under ``serve --workers 2``, and
``PYTHONHASHSEED=0`` keeps runs comparable. Needs ``valgrind``; takes about a minute per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile

from .run import REPO, mixed_corpus, slices


def bodies(size: int) -> list[bytes]:
    return [json.dumps({"tokenizer": "cl100k_base", "text": t}).encode() for t in slices(mixed_corpus(2**20), size, 16)]


async def serve_requests(app_name: str, n: int, size: int, path: str) -> None:
    """Answer 200 warm-up requests and then ``n`` more, in-process."""
    from .asgi_overhead import call

    data = bodies(size)
    if app_name == "floor":
        from . import floor_app

        for i in range(200 + n):
            await call(floor_app.app, path, data[i % len(data)])
        return
    from app.api.main import create_app
    from app.core.config import Settings

    app = create_app(Settings(log_level="warning", tokenizers="cl100k_base"))
    async with app.router.lifespan_context(app):
        for i in range(200 + n):
            await call(app, path, data[i % len(data)])


def instructions(app_name: str, n: int, size: int, path: str) -> int:
    with tempfile.TemporaryDirectory() as metrics_dir, tempfile.TemporaryDirectory() as out_dir:
        env = {**os.environ, "PYTHONHASHSEED": "0", "PROMETHEUS_MULTIPROC_DIR": metrics_dir, "PYTHONPATH": str(REPO)}
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir}/cg.out", sys.executable, "-m",
               "bench.service.instructions", "--child", str(n), "--app", app_name, "--bytes", str(size), "--path", path]
        out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=True).stderr
    return int(re.search(r"Collected : (\d+)", out).group(1))  # type: ignore[union-attr]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--app", choices=("ours", "floor"), default="ours")
    ap.add_argument("--bytes", type=int, default=200)
    ap.add_argument("--path", default="/count")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)  # inside valgrind: serve this many requests
    args = ap.parse_args(argv)
    if args.child is not None:
        asyncio.run(serve_requests(args.app, args.child, args.bytes, args.path))
        return 0
    small, large = 500, 1500
    per_request = (instructions(args.app, large, args.bytes, args.path)
                   - instructions(args.app, small, args.bytes, args.path)) / (large - small)
    print(f"{args.app} {args.path} {args.bytes} B: {per_request:,.0f} instructions/request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
