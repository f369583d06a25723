"""What every operation module shares: the result type, body parsing, the request limits (413s), the invalid-id
422, token pieces, timing, serialization, text truncation and the ``model`` block of a model's counts.

Every function here raises :class:`~app.api.errors.ApiError` for bad input and nothing for good input; the operation
modules (:mod:`app.api.ops.encode`, :mod:`~app.api.ops.chat`, …) import only these public names.

Decisions: JSON strings with lone surrogates (``"\\ud800"``) are rejected with 422 ``invalid_text`` (the engine
would silently turn them into U+FFFD; an API should not guess). Truncation never cuts inside a character: kept ids
always decode (strict UTF-8) to a prefix (``side: right``) or suffix (``left``) of the text. Pricing errors
(:class:`~app.pricing.pricer.PricingError`) become 422s with the same ``type`` (``unknown_model``,
``unknown_provider``, ``unknown_service_tier``, ``bad_usage``, ``bad_response``) and the closest names in the
details; the ``model`` block also feeds the billing counters (:func:`app.api.metrics.observe_billing`).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from app.core.billing import model_block as build_block
from app.core.billing import price_target, quotes_by_kind, single_block
from app.core.model_table import ModelInfo
from app.engine import Tokenizer
from app.engine.errors import InvalidTokenIdError
from app.engine.native import utf8_size
from app.pricing.money import money
from app.pricing.pricer import Pricer, PricingError
from app.pricing.quote import UNITS_BY_PRICE_KEY

from .. import metrics, serialize
from ..deps import ServiceState
from ..errors import ApiError, validation_details
from ..schemas import CountRequest, EncodeRequest, Truncate

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


# ---------------------------------------------------------------------------- limits


def check_batch(svc: ServiceState, n: int, what: str) -> None:
    """413 when ``what`` has more than ``TOKENIZER_MAX_BATCH_SIZE`` (``n``) items."""
    limit = svc.settings.max_batch_size
    if n > limit:
        raise ApiError(413, "payload_too_large", f"{what} has {n} items; the limit is {limit} "
                       "(TOKENIZER_MAX_BATCH_SIZE)", {"limit": limit, "actual": n, "field": what})


def check_chars(svc: ServiceState, n: int) -> None:
    """413 when the texts have more than ``TOKENIZER_MAX_TEXT_CHARS`` (``n``) characters."""
    limit = svc.settings.max_text_chars
    if n > limit:
        raise ApiError(413, "payload_too_large", f"the texts have {n} characters; the limit is {limit} "
                       "(TOKENIZER_MAX_TEXT_CHARS)", {"limit": limit, "actual": n})


#: The /encode fields that return per-token details.
DETAIL_FIELDS = "return_tokens/return_offsets"


def check_detail_texts(svc: ServiceState, tokenizer: Tokenizer, texts: Sequence[str], specials_each: int,
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
    check_detail_count(svc, sum(tokenizer.count(text) for text in texts) + specials_once + specials_each * len(texts),
                       field)


def check_detail_count(svc: ServiceState, n: int, field: str = DETAIL_FIELDS) -> None:
    """413 when ``n`` tokens are more than ``TOKENIZER_MAX_DETAIL_TOKENS`` (per-token details of ``field`` asked
    for)."""
    limit = svc.settings.max_detail_tokens
    if n > limit:
        raise ApiError(413, "payload_too_large", f"{field} is limited to {limit} tokens per request "
                       f"(TOKENIZER_MAX_DETAIL_TOKENS); this one has {n}: ask for ids only, or split the text",
                       {"limit": limit, "actual": n, "field": field})


def check_decode_ids(svc: ServiceState, n: int) -> None:
    """413 when ``n`` ids to decode are more than ``TOKENIZER_MAX_DECODE_IDS``."""
    limit = svc.settings.max_decode_ids
    if n > limit:
        raise ApiError(413, "payload_too_large", f"{n} ids to decode; the limit is {limit} "
                       "(TOKENIZER_MAX_DECODE_IDS)", {"limit": limit, "actual": n})


def invalid_token_id(tokenizer: Tokenizer, token_id: Any, where: str, position: int | None,
                     extra: dict[str, Any] | None = None) -> ApiError:
    """The 422 ``invalid_token_id`` of ``token_id`` at ``where`` (a field path such as ``ids[3]``), ``position``
    its index in its list; ``extra`` is added to the details."""
    return ApiError(422, "invalid_token_id", f"token id {token_id} at {where} is not in the vocabulary of "
                    f"{tokenizer.name!r} (valid ids: 0..{tokenizer.n_vocab - 1}, assigned ones only)",
                    {"id": token_id, "position": position, "tokenizer": tokenizer.name, **(extra or {})})


def decode_rows(tokenizer: Tokenizer, rows: Sequence[list[int]], skip_special: bool, field: str,
                batch: bool) -> list[str]:
    """The text of each id list of ``rows`` (``field`` names them in errors; ``batch``: ``rows`` is the field's
    list of lists, else its one list); 422 :func:`invalid_token_id` naming the first id not in the vocabulary."""
    texts = []
    for row_index, ids in enumerate(rows):
        try:
            texts.append(tokenizer.decode(ids, skip_special=skip_special))
        except InvalidTokenIdError as exc:
            if batch:
                raise invalid_token_id(tokenizer, exc.token_id, f"{field}[{row_index}][{exc.index}]", exc.index,
                                       {"batch_index": row_index}) from None
            raise invalid_token_id(tokenizer, exc.token_id, f"{field}[{exc.index}]", exc.index) from None
    return texts


# ---------------------------------------------------------------------------- shared pieces


def token_pieces(tokenizer: Tokenizer, ids: Sequence[int]) -> list[dict[str, str]]:
    """Each id's bytes: ``{"text": ...}`` when they are UTF-8, else ``{"bytes": base64}``."""
    out = []
    for chunk in tokenizer.decode_tokens_bytes(ids):
        try:
            out.append({"text": chunk.decode("utf-8")})
        except UnicodeDecodeError:
            out.append({"bytes": base64.b64encode(chunk).decode("ascii")})
    return out


def dumps(obj: Any) -> bytes:
    """The response body of ``obj`` (:func:`app.api.serialize.dumps`)."""
    return serialize.dumps(obj)


def timed(timings: dict[str, float], phase: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, its seconds added to ``timings[phase]`` (also when it raises)."""
    start = time.perf_counter()
    try:
        return fn()
    finally:
        timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - start


# ---------------------------------------------------------------------------- truncation


def prefix_fit(n: int, fits: Callable[[int], bool]) -> int:
    """The largest k in [0, n] with ``fits(k)`` (``fits`` monotone, ``fits(0)`` assumed), by binary search."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def clean_cut(tokenizer: Tokenizer, ids: Sequence[int], keep: int, side: str) -> tuple[list[int], str]:
    """At most ``keep`` of ``ids`` from the start (``right``) or end (``left``), fewer if needed so the kept ids
    decode to whole characters; returns the kept ids and their text."""
    keep = max(0, min(keep, len(ids)))
    while keep > 0:
        kept = list(ids[:keep]) if side == "right" else list(ids[len(ids) - keep:])
        try:
            return kept, tokenizer.decode_bytes(kept).decode("utf-8")
        except UnicodeDecodeError:
            keep -= 1
    return [], ""


def truncate_text(tokenizer: Tokenizer, text: str, trunc: Truncate,
                  n_specials: int) -> tuple[list[int], dict[str, Any]]:
    """The ids of ``text`` cut to ``trunc.max_tokens`` minus ``n_specials`` (room for the prefix/suffix specials)."""
    ids = tokenizer.encode(text)
    room = trunc.max_tokens - n_specials
    if room < 0:
        raise ApiError(422, "cannot_truncate", f"max_tokens {trunc.max_tokens} leaves no room for the "
                       f"{n_specials} special tokens requested", {"max_tokens": trunc.max_tokens})
    kept, kept_text = clean_cut(tokenizer, ids, room, trunc.side)
    return kept, {"max_tokens": trunc.max_tokens, "side": trunc.side, "dropped_tokens": len(ids) - len(kept),
                  "kept_text": kept_text, "kept_chars": len(kept_text)}


# ---------------------------------------------------------------------------- the model block


def pricing_error(exc: PricingError) -> ApiError:
    """The 422 of a pricing error."""
    return ApiError(422, exc.kind, str(exc), exc.details or None)


def model_block(svc: ServiceState, info: ModelInfo, counts: Sequence[int], batch: bool,
                req: EncodeRequest | CountRequest) -> dict[str, Any] | orjson.Fragment:
    """The ``model`` block of a /count or /encode request (from its model, max_output_tokens, cached_tokens,
    provider and service_tier); 422 for a provider, service tier or cached_tokens the price data cannot take. A
    single text at the standard prices is served from :func:`app.core.billing.single_block`'s memo as its JSON (an
    ``orjson.Fragment``: the response body is the same bytes, without walking and serializing the block again)."""
    prices = svc.prices
    try:
        if not batch and req.service_tier is None and prices is not None and len(counts) == 1:
            single = single_block(info, counts[0], prices, max_output_tokens=req.max_output_tokens,
                                  cached_tokens=req.cached_tokens, provider=req.provider, requested=req.model)
            served = single.served
            if served is None:
                served = single.served = (orjson.Fragment(single.json), _billing_updates(single.fields))
            metrics.observe_billing(served[1])
            return served[0]
        block = build_block(info, counts, batch, prices, max_output_tokens=req.max_output_tokens,
                            cached_tokens=req.cached_tokens, provider=req.provider, service_tier=req.service_tier,
                            requested=req.model)
    except PricingError as exc:
        raise pricing_error(exc) from None
    metrics.observe_billing(_billing_updates(block))
    return block


def _billing_updates(block: dict[str, Any]) -> tuple[tuple[Any, float], ...]:
    price = block.get("price")
    if not price:
        return ()
    by_kind = [(k, tokens, float(cost)) for k, (tokens, cost) in quotes_by_kind(block).items()]
    return metrics.billing_updates(price["model"], by_kind)


def model_price(pricer: Pricer | None, info: ModelInfo, name: str, source: str | None = None) -> dict[str, Any]:
    """A model's price for ``GET /models``: provider and model priced, the current standard rates per million
    tokens (exact decimal strings; ``tiered`` when a rate changes past a prompt size) and the service tiers the
    data has for it; or ``{"available": false, "reason": ...}``. ``source``: how the price was found (default:
    ``table`` when the model table names the provider, else ``name``)."""
    target = price_target(pricer, info, None, name)
    if target.provider is None or target.model is None:
        return {"available": False, "reason": target.reason}
    prices = target.model.get_prices(datetime.now(tz=UTC))
    rates: dict[str, str] = {}
    tiered = False
    for key, value in vars(prices).items():
        unit = UNITS_BY_PRICE_KEY.get(key)
        if unit is None or value is None or unit.per != 1_000_000:
            continue
        base = getattr(value, "base", value)
        tiered = tiered or base is not value
        rates[f"{unit.usage_key.removesuffix('_tokens')}_per_million"] = money(base)
    own = any(target.model is m for m in target.provider.models)
    variants = target.model.price_variants or [] if own else []
    tiers = sorted({f"{k}={v}" for pv in variants for k, v in pv.when.items()})
    return {"available": True, "provider": target.provider.id, "model": target.model.id, "currency": "USD",
            **rates, "tiered": tiered, "price_variants": tiers,
            "source": source or ("table" if info.pricing_provider else "name")}
