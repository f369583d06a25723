"""Chat operations: ``messages`` on ``/count`` and ``/encode``, truncation and ``GET /models``.

The model decides the framing (its ``chat`` entry in the model table, see :mod:`app.engine.chat.framings`); a model
without one is a 422 listing the models that support ``messages``. Caller text stays ordinary text everywhere.

Truncation never cuts inside a character (:func:`app.api.ops.common.clean_cut`). For messages, whole messages go
first, oldest non-system first (an assistant's tool calls leave with their results, and the conversation then starts
at a user message); if the newest message alone is still too long its text is shortened. The response says what was
dropped.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping, Sequence
from dataclasses import replace
from typing import Any

from app.core.model_table import ModelInfo
from app.core.priced_models import openai_names
from app.engine import Tokenizer
from app.engine.chat import ChatInputError, Conversation, Framing, parse_conversation

from .. import metrics
from ..deps import ServiceState
from ..errors import ApiError
from ..schemas import CountRequest, EncodeRequest, Truncate
from .common import (
    OpResult,
    check_batch,
    check_chars,
    check_detail_count,
    clean_cut,
    dumps,
    model_block,
    model_price,
    prefix_fit,
    timed,
    token_pieces,
    utf8_len,
)


def chat_models(svc: ServiceState) -> list[str]:
    """Model names (and aliases) whose table entry has a ``chat`` framing."""
    return svc.models.chat_models()


def _framing(svc: ServiceState, model: str | None,
             labels: MutableMapping[str, str]) -> tuple[Tokenizer, ModelInfo, Framing]:
    supported = chat_models(svc)
    if model is None:
        raise ApiError(422, "model_required", "'messages' needs 'model' (the model decides the framing); models "
                       f"that support messages: {', '.join(supported)}", {"supported": supported})
    info = svc.model(model)
    if info.chat is None:
        raise ApiError(422, "messages_not_supported", f"model {model!r} has no chat framing; models that support "
                       f"messages: {', '.join(supported)}", {"model": model, "supported": supported})
    tokenizer = svc.tokenizer(info.tokenizer)
    labels["tokenizer"] = tokenizer.name
    return tokenizer, info, svc.chat.framing(info.chat, tokenizer)


def _conversation(svc: ServiceState, messages: Any, tools: Any) -> tuple[Conversation, int]:
    if isinstance(messages, list):
        check_batch(svc, len(messages), "messages")
    if isinstance(tools, list):
        check_batch(svc, len(tools), "tools")
    try:
        conv = parse_conversation(messages, tools)
    except ChatInputError as exc:
        raise _chat_error(exc) from None
    texts = conv.texts()
    check_chars(svc, sum(map(len, texts)))
    nbytes = sum(utf8_len(t, "messages") for t in texts)
    return conv, nbytes


def _chat_error(exc: ChatInputError) -> ApiError:
    """422 ``invalid_messages`` naming the field (and the limit, when the conversation is over one)."""
    details: dict[str, Any] = {"field": exc.path}
    if exc.limit is not None:
        details["limit_name"], details["limit"] = exc.limit
    return ApiError(422, "invalid_messages", str(exc), details)


class ChatCounter:
    """Counts (or ids) of conversations under one framing, mapping framing errors to 422."""

    def __init__(self, tokenizer: Tokenizer, framing: Framing, add_generation_prompt: bool) -> None:
        self.tokenizer, self.framing, self.agp = tokenizer, framing, add_generation_prompt

    def count(self, conv: Conversation) -> int:
        try:
            return self.framing.count(self.tokenizer, conv, add_generation_prompt=self.agp)
        except ChatInputError as exc:
            raise _chat_error(exc) from None

    def ids(self, conv: Conversation) -> list[int]:
        try:
            return self.tokenizer.encode_parts(list(self.framing.frame(conv, add_generation_prompt=self.agp)))
        except ChatInputError as exc:
            raise _chat_error(exc) from None


def chat_op(svc: ServiceState, req: EncodeRequest | CountRequest, labels: MutableMapping[str, str],
            timings: dict[str, float], *, with_ids: bool) -> OpResult:
    """``messages`` on ``/encode`` (``with_ids``) or ``/count``."""
    unused = [k for k in ("special_tokens", "return_offsets", "report_special_lookalikes", "add_special_tokens")
              if getattr(req, k, None)]
    if unused:
        raise ApiError(422, "validation_error", f"'{unused[0]}' does not apply to 'messages' (the model's framing "
                       "decides every special token)", [{"loc": [unused[0]], "msg": "not with messages",
                                                         "type": "value_error"}])
    tokenizer, info, framing = _framing(svc, req.model, labels)
    if with_ids and not framing.ids_public:
        raise ApiError(422, "ids_not_public", f"model {req.model!r} frames messages with tokens that are not "
                       "public; POST /count gives the billed count", {"model": req.model, "framing": framing.kind})
    conv, nbytes = timed(timings, "parse", lambda: _conversation(svc, req.messages, req.tools))
    counter = ChatCounter(tokenizer, framing, req.add_generation_prompt)
    start = time.perf_counter()
    out: dict[str, Any] = {"tokenizer": tokenizer.name, "framing": framing.kind}
    if req.truncate is not None:
        conv, report = truncate_messages(counter, conv, req.truncate)
        out["truncated"] = report
    if with_ids:
        ids = counter.ids(conv)
        out["ids"], out["count"] = ids, len(ids)
        if getattr(req, "return_tokens", False):
            check_detail_count(svc, len(ids), "return_tokens")
            out["tokens"] = token_pieces(tokenizer, ids)
    else:
        out["count"] = counter.count(conv)
    timings["tokenize"] = time.perf_counter() - start
    out["model"] = model_block(svc, info, [out["count"]], False, req)
    payload = timed(timings, "serialize", lambda: dumps(out))
    metrics.cache_used(tokenizer)
    return OpResult(payload, tokenizer.name, out["count"], nbytes, timings)


# ---------------------------------------------------------------------------- truncation


def _units(conv: Conversation) -> list[list[int]]:
    """Droppable units (message indices): each non-system message, an assistant's tool calls with their results."""
    units: list[list[int]] = []
    for i, m in enumerate(conv.messages):
        if m.role in ("system", "developer"):
            continue
        if m.role == "tool" and units and conv.messages[units[-1][0]].tool_calls:
            units[-1].append(i)
        else:
            units.append([i])
    return units


def truncate_messages(counter: ChatCounter, conv: Conversation, trunc: Truncate) -> tuple[Conversation, dict[str, Any]]:
    """Drop (then shorten) the oldest non-system messages until the framed prompt has at most ``max_tokens``."""
    limit = trunc.max_tokens
    original = counter.count(conv)
    report: dict[str, Any] = {"max_tokens": limit, "original_count": original, "dropped_messages": [],
                              "shortened_message": None}
    if original <= limit:
        return conv, report
    keep = list(range(len(conv.messages)))
    units = _units(conv)

    def build(indices: Sequence[int], override: tuple[int, str] | None = None) -> Conversation:
        msgs = []
        for i in indices:
            m = conv.messages[i]
            if override is not None and override[0] == i:
                m = replace(m, content=override[1], content_parts=None)
            msgs.append(m)
        return conv.replace_messages(msgs)

    def first_kept(k: int) -> int:
        """Index into ``units`` of the first unit kept when the oldest ``k`` go: the conversation resumes at a
        user message (templates such as Gemma 3's require it), and the newest unit always stays."""
        while k < len(units) - 1 and conv.messages[units[k][0]].role != "user":
            k += 1
        return min(k, len(units) - 1)

    def kept_after(k: int) -> list[int]:
        gone = {i for unit in units[:first_kept(k)] for i in unit}
        return [i for i in keep if i not in gone]

    # fewer tokens the more units go: binary search for the fewest (O(log n) framings, not one per message)
    last = max(len(units) - 1, 0)
    if units and counter.count(build(kept_after(last))) <= limit:
        drop = last - prefix_fit(last, lambda j: counter.count(build(kept_after(last - j))) <= limit)
    else:
        drop = last
    keep = kept_after(drop)
    units = units[first_kept(drop):] if units else units
    report["dropped_messages"] = [i for i in range(len(conv.messages)) if i not in set(keep)]
    if counter.count(build(keep)) <= limit:
        return build(keep), report
    target = units[0][-1] if units else keep[-1]
    text = conv.messages[target].content
    ids = counter.tokenizer.encode(text)
    side = trunc.side

    def fits(k: int) -> bool:
        kept_ids, kept_text = clean_cut(counter.tokenizer, ids, k, side)
        return counter.count(build(keep, (target, kept_text))) <= limit

    if not fits(0):
        raise ApiError(422, "cannot_truncate", f"the conversation needs more than {limit} tokens even with only the "
                       "system messages and an empty last message", {"max_tokens": limit, "count": original})
    k = prefix_fit(len(ids), fits)
    kept_ids, kept_text = clean_cut(counter.tokenizer, ids, k, side)
    report["shortened_message"] = {"index": target, "side": side, "kept_chars": len(kept_text),
                                   "dropped_chars": len(text) - len(kept_text),
                                   "dropped_tokens": len(ids) - len(kept_ids)}
    return build(keep, (target, kept_text)), report


# ---------------------------------------------------------------------------- GET /models


def models_list(svc: ServiceState) -> dict[str, Any]:
    """Every model of the table, then every OpenAI model of the price data that resolves to a loaded tiktoken
    encoding (:func:`app.core.priced_models.openai_names`; ``listed_from`` says which): tokenizer, context window,
    output maximum, whether ``messages`` is supported (with which framing and whether ids are public), and its
    price from the price data in force (rates as exact decimal strings, the provider and model priced), or why it
    has none; ``price_data`` says which data that is."""
    out = []
    for name in svc.models.names():
        info = svc.models.entries()[name]
        chat = info.chat
        out.append({
            "name": name, "canonical": info.name, "tokenizer": svc.store.resolve(info.tokenizer),
            "context_window": info.context_window, "max_output_tokens": info.max_output_tokens,
            "messages": chat is not None, "framing": chat.get("framing") if chat else None,
            "ids_public": chat is not None and chat.get("framing") != "openai-cookbook",
            "price": model_price(svc.prices, info, name), "listed_from": "table",
        })
    listed = {m["name"] for m in out}
    for name in openai_names(svc.prices):
        if name in listed:
            continue
        try:
            info = svc.model(name)
        except ApiError:  # its encoding is not loaded by this process (TOKENIZER_TOKENIZERS)
            continue
        out.append({
            "name": name, "canonical": info.name, "tokenizer": svc.store.resolve(info.tokenizer),
            "context_window": info.context_window, "max_output_tokens": info.max_output_tokens,
            "messages": False, "framing": None, "ids_public": False,
            "price": model_price(svc.prices, info, name, source="price_data"), "listed_from": "price_data",
        })
    data = svc.prices.data.provenance.as_dict() if svc.prices is not None else None
    return {"models": out, "price_data": data}


__all__ = ["ChatCounter", "chat_conversation", "chat_framing", "chat_ids", "chat_models", "chat_op", "models_list",
           "truncate_messages"]


def chat_framing(svc: ServiceState, model: str | None,
                 labels: MutableMapping[str, str]) -> tuple[Tokenizer, ModelInfo, Framing]:
    """(tokenizer, model entry, framing) of ``model``; 422 when it has none (listing the models that do)."""
    return _framing(svc, model, labels)


def chat_conversation(svc: ServiceState, messages: Any, tools: Any) -> tuple[Conversation, int]:
    """A validated conversation and its caller text's UTF-8 size (limits applied); 422 for bad input."""
    return _conversation(svc, messages, tools)


def chat_ids(tokenizer: Tokenizer, framing: Framing, conv: Conversation, add_generation_prompt: bool) -> list[int]:
    """Ids of a framed conversation; 422 if the framing refuses it."""
    return ChatCounter(tokenizer, framing, add_generation_prompt).ids(conv)
