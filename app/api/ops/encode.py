"""The work behind POST /encode, /count and /decode: raw body bytes in, response bytes out.

Each operation parses, validates, tokenizes and serializes in one call, so the route can run the whole thing in a
worker thread and the event loop only moves bytes. They raise :class:`~app.api.errors.ApiError` or an engine error
(mapped to 4xx by the handlers) for every bad input; anything else is a bug (500).

``messages`` on /encode and /count go to :func:`app.api.ops.chat.chat_op`. Offsets are in characters (code points)
of the text; special tokens get empty spans at their position.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.model_table import ModelInfo
from app.engine import Special, Tokenizer
from app.engine.artifact_regex import running_inline
from app.engine.sampling import Sample

from .. import metrics, serialize
from ..deps import ServiceState
from ..errors import ApiError
from ..schemas import CountRequest, DecodeRequest, EncodeRequest, Part
from .chat import chat_op
from .common import (
    DETAIL_FIELDS,
    OpResult,
    check_batch,
    check_chars,
    check_decode_ids,
    check_detail_count,
    check_detail_texts,
    decode_rows,
    dumps,
    model_block,
    parse,
    timed,
    token_pieces,
    truncate_text,
    utf8_len,
)
from .sample import sample_of

# ---------------------------------------------------------------------------- shared pieces


@dataclass
class _Texts:
    """A validated text input: the encoding, optional model, and either texts or parts."""

    tokenizer: Tokenizer
    model: ModelInfo | None
    texts: list[str] | None  # for "text" (one item) or "texts"
    parts: list[Part] | None
    batch: bool
    prefix: list[str]
    suffix: list[str]
    input_bytes: int
    add_special: bool = False  # the tokenizer's template around the input (add_special_tokens)


def _check_detail(svc: ServiceState, t: _Texts) -> None:
    """:func:`check_detail_texts` for an /encode request asking for tokens or offsets (its parts or texts, with the
    prefix/suffix specials it names). Sampled requests are checked by :func:`check_detail_count` after their one
    encoding instead (sampling the text twice to count it first would double the work;
    :data:`~app.api.ops.sample.MAX_SAMPLE_BYTES` bounds the ids meanwhile)."""
    specials = len(t.prefix) + len(t.suffix)
    if t.add_special:
        specials += len(t.tokenizer.template.prefix_ids) + len(t.tokenizer.template.suffix_ids)
    if t.parts is not None:
        specials += sum(1 for p in t.parts if p.special is not None)
        check_detail_texts(svc, t.tokenizer, [p.text for p in t.parts if p.text is not None], 0, specials,
                           t.input_bytes, DETAIL_FIELDS)
    else:
        check_detail_texts(svc, t.tokenizer, t.texts or [], specials, 0, t.input_bytes, DETAIL_FIELDS)


def _resolve(svc: ServiceState, req: Any, labels: MutableMapping[str, str]) -> tuple[Tokenizer, ModelInfo | None]:
    info = svc.model(req.model) if req.model is not None else None
    tokenizer = svc.tokenizer(info.tokenizer if info is not None else req.tokenizer)
    labels["tokenizer"] = tokenizer.name
    return tokenizer, info


def _texts(svc: ServiceState, req: EncodeRequest | CountRequest, labels: MutableMapping[str, str]) -> _Texts:
    tokenizer, info = _resolve(svc, req, labels)
    specials = req.special_tokens
    prefix = list(specials.prefix) if specials else []
    suffix = list(specials.suffix) if specials else []
    for name in (*prefix, *suffix):
        tokenizer.special_token_id(name)  # 422 listing the allowed names, before any work
    nbytes = 0
    if req.parts is not None:
        check_batch(svc, len(req.parts), "parts")
        check_chars(svc, sum(len(p.text) for p in req.parts if p.text is not None))
        for i, p in enumerate(req.parts):
            if p.special is not None:
                tokenizer.special_token_id(p.special)
            else:
                nbytes += utf8_len(p.text or "", f"parts[{i}].text")
        return _Texts(tokenizer, info, None, req.parts, False, prefix, suffix, nbytes, req.add_special_tokens)
    if req.texts is not None:
        check_batch(svc, len(req.texts), "texts")
        texts, batch = req.texts, True
    else:
        texts, batch = [req.text or ""], False
    check_chars(svc, sum(map(len, texts)))
    for i, t in enumerate(texts):
        nbytes += utf8_len(t, f"texts[{i}]" if batch else "text")
    return _Texts(tokenizer, info, texts, None, batch, prefix, suffix, nbytes, req.add_special_tokens)


def _on_batch_path(svc: ServiceState, t: _Texts, sample: Sample | None) -> bool:
    """Whether a ``texts`` batch is tokenized by the engine's batch path, on threads (:mod:`app.api.batching`):
    two texts or more, ``TOKENIZER_BATCH_BYTES`` of them together, nothing sampled. Prefix, suffix and template
    specials go around each text's ids as :meth:`Tokenizer.encode` puts them."""
    return (t.batch and t.texts is not None and len(t.texts) > 1 and sample is None
            and t.input_bytes >= svc.settings.batch_bytes)


def _batch_ids(svc: ServiceState, t: _Texts) -> list[list[int]]:
    """``tokenizer.encode(text, prefix, suffix, add_special_tokens)`` of every text, by ``encode_batch`` on the
    threads the request is granted."""
    assert t.texts is not None
    before, after = _specials_around(t.tokenizer, t.prefix, t.suffix, t.add_special)
    if running_inline():  # on the event loop: no threads (they would not carry the unvetted-regex guard)
        rows = t.tokenizer.encode_batch(t.texts)
    else:
        with svc.batch_threads.take() as threads:
            rows = t.tokenizer.encode_batch(t.texts, num_threads=threads)
    if before or after:
        rows = [[*before, *ids, *after] for ids in rows]
    return rows


def _batch_counts(svc: ServiceState, t: _Texts) -> list[int]:
    """:func:`_batch_ids`' lengths, by ``count_batch`` (no id lists)."""
    assert t.texts is not None
    before, after = _specials_around(t.tokenizer, t.prefix, t.suffix, t.add_special)
    if running_inline():
        counts = t.tokenizer.count_batch(t.texts)
    else:
        with svc.batch_threads.take() as threads:
            counts = t.tokenizer.count_batch(t.texts, num_threads=threads)
    extra = len(before) + len(after)
    return [n + extra for n in counts] if extra else counts


def _lookalikes(svc: ServiceState, tokenizer: Tokenizer, texts: Sequence[str]) -> list[int]:
    counter = svc.lookalike_counter(tokenizer)
    return [counter(t) for t in texts]


# ---------------------------------------------------------------------------- operations


def encode(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """``POST /encode``: ids (and optionally token pieces and offsets) of a text, a batch or parts."""
    timings: dict[str, float] = {}
    req = timed(timings, "parse", lambda: parse(EncodeRequest, body))
    if req.messages is not None:
        return chat_op(svc, req, labels, timings, with_ids=True)
    t = timed(timings, "parse", lambda: _texts(svc, req, labels))
    tokenizer = t.tokenizer
    sample = sample_of(req.sample, tokenizer, t.input_bytes)
    start = time.perf_counter()
    detail = req.return_tokens or req.return_offsets
    if detail and sample is None:
        _check_detail(svc, t)
    tokens = req.return_tokens and sample is None  # a sampled request gets its pieces once its size is known
    results: list[dict[str, Any]] = []
    if req.truncate is not None:
        results.append(_truncated(t, req))
    elif t.parts is not None:
        ids, spans = _encode_parts(tokenizer, t.parts, t.prefix, t.suffix, req.return_offsets, t.add_special, sample)
        results.append(_result(tokenizer, ids, spans, tokens))
        look_texts = [p.text for p in t.parts if p.text is not None]
        if req.report_special_lookalikes:
            results[0]["special_lookalikes"] = sum(_lookalikes(svc, tokenizer, look_texts))
    else:
        assert t.texts is not None
        looks = _lookalikes(svc, tokenizer, t.texts) if req.report_special_lookalikes else None
        batched = not req.return_offsets and _on_batch_path(svc, t, sample)
        rows = _batch_ids(svc, t) if batched else None
        for i, text in enumerate(t.texts):
            if rows is not None:
                ids, spans = rows[i], None
            elif req.return_offsets:
                ids, spans = _encode_with_offsets(tokenizer, text, t.prefix, t.suffix, t.add_special)
            else:
                ids = tokenizer.encode(text, add_special_tokens=t.add_special, prefix=t.prefix, suffix=t.suffix,
                                 sample=sample.at(i) if sample else None)
                spans = None
            results.append(_result(tokenizer, ids, spans, tokens))
            if looks is not None:
                results[-1]["special_lookalikes"] = looks[i]
    if detail and sample is not None:
        check_detail_count(svc, sum(len(r["ids"]) for r in results))
        for r in results:
            r["tokens"] = token_pieces(tokenizer, r["ids"])
    timings["tokenize"] = time.perf_counter() - start
    counts = [r["count"] for r in results]
    total = sum(counts)
    out: dict[str, Any] = {"tokenizer": tokenizer.name}
    if t.model is not None:
        out["model"] = model_block(svc, t.model, counts, t.batch, req)
    if t.batch:
        out["results"] = results
        out["total"] = total
    else:
        out.update(results[0])
    payload = timed(timings, "serialize", lambda: dumps(out))
    if total > serialize.CHUNK:
        serialize.release(results)
    metrics.cache_used(tokenizer)
    return OpResult(payload, tokenizer.name, total, t.input_bytes, timings)


def _truncated(t: _Texts, req: EncodeRequest | CountRequest) -> dict[str, Any]:
    """``truncate`` on one ``text``: the kept ids (and prefix/suffix specials) and what was dropped."""
    if t.texts is None or t.batch or req.truncate is None:
        raise ApiError(422, "validation_error", "'truncate' works on 'text' or 'messages'",
                       [{"loc": ["truncate"], "msg": "use 'text' or 'messages'", "type": "value_error"}])
    tokenizer = t.tokenizer
    before, after = _specials_around(tokenizer, t.prefix, t.suffix, t.add_special)
    kept, report = truncate_text(tokenizer, t.texts[0], req.truncate, len(before) + len(after))
    result = _result(tokenizer, [*before, *kept, *after], None, bool(getattr(req, "return_tokens", False)))
    result["truncated"] = report
    return result


def _result(tokenizer: Tokenizer, ids: list[int], spans: list[tuple[int, int]] | None, tokens: bool) -> dict[str, Any]:
    r: dict[str, Any] = {"ids": ids, "count": len(ids)}
    if tokens:
        r["tokens"] = token_pieces(tokenizer, ids)
    if spans is not None:
        r["offsets"] = spans
    return r


def _specials_around(tokenizer: Tokenizer, prefix: list[str], suffix: list[str],
                     add_special: bool) -> tuple[list[int], list[int]]:
    """Ids before and after the input: the template's (when asked) outside the named prefix/suffix."""
    pre = [tokenizer.special_token_id(n) for n in prefix]
    suf = [tokenizer.special_token_id(n) for n in suffix]
    if add_special:
        pre, suf = [*tokenizer.template.prefix_ids, *pre], [*suf, *tokenizer.template.suffix_ids]
    return pre, suf


def _encode_with_offsets(tokenizer: Tokenizer, text: str, prefix: list[str], suffix: list[str],
                         add_special: bool) -> tuple[list[int], list[tuple[int, int]]]:
    ids, spans = tokenizer.encode_with_offsets(text)
    end = len(text)
    pre, suf = _specials_around(tokenizer, prefix, suffix, add_special)
    return [*pre, *ids, *suf], [*((0, 0) for _ in pre), *spans, *((end, end) for _ in suf)]


def _encode_parts(tokenizer: Tokenizer, parts: list[Part], prefix: list[str], suffix: list[str], offsets: bool,
                  add_special: bool, sample: Sample | None = None) -> tuple[list[int], list[tuple[int, int]] | None]:
    """Ids of (template) + prefix + parts + suffix (+ template). Offsets index the concatenation of the parts'
    texts."""
    seq = [*(Special(n) for n in prefix),
           *(Special(p.special) if p.special is not None else (p.text or "") for p in parts),
           *(Special(n) for n in suffix)]
    if not offsets:
        return tokenizer.encode_parts(seq, add_special_tokens=add_special, sample=sample), None
    template = tokenizer.template if add_special else None
    ids: list[int] = template.prefix_ids if template else []
    spans: list[tuple[int, int]] = [(0, 0)] * len(ids)
    pos = 0
    for item in seq:
        if isinstance(item, Special):
            ids.append(tokenizer.special_token_id(item.name))
            spans.append((pos, pos))
        else:
            part_ids, part_spans = tokenizer.encode_with_offsets(item)
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
    req = timed(timings, "parse", lambda: parse(CountRequest, body))
    if req.messages is not None:
        return chat_op(svc, req, labels, timings, with_ids=False)
    t = timed(timings, "parse", lambda: _texts(svc, req, labels))
    tokenizer = t.tokenizer
    sample = sample_of(req.sample, tokenizer, t.input_bytes)
    start = time.perf_counter()
    looks: list[int] | None = None
    truncated: dict[str, Any] | None = None
    if req.truncate is not None:
        result = _truncated(t, req)
        truncated = result["truncated"]
        counts = [result["count"]]
    elif t.parts is not None and sample is not None:
        counts = [len(_encode_parts(tokenizer, t.parts, t.prefix, t.suffix, False, t.add_special, sample)[0])]
    elif t.parts is not None:
        before, after = _specials_around(tokenizer, t.prefix, t.suffix, t.add_special)
        n = len(before) + len(after)
        for p in t.parts:
            n += 1 if p.special is not None else tokenizer.count(p.text or "")
        counts = [n]
        if req.report_special_lookalikes:
            looks = [sum(_lookalikes(svc, tokenizer, [p.text for p in t.parts if p.text is not None]))]
    elif _on_batch_path(svc, t, sample):
        counts = _batch_counts(svc, t)
        if req.report_special_lookalikes:
            looks = _lookalikes(svc, tokenizer, t.texts or [])
    else:
        assert t.texts is not None
        counts = [tokenizer.count(text, add_special_tokens=t.add_special, prefix=t.prefix, suffix=t.suffix,
                            sample=sample.at(i) if sample else None) for i, text in enumerate(t.texts)]
        if req.report_special_lookalikes:
            looks = _lookalikes(svc, tokenizer, t.texts)
    timings["tokenize"] = time.perf_counter() - start
    total = sum(counts)
    out: dict[str, Any] = {"tokenizer": tokenizer.name}
    if t.model is not None:
        out["model"] = model_block(svc, t.model, counts, t.batch, req)
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
    payload = timed(timings, "serialize", lambda: dumps(out))
    metrics.cache_used(tokenizer)
    return OpResult(payload, tokenizer.name, total, t.input_bytes, timings)


def decode(svc: ServiceState, body: bytes, labels: MutableMapping[str, str]) -> OpResult:
    """``POST /decode``: text of ids or of a batch of id lists; 422 naming the first id not in the vocabulary."""
    timings: dict[str, float] = {}
    req = timed(timings, "parse", lambda: parse(DecodeRequest, body))
    tokenizer, _ = _resolve(svc, req, labels)
    rows = [req.ids] if req.ids is not None else req.batch
    assert rows is not None
    if req.batch is not None:
        check_batch(svc, len(rows), "batch")
    n_ids = sum(map(len, rows))
    check_decode_ids(svc, n_ids)
    start = time.perf_counter()
    texts = decode_rows(tokenizer, rows, req.skip_special_tokens, "batch" if req.batch is not None else "ids",
                        req.batch is not None)
    timings["tokenize"] = time.perf_counter() - start
    out: dict[str, Any] = {"tokenizer": tokenizer.name}
    if req.batch is not None:
        out["texts"] = texts
    else:
        out["text"] = texts[0]
    payload = timed(timings, "serialize", lambda: dumps(out))
    return OpResult(payload, tokenizer.name, n_ids, 0, timings)
