"""LiteLLM proxy's ``POST /utils/token_counter``. Field lists from BerriAI/litellm ``litellm/proxy/_types.py``:
``TokenCountRequest`` (``model``, ``prompt``, ``messages``) and ``TokenCountResponse`` (``total_tokens``,
``request_model``, ``model_used``, ``tokenizer_type``)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.api.ops.litellm import TokenCounterRequest
from app.engine import get_tokenizer

REQUEST = {"model", "prompt", "messages"}
RESPONSE = {"total_tokens", "request_model", "model_used", "tokenizer_type"}


def test_fields_match_litellm() -> None:
    assert set(TokenCounterRequest.model_fields) == REQUEST


def test_prompt_and_messages(client: TestClient) -> None:
    r = client.post("/utils/token_counter", json={"model": "gpt-4o-2024-08-06", "prompt": "Hi <|endoftext|>"})
    assert r.status_code == 200 and set(r.json()) == RESPONSE
    body = r.json()
    assert body["total_tokens"] == len(get_tokenizer("o200k_base").encode("Hi <|endoftext|>"))  # text is text
    assert body["request_model"] == "gpt-4o-2024-08-06" and body["tokenizer_type"] == "openai_tokenizer"
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    for model in ("gpt-4o", "qwen3-8b", "llama-3.1-8b-instruct"):
        got = client.post("/utils/token_counter", json={"model": model, "messages": msgs}).json()
        assert got["total_tokens"] == client.post("/count", json={"model": model, "messages": msgs}).json()["count"]
        assert got["model_used"] == model
    assert client.post("/utils/token_counter", json={"model": "qwen3-8b", "prompt": "x"}).json()[
        "tokenizer_type"] == "huggingface_tokenizer"
    for bad in ({"model": "gpt-4o"}, {"model": "gpt-4o", "prompt": "x", "messages": msgs},
                {"model": "gpt-4o", "prompt": "x", "contents": []}):
        assert client.post("/utils/token_counter", json=bad).status_code == 422
