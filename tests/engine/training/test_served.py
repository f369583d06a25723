"""Trained tokenizers of both kinds are served by the HTTP service unchanged (in-process app, real lifespan)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.api.main import create_app
from app.core.config import Settings
from app.engine import reset
from app.engine.training import train_to_store


def test_service_serves_trained_tokenizers(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("low lower newest widest\n" * 10 + "the lowest newest\n", encoding="utf-8")
    store = tmp_path / "store"
    train_to_store([corpus], name="classic", store_dir=store, vocab_size=25, kind="char", quiet=True,
                   special_tokens=["<s>"])
    train_to_store([corpus], name="bytey", store_dir=store, vocab_size=300, quiet=True, special_tokens=["<s>"])
    reset()
    try:
        with TestClient(create_app(Settings(store=str(store))), raise_server_exceptions=False) as c:
            for name in ("classic", "bytey"):
                r = c.post("/encode", json={"tokenizer": name, "text": "lowest newer"})
                assert r.status_code == 200, r.text
                ids = r.json()["ids"]
                assert r.json()["count"] == len(ids) > 0
                d = c.post("/decode", json={"tokenizer": name, "ids": ids})
                assert d.status_code == 200 and d.json()["text"] == "lowest newer"
                n = c.post("/count", json={"tokenizer": name, "text": "lowest newer",
                                            "special_tokens": {"suffix": ["<s>"]}})
                assert n.status_code == 200 and n.json()["count"] == len(ids) + 1
                bad = c.post("/decode", json={"tokenizer": name, "ids": [10**6]})
                assert bad.status_code in (400, 422)
    finally:
        reset()
