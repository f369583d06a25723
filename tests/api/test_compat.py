"""The inference-server shapes: vLLM's /tokenize and /detokenize, TEI's /tei/{model}/tokenize and /decode."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.engine import get_encoding


def test_vllm_tokenize_and_detokenize(client: TestClient) -> None:
    enc = get_encoding("llama3")
    r = client.post("/tokenize", json={"model": "llama-3.1-8b-instruct", "prompt": "Hi <|eot_id|> there",
                                       "return_token_strs": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["tokens"] == enc.encode("Hi <|eot_id|> there", add_special_tokens=True)
    assert body["count"] == len(body["tokens"]) and body["max_model_len"] == 131072
    assert len(body["token_strs"]) == body["count"]
    assert not any(enc.is_special(i) for i in body["tokens"][1:])  # the marker stays text
    plain = client.post("/tokenize", json={"model": "llama-3.1-8b-instruct", "prompt": "Hi",
                                           "add_special_tokens": False}).json()
    assert plain["tokens"] == enc.encode("Hi")
    chat = client.post("/tokenize", json={"model": "gpt-oss-20b", "messages": [{"role": "user", "content": "Hi"}]})
    assert chat.json()["tokens"] == client.post("/encode", json={"model": "gpt-oss-20b", "messages": [
        {"role": "user", "content": "Hi"}]}).json()["ids"]
    d = client.post("/detokenize", json={"model": "llama-3.1-8b-instruct", "tokens": body["tokens"]})
    assert d.json() == {"prompt": enc.decode(body["tokens"])}
    bad = client.post("/detokenize", json={"model": "gpt-4o", "tokens": [10 ** 9]})
    assert bad.status_code == 422 and bad.json()["error"]["type"] == "invalid_token_id"
    assert client.post("/tokenize", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}
                       ).status_code == 422
    assert client.post("/tokenize", json={"model": "gpt-4o"}).status_code == 422
    # fields vLLM clients send that this service does not use are ignored, not refused
    extra = client.post("/tokenize", json={"model": "gpt-oss-20b", "messages": [{"role": "user", "content": "Hi"}],
                                           "chat_template_kwargs": {"x": 1}, "mm_processor_kwargs": None})
    assert extra.status_code == 200 and extra.json()["tokens"] == chat.json()["tokens"]
    assert client.post("/tokenize", json={"model": "gpt-4o", "prompt": 5}).status_code == 422  # types stay strict


def test_tei_tokenize(client: TestClient) -> None:
    enc = get_encoding("llama3")
    text = "Hé <|eot_id|> 😀 日本"
    r = client.post("/tei/llama-3.1-8b-instruct/tokenize", json={"inputs": text})
    assert r.status_code == 200, r.text
    (tokens,) = r.json()
    assert [t["id"] for t in tokens] == enc.encode(text, add_special_tokens=True)
    assert tokens[0] == {"id": 128000, "text": "<|begin_of_text|>", "special": True, "start": None, "stop": None}
    data = text.encode()
    for t in tokens[1:]:
        assert not t["special"] and t["text"] == data[t["start"]:t["stop"]].decode("utf-8", errors="replace")
    assert tokens[-1]["stop"] == len(data)
    batch = client.post("/tei/cl100k_base/tokenize", json={"inputs": ["a b", "c"], "add_special_tokens": False})
    assert [[t["id"] for t in row] for row in batch.json()] == [get_encoding("cl100k_base").encode(x)
                                                                for x in ("a b", "c")]
    assert client.post("/tei/gpt-4o-2024-08-06/tokenize", json={"inputs": "x"}).json()[0][0]["id"] == get_encoding(
        "o200k_base").encode("x")[0]
    assert client.post("/tei/nope/tokenize", json={"inputs": "x"}).status_code == 404
    assert client.post("/tei/gpt-4o/tokenize", json={"inputs": "x", "prompt_name": "query"}).status_code == 422
    assert client.post("/tei/gpt-4o/tokenize", json={"inputs": 3}).status_code == 422


def test_tei_decode(client: TestClient) -> None:
    enc = get_encoding("llama3")
    ids = enc.encode("Hi there", add_special_tokens=True)
    assert client.post("/tei/llama3/decode", json={"ids": ids}).json() == ["Hi there"]
    both = client.post("/tei/llama3/decode", json={"ids": [ids, ids[1:]], "skip_special_tokens": False}).json()
    assert both == [enc.decode(ids), "Hi there"]
    bad = client.post("/tei/llama3/decode", json={"ids": [10 ** 9]})
    assert bad.status_code == 422 and bad.json()["error"]["type"] == "invalid_token_id"
