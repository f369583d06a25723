"""POST /encode and /count in-process: exact ids (equal to app.engine's), batches, parts, special tokens, options."""

from __future__ import annotations

import base64
from decimal import Decimal

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.config import Settings
from app.engine import Special, get_tokenizer

TEXTS = [
    "hello world",
    "",
    "Việt Nam 🇻🇳 naïve café — 日本語のテキスト",
    "def f(x):\n    return x  # comment\n\n\n",
    "a  b\n \n  \n'RE 'll 123456789 ^^^^",
    "<|endoftext|> X.<|im_end|> <|eot_id|>",
]
TOKENIZERS = ["gpt2", "r50k_base", "cl100k_base", "o200k_base", "o200k_harmony", "llama3"]


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("text", TEXTS)
def test_encode_ids_equal_engine(client: TestClient, tokenizer: str, text: str) -> None:
    r = client.post("/encode", json={"tokenizer": tokenizer, "text": text})
    assert r.status_code == 200, r.text
    enc = get_tokenizer(tokenizer)
    body = r.json()
    assert body == {"tokenizer": enc.name, "ids": enc.encode(text), "count": len(enc.encode(text))}
    c = client.post("/count", json={"tokenizer": tokenizer, "text": text})
    assert c.json() == {"tokenizer": enc.name, "count": len(body["ids"])}


def test_special_token_strings_in_text_are_text(client: TestClient) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    for field in ("text", "texts", "parts"):
        text = "<|endoftext|><|fim_prefix|>"
        payload = {"text": text} if field == "text" else {"texts": [text]} if field == "texts" else {
            "parts": [{"text": text}]}
        r = client.post("/encode", json={"tokenizer": "cl100k_base", **payload})
        assert r.status_code == 200
        ids = r.json()["ids"] if field != "texts" else r.json()["results"][0]["ids"]
        assert not any(tokenizer.is_special(i) for i in ids)
        assert ids == tokenizer.encode(text)


def test_batch(client: TestClient) -> None:
    tokenizer = get_tokenizer("o200k_base")
    r = client.post("/encode", json={"tokenizer": "o200k_base", "texts": TEXTS})
    assert r.status_code == 200
    body = r.json()
    assert [x["ids"] for x in body["results"]] == [tokenizer.encode(t) for t in TEXTS]
    assert [x["count"] for x in body["results"]] == [len(tokenizer.encode(t)) for t in TEXTS]
    assert body["total"] == sum(len(tokenizer.encode(t)) for t in TEXTS)
    c = client.post("/count", json={"tokenizer": "o200k_base", "texts": TEXTS}).json()
    assert c == {"tokenizer": "o200k_base", "counts": [len(tokenizer.encode(t)) for t in TEXTS], "total": body["total"]}


def test_special_tokens_prefix_suffix(client: TestClient) -> None:
    tokenizer = get_tokenizer("llama3")
    payload = {"tokenizer": "llama3", "text": "Hi there",
               "special_tokens": {"prefix": ["<|begin_of_text|>"], "suffix": ["<|eot_id|>", "<|end_of_text|>"]}}
    r = client.post("/encode", json=payload)
    assert r.json()["ids"] == [128000, *tokenizer.encode("Hi there"), 128009, 128001]
    assert client.post("/count", json=payload).json()["count"] == len(r.json()["ids"])
    batch = client.post("/encode", json={**{k: v for k, v in payload.items() if k != "text"}, "texts": ["a", "b"]})
    assert [x["ids"] for x in batch.json()["results"]] == [[128000, *tokenizer.encode(t), 128009, 128001] for t in "ab"]


def test_parts(client: TestClient) -> None:
    tokenizer = get_tokenizer("llama3")
    parts = [{"special": "<|start_header_id|>"}, {"text": "user"}, {"special": "<|end_header_id|>"},
             {"text": "\n\nHi <|eot_id|>!"}, {"special": "<|eot_id|>"}]
    r = client.post("/encode", json={"tokenizer": "llama3", "parts": parts})
    assert r.status_code == 200
    expected = tokenizer.encode_parts([Special(p["special"]) if "special" in p else p["text"] for p in parts])
    assert r.json()["ids"] == expected
    assert expected.count(128009) == 1  # only the special part, never the text's look-alike
    assert client.post("/count", json={"tokenizer": "llama3", "parts": parts}).json()["count"] == len(expected)
    with_offsets = client.post("/encode", json={"tokenizer": "llama3", "parts": parts, "return_offsets": True})
    assert with_offsets.json()["ids"] == expected
    spans = with_offsets.json()["offsets"]
    joined = "user\n\nHi <|eot_id|>!"
    assert spans[0] == [0, 0] and spans[-1] == [len(joined), len(joined)]
    pairs = zip(spans, expected, strict=True)
    assert "".join(joined[a:b] for (a, b), i in pairs if not tokenizer.is_special(i)) == joined


def test_tokens_and_offsets(client: TestClient) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    text = "héllo 🇻🇳 world"
    r = client.post("/encode", json={"tokenizer": "cl100k_base", "text": text, "return_tokens": True,
                                     "return_offsets": True, "special_tokens": {"suffix": ["<|endoftext|>"]}})
    body = r.json()
    assert body["ids"] == tokenizer.encode(text, suffix=["<|endoftext|>"])
    raw = b""
    for piece, token_id in zip(body["tokens"], body["ids"], strict=True):
        assert len(piece) == 1
        chunk = piece["text"].encode() if "text" in piece else base64.b64decode(piece["bytes"])
        assert chunk == tokenizer.decode_tokens_bytes([token_id])[0]
        raw += chunk
    assert raw == text.encode() + b"<|endoftext|>"
    assert any("bytes" in p for p in body["tokens"])  # the flag splits into partial UTF-8 tokens
    ids, spans = tokenizer.encode_with_offsets(text)
    assert body["offsets"] == [list(s) for s in spans] + [[len(text), len(text)]]


def test_model_block(client: TestClient) -> None:
    r = client.post("/count", json={"model": "gpt-4o", "text": "hello world"})
    body = r.json()
    assert body["tokenizer"] == "o200k_base" and body["count"] == 2
    m = body["model"]
    assert m["name"] == "gpt-4o" and m["context_window"] == 128000 and m["fits"] is True
    # exact decimal strings from genai-prices: gpt-4o input is $2.5 per million tokens
    assert Decimal(m["estimated_input_cost"]) == 2 * Decimal(m["input_price_per_million"]) / 1_000_000
    assert m["input_price_per_million"] == "2.5" and m["estimated_input_cost"] == "0.000005"
    assert m["price_source"] == "genai-prices: openai gpt-4o" and m["price_as_of"].startswith("genai-prices 0.2.3")
    tight = client.post("/count", json={"model": "gpt2", "texts": ["a " * 1100, "b"]}).json()
    assert tight["model"]["fits"] is False and tight["model"]["fits_each"] == [False, True]
    assert tight["model"]["estimated_input_cost"] is None and "no price" in tight["model"]["price_unavailable"]
    tokenizer = client.post("/encode", json={"model": "llama-3.1-8b-instruct", "text": "x"}).json()
    assert tokenizer["tokenizer"] == "llama3" and tokenizer["model"]["context_window"] == 131072


def test_model_resolves_through_manifest_fallback(client: TestClient) -> None:
    # "davinci" is only in the manifest's models list, not in models.json: tokenizer known, window unknown.
    body = client.post("/count", json={"model": "davinci", "text": "hi"}).json()
    assert body["tokenizer"] == "gpt2"
    assert body["model"]["context_window"] is None and body["model"]["fits"] is None


def test_special_lookalikes(client: TestClient) -> None:
    text = "a <|endoftext|> b <|fim_prefix|><|endoftext|> <|nope|>"
    r = client.post("/count", json={"tokenizer": "cl100k_base", "text": text, "report_special_lookalikes": True})
    assert r.json()["special_lookalikes"] == 3
    r = client.post("/encode", json={"tokenizer": "cl100k_base", "texts": [text, "x"],
                                     "report_special_lookalikes": True})
    assert [x["special_lookalikes"] for x in r.json()["results"]] == [3, 0]
    assert "special_lookalikes" not in client.post("/count", json={"tokenizer": "cl100k_base", "text": text}).json()


def test_server_timing_header(client: TestClient) -> None:
    r = client.post("/encode", json={"tokenizer": "gpt2", "text": "timing"})
    timing = r.headers["server-timing"]
    assert "tokenize;dur=" in timing and "parse;dur=" in timing


def test_server_timing_names_the_pool_by_body_size(client: TestClient) -> None:
    """Bodies up to TOKENIZER_INLINE_BYTES run on the loop, bigger ones on the thread pool, from
    TOKENIZER_BULK_BYTES on the bulk pool; ``Server-Timing`` says which, and the answer is the same."""
    tokenizer = get_tokenizer("cl100k_base")
    limits = Settings()
    line = "The quick brown fox jumps over the lazy dog. "
    cases = {"inline": line, "threads": line * (limits.inline_bytes // len(line) + 10),
             "bulk": line * (limits.bulk_bytes // len(line) + 10)}
    for pool, text in cases.items():
        r = client.post("/encode", json={"tokenizer": "cl100k_base", "text": text})
        assert r.status_code == 200 and r.json()["ids"] == tokenizer.encode(text)
        timing = dict(item.strip().split(";", 1) for item in r.headers["server-timing"].split(","))
        assert timing["pool"] == f'desc="{pool}"', (pool, timing)
        assert {"parse", "tokenize", "serialize", "queue"} <= set(timing)


@settings(max_examples=150, deadline=None)
@given(text=st.text(st.characters(exclude_categories=("Cs",)), max_size=60),
       tokenizer=st.sampled_from(["gpt2", "cl100k_base", "o200k_base", "llama3"]))
def test_generated_texts_match_engine_and_round_trip(client: TestClient, text: str, tokenizer: str) -> None:
    enc = get_tokenizer(tokenizer)
    r = client.post("/encode", json={"tokenizer": tokenizer, "text": text, "return_offsets": True})
    assert r.status_code == 200
    ids = r.json()["ids"]
    assert ids == enc.encode(text)
    assert client.post("/count", json={"tokenizer": tokenizer, "text": text}).json()["count"] == len(ids)
    assert client.post("/decode", json={"tokenizer": tokenizer, "ids": ids}).json()["text"] == text


def test_add_special_tokens_applies_the_tokenizer_template(client: TestClient) -> None:
    body = {"tokenizer": "llama3", "text": "Hello", "special_tokens": {"suffix": ["<|eot_id|>"]}}
    plain = client.post("/encode", json=body).json()
    wrapped = client.post("/encode", json={**body, "add_special_tokens": True, "return_offsets": True}).json()
    assert plain["ids"] == [9906, 128009]
    assert wrapped["ids"] == [128000, 9906, 128009]
    assert wrapped["offsets"] == [[0, 0], [0, 5], [5, 5]]
    counted = client.post("/count", json={**body, "add_special_tokens": True}).json()
    assert counted["count"] == 3
    parts = {"tokenizer": "llama3", "parts": [{"text": "Hi"}], "add_special_tokens": True}
    assert client.post("/encode", json=parts).json()["ids"] == [128000, 13347]
    assert client.post("/count", json=parts).json()["count"] == 2
    with_offsets = client.post("/encode", json={**parts, "return_offsets": True}).json()
    assert with_offsets["ids"] == [128000, 13347] and with_offsets["offsets"] == [[0, 0], [0, 2]]
    # cl100k_base has no template: the flag changes nothing
    cl = {"tokenizer": "cl100k_base", "text": "Hello"}
    assert client.post("/encode", json={**cl, "add_special_tokens": True}).json() == client.post(
        "/encode", json=cl).json()
