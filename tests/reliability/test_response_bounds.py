"""No request within the limits kills a worker or stalls it: the largest ``/encode`` responses on a real server
with two workers.

Found by an outside probe: ``"ab " * 3145728`` (9.4 MB, under the 16 MiB body limit) with ``return_tokens`` and
``return_offsets`` made a 115 MB response whose single ``json.dumps`` call held the GIL for seconds; uvicorn's
supervisor missed the worker's health ping and SIGKILLed it, and the other requests on that worker failed. Now
such a request is a 413 decided before the work (``TOKENIZER_MAX_DETAIL_TOKENS``), and the largest request under
that limit is serialized and freed in bounded steps (:mod:`app.api.serialize`).
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from app.engine import get_tokenizer

from .conftest import Serve

pytestmark = pytest.mark.timeout(600)


def test_over_detail_limit_is_a_413_and_the_workers_live(serve: Serve) -> None:
    server = serve("--workers", "2")
    workers = sorted(server.workers())
    with server.client(timeout=120) as c:
        r = c.post("/encode", json={"tokenizer": "cl100k_base", "text": "ab " * 3145728, "return_tokens": True,
                                    "return_offsets": True})
        assert r.status_code == 413, r.status_code
        err = r.json()["error"]
        assert err["type"] == "payload_too_large" and "TOKENIZER_MAX_DETAIL_TOKENS" in err["message"]
        assert err["details"] == {"limit": 2**18, "actual": 3145729, "field": "return_tokens/return_offsets"}
        # ids alone are not limited by it: the same text answers, with every id
        r = c.post("/encode", json={"tokenizer": "cl100k_base", "text": "ab " * 3145728})
        assert r.status_code == 200 and r.json()["count"] == 3145729
    assert sorted(server.workers()) == workers
    assert "died" not in server.log()


def test_largest_detailed_responses_mixed_with_small_requests(serve: Serve) -> None:
    """Two clients send the largest in-limit detailed request (262,001 tokens, tokens and offsets: 9 MB) back to
    back while four send small requests: every answer is right, no request fails, no worker is replaced."""
    server = serve("--workers", "2")
    workers = sorted(server.workers())
    tokenizer = get_tokenizer("cl100k_base")
    text = "ab " * 262_000
    ids = tokenizer.encode(text)
    assert len(ids) <= 2**18
    failures: list[str] = []
    big_done: list[float] = []
    small_done: list[float] = []
    stop = threading.Event()

    def big() -> None:
        with server.client(timeout=300) as c:
            for _ in range(4):
                start = time.monotonic()
                try:
                    r = c.post("/encode", json={"tokenizer": "cl100k_base", "text": text, "return_tokens": True,
                                                "return_offsets": True})
                except httpx.HTTPError as exc:
                    failures.append(f"big: {exc!r}")
                    continue
                body = r.json() if r.status_code == 200 else {}
                if body.get("ids") != ids or len(body.get("tokens", ())) != len(ids) or \
                        body["offsets"][-1] != [len(text) - 1, len(text)] or body["tokens"][1] != {"text": " ab"}:
                    failures.append(f"big: status {r.status_code}")
                big_done.append(time.monotonic() - start)

    def small(i: int) -> None:
        words = f"small request {i}"
        while not stop.is_set():
            try:
                with server.client(timeout=60) as c:  # a fresh connection each time: both workers get them
                    start = time.monotonic()
                    r = c.post("/count", json={"tokenizer": "cl100k_base", "text": words})
                    small_done.append(time.monotonic() - start)
                    if r.status_code != 200 or r.json()["count"] != tokenizer.count(words):
                        failures.append(f"small: status {r.status_code}")
            except httpx.HTTPError as exc:
                failures.append(f"small: {exc!r}")

    smalls = [threading.Thread(target=small, args=(i,)) for i in range(4)]
    bigs = [threading.Thread(target=big) for _ in range(2)]
    for t in smalls + bigs:
        t.start()
    for t in bigs:
        t.join(500)
    stop.set()
    for t in smalls:
        t.join(60)
    assert not failures, failures[:5]
    assert len(big_done) == 8 and len(small_done) > 20
    assert sorted(server.workers()) == workers, "a worker was replaced"
    assert "died" not in server.log() and "Traceback" not in server.log()
    print(f"big requests {sorted(round(x, 2) for x in big_done)} s; {len(small_done)} small, "
          f"max {max(small_done) * 1e3:.0f} ms")
