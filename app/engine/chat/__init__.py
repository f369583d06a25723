"""Chat framing: conversations (OpenAI Chat Completions shape) -> the prompt a model sees, as parts or a count.

::

    from app.engine.chat import ChatFramings, parse_conversation
    conv = parse_conversation([{"role": "user", "content": "Hi"}])
    framing = ChatFramings.from_store(store_dir).framing({"framing": "harmony"}, tokenizer)
    ids = tokenizer.encode_parts(list(framing.frame(conv)))

Text in every message stays ordinary text: only the framing's own special tokens are special.
"""

from __future__ import annotations

from .framings import ChatFramings, ChatSpecError, Framing, TemplateSource, count_parts, load_templates
from .jinja import ChatTemplate
from .messages import ChatInputError, ChatMessage, Conversation, Tool, ToolCall, parse_conversation
from .parts import Parts

__all__ = [
    "ChatFramings",
    "ChatInputError",
    "ChatMessage",
    "ChatSpecError",
    "ChatTemplate",
    "Conversation",
    "Framing",
    "Parts",
    "TemplateSource",
    "Tool",
    "ToolCall",
    "count_parts",
    "load_templates",
    "parse_conversation",
]
