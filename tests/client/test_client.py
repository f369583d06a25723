"""``app.client`` against a real ``python -m app serve`` on loopback (TCP with a bearer token, and a Unix socket).

Every route, typed results equal to the engine's own output, the service's errors as typed exceptions, retries
(connection refused; 503 from a scripted loopback server), timeouts, the async client and the tiktoken-shaped
``RemoteEncoding`` (compared with :mod:`app.compat.tiktoken`, itself tested against tiktoken).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import app.compat.tiktoken as compat
from app.client import (
    AsyncClient,
    AsyncRemoteEncoding,
    AuthenticationError,
    Client,
    ConnectionFailedError,
    CountBatchResult,
    InvalidTextError,
    InvalidTokenIdError,
    NotFoundError,
    NotReadyError,
    PayloadTooLargeError,
    PriceResult,
    RemoteEncoding,
    RequestTimeoutError,
    RequestValidationError,
    Retry,
    ServiceError,
    UnknownModelError,
    UnknownSpecialTokenError,
    UnknownTokenizerError,
)
from app.engine import Special, get_store, get_tokenizer
from harness.server import DEFAULT_TOKENIZERS
from tests.api.conftest import LiveServer, free_port, start_server

pytestmark = pytest.mark.timeout(300)

SECRET = "client-test-secret"
TEXTS = ["hello world", "naïve café 👍🏽", "<|endoftext|> is text here", "def f(x):\n    return x\n", "", " \n\n "]

#: What the test servers load (tests/api/conftest.py), in manifest order.
SERVED = [n for n in get_store().names() if n in DEFAULT_TOKENIZERS.split(",")]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, LiveServer]]:
    """A TCP server with a bearer token and a batch limit of 12, and a Unix-socket server without a token."""
    tmp = tmp_path_factory.mktemp("client")
    tcp = start_server(tmp, env={"TOKENIZER_AUTH_TOKEN": SECRET, "TOKENIZER_MAX_BATCH_SIZE": "12"})
    try:
        uds = start_server(tmp, uds=tmp / "sidecar.sock")
    except BaseException:
        tcp.stop()
        raise
    yield tcp, uds
    tcp.stop()
    uds.stop()


@pytest.fixture
def client(servers: tuple[LiveServer, LiveServer]) -> Iterator[Client]:
    assert servers[0].url is not None
    with Client(servers[0].url, token=SECRET, tokenizer="cl100k_base") as c:
        yield c


def test_every_route(client: Client) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    assert client.health().status == "ok"
    assert client.ready().tokenizers == SERVED
    infos = client.tokenizers()
    assert [t.name for t in infos] == SERVED
    assert next(t for t in infos if t.name == "gpt2").aliases == ["r50k_base"]
    detail = client.tokenizer("cl100k_base")
    assert detail.special_tokens == tokenizer.special_tokens and detail.pattern == tokenizer.pattern
    assert detail.vocab_size == tokenizer.n_vocab and detail.sha256 == get_store().spec("cl100k_base").sha256
    assert client.tokenizer("r50k_base").name == "gpt2"  # aliases resolve
    assert "tokenizer_" in client.metrics()
    for text in TEXTS:
        ids = tokenizer.encode(text)
        assert client.count(text).count == len(ids)
        result = client.encode(text, return_tokens=True, return_offsets=True)
        assert result.ids == ids and result.count == len(ids) and result.tokenizer == "cl100k_base"
        assert result.tokens is not None and [t.data for t in result.tokens] == tokenizer.decode_tokens_bytes(ids)
        assert result.offsets == tokenizer.encode_with_offsets(text)[1]
        assert client.decode(ids).text == tokenizer.decode(ids)
    batch = client.count_batch(TEXTS)
    assert isinstance(batch, CountBatchResult) and batch.counts == [len(tokenizer.encode(t)) for t in TEXTS]
    assert batch.total == sum(batch.counts)
    encoded = client.encode_batch(TEXTS)
    assert [r.ids for r in encoded.results] == [tokenizer.encode(t) for t in TEXTS]
    want = [tokenizer.decode(tokenizer.encode(t)) for t in TEXTS]
    assert client.decode_batch([r.ids for r in encoded.results]).texts == want


def test_special_tokens_and_models(client: Client) -> None:
    llama = get_tokenizer("llama3")
    parts = [Special("<|start_header_id|>"), "user", Special("<|end_header_id|>"), "\n\nHi!", Special("<|eot_id|>")]
    assert client.encode_parts(parts, tokenizer="llama3").ids == llama.encode_parts(parts)
    assert client.count_parts(parts, tokenizer="llama3").count == len(llama.encode_parts(parts))
    cl = get_tokenizer("cl100k_base")
    with_suffix = client.encode("hi", suffix=["<|endoftext|>"])
    assert with_suffix.ids == cl.encode("hi", suffix=["<|endoftext|>"])
    assert client.encode("hi", prefix=["<|fim_prefix|>"]).ids == [100258, *cl.encode("hi")]
    assert client.encode("hi", tokenizer="llama3", add_special_tokens=True).ids == [128000, *llama.encode("hi")]
    assert client.count("<|endoftext|> x", report_special_lookalikes=True).special_lookalikes == 1
    skipped = client.decode([*cl.encode("a"), 100257], skip_special_tokens=True)
    assert skipped.text == "a"
    usage = client.count("How many tokens?", model="gpt-4o")
    assert usage.tokenizer == "o200k_base" and usage.model is not None and usage.model.name == "gpt-4o"
    assert usage.model.fits is True and usage.model.context_window == 128000
    batch = client.count_batch(["a", "b"], model="gpt-4o")
    assert batch.model is not None and batch.model.fits_each == [True, True]


def test_errors_are_typed(client: Client, servers: tuple[LiveServer, LiveServer]) -> None:
    with pytest.raises(UnknownTokenizerError) as unknown:
        client.count("x", tokenizer="nope")
    assert unknown.value.status == 422 and "cl100k_base" in unknown.value.details["known"]
    with pytest.raises(UnknownTokenizerError) as in_url:
        client.tokenizer("nope é?#")
    assert in_url.value.status == 404 and isinstance(in_url.value, NotFoundError)
    assert in_url.value.details["name"] == "nope é?#"  # sent percent-encoded, arrived whole
    with pytest.raises(NotFoundError) as slash:
        client.tokenizer("a/b")  # no such route: the service's plain 404
    assert slash.value.type == "not_found"
    with pytest.raises(UnknownModelError):
        client.count("x", model="no-such-model")
    with pytest.raises(UnknownSpecialTokenError) as special:
        client.encode("x", suffix=["<|nope|>"])
    assert "<|endoftext|>" in special.value.message
    with pytest.raises(InvalidTokenIdError) as bad_id:
        client.decode([1, 2, 10**9])
    assert isinstance(bad_id.value, KeyError) and bad_id.value.type == "invalid_token_id"
    assert str(bad_id.value).startswith("422 invalid_token_id: ")
    with pytest.raises(InvalidTextError):
        client.count("a\ud800b")
    with pytest.raises(PayloadTooLargeError) as too_many:
        client.count_batch(["a"] * 13)
    assert too_many.value.status == 413 and isinstance(too_many.value, ServiceError)
    with pytest.raises(RequestValidationError):
        client.decode_batch([])
    with pytest.raises(ValueError, match="not both"):
        client.count("x", tokenizer="gpt2", model="gpt-4o")
    with pytest.raises(ValueError, match="no tokenizer"):
        Client(servers[0].url).count("x")
    assert servers[0].url is not None
    for token in (None, "wrong"):
        with Client(servers[0].url, token=token, tokenizer="gpt2") as other:
            assert other.health().status == "ok"  # probes need no token
            with pytest.raises(AuthenticationError) as auth:
                other.count("x")
            assert auth.value.status == 401


def test_unix_socket(servers: tuple[LiveServer, LiveServer]) -> None:
    assert servers[1].uds is not None
    with Client(uds=servers[1].uds, tokenizer="o200k_base") as c:
        assert c.count("hello world").count == len(get_tokenizer("o200k_base").encode("hello world"))
        assert c.ready().status == "ready"
    with pytest.raises(ValueError, match="not both"):
        Client("http://x", uds=servers[1].uds)


def test_connection_refused_is_retried_then_raised() -> None:
    port = free_port()
    policy = Retry(attempts=3, backoff=0.05, max_backoff=1.0)
    with Client(f"http://127.0.0.1:{port}", tokenizer="gpt2", retry=policy) as c:
        start = time.monotonic()
        with pytest.raises(ConnectionFailedError, match="after 3 attempts"):
            c.count("x")
        assert time.monotonic() - start >= 0.05 + 0.1  # two waits: 0.05 s, then 0.1 s
        with pytest.raises(ConnectionFailedError) as once:
            c.health()  # probes are never retried
        assert "attempts" not in str(once.value)


class _Scripted(BaseHTTPRequestHandler):
    """Answers from a script: ``server.script`` is a list of (status, body, headers, delay) popped per request."""

    server: Any

    def do_POST(self) -> None:  # noqa: N802 -- http.server's naming
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.server.seen.append(self.headers.get("authorization"))
        status, body, headers, delay = self.server.script.pop(0) if self.server.script else self.server.default
        time.sleep(delay)
        self.send_response(status)
        for key, value in {"content-type": "application/json", **headers}.items():
            self.send_header(key, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    httpd.script = []  # type: ignore[attr-defined]
    httpd.seen = []  # type: ignore[attr-defined]
    httpd.default = (200, b'{"tokenizer": "gpt2", "count": 7}', {}, 0.0)  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


NOT_READY = json.dumps({"error": {"type": "not_ready", "message": "starting", "details": None}}).encode()


def test_503_is_retried_with_backoff(scripted: ThreadingHTTPServer) -> None:
    url = f"http://127.0.0.1:{scripted.server_address[1]}"
    scripted.script += [(503, NOT_READY, {}, 0.0), (503, NOT_READY, {"retry-after": "0"}, 0.0)]  # type: ignore
    with Client(url, token="t", tokenizer="gpt2", retry=Retry(attempts=3, backoff=0.01)) as c:
        assert c.count("x").count == 7
        assert scripted.seen == ["Bearer t"] * 3  # type: ignore[attr-defined]
        scripted.script += [(503, NOT_READY, {}, 0.0)] * 3  # type: ignore[attr-defined]
        with pytest.raises(NotReadyError) as err:
            c.count("x")
        assert err.value.type == "not_ready" and err.value.message == "starting"
        scripted.script.append((502, b"<html>bad gateway</html>", {"content-type": "text/html"}, 0.0))  # type: ignore
        with pytest.raises(ServiceError) as other:
            c.count("x")
        assert other.value.status == 502 and "bad gateway" in other.value.message
        scripted.script.append((200, b"not json", {}, 0.0))  # type: ignore[attr-defined]
        with pytest.raises(ServiceError, match="not JSON"):
            c.count("x")


def test_timeout(scripted: ThreadingHTTPServer) -> None:
    url = f"http://127.0.0.1:{scripted.server_address[1]}"
    scripted.script.append((200, b"{}", {}, 1.0))  # type: ignore[attr-defined]
    with Client(url, tokenizer="gpt2", timeout=0.2) as c, pytest.raises(RequestTimeoutError):
        c.count("x")
    assert len(scripted.seen) == 1  # type: ignore[attr-defined]  # a read timeout is not repeated


def test_async_client(servers: tuple[LiveServer, LiveServer]) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    assert servers[0].url is not None and servers[1].uds is not None

    async def main() -> None:
        async with AsyncClient(servers[0].url, token=SECRET, tokenizer="cl100k_base") as c:
            results = await asyncio.gather(*(c.encode(t) for t in TEXTS))
            assert [r.ids for r in results] == [tokenizer.encode(t) for t in TEXTS]
            assert (await c.count_batch(TEXTS)).counts == [len(tokenizer.encode(t)) for t in TEXTS]
            assert (await c.decode(tokenizer.encode("hi"))).text == "hi"
            assert (await c.tokenizer("gpt2")).vocab_size == 50257
            assert [t.name for t in await c.tokenizers()] == SERVED
            assert (await c.health()).status == "ok" and (await c.ready()).status == "ready"
            assert "gpt-4o" in [m.name for m in await c.models()]
            chat = [{"role": "user", "content": "hi"}]
            assert (await c.count_messages(chat, model="gpt-oss-20b")).count == len(
                (await c.encode_messages(chat, model="gpt-oss-20b")).ids)
            assert (await c.encode("one two three four", truncate=2)).ids == tokenizer.encode("one two three four")[:2]
            with pytest.raises(UnknownTokenizerError):
                await c.count("x", tokenizer="nope")
            remote = await AsyncRemoteEncoding.connect(c, "cl100k_base")
            assert await remote.encode("hi <|endoftext|>", allowed_special="all") == [6151, 220, 100257]
            assert await remote.count("hello world") == 2 and await remote.decode([15339]) == "hello"
            assert await remote.encode_ordinary_batch(["a", "b"]) == [tokenizer.encode("a"), tokenizer.encode("b")]
            with pytest.raises(ValueError, match="disallowed special token"):
                await remote.encode("<|endoftext|>")
        async with AsyncClient(uds=servers[1].uds) as u:
            assert (await u.count("hello", tokenizer="gpt2")).count == 1
        async with AsyncClient(f"http://127.0.0.1:{free_port()}", tokenizer="gpt2",
                               retry=Retry(attempts=2, backoff=0.01)) as down:
            with pytest.raises(ConnectionFailedError):
                await down.count("x")

    asyncio.run(main())


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_harmony", "llama3", "p50k_edit"])
def test_remote_encoding_is_tiktoken_shaped(client: Client, name: str) -> None:
    local = compat.get_encoding(name)
    remote = RemoteEncoding(client, name)
    assert remote.name == name and remote.n_vocab == local.n_vocab and remote.max_token_value == local.max_token_value
    assert remote.special_tokens_set == local.special_tokens_set
    assert remote.is_special_token(local.max_token_value) == local.is_special_token(local.max_token_value)
    specials = sorted(local.special_tokens_set)[:3]
    texts = [*TEXTS, f"a{specials[0]}b{specials[-1]}", f"{specials[1]} x {specials[1]}", "<|", "x<|endoftext|>"]
    argsets: list[dict[str, Any]] = [{}, {"disallowed_special": ()}, {"allowed_special": "all"},
                                     {"allowed_special": {specials[0]}, "disallowed_special": ()}]
    for text in texts:
        for kwargs in argsets:
            try:
                want: Any = local.encode(text, **kwargs)
            except ValueError as exc:
                with pytest.raises(ValueError) as got:
                    remote.encode(text, **kwargs)
                assert str(got.value) == str(exc)
                continue
            assert remote.encode(text, **kwargs) == want, (text, kwargs)
            assert remote.count(text, **kwargs) == len(want)
        assert remote.encode_ordinary(text) == local.encode_ordinary(text)
    plain = [t for t in texts if "<|" not in t]
    assert remote.encode_batch(plain) == local.encode_batch(plain)
    assert remote.encode_batch(texts, allowed_special="all") == local.encode_batch(texts, allowed_special="all")
    assert remote.encode_ordinary_batch(texts) == local.encode_ordinary_batch(texts)
    ids = local.encode_batch(texts, allowed_special="all")
    assert remote.decode_batch(ids) == local.decode_batch(ids)
    assert remote.decode(ids[1][:-1]) == local.decode(ids[1][:-1])  # cut inside a character: U+FFFD
    assert remote.encode_batch([]) == [] and remote.decode_batch([]) == []
    with pytest.raises(KeyError):
        remote.decode([local.n_vocab + 10])
    with pytest.raises(ValueError, match="errors='replace'"):
        remote.decode([1], errors="strict")


def test_remote_encoding_unknown_name(client: Client) -> None:
    with pytest.raises(UnknownTokenizerError):
        RemoteEncoding(client, "nope")
    if "gpt2" in compat.list_encoding_names():
        assert RemoteEncoding(client, "r50k_base").name == "gpt2"  # the service's canonical name


def test_client_package_does_not_import_the_engine(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    code = "import sys, app.client; assert 'app.engine' not in sys.modules and 'app.api' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)


def test_public_surface() -> None:
    import app.client

    assert set(app.client.__all__) == {name for name in dir(app.client) if not name.startswith("_")} - {
        "aio", "calls", "errors", "remote", "results", "sync", "annotations"}
    for name in app.client.__all__:
        assert (getattr(app.client, name).__doc__ or "").strip(), name


def test_models_messages_and_truncation(client: Client, servers: tuple[LiveServer, LiveServer]) -> None:
    """GET /models, ``messages`` on /count and /encode, and ``truncate``: the client's typed results carry what the
    service answers to the same raw request."""
    assert servers[0].url is not None
    raw = servers[0].client(headers={"authorization": f"Bearer {SECRET}"})
    models = client.models()
    assert [m.name for m in models] == [m["name"] for m in raw.get("/models").json()["models"]]
    harmony = next(m for m in models if m.name == "gpt-oss-20b")
    assert harmony.tokenizer == "o200k_harmony" and harmony.messages and harmony.ids_public
    conversation = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there, how?"}]
    counted = client.count_messages(conversation, model="gpt-4o")
    want = raw.post("/count", json={"model": "gpt-4o", "messages": conversation}).json()
    assert counted.count == want["count"] and counted.framing == want["framing"] and counted.model is not None
    assert counted.model.estimated_total_cost == Decimal(want["model"]["estimated_total_cost"])
    encoded = client.encode_messages(conversation, model="gpt-oss-20b", add_generation_prompt=False)
    want = raw.post("/encode", json={"model": "gpt-oss-20b", "messages": conversation,
                                     "add_generation_prompt": False}).json()
    assert encoded.ids == want["ids"] and encoded.framing == want["framing"]
    with pytest.raises(RequestValidationError) as hidden:
        client.encode_messages(conversation, model="gpt-4o")  # its framing ids are not public
    assert hidden.value.type == "ids_not_public"
    with pytest.raises(RequestValidationError) as tight:
        client.count_messages(conversation, model="gpt-oss-20b", truncate=3)
    assert tight.value.type == "cannot_truncate"
    text = "one two three four five six seven eight"
    full = get_tokenizer("cl100k_base").encode(text)
    cut = client.encode(text, truncate=3)
    assert cut.ids == full[:3] and cut.truncated is not None and cut.truncated["dropped_tokens"] == len(full) - 3
    assert client.encode(text, truncate=3, truncate_side="left").ids == full[-3:]
    assert client.count(text, truncate=3).count == 3
    raw.close()


def test_price(client: Client, servers: tuple[LiveServer, LiveServer]) -> None:
    """``price()``: the typed result carries, exactly, what ``POST /price`` answers to the same request; usage,
    a provider's response, a past timestamp and a service tier; unknown names are typed errors."""
    import genai_prices
    from genai_prices import Usage

    assert servers[0].url is not None
    raw = servers[0].client(headers={"authorization": f"Bearer {SECRET}"})
    usage = {"input_tokens": 300_000, "cache_read_tokens": 1_000, "cache_write_tokens": 500, "output_tokens": 200}
    got = client.price("claude-sonnet-4-5", usage=usage, provider="anthropic")
    want = raw.post("/price", json={"model": "claude-sonnet-4-5", "usage": usage, "provider": "anthropic"}).json()
    assert isinstance(got, PriceResult) and got.provider == "anthropic" and got.model == want["model"]
    assert got.total == Decimal(want["total"]) == genai_prices.calc_price(
        Usage(**usage), "claude-sonnet-4-5", provider_id="anthropic").total_price
    assert got.breakdown == {k: Decimal(v) for k, v in want["breakdown"].items()}
    assert sum(line.amount for line in got.lines) == got.total and got.tier == want["tier"]
    assert got.input_total + got.output_total == got.total and got.price_data == want["price_data"]
    assert all(isinstance(v, Decimal) for v in (got.total, *got.breakdown.values()))
    past = client.price("gpt-4o", usage={"input_tokens": 1000}, timestamp=datetime(2024, 6, 1, tzinfo=UTC))
    assert past.timestamp is not None and past.timestamp.startswith("2024-06-01")
    batch = client.price("gpt-4o", usage={"input_tokens": 1000}, service_tier="batch")
    assert batch.service_tier == "batch" and batch.total < client.price("gpt-4o", usage={"input_tokens": 1000}).total
    response = {"model": "gpt-4o-2024-08-06", "usage": {"prompt_tokens": 12, "completion_tokens": 3,
                                                        "total_tokens": 15}}
    read = client.price(response=response, provider="openai")
    assert read.usage["input_tokens"] == 12 and read.usage["output_tokens"] == 3
    with pytest.raises(UnknownModelError) as unknown:
        client.price("claude-sonet-4-5", usage={"input_tokens": 1})
    assert "claude-sonnet-4-5" in unknown.value.details["closest"]

    async def main() -> None:
        async with AsyncClient(servers[0].url, token=SECRET) as c:
            again = await c.price("claude-sonnet-4-5", usage=usage, provider="anthropic")
            assert replace(again, timestamp=None) == replace(got, timestamp=None)

    asyncio.run(main())
    raw.close()
