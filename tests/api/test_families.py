"""The SentencePiece, tekken and GGUF tokenizers through the HTTP routes (in-process app, every artifact loaded
and verified at start-up) and the CLI (a real process): /encode, /count and /decode give the engine's exact ids."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.engine import get_tokenizer

from ..cli.test_tokenize import run

NAMES = ["mistral-v1", "mistral-v3", "mistral-v7", "mistral-nemo", "llama2", "phi-3", "bge-small-en-v1.5",
         "xlm-roberta", "xlm-roberta-sentencepiece", "qwen2"]
TEXT = "Tokenizers: naïve café, 日本語 and  spaces\n\t<s>[INST] 12345"


@pytest.mark.parametrize("name", NAMES)
def test_encode_count_decode(client: TestClient, name: str) -> None:
    tok = get_tokenizer(name)
    r = client.post("/encode", json={"tokenizer": name, "text": TEXT})
    assert r.status_code == 200, r.text
    ids = r.json()["ids"]
    assert ids == tok.encode(TEXT) and not any(tok.is_special(i) for i in ids)
    assert client.post("/count", json={"tokenizer": name, "text": TEXT}).json()["count"] == len(ids)
    back = client.post("/decode", json={"tokenizer": name, "ids": ids})
    assert back.status_code == 200 and back.json()["text"] == tok.decode(ids)


@pytest.mark.parametrize("name", ["mistral-v3", "llama2", "bge-small-en-v1.5"])
def test_out_of_range_id_is_a_4xx(client: TestClient, name: str) -> None:
    r = client.post("/decode", json={"tokenizer": name, "ids": [10**7]})
    assert 400 <= r.status_code < 500 and r.json()["error"]["type"]


def test_cli_round_trip() -> None:
    text = "Hello wörld, ça va?\n"
    out = run("encode", "-t", "mistral-v3", stdin=text)
    assert out.returncode == 0, out.stderr
    ids = [int(x) for x in out.stdout.split()]
    assert ids == get_tokenizer("mistral-v3").encode(text)
    back = run("decode", "-t", "mistral-v3", stdin=out.stdout)
    assert back.returncode == 0 and back.stdout == text
