"""Special tokens of a tokenizer: named ids that enter only by name, never from text.

:class:`Special` names one in a sequence of parts, :class:`Template` is what ``add_special_tokens=True`` adds.
The lookups and their rules (one id for several names, errors listing the allowed names) are part of
:class:`~app.engine.tokenizer.Tokenizer`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Special:
    """A special token, by name, as one part of :meth:`~app.engine.tokenizer.Tokenizer.encode_parts`."""

    name: str


@dataclass(frozen=True)
class Template:
    """What ``add_special_tokens=True`` puts around one text: special tokens as ``(name, id)`` pairs.

    Byte-level tokenizers take it from the manifest (Llama 3: ``<|begin_of_text|>`` first); pipelines from their
    post-processor (BERT: ``[CLS]`` … ``[SEP]``)."""

    prefix: tuple[tuple[str, int], ...] = ()
    suffix: tuple[tuple[str, int], ...] = ()

    @property
    def prefix_ids(self) -> list[int]:
        return [i for _, i in self.prefix]

    @property
    def suffix_ids(self) -> list[int]:
        return [i for _, i in self.suffix]

    def describe(self) -> str:
        """``"<s> $text </s>"``-style summary, for ``GET /tokenizers/{name}``; ``"$text"`` when empty."""
        return " ".join([*(n for n, _ in self.prefix), "$text", *(n for n, _ in self.suffix)])


EMPTY_TEMPLATE = Template()
