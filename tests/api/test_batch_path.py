"""Large ``texts`` batches of /count and /encode on the engine's batch path and its threads
(``TOKENIZER_BATCH_THREADS``, ``TOKENIZER_BATCH_BYTES``; :mod:`app.api.batching`): the same answers as text by text,
for every bundled tokenizer and every option the batch path serves, and the thread budget it takes them from."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.batching import AUTO_LIMIT, BatchThreads, batch_thread_limit
from app.api.main import create_app
from app.core.config import Settings, SettingsError
from app.engine import Tokenizer, get_tokenizer, list_tokenizers

PIECES = ["a", "Hello", " world", "中文", "日本語", "\u0301", "123", " ", "\n\n", "\t", "'s", "😀", "Привет", "ﬀ",
          "x\u0301y", "▁", "<0x0A>", "\x00"]  # fmt: skip


@pytest.fixture(scope="module")
def batched() -> Iterator[TestClient]:
    """Every ``texts`` batch on the batch path, two threads."""
    with TestClient(create_app(Settings(batch_bytes=0, batch_threads=2)), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def per_text() -> Iterator[TestClient]:
    """No ``texts`` batch on the batch path."""
    with TestClient(create_app(Settings(batch_bytes=2**40)), raise_server_exceptions=False) as c:
        yield c


def texts_for(name: str, n: int = 40) -> list[str]:
    """Hostile short texts with the tokenizer's own special-token strings glued in (plain text here), and a
    few long ones: over 16 KiB in all, so the request runs on the thread pool (not inline) with its threads."""
    rng = random.Random(name)
    pieces = [*PIECES, *list(get_tokenizer(name).special_tokens)[:10]]
    texts = ["", "plain", *("".join(rng.choice(pieces) for _ in range(rng.randint(1, 40))) for _ in range(n))]
    return [*texts, "a" * 3_000, *("".join(rng.choice(pieces) for _ in range(2_000)) for _ in range(3))]


def _post(client: TestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


@pytest.mark.parametrize("name", list_tokenizers())
def test_batch_path_answers_as_text_by_text(name: str, batched: TestClient, per_text: TestClient,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = get_tokenizer(name)
    texts = texts_for(name)
    assert sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) > Settings().inline_bytes
    calls = _spy(monkeypatch, tokenizer)
    specials = list(tokenizer.special_tokens)
    framed: dict[str, Any] = {"special_tokens": {"prefix": specials[:1], "suffix": specials[-2:]}} if specials else {}
    bodies: list[dict[str, Any]] = [
        {}, {"add_special_tokens": True}, framed, {"return_tokens": True, "report_special_lookalikes": True},
        {"return_offsets": True},  # not on the batch path: still the same answer
    ]
    for extra in bodies:
        body = {"tokenizer": name, "texts": texts, **extra}
        encoded = _post(batched, "/encode", body)
        assert encoded == _post(per_text, "/encode", body), (name, extra)
        counted_body = {k: v for k, v in body.items() if k not in ("return_tokens", "return_offsets")}
        counted = _post(batched, "/count", counted_body)
        assert counted == _post(per_text, "/count", counted_body), (name, extra)
        assert counted["counts"] == [r["count"] for r in encoded["results"]]
    # the batch path, on two threads, for every option set but return_offsets (encode and count each)
    assert sorted(calls) == sorted([("encode_batch", 2)] * 4 + [("count_batch", 2)] * 5)
    plain = _post(batched, "/encode", {"tokenizer": name, "texts": texts})
    assert [r["ids"] for r in plain["results"]] == [tokenizer.encode(t) for t in texts]


def _spy(monkeypatch: pytest.MonkeyPatch, tokenizer: Tokenizer) -> list[tuple[str, int]]:
    """Record the batch calls (method, num_threads) made on ``tokenizer``."""
    calls: list[tuple[str, int]] = []
    for method in ("encode_batch", "count_batch"):
        real = getattr(tokenizer, method)

        def spy(texts: Any, *, num_threads: int = 1, _real: Any = real, _m: str = method, **kw: Any) -> Any:
            calls.append((_m, num_threads))
            return _real(texts, num_threads=num_threads, **kw)

        monkeypatch.setattr(tokenizer, method, spy)
    return calls


def test_large_batches_take_the_batch_path_on_threads(monkeypatch: pytest.MonkeyPatch, batched: TestClient,
                                                      per_text: TestClient) -> None:
    """~200 KB of texts (above the inline size: off the event loop): the batch path with the budget's threads,
    ids equal to per-text ones; the per-text client never calls it; sampled and single-text requests neither."""
    tokenizer = get_tokenizer("cl100k_base")
    texts = [f"{i} " + "The quick brown fox jumps over the lazy dog. " * 45 for i in range(100)]
    calls = _spy(monkeypatch, tokenizer)
    big = _post(batched, "/encode", {"tokenizer": "cl100k_base", "texts": texts})
    assert calls == [("encode_batch", 2)]
    assert [r["ids"] for r in big["results"]] == [tokenizer.encode(t) for t in texts]
    assert _post(batched, "/count", {"tokenizer": "cl100k_base", "texts": texts})["counts"] == [
        r["count"] for r in big["results"]]
    assert calls[-1] == ("count_batch", 2)
    calls.clear()
    assert _post(per_text, "/encode", {"tokenizer": "cl100k_base", "texts": texts}) == big
    _post(batched, "/count", {"tokenizer": "cl100k_base", "text": texts[0]})
    _post(batched, "/count", {"tokenizer": "o200k_base", "texts": texts[:3]})  # another tokenizer: not spied
    assert calls == []


def test_small_batches_on_the_event_loop_run_without_threads(monkeypatch: pytest.MonkeyPatch,
                                                             batched: TestClient) -> None:
    """A batch small enough to run inline still takes the batch path (threshold 0) but on one thread: threads
    started on the event loop would not carry its unvetted-regex guard."""
    tokenizer = get_tokenizer("gpt2")
    calls = _spy(monkeypatch, tokenizer)
    _post(batched, "/count", {"tokenizer": "gpt2", "texts": ["a b", "c d"]})
    assert calls == [("count_batch", 1)]


def test_thread_budget_is_shared_by_concurrent_requests() -> None:
    gate = BatchThreads(4)
    with gate.take() as first:
        assert first == 4 and gate.in_use == 4
        with gate.take() as second:
            assert second == 1 and gate.in_use == 5  # its own thread only
        assert gate.in_use == 4
    with gate.take() as a, gate.take() as b:
        assert (a, b) == (4, 1)
    assert gate.in_use == 0
    gate = BatchThreads(3)
    seen: list[int] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        barrier.wait()
        with gate.take() as n:
            seen.append(n)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gate.in_use == 0 and all(1 <= n <= 3 for n in seen)


def test_batch_settings() -> None:
    import os

    assert batch_thread_limit(3) == 3 and batch_thread_limit(1) == 1
    assert batch_thread_limit(0) == max(1, min(AUTO_LIMIT, len(os.sched_getaffinity(0))))
    assert Settings.from_env({"TOKENIZER_BATCH_THREADS": "2", "TOKENIZER_BATCH_BYTES": "0"}).batch_threads == 2
    for var in ("TOKENIZER_BATCH_THREADS", "TOKENIZER_BATCH_BYTES"):
        with pytest.raises(SettingsError, match=var):
            Settings.from_env({var: "-1"})
