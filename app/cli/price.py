"""``price``: the price of one request from usage flags or a provider's response JSON on stdin (genai-prices, the
calculation behind ``POST /price``). Amounts are exact decimal strings. ``$TOKENIZER_PRICE_DATA_FILE`` selects a
newer genai-prices data file, as in the service."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any

from app.core.billing import load_pricer
from app.core.config import SettingsError
from app.pricing.data import PriceDataError
from app.pricing.pricer import SERVICE_TIERS, PricingError, make_usage
from app.pricing.quote import USAGE_KEYS

_TOKEN_FLAGS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_5m_tokens",
                "cache_write_1h_tokens", "output_tokens", "output_reasoning_tokens")


def register(sub: Any) -> None:
    p = sub.add_parser("price", help="price one request: usage flags, or a provider response JSON on stdin",
                       description="Price one request with genai-prices. Give usage flags, or --response with the "
                       "provider's response (or usage object) as JSON on stdin.")
    p.add_argument("model", nargs="?", help="model name as sent to the provider (with --response: default the "
                   "response's own)")
    p.add_argument("--provider", help="genai-prices provider id (default: matched from the model name)")
    for key in _TOKEN_FLAGS:
        p.add_argument(f"--{key.replace('_', '-')}", dest=key, type=int, metavar="N")
    p.add_argument("--usage", action="append", default=[], metavar="KEY=N",
                   help="any other genai-prices usage field, e.g. --usage input_audio_tokens=100")
    p.add_argument("--response", action="store_true", help="read the provider's response JSON from stdin")
    p.add_argument("--api-flavor", help="with --response: the extractor (OpenAI: chat, responses, ...)")
    p.add_argument("--timestamp", help="ISO 8601 time of the request (prices then in force; naive = UTC)")
    p.add_argument("--service-tier", choices=sorted(SERVICE_TIERS))
    p.add_argument("--json", action="store_true", help="print the whole quote as JSON")
    p.set_defaults(handler=cmd_price)


def _usage_fields(args: argparse.Namespace) -> dict[str, int]:
    fields = {k: getattr(args, k) for k in _TOKEN_FLAGS if getattr(args, k) is not None}
    for item in args.usage:
        key, sep, value = item.partition("=")
        if not sep or key not in USAGE_KEYS:
            raise PricingError("bad_usage", f"--usage {item!r}: expected KEY=N with KEY one of {', '.join(USAGE_KEYS)}")
        try:
            fields[key] = int(value)
        except ValueError:
            raise PricingError("bad_usage", f"--usage {item!r}: {value!r} is not an integer") from None
    if any(v < 0 for v in fields.values()):
        raise PricingError("bad_usage", "usage counts must be >= 0")
    return fields


def _run(args: argparse.Namespace) -> int:
    pricer = load_pricer()
    when = None
    if args.timestamp:
        try:
            when = datetime.fromisoformat(args.timestamp)
        except ValueError:
            raise PricingError("bad_usage", f"--timestamp {args.timestamp!r} is not ISO 8601") from None
    fields = _usage_fields(args)
    model_ref = args.model
    if args.response:
        if fields:
            raise PricingError("bad_usage", "give either --response (JSON on stdin) or usage flags, not both")
        if args.provider is None:
            raise PricingError("bad_response", "--response needs --provider (whose response format to read)")
        try:
            data = json.loads(sys.stdin.read())
        except ValueError as exc:
            raise PricingError("bad_response", f"stdin is not JSON: {exc}") from None
        found, usage = pricer.extract(data, args.provider, args.api_flavor)
        model_ref = model_ref or found
    else:
        if not fields:
            raise PricingError("bad_usage", "give usage flags (--input-tokens N, --output-tokens N, ...) or --response")
        usage = make_usage(fields)
    if model_ref is None:
        raise PricingError("unknown_model", "give the model (the response names none)")
    provider, model = pricer.resolve(model_ref, args.provider)
    quote = pricer.quote(provider, model, usage, timestamp=when, service_tier=args.service_tier)
    if args.json:
        out = quote.as_dict()
        out["price_data"] = pricer.data.provenance.as_dict()
        print(json.dumps(out))
        return 0
    shown = quote.as_dict()
    print(f"{shown['total']} USD  {provider.id} {model.id} ({pricer.data.provenance.version})")
    for kind, amount in shown["breakdown"].items():
        print(f"  {kind:15} {amount}")
    if quote.tier is not None:
        print(f"  tier: {quote.tier.reason}")
    if args.service_tier:
        print(f"  service tier: {args.service_tier}")
    return 0


def cmd_price(args: argparse.Namespace) -> int:
    """``price``: errors are one line on stderr, exit 2."""
    try:
        return _run(args)
    except (PricingError, PriceDataError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
