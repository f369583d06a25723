"""Routes in the shapes of inference servers, so their clients work unchanged: vLLM's ``POST /tokenize`` and
``POST /detokenize``, and TEI's ``POST /tokenize`` and ``POST /decode`` under ``/tei/{model}/`` (point a TEI client's
base URL at ``http://host/tei/MODEL``).

Per-token details (vLLM's ``token_strs``, TEI's token objects) are bounded by ``TOKENIZER_MAX_DETAIL_TOKENS`` as on
``/encode``: a 413 decided before that work.

Same safety rule as everywhere: input text is ordinary text. vLLM and TEI parse special-token strings typed in a
prompt (vLLM also in messages) into control tokens; here they stay text (the tokenizer's own framing is added only by
``add_special_tokens``, and chat framing only by ``messages``).
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from typing import Any

import orjson

from app.core.model_table import ModelInfo
from app.engine import Tokenizer
from app.engine.errors import UnknownTokenizerError

from .. import metrics
from ..deps import ServiceState
from ..errors import ApiError
from ..schemas import DetokenizeRequest, TeiDecodeRequest, TeiTokenizeRequest, TokenizeRequest
from . import llamacpp
from .chat import chat_conversation, chat_framing
from .chat_options import ChatOptions, framed_ids, refuse, resolve_model
from .common import (
    OpResult,
    check_batch,
    check_chars,
    check_decode_ids,
    check_detail_count,
    check_detail_texts,
    decode_rows,
    dumps,
    parse,
    timed,
    token_pieces,
    utf8_len,
)


def _model_tokenizer(svc: ServiceState, model: str, labels: MutableMapping[str, str]) -> tuple[ModelInfo, Tokenizer]:
    info = svc.model(model)
    tokenizer = svc.tokenizer(info.tokenizer)
    labels["tokenizer"] = tokenizer.name
    return info, tokenizer


# ---------------------------------------------------------------------------- vLLM


#: Fields of vLLM's chat form that a ``prompt`` request may not carry (vLLM would ignore them).
CHAT_ONLY = ("tools", "add_generation_prompt", "continue_final_message", "chat_template", "chat_template_kwargs",
             "mm_processor_kwargs", "media_io_kwargs")


def _vllm_chat_options(req: TokenizeRequest) -> ChatOptions:
    for name in ("mm_processor_kwargs", "media_io_kwargs"):
        if getattr(req, name):
            raise refuse(name, "multimodal inputs are not supported (this service counts text); only null or {}")
    agp = req.add_generation_prompt
    if req.continue_final_message:
        if agp:
            raise refuse("continue_final_message", "cannot be set together with add_generation_prompt: true (as "
                         "in vLLM)")
        agp = False
    return ChatOptions(add_generation_prompt=True if agp is None else agp,
                       continue_final_message=req.continue_final_message,
                       variables=req.chat_template_kwargs or None, template_source=req.chat_template)


def tokenize_either(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """``POST /tokenize``: llama.cpp's when the body has ``content`` and neither ``prompt`` nor ``messages``
    (:func:`app.api.llamacpp.tokenize`), else vLLM's (:func:`tokenize`)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict) and "content" in data and "prompt" not in data and "messages" not in data:
        return llamacpp.tokenize(svc, body, labels)
    return tokenize(svc, body, labels)


def tokenize(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """vLLM's ``POST /tokenize``: ``{count, max_model_len, tokens[, token_strs]}`` for ``prompt`` or ``messages``,
    with vLLM's options (``vllm/entrypoints/serve/tokenize/protocol.py``); an option this service cannot honour is
    a 422 naming it."""
    timings: dict[str, float] = {}
    req = timed(timings, "parse", lambda: parse(TokenizeRequest, body))
    model = resolve_model(svc, req.model)
    if req.messages is not None:
        options = _vllm_chat_options(req)
        tokenizer, info, framing = chat_framing(svc, model, labels)
        if not framing.ids_public:
            raise ApiError(422, "ids_not_public", f"model {model!r} frames messages with tokens that are not "
                           "public; POST /count gives the billed count", {"model": model})
        conv, nbytes = chat_conversation(svc, req.messages, req.tools)
        start = time.perf_counter()
        ids = framed_ids(svc, tokenizer, framing, conv, options)
        if req.add_special_tokens:
            ids = [*tokenizer.template.prefix_ids, *ids, *tokenizer.template.suffix_ids]
    else:
        given = [name for name in CHAT_ONLY if name in req.model_fields_set]
        if given:
            raise refuse(given[0], "belongs to the 'messages' form of /tokenize, not to 'prompt'")
        info, tokenizer = _model_tokenizer(svc, model, labels)
        prompt = req.prompt or ""
        check_chars(svc, len(prompt))
        nbytes = utf8_len(prompt, "prompt")
        if req.return_token_strs:
            template = tokenizer.template
            specials = len(template.prefix_ids) + len(template.suffix_ids) if req.add_special_tokens else 0
            check_detail_texts(svc, tokenizer, [prompt], specials, 0, nbytes, "return_token_strs")
        start = time.perf_counter()
        ids = tokenizer.encode(prompt, add_special_tokens=req.add_special_tokens is not False)
    timings["tokenize"] = time.perf_counter() - start
    if req.return_token_strs:  # messages: the framed ids are the count (ids alone are not limited)
        check_detail_count(svc, len(ids), "return_token_strs")
    metrics.cache_used(tokenizer)
    out: dict[str, Any] = {"count": len(ids), "max_model_len": info.context_window, "tokens": ids}
    if req.return_token_strs:
        out["token_strs"] = [p.get("text", p.get("bytes")) for p in token_pieces(tokenizer, ids)]
    payload = timed(timings, "serialize", lambda: dumps(out))
    return OpResult(payload, tokenizer.name, len(ids), nbytes, timings)


def detokenize(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """``POST /detokenize`` for vLLM and llama.cpp clients alike (both send ``{tokens}``): ``{"prompt": text,
    "content": text}`` (vLLM reads ``prompt``, llama.cpp ``content``); 422 naming an id outside the vocabulary."""
    timings: dict[str, float] = {}
    req = timed(timings, "parse", lambda: parse(DetokenizeRequest, body))
    _, tokenizer = _model_tokenizer(svc, resolve_model(svc, req.model), labels)
    check_decode_ids(svc, len(req.tokens))
    start = time.perf_counter()
    text = decode_rows(tokenizer, [req.tokens], False, "tokens", False)[0]
    timings["tokenize"] = time.perf_counter() - start
    return OpResult(dumps({"prompt": text, "content": text}), tokenizer.name, len(req.tokens), 0, timings)


def tokenizer_info(svc: ServiceState, model: str | None) -> dict[str, Any]:
    """vLLM's ``GET /tokenizer_info``: the model's tokenizer configuration in the keys of a ``tokenizer_config.json``
    (``vllm/entrypoints/serve/tokenize/serving.py``, ``TokenizerInfo``): ``tokenizer_class``, ``model_max_length``,
    the special-token strings of its chat template's variables (``bos_token``, ``eos_token``, …), ``chat_template``
    for a Jinja-framed model, and ``added_tokens_decoder`` (id -> {content, special}). ``tokenizer_class`` names this
    service's family (``byte_bpe``, ``sentencepiece``, …), not a transformers class."""
    name = resolve_model(svc, model)
    info = svc.model(name)
    tokenizer = svc.tokenizer(info.tokenizer)
    spec = tokenizer.spec
    out: dict[str, Any] = {"tokenizer_class": spec.kind if spec else "byte_bpe", "name_or_path": tokenizer.name,
                           "model_max_length": info.context_window}
    chat = info.chat or {}
    if chat.get("framing") == "jinja":
        source = svc.chat.templates[chat["template"]]
        out.update(source.variables)
        out["chat_template"] = source.text
    specials = sorted(tokenizer.special_tokens.items(), key=lambda x: x[1])
    added = sorted(tokenizer.added_tokens.items(), key=lambda x: x[1])
    out["added_tokens_decoder"] = {str(i): {"content": t, "special": True} for t, i in specials}
    out["added_tokens_decoder"].update({str(i): {"content": t, "special": False} for t, i in added})
    return out


# ---------------------------------------------------------------------------- TEI


def _tei_target(svc: ServiceState, name: str, labels: MutableMapping[str, str]) -> Tokenizer:
    """A model name (snapshots resolve), else a tokenizer name."""
    try:
        return _model_tokenizer(svc, name, labels)[1]
    except ApiError:
        try:
            tokenizer = svc.tokenizer(name)
        except (UnknownTokenizerError, KeyError):
            raise ApiError(404, "unknown_model", f"unknown model or tokenizer {name[:256]!r} in the URL",
                           {"name": name[:256]}) from None
        labels["tokenizer"] = tokenizer.name
        return tokenizer


def _tei_tokens(tokenizer: Tokenizer, text: str, add_special: bool) -> list[dict[str, Any]]:
    ids, spans = tokenizer.encode_with_offsets(text)
    # character offsets -> UTF-8 byte offsets, as TEI reports them
    starts = [0]
    for ch in text:
        starts.append(starts[-1] + len(ch.encode("utf-8")))
    data = text.encode("utf-8")
    tokens = [{"id": i, "text": data[starts[a]:starts[b]].decode("utf-8", errors="replace"), "special": False,
               "start": starts[a], "stop": starts[b]} for i, (a, b) in zip(ids, spans, strict=True)]
    if not add_special:
        return tokens
    template = tokenizer.template

    def special(token_id: int) -> dict[str, Any]:
        return {"id": token_id, "text": tokenizer.decode([token_id]), "special": True, "start": None, "stop": None}

    return [*map(special, template.prefix_ids), *tokens, *map(special, template.suffix_ids)]


def tei_tokenize(svc: ServiceState, name: str, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """TEI's ``POST /tokenize``: ``[[{id, text, special, start, stop}, …], …]`` (byte offsets; one list per input)."""
    timings: dict[str, float] = {}
    req = timed(timings, "parse", lambda: parse(TeiTokenizeRequest, body))
    if req.prompt_name is not None:
        raise ApiError(422, "validation_error", "prompt_name: no prompts are configured",
                       [{"loc": ["prompt_name"], "msg": "no prompts are configured", "type": "value_error"}])
    tokenizer = _tei_target(svc, name, labels)
    inputs = [req.inputs] if isinstance(req.inputs, str) else req.inputs
    check_batch(svc, len(inputs), "inputs")
    check_chars(svc, sum(map(len, inputs)))
    nbytes = sum(utf8_len(t, f"inputs[{i}]") for i, t in enumerate(inputs))
    template = tokenizer.template
    specials = len(template.prefix_ids) + len(template.suffix_ids) if req.add_special_tokens else 0
    check_detail_texts(svc, tokenizer, inputs, specials, 0, nbytes, "TEI tokenize")  # every token is a detail object
    start = time.perf_counter()
    out = [_tei_tokens(tokenizer, t, req.add_special_tokens) for t in inputs]
    timings["tokenize"] = time.perf_counter() - start
    metrics.cache_used(tokenizer)
    payload = timed(timings, "serialize", lambda: dumps(out))
    return OpResult(payload, tokenizer.name, sum(map(len, out)), nbytes, timings)


def tei_decode(svc: ServiceState, name: str, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """TEI's ``POST /decode``: a list with the text of ``ids`` (or of each id list)."""
    timings: dict[str, float] = {}
    req = timed(timings, "parse", lambda: parse(TeiDecodeRequest, body))
    tokenizer = _tei_target(svc, name, labels)
    batched = bool(req.ids) and not isinstance(req.ids[0], int)
    rows: list[list[int]] = req.ids if batched else [req.ids]  # type: ignore[assignment,list-item]
    check_batch(svc, len(rows), "ids")
    n = sum(map(len, rows))
    check_decode_ids(svc, n)
    start = time.perf_counter()
    texts = decode_rows(tokenizer, rows, req.skip_special_tokens, "ids", batched)
    timings["tokenize"] = time.perf_counter() - start
    return OpResult(dumps(texts), tokenizer.name, n, 0, timings)
