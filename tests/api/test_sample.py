"""The ``sample`` option of POST /encode and /count (app/api/ops/sample.py, schemas ``SampleOptions``): ids equal
the engine's ``encode(sample=...)`` for text, batches (item i: seed + i) and parts, counts equal the sampled ids,
special tokens stay where they are, and every bad request is a 422 in the one error shape — on the in-process app
and on a real server process (uvicorn on loopback, started by the tests' launcher)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.engine import Special, get_tokenizer
from app.engine.sampling import Sample

from .conftest import LiveServer

TEXT = "Subword regularisation: naïve café, 日本語 12345"


def _sample(options: dict[str, Any]) -> Sample:
    return Sample(**options)


@pytest.mark.parametrize(("name", "options"), [
    ("cl100k_base", {"seed": 3, "dropout": 0.3}), ("qwen3", {"seed": 3, "dropout": 0.3}),
    ("mistral-v1", {"seed": 3, "dropout": 0.3}), ("xlm-roberta-sentencepiece", {"seed": 3, "alpha": 0.2}),
    ("xlm-roberta-sentencepiece", {"seed": 3, "alpha": 0.5, "nbest": 5}),
])
def test_ids_equal_the_engine(client: TestClient, name: str, options: dict[str, Any]) -> None:
    tok, sample = get_tokenizer(name), _sample(options)
    r = client.post("/encode", json={"tokenizer": name, "text": TEXT, "sample": options, "return_tokens": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ids"] == tok.encode(TEXT, sample=sample) and body["count"] == len(body["ids"])
    assert len(body["tokens"]) == body["count"]
    assert client.post("/count", json={"tokenizer": name, "text": TEXT, "sample": options}).json()["count"] == len(
        body["ids"])
    texts = [TEXT, TEXT, "second"]
    batch = client.post("/encode", json={"tokenizer": name, "texts": texts, "sample": options}).json()
    assert [r["ids"] for r in batch["results"]] == tok.encode_batch(texts, sample=sample)
    counts = client.post("/count", json={"tokenizer": name, "texts": texts, "sample": options}).json()["counts"]
    assert counts == [len(r["ids"]) for r in batch["results"]]
    special = next(iter(tok.special_tokens))
    parts = [{"text": "one"}, {"special": special}, {"text": TEXT}]
    got = client.post("/encode", json={"tokenizer": name, "parts": parts, "sample": options,
                                       "special_tokens": {"prefix": [special]}, "add_special_tokens": True}).json()
    expected = tok.encode_parts([Special(special), "one", Special(special), TEXT], add_special_tokens=True,
                                sample=sample)
    assert got["ids"] == expected
    counted = client.post("/count", json={"tokenizer": name, "parts": parts, "sample": options,
                                          "special_tokens": {"prefix": [special]}, "add_special_tokens": True})
    assert counted.json()["count"] == len(expected)


def test_model_names_resolve_and_bad_requests_are_422(client: TestClient) -> None:
    r = client.post("/encode", json={"model": "gpt-4o", "text": TEXT, "sample": {"seed": 1, "dropout": 1.0}})
    assert r.status_code == 200 and r.json()["count"] == len(TEXT.encode("utf-8"))  # dropout 1: bytes
    refused = [
        ({"tokenizer": "bge-small-en-v1.5", "text": "hi", "sample": {"seed": 1}}, "invalid_sample"),
        ({"tokenizer": "xlm-roberta-sentencepiece", "text": "hi", "sample": {"dropout": 0.1}}, "invalid_sample"),
        ({"tokenizer": "cl100k_base", "text": "hi", "sample": {"alpha": 0.1}}, "invalid_sample"),
        ({"tokenizer": "cl100k_base", "text": "hi", "sample": {"nbest": 4}}, "invalid_sample"),
        ({"tokenizer": "xlm-roberta-sentencepiece", "text": "hi", "sample": {"nbest": 0}}, "validation_error"),
        ({"tokenizer": "xlm-roberta-sentencepiece", "text": "hi", "sample": {"nbest": 513}}, "validation_error"),
        ({"tokenizer": "xlm-roberta-sentencepiece", "text": "hi", "sample": {"alpha": -1}}, "validation_error"),
        ({"tokenizer": "cl100k_base", "text": "hi", "sample": {"dropout": 1.01}}, "validation_error"),
        ({"tokenizer": "cl100k_base", "text": "hi", "sample": {"seed": -1}}, "validation_error"),
        ({"tokenizer": "cl100k_base", "text": "hi", "sample": {"seed": "1"}}, "validation_error"),
        ({"tokenizer": "cl100k_base", "text": "hi", "sample": {"temperature": 1}}, "validation_error"),
        ({"tokenizer": "cl100k_base", "text": "hi", "sample": {}, "return_offsets": True}, "validation_error"),
        ({"tokenizer": "cl100k_base", "text": "hi", "sample": {}, "truncate": {"max_tokens": 1}},
         "validation_error"),
        ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "sample": {}}, "validation_error"),
    ]
    for body, kind in refused:
        for path in ("/encode", "/count"):
            if path == "/count" and "return_offsets" in body:
                continue
            r = client.post(path, json=body)
            assert r.status_code == 422, (path, body, r.text)
            error = r.json()["error"]
            assert error["type"] == kind and error["message"], (path, body)
    r = client.post("/encode", content=b'{"tokenizer": "xlm-roberta-sentencepiece", "text": "hi", '
                                      b'"sample": {"alpha": NaN}}',
                    headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["type"] == "validation_error"
    detail = client.post("/encode", json=refused[0][0]).json()["error"]
    assert detail["details"] == {"tokenizer": "bge-small-en-v1.5", "model": "WordPiece"}


def test_openapi_documents_the_option(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    options = schemas["SampleOptions"]["properties"]
    assert set(options) == {"seed", "alpha", "nbest", "dropout"} and all(p.get("description") for p in
                                                                         options.values())
    assert any("sample" in e for e in schemas["EncodeRequest"]["examples"])
    assert any("sample" in e for e in schemas["CountRequest"]["examples"])


@pytest.mark.timeout(300)
def test_real_server(live_server: Callable[..., LiveServer]) -> None:
    server = live_server("--workers", "1",
                         env={"TOKENIZER_TOKENIZERS": "cl100k_base,xlm-roberta-sentencepiece,bge-small-en-v1.5"})
    x = get_tokenizer("xlm-roberta-sentencepiece")
    with server.client(timeout=60) as c:
        body = {"tokenizer": "xlm-roberta-sentencepiece", "text": TEXT,
                "sample": {"seed": 11, "alpha": 0.3, "nbest": 8}}
        first, again = c.post("/encode", json=body), c.post("/encode", json=body)
        assert first.status_code == 200, first.text
        assert first.json()["ids"] == again.json()["ids"] == x.encode(TEXT, sample=Sample(seed=11, alpha=0.3, nbest=8))
        drawn = {tuple(c.post("/encode", json={**body, "sample": {"seed": s, "alpha": 0.0}}).json()["ids"])
                 for s in range(8)}
        assert len(drawn) > 3 and all(x.decode(list(ids)) == x.decode(x.encode(TEXT)) for ids in drawn)
        r = c.post("/count", json={"tokenizer": "cl100k_base", "texts": ["ab", "cd"], "sample": {"dropout": 1.0}})
        assert r.json() == {"tokenizer": "cl100k_base", "counts": [2, 2], "total": 4}
        r = c.post("/encode", json={"tokenizer": "bge-small-en-v1.5", "text": "hi", "sample": {"seed": 1}})
        assert r.status_code == 422 and r.json()["error"]["type"] == "invalid_sample"


def test_sampled_text_is_limited(client: TestClient) -> None:
    from app.api.ops.sample import MAX_SAMPLE_BYTES

    big = "a" * (MAX_SAMPLE_BYTES + 1)
    r = client.post("/count", json={"tokenizer": "cl100k_base", "text": big, "sample": {"dropout": 0.1}})
    assert r.status_code == 413 and r.json()["error"]["details"]["field"] == "sample"
    assert client.post("/count", json={"tokenizer": "cl100k_base", "text": big}).status_code == 200


def test_sampled_tokens_are_limited_after_one_encoding(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sampled request for token pieces is sized by its own (one) sampled encoding: over
    TOKENIZER_MAX_DETAIL_TOKENS it is the same 413 as an unsampled one, under it the pieces match the ids."""
    tok = get_tokenizer("cl100k_base")
    calls: list[int] = []
    real_sampled = type(tok)._sampled  # what encode and count call for a sampled text

    def counting_sampled(self: Any, text: str, *args: Any, **kwargs: Any) -> list[int]:
        calls.append(len(text))
        return real_sampled(self, text, *args, **kwargs)

    monkeypatch.setattr(type(tok), "_sampled", counting_sampled)
    text = "ab " * 90_000  # 270,000 bytes; with dropout 1.0 every byte is a token: 270,000 > 2**18
    r = client.post("/encode", json={"tokenizer": "cl100k_base", "text": text, "return_tokens": True,
                                     "sample": {"seed": 1, "dropout": 1.0}})
    assert r.status_code == 413, r.text
    assert r.json()["error"]["details"] == {"limit": 2**18, "actual": 270_000, "field": "return_tokens/return_offsets"}
    assert calls == [len(text)]  # sampled once, not counted by a second sampling first
    calls.clear()
    # over the limit in bytes, under it in (sampled) tokens: encoded once, pieces for every id
    r = client.post("/encode", json={"tokenizer": "cl100k_base", "text": text, "return_tokens": True,
                                     "sample": {"seed": 1, "dropout": 0.1}})
    body = r.json()
    assert r.status_code == 200 and 90_000 < body["count"] < 2**18 and calls == [len(text)]
    assert body["ids"] == tok.encode(text, sample=Sample(seed=1, dropout=0.1))
    assert "".join(t["text"] for t in body["tokens"]) == text
