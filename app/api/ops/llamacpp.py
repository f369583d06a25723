"""llama.cpp server shapes (the server README and ``server.cpp`` in ``tools/server`` of ggml-org/llama.cpp):
``POST /tokenize`` with ``content``, ``POST /detokenize`` and ``POST /apply-template``.

``/tokenize`` is shared with vLLM: a body with ``content`` (and neither ``prompt`` nor ``messages``) is llama.cpp's.
Fields: ``content`` (a string, or llama.cpp's mixed array of strings and token ids), ``add_special`` (default false:
the tokenizer's BOS/EOS), ``with_pieces`` (default false: ``[{id, piece}]``, a piece as text, or as a list of byte
values where it is not valid UTF-8 on its own), ``parse_special`` (llama.cpp's default true parses special-token
strings typed in ``content`` into control tokens; here text is text: ``false`` and absent are honoured as text,
``true`` is a 422), and ``model`` (this service's extension; else the default model). Answer: ``{"tokens": [...]}``.

``/apply-template``: ``messages`` (and ``tools``, ``add_generation_prompt``) -> ``{"prompt": text}``, the model's
framed prompt as one string (what llama.cpp's server would tokenize with ``parse_special``; to count it use
``POST /count`` with the same ``messages``, which keeps caller text as text).
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.engine import Special

from .. import metrics, serialize
from ..deps import ServiceState
from ..errors import ApiError
from .chat import chat_conversation, chat_framing
from .chat_options import ChatOptions, framed_ids, refuse, resolve_model
from .common import OpResult, invalid_token_id, parse, utf8_len

#: Field -> verdict for llama.cpp's ``/tokenize`` (see the module docstring).
TOKENIZE_FIELDS = {"content": "count", "add_special": "count", "with_pieces": "count", "model": "count",
                   "parse_special": "refused when true"}


class LlamaCppTokenizeRequest(BaseModel):
    """Body of llama.cpp's ``POST /tokenize``."""

    model_config = ConfigDict(strict=True, extra="forbid", json_schema_extra={"examples": [
        {"content": "Hello world", "add_special": True, "with_pieces": True}]})

    content: str | list[str | int] = Field(description="text, or a mixed array of texts and token ids")
    add_special: bool = Field(False, description="add the tokenizer's BOS/EOS")
    with_pieces: bool = Field(False, description="answer [{id, piece}] instead of ids")
    parse_special: bool | None = Field(None, description="only false or absent: special-token strings in content "
                                       "stay text (llama.cpp parses them by default)")
    model: str | None = Field(None, min_length=1, max_length=256, description="this service's extension: the model "
                              "(default: TOKENIZER_DEFAULT_MODEL)")


class LlamaCppApplyTemplateRequest(BaseModel):
    """Body of llama.cpp's ``POST /apply-template``."""

    model_config = ConfigDict(strict=True, extra="forbid", json_schema_extra={"examples": [
        {"messages": [{"role": "user", "content": "Hello"}], "model": "qwen3-8b"}]})

    messages: list[dict[str, Any]] = Field(description="Chat Completions messages")
    tools: list[dict[str, Any]] | None = Field(None, description="function tools")
    add_generation_prompt: bool = Field(True, description="end with the assistant's turn header")
    chat_template_kwargs: dict[str, Any] | None = Field(None, description="extra chat-template variables")
    model: str | None = Field(None, min_length=1, max_length=256, description="this service's extension: the model "
                              "(default: TOKENIZER_DEFAULT_MODEL)")


def _piece(data: bytes) -> str | list[int]:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return list(data)


def tokenize(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """llama.cpp's ``POST /tokenize``: ``{"tokens": ids}`` or ``{"tokens": [{id, piece}]}``."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    req = parse(LlamaCppTokenizeRequest, body)
    if req.parse_special:
        raise refuse("parse_special", "special-token strings in content are always text here (llama.cpp parses "
                     "them by default); send false or leave it out")
    info = svc.model(resolve_model(svc, req.model))
    tokenizer = svc.tokenizer(info.tokenizer)
    labels["tokenizer"] = tokenizer.name
    items = [req.content] if isinstance(req.content, str) else req.content
    texts = [x for x in items if isinstance(x, str)]
    nbytes = sum(utf8_len(t, "content") for t in texts)
    timings["parse"] = time.perf_counter() - start
    start = time.perf_counter()
    ids: list[int] = list(tokenizer.template.prefix_ids) if req.add_special else []
    for i, item in enumerate(items):
        if isinstance(item, str):
            ids.extend(tokenizer.encode(item))
        else:
            if not 0 <= item < tokenizer.n_vocab:
                raise invalid_token_id(tokenizer, item, f"content[{i}]", i, {"field": f"content[{i}]"})
            ids.append(item)
    if req.add_special:
        ids.extend(tokenizer.template.suffix_ids)
    out: list[Any] = ids
    if req.with_pieces:
        out = [{"id": i, "piece": _piece(b)} for i, b in zip(ids, tokenizer.decode_tokens_bytes(ids), strict=True)]
    timings["tokenize"] = time.perf_counter() - start
    metrics.cache_used(tokenizer)
    return OpResult(serialize.dumps({"tokens": out}), tokenizer.name, len(ids), nbytes, timings)


def apply_template(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """llama.cpp's ``POST /apply-template``: ``{"prompt": text}``, the framed prompt as one string."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    req = parse(LlamaCppApplyTemplateRequest, body)
    tokenizer, _, framing = chat_framing(svc, resolve_model(svc, req.model), labels)
    if not framing.ids_public:
        raise ApiError(422, "ids_not_public", "this model's framing tokens are not public: there is no prompt text "
                       "to show; POST /count gives the billed count", {"field": "model"})
    conv, nbytes = chat_conversation(svc, req.messages, req.tools)
    timings["parse"] = time.perf_counter() - start
    start = time.perf_counter()
    options = ChatOptions(add_generation_prompt=req.add_generation_prompt, variables=req.chat_template_kwargs or None)
    ids = framed_ids(svc, tokenizer, framing, conv, options)  # validates, and counts the tokens for the metrics
    if options.plain:
        parts = framing.frame(conv, add_generation_prompt=req.add_generation_prompt)
    else:
        parts = None
    prompt = ("".join(p.name if isinstance(p, Special) else p for p in parts) if parts is not None
              else tokenizer.decode(ids))
    timings["tokenize"] = time.perf_counter() - start
    return OpResult(serialize.dumps({"prompt": prompt}), tokenizer.name, len(ids), nbytes, timings)
