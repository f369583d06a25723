"""llama.cpp server shapes: ``/tokenize`` with ``content`` (told apart from vLLM's body), ``/detokenize``,
``/apply-template``. Field lists from the ggml-org/llama.cpp server README (``tools/server``) ("POST /tokenize":
``content``, ``add_special``, ``parse_special``, ``with_pieces``; "POST /detokenize": ``tokens``;
"POST /apply-template": ``messages``) and ``tools/server/server.cpp``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.api.ops.llamacpp import TOKENIZE_FIELDS, LlamaCppApplyTemplateRequest, LlamaCppTokenizeRequest
from app.core.config import Settings
from app.engine import get_tokenizer

#: llama.cpp's documented /tokenize fields (the server README in tools/server), plus this service's ``model``.
LLAMACPP_TOKENIZE = {"content", "add_special", "parse_special", "with_pieces"}


@pytest.fixture(scope="module")
def sidecar() -> Iterator[TestClient]:
    """A sidecar serving one model: llama.cpp bodies name none."""
    app = create_app(Settings(tokenizers="llama3,qwen3", default_model="llama-3.1-8b-instruct"))
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def test_fields_match_llamacpp() -> None:
    assert set(LlamaCppTokenizeRequest.model_fields) == LLAMACPP_TOKENIZE | {"model"} == set(TOKENIZE_FIELDS)
    assert {"messages"} <= set(LlamaCppApplyTemplateRequest.model_fields)


def test_tokenize(sidecar: TestClient) -> None:
    tokenizer = get_tokenizer("llama3")
    text = "Hi <|eot_id|> 日本語 𝔘"
    r = sidecar.post("/tokenize", json={"content": text})
    assert r.status_code == 200 and r.json() == {"tokens": tokenizer.encode(text)}  # add_special defaults to false
    assert sidecar.post("/tokenize", json={"content": text, "add_special": True}).json()["tokens"] == tokenizer.encode(
        text, add_special_tokens=True)
    plain = sidecar.post("/tokenize", json={"content": text, "parse_special": False})
    assert plain.json()["tokens"] == tokenizer.encode(text)
    refused = sidecar.post("/tokenize", json={"content": text, "parse_special": True})
    assert refused.status_code == 422 and refused.json()["error"]["details"]["field"] == "parse_special"
    mixed = sidecar.post("/tokenize", json={"content": ["Hi", 128009, " there"]}).json()["tokens"]
    assert mixed == [*tokenizer.encode("Hi"), 128009, *tokenizer.encode(" there")]
    assert sidecar.post("/tokenize", json={"content": [10**9]}).status_code == 422
    assert sidecar.post("/tokenize", json={"content": "x", "model": "qwen3-8b"}).json()["tokens"] == get_tokenizer(
        "qwen3").encode("x")
    assert sidecar.post("/tokenize", json={"content": "x", "n_probs": 1}).status_code == 422  # unknown: refused


def test_with_pieces(sidecar: TestClient) -> None:
    tokenizer = get_tokenizer("llama3")
    text = "Hé 𝔘𝔫𝔦"
    pieces = sidecar.post("/tokenize", json={"content": text, "with_pieces": True}).json()["tokens"]
    ids = tokenizer.encode(text)
    assert [p["id"] for p in pieces] == ids
    data = b""
    split = 0
    for p, raw in zip(pieces, tokenizer.decode_tokens_bytes(ids), strict=True):
        if isinstance(p["piece"], list):  # not valid UTF-8 alone: its bytes
            split += 1
            assert bytes(p["piece"]) == raw
        else:
            assert p["piece"].encode() == raw
        data += raw
    assert data == text.encode() and split > 0


def test_detokenize_answers_both_shapes(sidecar: TestClient) -> None:
    ids = get_tokenizer("llama3").encode("Hello there")
    assert sidecar.post("/detokenize", json={"tokens": ids}).json() == {"prompt": "Hello there",
                                                                      "content": "Hello there"}


def test_apply_template(sidecar: TestClient) -> None:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Hi <|eot_id|>"}]
    r = sidecar.post("/apply-template", json={"messages": msgs})
    assert r.status_code == 200
    prompt = r.json()["prompt"]
    assert prompt.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>")
    assert prompt.endswith("Hi <|eot_id|><|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    qwen = sidecar.post("/apply-template", json={"messages": msgs, "model": "qwen3-8b", "add_generation_prompt": False,
                                                 "chat_template_kwargs": {"enable_thinking": False}})
    assert qwen.json()["prompt"] == "<|im_start|>user\nHi <|eot_id|><|im_end|>\n"
    assert sidecar.post("/apply-template", json={"messages": msgs, "bogus": 1}).status_code == 422
