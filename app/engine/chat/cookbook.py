"""OpenAI's published chat counting rules (the OpenAI cookbook's ``num_tokens_from_messages`` and
``num_tokens_for_tools``), for models whose framing tokens are not public: counts only, no ids.

The rules: every message costs 3 tokens plus the tokens of each of its string values (``role``, ``content``,
``name``, ``tool_call_id``); a ``name`` costs 1 more; 3 more prime the reply. Function tools: per function
``func_init`` (7 for the gpt-4o family, 10 for gpt-4 and gpt-3.5-turbo) plus the tokens of ``"name:description"``
(a final ``.`` dropped); 3 to start the properties when there are any; per property 3 plus ``"key:type:description"``
and, with an enum, -3 plus 3 and the item's tokens per item; 12 after the function list.

Where the cookbook is silent (its code would fail), this module decides: list content counts as its text parts
joined with ``"\\n"``; an assistant's ``tool_calls`` count the tokens of each call's function name and of its
arguments text (no per-call overhead is published); a missing description, type or property description counts as
the empty string; a non-string enum item counts as its JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .messages import Conversation, Tool


@dataclass(frozen=True)
class CookbookRules:
    """One family's constants."""

    name: str
    tokens_per_message: int = 3
    tokens_per_name: int = 1
    reply_priming: int = 3
    func_init: int = 7
    prop_init: int = 3
    prop_key: int = 3
    enum_init: int = -3
    enum_item: int = 3
    func_end: int = 12


#: ``gpt-4o`` rules: the gpt-4o family, gpt-4.1 and the o-series (all o200k_base); ``gpt-4`` rules: gpt-4,
#: gpt-4-turbo and gpt-3.5-turbo (cl100k_base).
RULES: dict[str, CookbookRules] = {
    "gpt-4o": CookbookRules("gpt-4o", func_init=7),
    "gpt-4": CookbookRules("gpt-4", func_init=10),
}


def count_messages(count: Callable[[str], int], conv: Conversation, rules: CookbookRules) -> int:
    """``num_tokens_from_messages``: ``count(text)`` is the tokenizer's ordinary-text count."""
    total = 0
    for m in conv.messages:
        total += rules.tokens_per_message + count(m.role) + count(m.content)
        if m.name is not None:
            total += count(m.name) + rules.tokens_per_name
        if m.tool_call_id is not None:
            total += count(m.tool_call_id)
        for call in m.tool_calls:
            total += count(call.name) + count(call.arguments)
    return total + rules.reply_priming


def count_tools(count: Callable[[str], int], tools: tuple[Tool, ...], rules: CookbookRules) -> int:
    """``num_tokens_for_tools`` without the messages: the tokens the function definitions add (0 without tools)."""
    if not tools:
        return 0
    total = 0
    for tool in tools:
        total += rules.func_init
        total += count(f"{tool.name}:{_strip_dot(tool.description or '')}")
        properties = (tool.parameters or {}).get("properties") or {}
        if not isinstance(properties, Mapping) or not properties:
            continue
        total += rules.prop_init
        for key, prop in properties.items():
            prop = prop if isinstance(prop, Mapping) else {}
            total += rules.prop_key
            enum = prop.get("enum")
            if "enum" in prop and isinstance(enum, list):
                total += rules.enum_init
                for item in enum:
                    total += rules.enum_item + count(item if isinstance(item, str) else json.dumps(item))
            total += count(f"{key}:{_text(prop.get('type'))}:{_strip_dot(_text(prop.get('description')))}")
    return total + rules.func_end


def count_conversation(count: Callable[[str], int], conv: Conversation, rules: CookbookRules) -> int:
    """Messages plus tools, as ``num_tokens_for_tools(tools, messages, model)`` adds them."""
    return count_messages(count, conv, rules) + count_tools(count, conv.tools, rules)


def _strip_dot(text: str) -> str:
    return text[:-1] if text.endswith(".") else text


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)
