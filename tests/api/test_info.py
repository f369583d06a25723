"""GET /tokenizers, /tokenizers/{name}, /healthz, /readyz, /metrics and the OpenAPI document."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from app.api.main import create_app
from app.core.config import Settings
from app.engine import get_store, get_tokenizer

from .test_errors import assert_error


def test_tokenizers_list(client: TestClient) -> None:
    body = client.get("/tokenizers").json()
    store = get_store()
    assert [t["name"] for t in body["tokenizers"]] == store.names()
    by_name = {t["name"]: t for t in body["tokenizers"]}
    cl = by_name["cl100k_base"]
    assert cl["sha256"] == store.spec("cl100k_base").sha256
    assert cl["vocab_size"] == 100277 and cl["special_tokens_count"] == 5
    assert cl["backend"] == get_tokenizer("cl100k_base").backend
    assert "gpt-4" in cl["models"] and "gpt-4-turbo" in cl["models"]  # manifest and model table
    assert by_name["gpt2"]["aliases"] == ["r50k_base"]
    assert "gpt-oss-20b" in by_name["o200k_harmony"]["models"]
    # every tokenizer names the library whose ids its ids equal
    assert {n: t["reference"] for n, t in by_name.items()} == {s.name: s.reference for s in store}
    assert all(t["reference"] for t in body["tokenizers"])
    assert cl["reference"].startswith("tiktoken ")
    assert by_name["xlm-roberta"]["reference"].startswith("tokenizers ")
    assert by_name["xlm-roberta-sentencepiece"]["reference"].startswith("sentencepiece ")


def test_tokenizer_detail(client: TestClient) -> None:
    body = client.get("/tokenizers/r50k_base").json()
    assert body["name"] == "gpt2" and body["special_tokens"] == {"<|endoftext|>": 50256}
    assert body["pattern"]
    llama = client.get("/tokenizers/llama3").json()
    assert llama["special_tokens"]["<|eot_id|>"] == 128009 and len(llama["special_tokens"]) == 256
    assert llama["template"] == "<|begin_of_text|> $text" and llama["added_tokens"] == {}
    assert body["template"] == "$text"
    qwen = client.get("/tokenizers/qwen3").json()  # a tokenizer.json pipeline: its added tokens and template
    assert qwen["added_tokens"]["<tool_call>"] == 151657 and "<|im_start|>" in qwen["special_tokens"]
    assert client.get("/tokenizers/gemma3").json()["template"] == "<bos> $text"
    xlmr = client.get("/tokenizers/xlm-roberta").json()
    assert xlmr["reference"].startswith("tokenizers ") and xlmr["template"] == "<s> $text </s>"
    assert xlmr["vocab_size"] == 250_002 and xlmr["special_tokens"]["<mask>"] == 250_001
    err = assert_error(client.get("/tokenizers/nope"), 404, "unknown_tokenizer")
    assert "cl100k_base" in err["details"]["known"]
    for path in ("/tokenizers/%FF", "/tokenizers/%00", "/tokenizers/" + "a" * 10_000):
        r = client.get(path)
        assert_error(r, 404, "unknown_tokenizer")
        assert len(r.content) < 2000


def test_health_and_ready(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.head("/healthz").status_code == 200 and client.head("/readyz").status_code == 200
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["tokenizers"] == get_store().names()


def _sample(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if not line.startswith(name + "{") and line.split(" ")[0] != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0] if "{" not in line else line[: line.index("}")]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_metrics(client: TestClient) -> None:
    served = client.app.state.service.tokenizer("llama3")  # type: ignore[attr-defined]
    stats0 = served.cache_stats()
    before = client.get("/metrics").text
    n0 = _sample(before, "tokenizer_http_request_duration_seconds_count", endpoint="/count", tokenizer="llama3",
                 status="200") or 0
    t0 = _sample(before, "tokenizer_tokens_total", endpoint="/count", tokenizer="llama3") or 0
    b0 = _sample(before, "tokenizer_input_bytes_total", endpoint="/count", tokenizer="llama3") or 0
    text = "zqxjkvw zqxjkvw zqxjkvw naïve zqxjkvw"  # not tokens themselves: BPE and the cache run
    counts = [client.post("/count", json={"tokenizer": "llama3", "text": text}).json()["count"] for _ in range(3)]
    client.post("/count", json={"tokenizer": "llama3", "text": 5})  # a 422 that resolved no tokenizer
    r = client.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain")
    after = r.text
    assert _sample(after, "tokenizer_http_request_duration_seconds_count", endpoint="/count", tokenizer="llama3",
                   status="200") == n0 + 3
    assert _sample(after, "tokenizer_tokens_total", endpoint="/count", tokenizer="llama3") == t0 + sum(counts)
    assert _sample(after, "tokenizer_input_bytes_total", endpoint="/count", tokenizer="llama3") == b0 + 3 * len(
        text.encode())
    assert (_sample(after, "tokenizer_http_request_duration_seconds_count", endpoint="/count", tokenizer="",
                    status="422") or 0) >= 1
    assert _sample(after, "tokenizer_http_requests_in_flight") == 1  # this scrape
    # The cache counters follow the served tokenizer's cache_stats(): this process's counters sum every instance's
    # (under pytest-xdist other modules' apps in this worker add theirs), so compare what this test added.
    stats = served.cache_stats()
    hits0 = _sample(before, "tokenizer_cache_hits_total", tokenizer="llama3") or 0
    misses0 = _sample(before, "tokenizer_cache_misses_total", tokenizer="llama3") or 0
    assert (_sample(after, "tokenizer_cache_hits_total", tokenizer="llama3") or 0) - hits0 == stats.hits - stats0.hits
    assert ((_sample(after, "tokenizer_cache_misses_total", tokenizer="llama3") or 0) - misses0
            == stats.misses - stats0.misses)
    assert _sample(after, "tokenizer_cache_max_entries", tokenizer="llama3") == stats.max_size
    sha = get_store().spec("llama3").sha256
    assert _sample(after, "tokenizer_info", tokenizer="llama3", sha256=sha) == 1
    assert _sample(after, "tokenizer_tokenize_duration_seconds_count", endpoint="/count", tokenizer="llama3")


def test_unknown_paths_share_one_metric_label(client: TestClient) -> None:
    for i in range(3):
        client.get(f"/random-{i}")
    text = client.get("/metrics").text
    assert "random-" not in text
    assert (_sample(text, "tokenizer_http_request_duration_seconds_count", endpoint="other", status="404") or 0) >= 3


def test_openapi_documents_bodies_and_examples(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for path, model in (("/encode", "EncodeRequest"), ("/count", "CountRequest"), ("/decode", "DecodeRequest")):
        op = spec["paths"][path]["post"]
        ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert ref == f"#/components/schemas/{model}"
        assert schemas[model]["examples"]
        assert {"200", "400", "413", "415", "422"} <= set(op["responses"])
    assert "Part" in schemas and "SpecialTokens" in schemas
    assert {"/tokenizers", "/tokenizers/{name}", "/healthz", "/readyz", "/metrics"} <= set(spec["paths"])
    assert client.get("/docs").status_code == 200


def test_not_ready_before_start_up() -> None:
    from app.api.main import create_app
    from app.core.config import Settings

    c = TestClient(create_app(Settings()), raise_server_exceptions=False)  # no `with`: the lifespan has not run
    assert c.get("/healthz").status_code == 200
    assert_error(c.get("/readyz"), 503, "not_ready")
    assert_error(c.post("/count", json={"tokenizer": "gpt2", "text": "a"}), 503, "not_ready")


def test_tokenizers_setting_loads_and_serves_only_those() -> None:
    settings = Settings(tokenizers="cl100k_base, r50k_base")
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        assert [t["name"] for t in c.get("/tokenizers").json()["tokenizers"]] == ["gpt2", "cl100k_base"]
        assert c.get("/readyz").json()["tokenizers"] == ["gpt2", "cl100k_base"]
        assert c.post("/count", json={"tokenizer": "gpt2", "text": "hi"}).json()["count"] == 1
        assert_error(c.post("/count", json={"tokenizer": "llama3", "text": "hi"}), 422, "unknown_tokenizer")
        assert c.post("/count", json={"model": "gpt-4", "text": "hi"}).json()["tokenizer"] == "cl100k_base"
        # a known model whose tokenizer this process does not load: the error names both
        r = c.post("/count", json={"model": "gpt-4o", "text": "hi"})
        assert_error(r, 422, "unknown_tokenizer")
        assert r.json()["error"]["details"] == {"name": "gpt-4o", "tokenizer": "o200k_base"}
