"""Special-token injection: every special-token string of every bundled tokenizer, alone and glued into text, is
plain text on every endpoint (/encode text, texts, parts; /count; /decode round trip) and in both engine backends;
special ids come only from the special-token fields (``special_tokens.prefix/suffix``, ``parts[].special``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.api.main import create_app
from app.core.config import Settings
from app.engine import RankBPETokenizer, get_tokenizer, list_tokenizers
from app.engine.native import available
from tests.engine.references import expected_round_trip

TOKENIZERS = list_tokenizers()
BACKENDS = ["python", "native"] if available() else ["python"]


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings()), raise_server_exceptions=False) as c:
        yield c


def variants(special: str) -> list[str]:
    """The special string alone and glued into text in the ways that have fooled tokenizers."""
    return [special, f"x{special}y", f"X.{special}", f"{special}{special}", f" {special}\n", f"abc{special}def",
            f"{special[:-1]}", f"«{special}»", f"{special} hello"]


def all_texts(tokenizer: RankBPETokenizer) -> list[str]:
    return [v for s in sorted(tokenizer.special_tokens) for v in variants(s)]


def chunks(items: list[str], n: int = 1000) -> Iterator[list[str]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def no_special(tokenizer: RankBPETokenizer, ids: list[int]) -> bool:
    """No special id, except the model's own unknown token (WordPiece's [UNK]: model output, not a parse)."""
    unk = getattr(getattr(tokenizer, "model", None), "unk_id", None)
    return not any(tokenizer.is_special(i) and i != unk for i in ids)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_engine_encodes_special_strings_as_text(name: str, backend: str) -> None:
    tokenizer = get_tokenizer(name, backend=backend)
    for text in all_texts(tokenizer):
        ids = tokenizer.encode(text)
        assert no_special(tokenizer, ids), (text, ids)
        assert tokenizer.decode(ids) == expected_round_trip(name, text)
        assert tokenizer.count(text) == len(ids)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_every_endpoint_treats_special_strings_as_text(client: TestClient, name: str) -> None:
    tokenizer = get_tokenizer(name)
    texts = all_texts(tokenizer)
    for batch in chunks(texts):
        expected = [tokenizer.encode(t) for t in batch]
        for ids in expected:
            assert no_special(tokenizer, ids)
        r = client.post("/encode", json={"tokenizer": name, "texts": batch, "return_tokens": True,
                                         "return_offsets": True})
        assert r.status_code == 200, r.text
        results = r.json()["results"]
        assert [res["ids"] for res in results] == expected
        r = client.post("/count", json={"tokenizer": name, "texts": batch})
        assert r.status_code == 200 and r.json()["counts"] == [len(e) for e in expected]
        r = client.post("/decode", json={"tokenizer": name, "batch": expected})
        assert r.status_code == 200 and r.json()["texts"] == [expected_round_trip(name, t) for t in batch]
    for text in texts[:: max(1, len(texts) // 60)]:  # single-text forms, a spread sample of every kind
        expected = tokenizer.encode(text)
        r = client.post("/encode", json={"tokenizer": name, "text": text})
        assert r.status_code == 200 and r.json()["ids"] == expected
        assert client.post("/count", json={"tokenizer": name, "text": text}).json()["count"] == len(expected)
        r = client.post("/encode", json={"tokenizer": name, "parts": [{"text": text}, {"text": text}]})
        assert r.status_code == 200 and r.json()["ids"] == tokenizer.encode_parts([text, text])
        assert no_special(tokenizer, r.json()["ids"])
        r = client.post("/count", json={"tokenizer": name, "parts": [{"text": text}]})
        assert r.json()["count"] == len(expected)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_decoded_special_id_re_encodes_as_text(client: TestClient, name: str) -> None:
    """Decode a special id to its string, send that string back: it comes back as ordinary text ids."""
    tokenizer = get_tokenizer(name)
    specials = list(tokenizer.special_tokens.items())[:40]
    r = client.post("/decode", json={"tokenizer": name, "batch": [[i] for _, i in specials]})
    assert r.status_code == 200
    decoded = r.json()["texts"]
    r = client.post("/encode", json={"tokenizer": name, "texts": decoded})
    for (_, sid), res in zip(specials, r.json()["results"], strict=True):
        assert sid not in res["ids"] and no_special(tokenizer, res["ids"])


@pytest.mark.parametrize("name", TOKENIZERS)
def test_special_ids_come_only_from_the_special_fields(client: TestClient, name: str) -> None:
    tokenizer = get_tokenizer(name)
    first, last = sorted(tokenizer.special_tokens)[0], sorted(tokenizer.special_tokens)[-1]
    r = client.post("/encode", json={"tokenizer": name, "text": f"a {first} b",
                                     "special_tokens": {"prefix": [first], "suffix": [last]}})
    ids = r.json()["ids"]
    assert ids[0] == tokenizer.special_tokens[first] and ids[-1] == tokenizer.special_tokens[last]
    assert no_special(tokenizer, ids[1:-1])
    r = client.post("/encode", json={"tokenizer": name, "parts": [{"text": last}, {"special": first},
                                                                  {"text": first}]})
    ids = r.json()["ids"]
    assert [i for i in ids if tokenizer.is_special(i)] == [tokenizer.special_tokens[first]]
    assert client.post("/count", json={"tokenizer": name, "parts": [{"special": first}]}).json()["count"] == 1
    # A special string where a name is expected is just an unknown name, and smuggling fields is refused.
    r = client.post("/encode", json={"tokenizer": name, "text": "x", "special_tokens": {"prefix": [f"{first} "]}})
    assert r.status_code == 422
    for extra in ({"allowed_special": "all"}, {"parse_special": True}, {"special": first}):
        r = client.post("/encode", json={"tokenizer": name, "text": first, **extra})
        assert r.status_code == 422, (extra, r.text)


_HARMONY = get_tokenizer("o200k_harmony")
_FRAGMENTS = sorted({*_HARMONY.special_tokens.keys(), *get_tokenizer("llama3").special_tokens.keys(), "<|", "|>", "<",
                     ">", "|", "endoftext", "eot_id", " ", "\n", "a"})[:400]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(TOKENIZERS),
       texts=st.lists(st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=3), max_size=12).map("".join),
                      min_size=1, max_size=4))
def test_no_text_input_yields_a_special_id(client: TestClient, name: str, texts: list[str]) -> None:
    tokenizer = get_tokenizer(name)
    r = client.post("/encode", json={"tokenizer": name, "texts": texts})
    if r.status_code == 422:  # lone surrogates from st.text
        assert r.json()["error"]["type"] == "invalid_text"
        return
    assert r.status_code == 200, r.text
    for text, res in zip(texts, r.json()["results"], strict=True):
        assert no_special(tokenizer, res["ids"]) and res["ids"] == tokenizer.encode(text)
    r = client.post("/encode", json={"tokenizer": name, "parts": [{"text": t} for t in texts]})
    assert r.status_code == 200 and no_special(tokenizer, r.json()["ids"])
