"""The baseline: a plain FastAPI + tiktoken tokenization service, written the obvious way.

Sync handlers (FastAPI runs them in its thread pool), a pydantic body model, dicts returned and serialized by
FastAPI. tiktoken's ``Encoding`` is built from this repository's local cl100k_base artifact (``load_tiktoken_bpe``
on a file path: no download). Run: ``uvicorn bench.service.baseline_app:app --workers 2``.
"""

from __future__ import annotations

import tiktoken
from fastapi import FastAPI
from pydantic import BaseModel
from tiktoken.load import load_tiktoken_bpe

from app.engine import get_store

_spec = get_store().spec("cl100k_base")
tokenizer = tiktoken.Encoding(
    name="cl100k_base",
    pat_str=_spec.pattern,
    mergeable_ranks=load_tiktoken_bpe(str(_spec.artifact_path), expected_hash=_spec.sha256),
    special_tokens=dict(_spec.special_tokens),
)

app = FastAPI(title="baseline tiktoken service")


class TextIn(BaseModel):
    tokenizer: str = "cl100k_base"
    text: str


@app.post("/count")
def count(req: TextIn) -> dict[str, object]:
    return {"tokenizer": "cl100k_base", "count": len(tokenizer.encode_ordinary(req.text))}


@app.post("/encode")
def encode(req: TextIn) -> dict[str, object]:
    ids = tokenizer.encode_ordinary(req.text)
    return {"tokenizer": "cl100k_base", "ids": ids, "count": len(ids)}


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
