"""LiteLLM proxy's ``POST /utils/token_counter`` (``litellm/proxy/_types.py``: ``TokenCountRequest`` ``{model,
prompt?, messages?}`` -> ``TokenCountResponse`` ``{total_tokens, request_model, model_used, tokenizer_type}``).

``prompt`` counts as ordinary text (no BOS); ``messages`` as ``POST /count`` counts them, through the model's own
framing (LiteLLM applies OpenAI's per-message rule to every model instead; for OpenAI models the two agree).
``model_used`` is the model table's canonical name; ``tokenizer_type`` uses LiteLLM's two words:
``openai_tokenizer`` for OpenAI's tiktoken encodings, ``huggingface_tokenizer`` for every other tokenizer.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .. import metrics, serialize
from ..deps import ServiceState
from ..errors import ApiError
from .chat import chat_conversation, chat_framing
from .chat_options import ChatOptions, framed_count
from .common import OpResult, parse, utf8_len

#: tiktoken's own encodings: LiteLLM calls them ``openai_tokenizer``.
OPENAI_ENCODINGS = frozenset({"gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base",
                              "o200k_harmony"})


class TokenCounterRequest(BaseModel):
    """Body of LiteLLM's ``POST /utils/token_counter``: ``model`` and exactly one of ``prompt`` or ``messages``."""

    model_config = ConfigDict(strict=True, extra="forbid", json_schema_extra={"examples": [
        {"model": "gpt-4o", "prompt": "How many tokens is this?"},
        {"model": "qwen3-8b", "messages": [{"role": "user", "content": "Hello"}]}]})

    model: str = Field(min_length=1, max_length=256, description="model name (GET /models)")
    prompt: str | None = Field(None, description="one text (ordinary text)")
    messages: list[dict[str, Any]] | None = Field(None, description="Chat Completions messages, framed as the model "
                                                  "frames them")


def token_counter(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """``{total_tokens, request_model, model_used, tokenizer_type}``."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    req = parse(TokenCounterRequest, body)
    if (req.prompt is None) == (req.messages is None):
        raise ApiError(422, "validation_error", "give exactly one of 'prompt' or 'messages'",
                       {"field": "prompt" if req.prompt is not None else "messages"})
    info = svc.model(req.model)
    if req.messages is not None:
        tokenizer, info, framing = chat_framing(svc, req.model, labels)
        conv, nbytes = chat_conversation(svc, req.messages, None)
        timings["parse"] = time.perf_counter() - start
        start = time.perf_counter()
        n = framed_count(svc, tokenizer, framing, conv, ChatOptions())
    else:
        tokenizer = svc.tokenizer(info.tokenizer)
        labels["tokenizer"] = tokenizer.name
        prompt = req.prompt or ""
        nbytes = utf8_len(prompt, "prompt")
        timings["parse"] = time.perf_counter() - start
        start = time.perf_counter()
        n = tokenizer.count(prompt)
    timings["tokenize"] = time.perf_counter() - start
    metrics.cache_used(tokenizer)
    kind = "openai_tokenizer" if tokenizer.name in OPENAI_ENCODINGS else "huggingface_tokenizer"
    out = {"total_tokens": n, "request_model": req.model, "model_used": info.name, "tokenizer_type": kind}
    return OpResult(serialize.dumps(out), tokenizer.name, n, nbytes, timings)
