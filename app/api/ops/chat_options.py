"""``apply_chat_template``'s options beyond ``add_generation_prompt`` for the compatibility routes:
``chat_template_kwargs`` (extra template variables, e.g. Qwen3's ``enable_thinking``), ``continue_final_message``
and an operator-allowed caller ``chat_template``; plus the model a request names, or the configured default model.

Only Jinja framings (the model's own chat template) take these options; for the other framings (OpenAI's published
counting rules, Harmony, mistral-common) a request that sets one is a 422 naming the field, never ignored.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from app.core.model_table import ModelInfo
from app.engine import Tokenizer
from app.engine.chat import ChatInputError, ChatTemplate, Conversation, Framing
from app.engine.chat.framings import TemplateFraming

from ..deps import ServiceState
from ..errors import ApiError
from .chat import chat_framing


@dataclass(frozen=True)
class ChatOptions:
    """How to render a conversation: the ``apply_chat_template`` options a compatibility request set."""

    add_generation_prompt: bool = True
    continue_final_message: bool = False
    variables: Mapping[str, Any] | None = None  # chat_template_kwargs
    template_source: str | None = None  # a caller's chat_template (only when the operator allows it)

    @property
    def plain(self) -> bool:
        """Only ``add_generation_prompt``: the framing's own (memoised) count applies."""
        return not (self.continue_final_message or self.variables or self.template_source is not None)


def refuse(field: str, why: str) -> ApiError:
    """A 422 naming ``field`` (an option this service cannot honour for this request)."""
    return ApiError(422, "unsupported_field", f"'{field}': {why}", {"field": field})


def resolve_model(svc: ServiceState, model: str | None) -> str:
    """``model``, else the service's default model (``TOKENIZER_DEFAULT_MODEL``); 422 when neither is set."""
    if model is not None:
        return model
    default = svc.settings.default_model
    if default is None:
        raise ApiError(422, "model_required", "'model' is required (no default model is configured: "
                       "TOKENIZER_DEFAULT_MODEL)", {"field": "model"})
    return default


def open_framing(svc: ServiceState, model: str | None,
                 labels: MutableMapping[str, str]) -> tuple[str, Tokenizer, ModelInfo, Framing]:
    """(model name, tokenizer, model entry, framing) of ``model`` or the default model."""
    name = resolve_model(svc, model)
    tokenizer, info, framing = chat_framing(svc, name, labels)
    return name, tokenizer, info, framing


_LOCK = threading.Lock()
_CALLER_TEMPLATES: dict[tuple[str, str], ChatTemplate] = {}
_MAX_CALLER_TEMPLATES = 32


def _caller_template(svc: ServiceState, tokenizer: Tokenizer, framing: Framing, source: str) -> ChatTemplate:
    if not svc.settings.allow_request_chat_template:
        raise refuse("chat_template", "a caller-supplied chat template is not allowed on this service (the operator "
                     "can allow it: TOKENIZER_ALLOW_REQUEST_CHAT_TEMPLATE); the model's own template is used without "
                     "it")
    variables = framing.template.variables if isinstance(framing, TemplateFraming) else {}
    key = (hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest(), tokenizer.name)
    with _LOCK:
        template = _CALLER_TEMPLATES.get(key)
    if template is None:
        try:
            template = ChatTemplate("request", source, variables, tokenizer.special_tokens)
        except ValueError as exc:
            raise refuse("chat_template", str(exc)) from None
        with _LOCK:
            if len(_CALLER_TEMPLATES) >= _MAX_CALLER_TEMPLATES:
                _CALLER_TEMPLATES.pop(next(iter(_CALLER_TEMPLATES)))
            _CALLER_TEMPLATES[key] = template
    return template


def _chat_error(exc: ChatInputError) -> ApiError:
    return ApiError(422, "invalid_messages", str(exc), {"field": exc.path})


def framed_ids(svc: ServiceState, tokenizer: Tokenizer, framing: Framing, conv: Conversation,
               options: ChatOptions) -> list[int]:
    """Ids of the conversation rendered with ``options``; 422 for what the framing cannot do or refuses."""
    try:
        if options.plain:
            parts = framing.frame(conv, add_generation_prompt=options.add_generation_prompt)
            return tokenizer.encode_parts(list(parts))
        return tokenizer.encode_parts(list(_template(svc, tokenizer, framing, options).frame_with(
            conv, add_generation_prompt=options.add_generation_prompt,
            continue_final_message=options.continue_final_message, variables=options.variables)))
    except ChatInputError as exc:
        raise _chat_error(exc) from None


def framed_count(svc: ServiceState, tokenizer: Tokenizer, framing: Framing, conv: Conversation,
                 options: ChatOptions) -> int:
    """Tokens of the conversation rendered with ``options`` (the framing's billed count where ids are not public)."""
    if options.plain:
        try:
            return framing.count(tokenizer, conv, add_generation_prompt=options.add_generation_prompt)
        except ChatInputError as exc:
            raise _chat_error(exc) from None
    return len(framed_ids(svc, tokenizer, framing, conv, options))


def _template(svc: ServiceState, tokenizer: Tokenizer, framing: Framing, options: ChatOptions) -> ChatTemplate:
    if isinstance(framing, TemplateFraming):
        if options.template_source is not None:
            return _caller_template(svc, tokenizer, framing, options.template_source)
        return framing.template
    field = ("chat_template" if options.template_source is not None else
             "chat_template_kwargs" if options.variables else "continue_final_message")
    raise refuse(field, f"the model's framing ({framing.kind}) is not a chat template; this option applies to "
                 "models framed by their Jinja chat template")
