"""Framings: how a model turns a conversation into prompt tokens, chosen by a small spec in the model table.

A model table entry opts into ``messages`` with a ``chat`` object; a new chat model is one entry::

    "chat": {"framing": "openai-cookbook", "rules": "gpt-4o"}     # counts only (OpenAI's published rules)
    "chat": {"framing": "harmony"}                                # gpt-oss; ids and count
    "chat": {"framing": "jinja", "template": "qwen3-8b"}          # a template of <store>/chat_templates/
    "chat": {"framing": "mistral", "version": "v3"}               # mistral-common's instruct format v1/v3/v7

Every framing has ``count(tokenizer, conv, add_generation_prompt)``; those with public ids (``ids_public``) also
``frame(...)`` -> :class:`~app.engine.chat.parts.Parts`, which any tokenizer's ``encode_parts`` turns into ids.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..tokenizer import Tokenizer
from . import cookbook, harmony, mistral
from .jinja import MARK, ChatTemplate
from .messages import Conversation
from .parts import Parts

TEMPLATES_DIR = "chat_templates"
TEMPLATES_MANIFEST = "manifest.json"
FRAMINGS = ("openai-cookbook", "harmony", "jinja", "mistral")


class ChatSpecError(ValueError):
    """A ``chat`` spec or chat-template manifest entry that cannot be used; the message names it."""


class Framing(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def ids_public(self) -> bool: ...

    def frame(self, conv: Conversation, *, add_generation_prompt: bool = True) -> Parts: ...

    def count(self, tok: Tokenizer, conv: Conversation, *, add_generation_prompt: bool = True) -> int: ...


def count_parts(tok: Tokenizer, parts: Parts, memo: dict[str, int] | None = None) -> int:
    """Tokens of parts without building the id list. ``memo`` caches the counts of short texts (the framing's
    headers repeat in every message)."""
    count = tok.count
    if memo is None:
        return sum(count(p) if type(p) is str else 1 for p in parts)
    total = 0
    get = memo.get
    for p in parts:
        if type(p) is not str:  # a Special
            total += 1
        elif len(p) <= _MEMO_CHARS:
            n = get(p)
            if n is None:
                n = count(p)
                if len(memo) < _MEMO_SIZE:
                    memo[p] = n
            total += n
        else:
            total += count(p)
    return total


_MEMO_CHARS = 64
_MEMO_SIZE = 4096


@dataclass(frozen=True)
class CookbookFraming:
    rules: cookbook.CookbookRules
    kind: str = "openai-cookbook"
    ids_public: bool = False

    def frame(self, conv: Conversation, *, add_generation_prompt: bool = True) -> Parts:
        raise NotImplementedError("this model's framing tokens are not public: only counts are available")

    def count(self, tok: Tokenizer, conv: Conversation, *, add_generation_prompt: bool = True) -> int:
        """The cookbook always adds the 3 reply-priming tokens (the provider bills them on every request)."""
        return cookbook.count_conversation(tok.count, conv, self.rules)


class _CountsFramedParts:
    """``count`` as the tokens of ``frame(...)``, with the framing's short texts memoized per tokenizer name."""

    _memo: dict[str, dict[str, int]]

    def frame(self, conv: Conversation, *, add_generation_prompt: bool = True) -> Parts:
        raise NotImplementedError

    def count(self, tok: Tokenizer, conv: Conversation, *, add_generation_prompt: bool = True) -> int:
        memo = self._memo.setdefault(tok.name, {})
        return count_parts(tok, self.frame(conv, add_generation_prompt=add_generation_prompt), memo)


@dataclass(frozen=True)
class HarmonyFraming(_CountsFramedParts):
    kind: str = "harmony"
    ids_public: bool = True
    _memo: dict[str, dict[str, int]] = field(default_factory=dict, compare=False, repr=False)

    def frame(self, conv: Conversation, *, add_generation_prompt: bool = True) -> Parts:
        return harmony.frame(conv, add_generation_prompt=add_generation_prompt)


@dataclass(frozen=True)
class TemplateFraming(_CountsFramedParts):
    template: ChatTemplate
    kind: str = "jinja"
    ids_public: bool = True
    _memo: dict[str, dict[str, int]] = field(default_factory=dict, compare=False, repr=False)

    def frame(self, conv: Conversation, *, add_generation_prompt: bool = True) -> Parts:
        return self.template.frame(conv, add_generation_prompt=add_generation_prompt)

    def count(self, tok: Tokenizer, conv: Conversation, *, add_generation_prompt: bool = True) -> int:
        """The tokens of :meth:`frame`'s parts. Where no caller text needed escaping, the rendered string is read as
        those parts directly (:meth:`Tokenizer.count_framed` on the template's own specials: the same cuts as
        the split into parts, one call into the compiled core where there is one)."""
        template = self.template
        rendered = template.render_for_count(conv, add_generation_prompt=add_generation_prompt)
        if MARK not in rendered:
            return tok.count_framed(rendered, template.own_specials)
        return count_parts(tok, template.parts_of(rendered), self._memo.setdefault(tok.name, {}))


@dataclass(frozen=True)
class MistralFraming(_CountsFramedParts):
    version: str
    kind: str = "mistral"
    ids_public: bool = True
    _memo: dict[str, dict[str, int]] = field(default_factory=dict, compare=False, repr=False)

    def frame(self, conv: Conversation, *, add_generation_prompt: bool = True) -> Parts:
        """``add_generation_prompt`` changes nothing: every user turn already ends with ``[/INST]``."""
        return mistral.frame(self.version, conv)


@dataclass(frozen=True)
class TemplateSource:
    """One verified entry of ``chat_templates/manifest.json``."""

    name: str
    text: str
    sha256: str
    source: str
    license: str
    variables: Mapping[str, str]


def load_templates(store_dir: Path) -> dict[str, TemplateSource]:
    """Read ``<store>/chat_templates/manifest.json`` and verify every file's sha256 (empty if there is none)."""
    directory = Path(store_dir) / TEMPLATES_DIR
    path = directory / TEMPLATES_MANIFEST
    if not path.is_file():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        entries = raw["templates"]
        out = {}
        for name, entry in entries.items():
            data = (directory / entry["file"]).read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if digest != entry["sha256"]:
                raise ChatSpecError(f"{path}: template {name!r}: sha256 {digest} does not match the manifest's "
                                    f"{entry['sha256']}")
            variables = entry.get("variables", {})
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in variables.items()):
                raise ChatSpecError(f"{path}: template {name!r}: 'variables' must map names to strings")
            out[name] = TemplateSource(name, data.decode("utf-8"), digest, str(entry["source"]),
                                       str(entry["license"]), variables)
        return out
    except ChatSpecError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ChatSpecError(f"{path}: cannot read the chat-template manifest: {exc!r}") from None


class ChatFramings:
    """Framing specs -> framings, with templates compiled once per (template, tokenizer)."""

    def __init__(self, templates: Mapping[str, TemplateSource]) -> None:
        self.templates = dict(templates)
        self._compiled: dict[tuple[str, str], TemplateFraming] = {}
        self._mistral: dict[str, MistralFraming] = {}
        self._harmony = HarmonyFraming()
        self._lock = threading.Lock()

    @classmethod
    def from_store(cls, store_dir: Path) -> ChatFramings:
        return cls(load_templates(store_dir))

    def check(self, spec: Any, where: str) -> None:
        """Validate a ``chat`` spec; raises :class:`ChatSpecError` naming ``where``."""
        if not isinstance(spec, Mapping) or spec.get("framing") not in FRAMINGS:
            raise ChatSpecError(f"{where}: 'chat' must be an object with 'framing' one of {', '.join(FRAMINGS)}")
        kind = spec["framing"]
        if kind == "openai-cookbook" and spec.get("rules") not in cookbook.RULES:
            raise ChatSpecError(f"{where}: openai-cookbook needs 'rules' one of {', '.join(cookbook.RULES)}")
        if kind == "mistral" and spec.get("version") not in mistral.VERSIONS:
            raise ChatSpecError(f"{where}: mistral needs 'version' one of {', '.join(mistral.VERSIONS)}")
        if kind == "jinja" and spec.get("template") not in self.templates:
            raise ChatSpecError(f"{where}: unknown chat template {spec.get('template')!r} (known: "
                                f"{', '.join(sorted(self.templates))})")

    def framing(self, spec: Mapping[str, Any], tok: Tokenizer) -> Framing:
        """The framing a (checked) spec describes, for tokenizer ``tok``."""
        kind = spec["framing"]
        if kind == "openai-cookbook":
            return CookbookFraming(cookbook.RULES[spec["rules"]])
        if kind == "harmony":
            return self._harmony  # one instance: its memo of header counts outlives the request
        if kind == "mistral":
            return self._mistral.setdefault(spec["version"], MistralFraming(spec["version"]))
        key = (spec["template"], tok.name)
        with self._lock:
            framing = self._compiled.get(key)
            if framing is None:
                src = self.templates[spec["template"]]
                template = ChatTemplate(src.name, src.text, src.variables, tok.special_tokens)
                framing = self._compiled[key] = TemplateFraming(template)
            return framing
