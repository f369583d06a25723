"""The checks :mod:`app.api.ops.common` gives every operation: one invalid-id 422 (``/decode``, vLLM's
``/detokenize``, TEI's ``/decode``, llama.cpp's ``/tokenize``) and one decode-ids 413, the same on every route."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.core.config import Settings
from app.engine import get_tokenizer

BAD = 10**9


def _error(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    error: dict[str, Any] = r.json()["error"]
    return error


@pytest.mark.parametrize(("path", "body", "where", "extra"), [
    ("/decode", {"tokenizer": "llama3", "ids": [1, BAD]}, "ids[1]", {}),
    ("/decode", {"tokenizer": "llama3", "batch": [[1], [2, 3, BAD]]}, "batch[1][2]", {"batch_index": 1}),
    ("/detokenize", {"model": "llama-3.1-8b-instruct", "tokens": [1, BAD]}, "tokens[1]", {}),
    ("/tei/llama3/decode", {"ids": [1, BAD]}, "ids[1]", {}),
    ("/tei/llama3/decode", {"ids": [[1], [BAD]]}, "ids[1][0]", {"batch_index": 1}),
    ("/tokenize", {"model": "llama-3.1-8b-instruct", "content": ["Hi", 1, BAD]}, "content[2]",
     {"field": "content[2]"}),
])
def test_one_invalid_id_error_on_every_route(client: TestClient, path: str, body: dict[str, Any], where: str,
                                             extra: dict[str, Any]) -> None:
    tokenizer = get_tokenizer("llama3")
    error = _error(client.post(path, json=body), 422)
    assert error["type"] == "invalid_token_id"
    assert error["message"] == (f"token id {BAD} at {where} is not in the vocabulary of 'llama3' (valid ids: "
                                f"0..{tokenizer.n_vocab - 1}, assigned ones only)")
    position = int(where.rsplit("[", 1)[1].rstrip("]"))
    assert error["details"] == {"id": BAD, "position": position, "tokenizer": "llama3", **extra}


def test_one_decode_ids_limit_on_every_route() -> None:
    with TestClient(create_app(Settings(max_decode_ids=4))) as c:
        for path, body in [("/decode", {"tokenizer": "llama3", "batch": [[1, 2], [3, 4, 5]]}),
                           ("/detokenize", {"model": "llama-3.1-8b-instruct", "tokens": [1, 2, 3, 4, 5]}),
                           ("/tei/llama3/decode", {"ids": [[1, 2], [3, 4, 5]]})]:
            error = _error(c.post(path, json=body), 413)
            assert error["type"] == "payload_too_large", path
            assert error["message"] == "5 ids to decode; the limit is 4 (TOKENIZER_MAX_DECODE_IDS)", path
            assert error["details"] == {"limit": 4, "actual": 5}, path
        assert c.post("/decode", json={"tokenizer": "llama3", "ids": [1, 2, 3, 4]}).status_code == 200
