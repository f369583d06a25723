"""A small closed-loop HTTP/1.1 load generator (asyncio, keep-alive connections, no client library overhead).

``run_load(host, port, requests, concurrency, seconds)`` keeps ``concurrency`` connections busy, each sending the
next prepared request as soon as the previous response is read, for ``seconds``; it returns per-request latencies
(seconds, from write to last body byte) and the number of non-200 responses.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field


@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    seconds: float = 0.0

    @property
    def rps(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        """The ``q`` quantile (0..1) of latencies, nearest-rank; seconds."""
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def http_post(path: str, body: bytes, host: str = "127.0.0.1") -> bytes:
    """Raw bytes of a keep-alive ``POST`` with a JSON body."""
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode("ascii") + body


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    for line in lines[1:]:
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    body = await reader.readexactly(length) if length else b""
    return status, body


async def _connection(host: str, port: int, requests: list[bytes], start_index: int, deadline: float,
                      out: LoadResult) -> None:
    reader, writer = await asyncio.open_connection(host, port, limit=2**20)
    try:
        for i in itertools.count(start_index):
            if time.perf_counter() >= deadline:
                return
            req = requests[i % len(requests)]
            t0 = time.perf_counter()
            writer.write(req)
            await writer.drain()
            status, _ = await _read_response(reader)
            out.latencies.append(time.perf_counter() - t0)
            if status != 200:
                out.errors += 1
    finally:
        writer.close()


async def _run(host: str, port: int, requests: list[bytes], concurrency: int, seconds: float) -> LoadResult:
    out = LoadResult()
    start = time.perf_counter()
    deadline = start + seconds
    await asyncio.gather(*(_connection(host, port, requests, i * 7, deadline, out) for i in range(concurrency)))
    out.seconds = time.perf_counter() - start  # includes finishing the requests in flight at the deadline
    return out


def run_load(host: str, port: int, requests: list[bytes], concurrency: int, seconds: float) -> LoadResult:
    return asyncio.run(_run(host, port, requests, concurrency, seconds))
