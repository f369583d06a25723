"""POST /decode in-process: round trips, batches, special tokens, ids out of range."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.engine import get_tokenizer

from .test_errors import assert_error


@pytest.mark.parametrize("tokenizer", ["gpt2", "cl100k_base", "o200k_base", "o200k_harmony", "llama3"])
def test_round_trip(client: TestClient, tokenizer: str) -> None:
    text = "Round trip: naïve 日本語 🇻🇳\n\tdone"
    ids = client.post("/encode", json={"tokenizer": tokenizer, "text": text}).json()["ids"]
    r = client.post("/decode", json={"tokenizer": tokenizer, "ids": ids})
    assert r.status_code == 200
    assert r.json() == {"tokenizer": get_tokenizer(tokenizer).name, "text": text}


def test_batch_and_skip_special(client: TestClient) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    rows = [[*tokenizer.encode("hi"), 100257], [100258, *tokenizer.encode(" there")], []]
    r = client.post("/decode", json={"tokenizer": "cl100k_base", "batch": rows})
    assert r.json() == {"tokenizer": "cl100k_base", "texts": ["hi<|endoftext|>", "<|fim_prefix|> there", ""]}
    r = client.post("/decode", json={"tokenizer": "cl100k_base", "batch": rows, "skip_special_tokens": True})
    assert r.json()["texts"] == ["hi", " there", ""]


def test_partial_utf8_becomes_replacement_char(client: TestClient) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    ids = tokenizer.encode("🇻")
    assert len(ids) > 1
    r = client.post("/decode", json={"tokenizer": "cl100k_base", "ids": ids[:1]})
    assert r.json()["text"] == tokenizer.decode(ids[:1]) and "\ufffd" in r.json()["text"]


def test_model_resolves_for_decode(client: TestClient) -> None:
    r = client.post("/decode", json={"model": "gpt-4o", "ids": [24912, 2375]})
    assert r.json() == {"tokenizer": "o200k_base", "text": "hello world"}


@pytest.mark.parametrize("ids,bad,position", [
    ([15339, 100277, 5], 100277, 1),  # one past the last special id
    ([-1], -1, 0),
    ([1, 2, 3, 10**30], 10**30, 3),
    ([1, 100261, 100300], 100261, 1),  # an unassigned id inside the special range
])
def test_out_of_range_ids_are_422_naming_the_first(client: TestClient, ids: list[int], bad: int,
                                                   position: int) -> None:
    err = assert_error(client.post("/decode", json={"tokenizer": "cl100k_base", "ids": ids}), 422, "invalid_token_id")
    assert err["details"]["id"] == bad and err["details"]["position"] == position
    assert str(bad) in err["message"]


def test_out_of_range_in_batch_names_the_row(client: TestClient) -> None:
    err = assert_error(client.post("/decode", json={"tokenizer": "gpt2", "batch": [[1], [2, 50257]]}), 422,
                       "invalid_token_id")
    assert err["details"] == {"id": 50257, "position": 1, "batch_index": 1, "tokenizer": "gpt2"}
