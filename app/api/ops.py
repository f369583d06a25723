"""The work behind POST /encode, /count and /decode: raw body bytes in, response bytes out.

Each operation parses, validates, tokenizes and serializes in one call, so the route can run the whole thing in a
worker thread and the event loop only moves bytes. They raise :class:`~app.api.errors.ApiError` or an engine error
(mapped to 4xx by the handlers) for every bad input; anything else is a bug (500).

Decisions: JSON strings with lone surrogates (``"\\ud800"``) are rejected with 422 ``invalid_text`` (the engine would
silently turn them into U+FFFD; an API should not guess). Offsets are in characters (code points) of the text;
special tokens get empty spans at their position.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from app.core.model_table import ModelInfo
from app.engine import Special, Tokenizer
from app.engine.errors import InvalidTokenIdError
from app.engine.native import utf8_size
from app.engine.sampling import Sample

from . import metrics, pricing_ops, serialize
from .deps import ServiceState
from .errors import ApiError, validation_details
from .sample_ops import sample_of
from .schemas import CountRequest, DecodeRequest, EncodeRequest, Part

M = TypeVar("M", bound=BaseModel)


@dataclass
class OpResult:
    """A finished operation: the response body and what the metrics and ``Server-Timing`` need."""

    body: bytes
    tokenizer: str
    tokens: int
    input_bytes: int
    timings: dict[str, float] = field(default_factory=dict)  # phase -> seconds

    def server_timing(self) -> str:
        return ", ".join(f"{k};dur={v * 1000:.3f}" for k, v in self.timings.items())


# ---------------------------------------------------------------------------- parsing


#: The smallest magnitude of a float orjson makes of an integer (one past the 64-bit range).
_BIG = float(2**63)


def _holds_big_float(value: Any) -> bool:
    """True when a float of magnitude at least 2**63 (what orjson makes of an integer past 64 bits, or such a float
    literal) occurs anywhere in ``value``. Iterative; strings are not looked into, and a list is looked into item by
    item only when it holds floats or containers (its item types are gathered at C speed)."""
    stack = [value]
    while stack:
        node = stack.pop()
        children = list(node.values()) if type(node) is dict else node
        kinds = set(map(type, children))
        if float in kinds and any(type(c) is float and not -_BIG < c < _BIG for c in children):
            return True
        if dict in kinds or list in kinds:
            stack.extend(c for c in children if type(c) is dict or type(c) is list)
    return False


def parse(model: type[M], body: bytes) -> M:
    """Decode and validate a JSON body. 400 for anything that is not JSON, 422 for JSON of the wrong shape.

    orjson parses first (the fast path). Whatever it refuses, and any body whose orjson value fails validation, is
    decided by the standard library's parser instead, so every verdict is the one ``json.loads`` gives (orjson turns
    integers above 64 bits into floats and refuses lone-surrogate escapes, which then get their own 422). A chat
    body (``messages`` and ``tools`` hold free JSON) where orjson produced a float of magnitude 2**63 or more is read
    by ``json.loads`` too, so its integers are the exact ones the CLI reads from a file (each framing then prints
    them as its reference does)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _validate(model, _loads_or_400(body))
    if type(data) is dict and type(data.get("messages")) is list and _holds_big_float(
            [data["messages"], data.get("tools")]):
        data = _loads_or_400(body)
    try:
        return _validate(model, data)
    except ApiError:
        return _validate(model, _loads_or_400(body))


def _validate(model: type[M], data: Any) -> M:
    if not isinstance(data, dict):
        raise ApiError(422, "validation_error", "the request body must be a JSON object",
                       [{"loc": [], "msg": "expected an object", "type": "model_type"}])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        raise ApiError(422, "validation_error", "request does not match the schema: "
                       + "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in errors[:5]),
                       validation_details(errors)) from None
    except RecursionError:
        raise ApiError(400, "invalid_json", "malformed JSON: nested too deeply") from None


def _loads_or_400(body: bytes) -> Any:
    """``json.loads`` with every failure as a 400."""
    if not body.strip():
        raise ApiError(400, "invalid_json", "the request body is empty; expected a JSON object")
    try:
        return json.loads(body)
    except RecursionError:
        raise ApiError(400, "invalid_json", "malformed JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer with too many digits
        raise ApiError(400, "invalid_json", f"malformed JSON: {str(exc)[:200]}") from None


def utf8_len(text: str, where: str) -> int:
    """UTF-8 length of ``text``; 422 ``invalid_text`` if it holds a lone surrogate (not valid Unicode). The UTF-8
    copy stays in the str (:func:`app.engine.native.utf8_size`): tokenizing it next does not encode it again."""
    if text.isascii():
        return len(text)
    try:
        return utf8_size(text)
    except UnicodeEncodeError as exc:
        raise ApiError(422, "invalid_text", f"{where} holds a lone surrogate U+{ord(text[exc.start]):04X} at "
                       f"character {exc.start}; JSON strings must encode valid Unicode (pair \\uD800-\\uDBFF with "
                       "\\uDC00-\\uDFFF)", {"field": where, "position": exc.start}) from None


def _check_batch(svc: ServiceState, n: int, what: str) -> None:
    limit = svc.settings.max_batch_size
    if n > limit:
        raise ApiError(413, "payload_too_large", f"{what} has {n} items; the limit is {limit} "
                       "(TOKENIZER_MAX_BATCH_SIZE)", {"limit": limit, "actual": n, "field": what})


def _check_chars(svc: ServiceState, n: int) -> None:
    limit = svc.settings.max_text_chars
    if n > limit:
        raise ApiError(413, "payload_too_large", f"the texts have {n} characters; the limit is {limit} "
                       "(TOKENIZER_MAX_TEXT_CHARS)", {"limit": limit, "actual": n})


def _check_detail(svc: ServiceState, t: _Texts) -> None:
    """:func:`check_detail_texts` for an /encode request asking for tokens or offsets (its parts or texts, with the
    prefix/suffix specials it names). Sampled requests are checked by :func:`check_detail_count` after their one
    encoding instead (sampling the text twice to count it first would double the work;
    :data:`~app.api.sample_ops.MAX_SAMPLE_BYTES` bounds the ids meanwhile)."""
    specials = len(t.prefix) + len(t.suffix)
    if t.add_special:
        specials += len(t.enc.template.prefix_ids) + len(t.enc.template.suffix_ids)
    if t.parts is not None:
        specials += sum(1 for p in t.parts if p.special is not None)
        check_detail_texts(svc, t.enc, [p.text for p in t.parts if p.text is not None], 0, specials, t.input_bytes,
                           DETAIL_FIELDS)
    else:
        check_detail_texts(svc, t.enc, t.texts or [], specials, 0, t.input_bytes, DETAIL_FIELDS)


#: The /encode fields that return per-token details.
DETAIL_FIELDS = "return_tokens/return_offsets"


def check_detail_texts(svc: ServiceState, enc: Tokenizer, texts: Sequence[str], specials_each: int,
                       specials_once: int, input_bytes: int, field: str) -> None:
    """413 when per-token details (``field``: pieces, offsets, TEI token objects, vLLM ``token_strs``) of ``texts``
    would cover more than ``TOKENIZER_MAX_DETAIL_TOKENS`` tokens, decided before any of that work. ``specials_each``
    special tokens are added around every text, ``specials_once`` once; ``input_bytes`` is the texts' UTF-8 size.
    A text has at most one token per UTF-8 byte, so only inputs with more bytes than the limit are counted (the
    compiled count, which releases the GIL, builds nothing)."""
    limit = svc.settings.max_detail_tokens
    specials = specials_once + specials_each * max(1, len(texts))
    if input_bytes + specials <= limit:
        return
    check_detail_count(svc, sum(enc.count(text) for text in texts) + specials_once + specials_each * len(texts),
                       field)


def check_detail_count(svc: ServiceState, n: int, field: str = DETAIL_FIELDS) -> None:
    """413 when ``n`` tokens are more than ``TOKENIZER_MAX_DETAIL_TOKENS`` (per-token details of ``field`` asked
    for)."""
    limit = svc.settings.max_detail_tokens
    if n > limit:
        raise ApiError(413, "payload_too_large", f"{field} is limited to {limit} tokens per request "
                       f"(TOKENIZER_MAX_DETAIL_TOKENS); this one has {n}: ask for ids only, or split the text",
                       {"limit": limit, "actual": n, "field": field})


# ---------------------------------------------------------------------------- shared pieces


@dataclass
class _Texts:
    """A validated text input: the encoding, optional model, and either texts or parts."""

    enc: Tokenizer
    model: ModelInfo | None
    texts: list[str] | None  # for "text" (one item) or "texts"
    parts: list[Part] | None
    batch: bool
    prefix: list[str]
    suffix: list[str]
    input_bytes: int
    add_special: bool = False  # the tokenizer's template around the input (add_special_tokens)


def _resolve(svc: ServiceState, req: Any, labels: MutableMapping[str, str]) -> tuple[Tokenizer, ModelInfo | None]:
    info = svc.model(req.model) if req.model is not None else None
    enc = svc.encoding(info.tokenizer if info is not None else req.tokenizer)
    labels["tokenizer"] = enc.name
    return enc, info


def _texts(svc: ServiceState, req: EncodeRequest | CountRequest, labels: MutableMapping[str, str]) -> _Texts:
    enc, info = _resolve(svc, req, labels)
    specials = req.special_tokens
    prefix = list(specials.prefix) if specials else []
    suffix = list(specials.suffix) if specials else []
    for name in (*prefix, *suffix):
        enc.special_token_id(name)  # 422 listing the allowed names, before any work
    nbytes = 0
    if req.parts is not None:
        _check_batch(svc, len(req.parts), "parts")
        _check_chars(svc, sum(len(p.text) for p in req.parts if p.text is not None))
        for i, p in enumerate(req.parts):
            if p.special is not None:
                enc.special_token_id(p.special)
            else:
                nbytes += utf8_len(p.text or "", f"parts[{i}].text")
        return _Texts(enc, info, None, req.parts, False, prefix, suffix, nbytes, req.add_special_tokens)
    if req.texts is not None:
        _check_batch(svc, len(req.texts), "texts")
        texts, batch = req.texts, True
    else:
        texts, batch = [req.text or ""], False
    _check_chars(svc, sum(map(len, texts)))
    for i, t in enumerate(texts):
        nbytes += utf8_len(t, f"texts[{i}]" if batch else "text")
    return _Texts(enc, info, texts, None, batch, prefix, suffix, nbytes, req.add_special_tokens)


def _lookalikes(svc: ServiceState, enc: Tokenizer, texts: Sequence[str]) -> list[int]:
    counter = svc.lookalike_counter(enc)
    return [counter(t) for t in texts]


def _token_pieces(enc: Tokenizer, ids: Sequence[int]) -> list[dict[str, str]]:
    out = []
    for chunk in enc.decode_tokens_bytes(ids):
        try:
            out.append({"text": chunk.decode("utf-8")})
        except UnicodeDecodeError:
            out.append({"bytes": base64.b64encode(chunk).decode("ascii")})
    return out


def _dumps(obj: Any) -> bytes:
    return serialize.dumps(obj)


def _timed(timings: dict[str, float], phase: str, fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    try:
        return fn()
    finally:
        timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - start


# ---------------------------------------------------------------------------- operations


def encode(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """``POST /encode``: ids (and optionally token pieces and offsets) of a text, a batch or parts."""
    timings: dict[str, float] = {}
    req = _timed(timings, "parse", lambda: parse(EncodeRequest, body))
    if req.messages is not None:
        from .chat_ops import chat_op

        return chat_op(svc, req, labels, timings, with_ids=True)
    t = _timed(timings, "parse", lambda: _texts(svc, req, labels))
    enc = t.enc
    sample = sample_of(req.sample, enc, t.input_bytes)
    start = time.perf_counter()
    detail = req.return_tokens or req.return_offsets
    if detail and sample is None:
        _check_detail(svc, t)
    tokens = req.return_tokens and sample is None  # a sampled request gets its pieces once its size is known
    results: list[dict[str, Any]] = []
    if req.truncate is not None:
        results.append(_truncated(t, req))
    elif t.parts is not None:
        ids, spans = _encode_parts(enc, t.parts, t.prefix, t.suffix, req.return_offsets, t.add_special, sample)
        results.append(_result(enc, ids, spans, tokens))
        look_texts = [p.text for p in t.parts if p.text is not None]
        if req.report_special_lookalikes:
            results[0]["special_lookalikes"] = sum(_lookalikes(svc, enc, look_texts))
    else:
        assert t.texts is not None
        looks = _lookalikes(svc, enc, t.texts) if req.report_special_lookalikes else None
        for i, text in enumerate(t.texts):
            if req.return_offsets:
                ids, spans = _encode_with_offsets(enc, text, t.prefix, t.suffix, t.add_special)
            else:
                ids = enc.encode(text, add_special_tokens=t.add_special, prefix=t.prefix, suffix=t.suffix,
                                 sample=sample.at(i) if sample else None)
                spans = None
            results.append(_result(enc, ids, spans, tokens))
            if looks is not None:
                results[-1]["special_lookalikes"] = looks[i]
    if detail and sample is not None:
        check_detail_count(svc, sum(len(r["ids"]) for r in results))
        for r in results:
            r["tokens"] = _token_pieces(enc, r["ids"])
    timings["tokenize"] = time.perf_counter() - start
    counts = [r["count"] for r in results]
    total = sum(counts)
    out: dict[str, Any] = {"tokenizer": enc.name}
    if t.model is not None:
        out["model"] = pricing_ops.model_block(svc, t.model, counts, t.batch, req)
    if t.batch:
        out["results"] = results
        out["total"] = total
    else:
        out.update(results[0])
    payload = _timed(timings, "serialize", lambda: _dumps(out))
    if total > serialize.CHUNK:
        serialize.release(results)
    metrics.sync_cache([enc])
    return OpResult(payload, enc.name, total, t.input_bytes, timings)


def _truncated(t: _Texts, req: EncodeRequest | CountRequest) -> dict[str, Any]:
    """``truncate`` on one ``text``: the kept ids (and prefix/suffix specials) and what was dropped."""
    from .chat_ops import truncate_text

    if t.texts is None or t.batch or req.truncate is None:
        raise ApiError(422, "validation_error", "'truncate' works on 'text' or 'messages'",
                       [{"loc": ["truncate"], "msg": "use 'text' or 'messages'", "type": "value_error"}])
    enc = t.enc
    before, after = _specials_around(enc, t.prefix, t.suffix, t.add_special)
    kept, report = truncate_text(enc, t.texts[0], req.truncate, len(before) + len(after))
    result = _result(enc, [*before, *kept, *after], None, bool(getattr(req, "return_tokens", False)))
    result["truncated"] = report
    return result


def _result(enc: Tokenizer, ids: list[int], spans: list[tuple[int, int]] | None, tokens: bool) -> dict[str, Any]:
    r: dict[str, Any] = {"ids": ids, "count": len(ids)}
    if tokens:
        r["tokens"] = _token_pieces(enc, ids)
    if spans is not None:
        r["offsets"] = spans
    return r


def _specials_around(enc: Tokenizer, prefix: list[str], suffix: list[str],
                     add_special: bool) -> tuple[list[int], list[int]]:
    """Ids before and after the input: the template's (when asked) outside the named prefix/suffix."""
    pre = [enc.special_token_id(n) for n in prefix]
    suf = [enc.special_token_id(n) for n in suffix]
    if add_special:
        pre, suf = [*enc.template.prefix_ids, *pre], [*suf, *enc.template.suffix_ids]
    return pre, suf


def _encode_with_offsets(enc: Tokenizer, text: str, prefix: list[str], suffix: list[str],
                         add_special: bool) -> tuple[list[int], list[tuple[int, int]]]:
    ids, spans = enc.encode_with_offsets(text)
    end = len(text)
    pre, suf = _specials_around(enc, prefix, suffix, add_special)
    return [*pre, *ids, *suf], [*((0, 0) for _ in pre), *spans, *((end, end) for _ in suf)]


def _encode_parts(enc: Tokenizer, parts: list[Part], prefix: list[str], suffix: list[str], offsets: bool,
                  add_special: bool, sample: Sample | None = None) -> tuple[list[int], list[tuple[int, int]] | None]:
    """Ids of (template) + prefix + parts + suffix (+ template). Offsets index the concatenation of the parts'
    texts."""
    seq = [*(Special(n) for n in prefix),
           *(Special(p.special) if p.special is not None else (p.text or "") for p in parts),
           *(Special(n) for n in suffix)]
    if not offsets:
        return enc.encode_parts(seq, add_special_tokens=add_special, sample=sample), None
    template = enc.template if add_special else None
    ids: list[int] = template.prefix_ids if template else []
    spans: list[tuple[int, int]] = [(0, 0)] * len(ids)
    pos = 0
    for item in seq:
        if isinstance(item, Special):
            ids.append(enc.special_token_id(item.name))
            spans.append((pos, pos))
        else:
            part_ids, part_spans = enc.encode_with_offsets(item)
            ids.extend(part_ids)
            spans.extend((pos + a, pos + b) for a, b in part_spans)
            pos += len(item)
    if template:
        ids.extend(template.suffix_ids)
        spans.extend((pos, pos) for _ in template.suffix)
    return ids, spans


def count(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """``POST /count``: the number of tokens of a text, a batch or parts (special tokens included)."""
    timings: dict[str, float] = {}
    req = _timed(timings, "parse", lambda: parse(CountRequest, body))
    if req.messages is not None:
        from .chat_ops import chat_op

        return chat_op(svc, req, labels, timings, with_ids=False)
    t = _timed(timings, "parse", lambda: _texts(svc, req, labels))
    enc = t.enc
    sample = sample_of(req.sample, enc, t.input_bytes)
    start = time.perf_counter()
    looks: list[int] | None = None
    truncated: dict[str, Any] | None = None
    if req.truncate is not None:
        result = _truncated(t, req)
        truncated = result["truncated"]
        counts = [result["count"]]
    elif t.parts is not None and sample is not None:
        counts = [len(_encode_parts(enc, t.parts, t.prefix, t.suffix, False, t.add_special, sample)[0])]
    elif t.parts is not None:
        before, after = _specials_around(enc, t.prefix, t.suffix, t.add_special)
        n = len(before) + len(after)
        for p in t.parts:
            n += 1 if p.special is not None else enc.count(p.text or "")
        counts = [n]
        if req.report_special_lookalikes:
            looks = [sum(_lookalikes(svc, enc, [p.text for p in t.parts if p.text is not None]))]
    else:
        assert t.texts is not None
        counts = [enc.count(text, add_special_tokens=t.add_special, prefix=t.prefix, suffix=t.suffix,
                            sample=sample.at(i) if sample else None) for i, text in enumerate(t.texts)]
        if req.report_special_lookalikes:
            looks = _lookalikes(svc, enc, t.texts)
    timings["tokenize"] = time.perf_counter() - start
    total = sum(counts)
    out: dict[str, Any] = {"tokenizer": enc.name}
    if t.model is not None:
        out["model"] = pricing_ops.model_block(svc, t.model, counts, t.batch, req)
    if truncated is not None:
        out["truncated"] = truncated
    if t.batch:
        out.update(counts=counts, total=total)
        if looks is not None:
            out["special_lookalikes"] = looks
    else:
        out["count"] = total
        if looks is not None:
            out["special_lookalikes"] = looks[0]
    payload = _timed(timings, "serialize", lambda: _dumps(out))
    metrics.sync_cache([enc])
    return OpResult(payload, enc.name, total, t.input_bytes, timings)


def decode(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """``POST /decode``: text of ids or of a batch of id lists; 422 naming the first id not in the vocabulary."""
    timings: dict[str, float] = {}
    req = _timed(timings, "parse", lambda: parse(DecodeRequest, body))
    enc, _ = _resolve(svc, req, labels)
    rows = [req.ids] if req.ids is not None else req.batch
    assert rows is not None
    if req.batch is not None:
        _check_batch(svc, len(rows), "batch")
    n_ids = sum(map(len, rows))
    if n_ids > svc.settings.max_decode_ids:
        limit = svc.settings.max_decode_ids
        raise ApiError(413, "payload_too_large", f"{n_ids} ids to decode; the limit is {limit} "
                       "(TOKENIZER_MAX_DECODE_IDS)", {"limit": limit, "actual": n_ids})
    start = time.perf_counter()
    texts = []
    for row_index, ids in enumerate(rows):
        try:
            texts.append(enc.decode(ids, skip_special=req.skip_special_tokens))
        except InvalidTokenIdError as exc:
            details: dict[str, Any] = {"id": exc.token_id, "position": exc.index, "tokenizer": enc.name}
            where = f"ids[{exc.index}]"
            if req.batch is not None:
                details["batch_index"] = row_index
                where = f"batch[{row_index}][{exc.index}]"
            raise ApiError(422, "invalid_token_id", f"token id {exc.token_id} at {where} is not in the vocabulary of "
                           f"{enc.name!r} (valid ids: 0..{enc.n_vocab - 1}, assigned ones only)", details) from None
    timings["tokenize"] = time.perf_counter() - start
    out: dict[str, Any] = {"tokenizer": enc.name}
    if req.batch is not None:
        out["texts"] = texts
    else:
        out["text"] = texts[0]
    payload = _timed(timings, "serialize", lambda: _dumps(out))
    return OpResult(payload, enc.name, n_ids, 0, timings)
