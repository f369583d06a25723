"""``count --model`` (cost and context window) and ``count --messages FILE.json`` (a conversation, framed as the
model frames it). The model table is ``$TOKENIZER_MODELS_FILE`` or the store's ``models.json``; snapshot names
resolve as in the service."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from app.core.billing import load_pricer, model_block
from app.core.config import Settings
from app.core.model_table import MODELS_FILE, ModelInfo, ModelTable, ModelTableError
from app.core.priced_models import NoPublicTokenizer, priced_model
from app.engine import get_store, get_tokenizer
from app.engine.chat import ChatFramings, ChatInputError, ChatSpecError, parse_conversation
from app.pricing.data import PriceDataError
from app.pricing.pricer import Pricer, PricingError

from ._io import CliError, read_text_inputs


def _table(store_dir: str | None) -> tuple[ModelTable, Path]:
    store = get_store(store_dir)
    path = Settings.from_env().models_file or store.directory / MODELS_FILE
    return (ModelTable.load(path) if path.is_file() else ModelTable.empty()), store.directory


def _model(table: ModelTable, name: str, pricer: Pricer) -> ModelInfo:
    info = table.resolve(name)
    if info is None:
        try:
            info = priced_model(pricer, name)  # an OpenAI model of the price data, by tiktoken's rules
        except NoPublicTokenizer as exc:
            raise CliError(str(exc)) from None
    if info is None:
        raise CliError(f"unknown model {name!r}; known models: {', '.join(table.names())}")
    return info


def _read_conversation(path: str) -> tuple[Any, Any, bool]:
    """``(messages, tools, add_generation_prompt)`` from a JSON file: a list of messages or an object with
    ``messages`` (and optionally ``tools``, ``add_generation_prompt``)."""
    try:
        data = json.loads(read_text_inputs([path])[0][1])
    except RecursionError:
        raise CliError(f"{path}: cannot read a JSON conversation: nested too deeply") from None
    except (OSError, ValueError) as exc:
        raise CliError(f"{path}: cannot read a JSON conversation: {str(exc)[:200]}") from None
    if isinstance(data, list):
        return data, None, True
    if isinstance(data, dict) and "messages" in data:
        agp = data.get("add_generation_prompt", True)
        if not isinstance(agp, bool):
            raise CliError(f"{path}: 'add_generation_prompt' must be true or false")
        return data["messages"], data.get("tools"), agp
    raise CliError(f"{path}: expected a list of messages or an object with 'messages'")


def cmd_count_model(args: Any) -> int:
    """``count`` with ``--model`` and/or ``--messages``."""
    try:
        return _run(args)
    except (CliError, ModelTableError, ChatSpecError, PricingError, PriceDataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ChatInputError as exc:
        print(f"error: {exc.path}: {exc}" if not str(exc).startswith(exc.path) else f"error: {exc}",
              file=sys.stderr)
        return 2


def _run(args: Any) -> int:
    table, store_dir = _table(args.store)
    if args.messages and not args.model:
        raise CliError("--messages needs --model (the model decides the framing)")
    pricer = load_pricer()
    info = _model(table, args.model, pricer)
    tokenizer = get_tokenizer(info.tokenizer, args.store)
    out: dict[str, Any] = {"model": args.model, "tokenizer": tokenizer.name}
    if args.messages:
        if args.files:
            raise CliError("give either --messages FILE.json or text files, not both")
        if args.add_special_tokens:
            raise CliError("--add-special-tokens does not apply to --messages (the model's framing decides)")
        if info.chat is None:
            raise CliError(f"model {args.model!r} has no chat framing; models that support messages: "
                           f"{', '.join(table.chat_models())}")
        framings = ChatFramings.from_store(store_dir)
        framings.check(info.chat, f"model {args.model!r}")
        messages, tools, agp = _read_conversation(args.messages)
        conv = parse_conversation(messages, tools)
        framing = framings.framing(info.chat, tokenizer)
        counts = [framing.count(tokenizer, conv, add_generation_prompt=agp)]
        out["framing"] = framing.kind
    else:
        counts = [tokenizer.count(text, add_special_tokens=args.add_special_tokens)
                  for _, text in read_text_inputs(args.files, args.errors)]
    total = sum(counts)
    usage = model_block(info, [total], False, pricer, max_output_tokens=args.max_output_tokens,
                        requested=args.model)
    usage.pop("name", None)
    out.update(count=total, **usage)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{total} tokens ({args.model}, {tokenizer.name}{', ' + out['framing'] if 'framing' in out else ''})")
    if usage["context_window"] is not None:
        reserved = usage["output_tokens_reserved"]
        room = f" with {reserved} output tokens reserved" if reserved else ""
        print(f"context window {usage['context_window']}: {'fits' if usage['fits'] else 'does NOT fit'}{room}")
    if usage["estimated_input_cost"] is not None:
        line = f"input {usage['estimated_input_cost']} {usage['currency']}"
        if usage["estimated_output_cost"] is not None:
            line += (f", worst-case output {usage['estimated_output_cost']}, total "
                     f"{usage['estimated_total_cost']}")
        print(f"{line} ({usage['price_source']}; {usage['price_as_of']})")
    else:
        print(f"no price: {usage['price_unavailable']}")
    return 0
