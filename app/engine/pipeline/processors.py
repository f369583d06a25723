"""Post-processors: TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel.

Each gives the single-sequence :class:`~app.engine.specials.Template` that ``add_special_tokens=True`` puts
around a text and adjusts the text's offsets (``trim_offsets``). Pair templates are not used: the service
encodes one sequence at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..specials import EMPTY_TEMPLATE, Template
from .base import PostProcessor, Span
from .pre_tokenizers import byte_chars

_SPACE = byte_chars()[ord(" ")]
_RUST_WS = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    chr(c) for c in range(0x2000, 0x200B)))


class ProcessorError(ValueError):
    """A post-processor configuration the service cannot honour exactly."""


def trim_offsets(tokens: list[str], spans: list[Span], add_prefix_space: bool) -> list[Span]:
    """Hugging Face's offset trimming: a token's leading/trailing spaces (``Ġ`` or whitespace) are left out of its
    span, except a single leading space that ``add_prefix_space`` put before the first token."""
    out: list[Span] = []
    for i, (token, (start, end)) in enumerate(zip(tokens, spans, strict=True)):
        lead = 0
        for c in token:
            if c != _SPACE and c not in _RUST_WS:
                break
            lead += 1
        trail = 0
        for c in reversed(token):
            if c != _SPACE and c not in _RUST_WS:
                break
            trail += 1
        if lead or trail:
            if lead:
                if (i == 0 or start == 0) and add_prefix_space and lead == 1:
                    lead = 0
                start = min(start + lead, end)
            if trail and end >= trail:
                end = max(end - trail, start)
        out.append((start, end))
    return out


class ByteLevelProcessor:
    """Adds nothing; trims offsets when ``trim_offsets``."""

    def __init__(self, trim: bool, add_prefix_space: bool) -> None:
        self.trim = trim
        self.add_prefix_space = add_prefix_space

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> ByteLevelProcessor:
        return cls(bool(config.get("trim_offsets", True)), bool(config.get("add_prefix_space", True)))

    def template(self) -> Template:
        return EMPTY_TEMPLATE

    def adjust_offsets(self, tokens: list[str], spans: list[Span]) -> list[Span]:
        return trim_offsets(tokens, spans, self.add_prefix_space) if self.trim else spans


class TemplateProcessing:
    """The ``single`` template of a ``TemplateProcessing`` entry: special tokens around ``$A``."""

    def __init__(self, template: Template) -> None:
        self._template = template

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> TemplateProcessing:
        specials = config.get("special_tokens") or {}
        prefix: list[tuple[str, int]] = []
        suffix: list[tuple[str, int]] = []
        seen_sequence = False
        for item in config.get("single") or []:
            if not isinstance(item, dict) or len(item) != 1:
                raise ProcessorError(f"template item {item!r:.60}")
            kind, body = next(iter(item.items()))
            if kind == "Sequence":
                if seen_sequence or body.get("id") != "A":
                    raise ProcessorError("the single template must hold the sequence $A exactly once")
                seen_sequence = True
            elif kind == "SpecialToken":
                entry = specials.get(body.get("id"))
                if not isinstance(entry, dict) or len(entry.get("ids", [])) != len(entry.get("tokens", [])):
                    raise ProcessorError(f"template special token {body.get('id')!r} is not defined")
                pairs = list(zip(entry["tokens"], entry["ids"], strict=True))
                (suffix if seen_sequence else prefix).extend((str(n), int(i)) for n, i in pairs)
            else:
                raise ProcessorError(f"template item kind {kind!r}")
        if not seen_sequence:
            raise ProcessorError("the single template has no $A")
        return cls(Template(tuple(prefix), tuple(suffix)))

    def template(self) -> Template:
        return self._template

    def adjust_offsets(self, tokens: list[str], spans: list[Span]) -> list[Span]:
        return spans


class BertProcessing:
    """``[CLS] $A [SEP]`` from ``cls`` and ``sep`` (each ``[token, id]``)."""

    def __init__(self, cls_token: tuple[str, int], sep: tuple[str, int]) -> None:
        self._template = Template((cls_token,), (sep,))

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> BertProcessing:
        return cls((str(config["cls"][0]), int(config["cls"][1])), (str(config["sep"][0]), int(config["sep"][1])))

    def template(self) -> Template:
        return self._template

    def adjust_offsets(self, tokens: list[str], spans: list[Span]) -> list[Span]:
        return spans


class RobertaProcessing(BertProcessing):
    """``<s> $A </s>``, and ByteLevel's offset trimming when ``trim_offsets``."""

    def __init__(self, cls_token: tuple[str, int], sep: tuple[str, int], trim: bool, add_prefix_space: bool) -> None:
        super().__init__(cls_token, sep)
        self.trim = trim
        self.add_prefix_space = add_prefix_space

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> RobertaProcessing:
        return cls((str(config["cls"][0]), int(config["cls"][1])), (str(config["sep"][0]), int(config["sep"][1])),
                   bool(config.get("trim_offsets", True)), bool(config.get("add_prefix_space", True)))

    def adjust_offsets(self, tokens: list[str], spans: list[Span]) -> list[Span]:
        return trim_offsets(tokens, spans, self.add_prefix_space) if self.trim else spans


class ProcessorSequence:
    """Processors in order: the template of the one that adds tokens, every offset adjustment."""

    def __init__(self, members: Sequence[PostProcessor]) -> None:
        self.members = list(members)
        adding = [m.template() for m in self.members if m.template() != EMPTY_TEMPLATE]
        if len(adding) > 1:
            raise ProcessorError("more than one processor of the sequence adds special tokens")
        self._template = adding[0] if adding else EMPTY_TEMPLATE

    def template(self) -> Template:
        return self._template

    def adjust_offsets(self, tokens: list[str], spans: list[Span]) -> list[Span]:
        for m in self.members:
            spans = m.adjust_offsets(tokens, spans)
        return spans
