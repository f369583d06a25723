"""Instructions per request, counted by callgrind (stable on a loaded machine, unlike wall time), for this service,
the stock floor and the same-protocol floor, whole request path and layer by layer.

    python -m bench.service.instructions [--what server,asgi,layers] [--bytes 200] [--requests 1000]

Every figure is one segment of a process running under ``valgrind --tool=callgrind --instr-atstart=no``: after
warm-up, ``callgrind_control`` zeroes the counters and switches instrumentation on, the segment's ``N`` requests
(or calls) run, instrumentation goes off and the counters are dumped; the figure is the dump's total over ``N``.
Start-up, warm-up and the driver's own work are not counted. Bodies are the floor bench's (cl100k_base, 16
slices of the mixed corpus of ``--bytes`` each, in turn); ``PYTHONHASHSEED=0``; multiprocess metrics mode is on
(a fresh ``PROMETHEUS_MULTIPROC_DIR``), as under ``serve --workers 2``.

* ``server``: one single-process server per app, driven over one keep-alive connection by a client outside
  valgrind, so the figure is the whole server side of a request (event loop, protocol, app). Apps: ``ours``
  (``python -m app serve``'s uvicorn options: uvloop, our header-limit protocol), ``stock`` (the floor app of
  :mod:`bench.service.floor_app` under stock uvicorn options: uvloop + httptools, the issue's floor) and ``same``
  (the floor app under our uvicorn options).
* ``asgi``: each app called in-process (no sockets, no protocol): ``ours`` and the floor app.
* ``price``: issue 26's pair (:mod:`bench.service.price_overhead`'s bodies, in-process): ``/count`` with a
  priced model against the same count by tokenizer, and their ratio per text size.
* ``layers``: the parts of ours' in-process path called alone (the operation, its parse/validation, tokenization
  and serialization, the metric updates of a request, the gateway with a bearer token), so the gateway's own
  share is what remains.

Needs ``valgrind``; about a minute per mode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.server import free_port

from .run import REPO, mixed_corpus, slices

SERVER_APPS = ("ours", "stock", "same")
TOKEN = "bench-token"


def bodies(size: int) -> list[bytes]:
    return [json.dumps({"tokenizer": "cl100k_base", "text": t}).encode() for t in slices(mixed_corpus(2**20), size, 16)]


# ---------------------------------------------------------------------------- the parent (outside valgrind)


class Callgrind:
    """A child under callgrind whose counters are switched on for one segment at a time."""

    def __init__(self, args: list[str], out_dir: str) -> None:
        own = Path(tempfile.mkdtemp(dir=out_dir))
        (own / "metrics").mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENIZER_")}
        env.update(PYTHONHASHSEED="0", PROMETHEUS_MULTIPROC_DIR=str(own / "metrics"), PYTHONPATH=str(REPO))
        self.out = own / "cg.out"
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={self.out}",
             sys.executable, "-m", "bench.service.instructions", *args],
            cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.dumps = 0

    def control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(self.proc.pid)], check=True, capture_output=True)

    @contextmanager
    def segment(self) -> Iterator[list[int]]:
        """Count what runs inside the block; the total is appended to the yielded list."""
        total: list[int] = []
        self.control("-z")
        self.control("-i", "on")
        yield total
        self.control("-i", "off")
        self.control("-d")
        self.dumps += 1
        text = Path(f"{self.out}.{self.dumps}").read_text()
        total.append(int(re.search(r"^totals: (\d+)", text, re.M).group(1)))  # type: ignore[union-attr]

    def line(self) -> str:
        assert self.proc.stdout is not None
        out = self.proc.stdout.readline()
        if not out:
            raise RuntimeError(f"child exited ({self.proc.wait()})")
        return out.strip()

    def say(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Client:
    """One keep-alive HTTP/1.1 connection sending POSTs and reading whole responses."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def post(self, path: str, body: bytes) -> int:
        self.sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                          b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        while b"\r\n\r\n" not in self.buf:
            self.recv()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        while len(self.buf) < length:
            self.recv()
        self.buf = self.buf[length:]
        return int(head.split(b" ", 2)[1])

    def recv(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk


def measure_server(app: str, size: int, path: str, n: int, out_dir: str) -> float:
    """Instructions per request of a single-process server of ``app`` (see the module docstring)."""
    port = free_port()
    cg = Callgrind(["--child-server", app, "--port", str(port)], out_dir)
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                client = Client(port)
                break
            except OSError:
                if cg.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{app}: server did not start") from None
                time.sleep(0.5)
        data = bodies(size)
        for i in range(200):
            while client.post(path, data[i % len(data)]) == 503:  # ours: not ready yet
                time.sleep(0.5)
        with cg.segment() as total:
            for i in range(n):
                status = client.post(path, data[i % len(data)])
                if status != 200:
                    raise RuntimeError(f"{app}: status {status}")
        return total[0] / n
    finally:
        cg.close()


def measure_inprocess(what: str, size: int, path: str, n: int, out_dir: str) -> dict[str, float]:
    """Instructions per call of every in-process segment of ``what`` (``asgi`` or ``layers``)."""
    cg = Callgrind(["--child-inprocess", what, "--bytes", str(size), "--path", path, "--requests", str(n)], out_dir)
    out: dict[str, float] = {}
    try:
        while (line := cg.line()) != "END":
            name = line.removeprefix("SEGMENT ")
            with cg.segment() as total:
                cg.say("go")
                if cg.line() != "DONE":
                    raise RuntimeError(f"segment {name} failed")
            out[name] = total[0] / n
    finally:
        cg.close()
    return out


# ---------------------------------------------------------------------------- the children (under valgrind)


def child_server(app: str, port: int) -> None:
    import uvicorn

    from app.cli.prefork import uvicorn_options
    from app.core.config import Settings

    if app == "stock":  # uvicorn's defaults (loop and http "auto": uvloop + httptools when installed)
        uvicorn.run("bench.service.floor_app:app", host="127.0.0.1", port=port, log_level="warning",
                    access_log=False)
        return
    settings = Settings(host="127.0.0.1", port=port, workers=1, access_log=False, log_level="warning",
                        tokenizers="cl100k_base" if app == "ours" else None)
    if app == "ours":
        os.environ["TOKENIZER_TOKENIZERS"] = "cl100k_base"
        uvicorn.run("app.api.main:create_app", factory=True, **uvicorn_options(settings))
    else:
        uvicorn.run("bench.service.floor_app:app", **uvicorn_options(settings))


async def child_price(n: int) -> None:
    """Issue 26's pair, as :mod:`bench.service.price_overhead` times it: ``/count`` with ``"model": "gpt-4o"``
    (count + priced block) and with ``"tokenizer": "o200k_base"`` (the same count, no block), per text size."""
    from app.api.main import create_app
    from app.core.config import Settings

    from .asgi_overhead import call
    from .price_overhead import bodies as price_bodies

    app = create_app(Settings(log_level="warning", tokenizers="o200k_base"))
    async with app.router.lifespan_context(app):
        loop = asyncio.get_running_loop()
        for (size, variant), body in price_bodies().items():
            for _ in range(200):
                await call(app, "/count", body)
            print(f"SEGMENT price {size} /count {variant}", flush=True)
            await loop.run_in_executor(None, sys.stdin.readline)
            for _ in range(n):
                await call(app, "/count", body)
            print("DONE", flush=True)
        print("END", flush=True)


async def child_inprocess(what: str, size: int, path: str, n: int) -> None:
    if what == "price":
        await child_price(n)
        return
    from app.api import dispatch, metrics
    from app.api.main import create_app
    from app.api.ops import common, encode
    from app.api.schemas import CountRequest
    from app.core.config import Settings

    from . import floor_app
    from .asgi_overhead import call

    data = bodies(size)
    app = create_app(Settings(log_level="warning", tokenizers="cl100k_base"))
    authed = create_app(Settings(log_level="warning", tokenizers="cl100k_base", auth_token=TOKEN))
    bearer = [(b"authorization", f"Bearer {TOKEN}".encode())]

    async def raw(scope: Any, receive: Any, send: Any) -> None:  # the harness's own cost: no framework at all
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": floor_app.ANSWER})

    async with app.router.lifespan_context(app), authed.router.lifespan_context(authed):
        svc = app.state.service
        tokenizer = svc.tokenizer("cl100k_base")
        texts = [json.loads(b)["text"] for b in data]
        labels = {"tokenizer": ""}

        def sync(fn: Callable[[int], Any]) -> Callable[[int], Any]:
            async def run(i: int) -> None:
                fn(i)
            return run

        def one_request_metrics(i: int) -> None:
            metrics.request_started()
            metrics.observe_work(path, "cl100k_base", 1e-5, 50, size)
            metrics.cache_used(tokenizer)
            metrics.request_done(path, "cl100k_base", 200, 1e-4)

        segments: dict[str, Callable[[int], Any]] = {
            "asgi harness (no framework)": lambda i: call(raw, path, data[i % 16]),
            "asgi floor app (FastAPI route)": lambda i: call(floor_app.app, path, data[i % 16]),
            "asgi ours": lambda i: call(app, path, data[i % 16]),
        }
        if what == "layers":
            segments.update({
                "asgi ours with a bearer token": lambda i: call(authed, path, data[i % 16], bearer),
                "dispatch.run (operation + its metrics)": lambda i: dispatch.run(svc, encode.count, path,
                                                                                 data[i % 16], labels),
                "operation (encode.count)": sync(lambda i: encode.count(svc, data[i % 16], labels)),
                "parse: orjson.loads": sync(lambda i: common.orjson.loads(data[i % 16])),
                "parse: orjson + pydantic (common.parse)": sync(lambda i: common.parse(CountRequest, data[i % 16])),
                "tokenize: enc.count": sync(lambda i: tokenizer.count(texts[i % 16])),
                "serialize: dumps": sync(lambda i: common.dumps({"tokenizer": "cl100k_base", "count": 40 + i % 16})),
                "metrics: a request's updates": sync(one_request_metrics),
                "metrics: request_started + request_done": sync(lambda i: (
                    metrics.request_started(), metrics.request_done(path, "cl100k_base", 200, 1e-4))),
                "metrics: observe_work": sync(lambda i: metrics.observe_work(path, "cl100k_base", 1e-5, 50, size)),
                "metrics: cache_used": sync(lambda i: metrics.cache_used(tokenizer)),
                "metrics: sync_cache (once a second)": sync(lambda i: metrics.sync_cache([tokenizer])),
            })
        loop = asyncio.get_running_loop()
        for name, fn in segments.items():
            for i in range(200):
                await fn(i)
            print(f"SEGMENT {name}", flush=True)
            await loop.run_in_executor(None, sys.stdin.readline)
            for i in range(n):
                await fn(i)
            print("DONE", flush=True)
        print("END", flush=True)


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--what", default="server,asgi,layers",
                    help="comma-separated: server, asgi, layers, price (issue 26's /count with and without a model)")
    ap.add_argument("--apps", default=",".join(SERVER_APPS), help="servers to measure (server mode)")
    ap.add_argument("--bytes", type=int, default=200)
    ap.add_argument("--path", default="/count")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--child-server", choices=SERVER_APPS, help=argparse.SUPPRESS)
    ap.add_argument("--child-inprocess", choices=("asgi", "layers", "price"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_server:
        child_server(args.child_server, args.port)
        return 0
    if args.child_inprocess:
        asyncio.run(child_inprocess(args.child_inprocess, args.bytes, args.path, args.requests))
        return 0
    what = args.what.split(",")
    print(f"{args.path} {args.bytes} B, {args.requests} requests per figure; instructions per request")
    with tempfile.TemporaryDirectory() as out_dir:
        if "server" in what:
            for app in args.apps.split(","):
                per = measure_server(app, args.bytes, args.path, args.requests, out_dir)
                print(f"| server {app} | {per:,.0f} |", flush=True)
        for mode in ("layers", "asgi"):
            if mode in what:
                for name, per in measure_inprocess(mode, args.bytes, args.path, args.requests, out_dir).items():
                    print(f"| {name} | {per:,.0f} |", flush=True)
                break  # layers includes the asgi segments
        if "price" in what:
            per_case = measure_inprocess("price", args.bytes, args.path, args.requests, out_dir)
            for name, per in per_case.items():
                print(f"| {name} | {per:,.0f} |", flush=True)
            for size in ("200 B", "4 KB"):
                model, plain = per_case[f"price {size} /count model"], per_case[f"price {size} /count tokenizer"]
                print(f"| price {size}: model / tokenizer | {model / plain:.3f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
