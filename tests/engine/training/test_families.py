"""Every trainer kind published into a store is served by name by the HTTP service (in-process app, real
lifespan) and round-trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.core.config import Settings
from app.engine import reset
from app.engine.training import train_to_store
from app.engine.training.families import OPTIONS, make_trainer
from app.engine.training.trainer import FAMILY_KINDS

from .family_corpus import corpus_text

EXPECTED = {"wordpiece": ("wordpiece", "hf_json", ".tokenizer.json"),
            "unigram": ("unigram", "hf_json", ".tokenizer.json"),
            "sentencepiece-unigram": ("unigram", "sentencepiece", ".model"),
            "sentencepiece-bpe": ("bpe", "sentencepiece", ".model")}


def test_every_kind_is_published_and_served(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text(corpus_text(40_000), encoding="utf-8")
    store = tmp_path / "store"
    for kind in FAMILY_KINDS:
        report = train_to_store([corpus], name=f"t-{kind}", store_dir=store, kind=kind, vocab_size=700, quiet=True)
        assert (report.spec.kind, report.spec.format, report.spec.artifact_path.name) == (
            EXPECTED[kind][0], EXPECTED[kind][1], f"t-{kind}{EXPECTED[kind][2]}")
        assert report.spec.vocab_size == 700
    entries = json.loads((store / "manifest.json").read_text())["tokenizers"]
    assert [e["name"] for e in entries] == [f"t-{k}" for k in FAMILY_KINDS]
    reset()
    try:
        with TestClient(create_app(Settings(store=str(store))), raise_server_exceptions=False) as c:
            text = "the tokenizer service encodes text"
            for kind in FAMILY_KINDS:
                r = c.post("/encode", json={"tokenizer": f"t-{kind}", "text": text})
                assert r.status_code == 200, r.text
                ids = r.json()["ids"]
                assert 0 < len(ids) < len(text)
                d = c.post("/decode", json={"tokenizer": f"t-{kind}", "ids": ids})
                assert d.status_code == 200 and d.json()["text"] == text
                bad = c.post("/decode", json={"tokenizer": f"t-{kind}", "ids": [10**6]})
                assert bad.status_code in (400, 422) and "error" in bad.json()
    finally:
        reset()


def test_options_are_checked_per_kind(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c\n", encoding="utf-8")
    for kind in FAMILY_KINDS:
        assert make_trainer(kind, vocab_size=300, options=dict.fromkeys(OPTIONS[kind])) is not None
    with pytest.raises(ValueError, match="do not apply"):
        make_trainer("unigram", vocab_size=300, options={"split_digits": True})
    with pytest.raises(ValueError, match="threads must be 1 or 2"):
        train_to_store([corpus], name="x", store_dir=tmp_path, kind="unigram", vocab_size=300, threads=3)
    with pytest.raises(ValueError, match="no pattern"):
        train_to_store([corpus], name="x", store_dir=tmp_path, kind="wordpiece", vocab_size=300, pattern="gpt2")
    with pytest.raises(ValueError, match="no trainer options"):
        train_to_store([corpus], name="x", store_dir=tmp_path, kind="byte", vocab_size=300,
                       options={"byte_fallback": True})
