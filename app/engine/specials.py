"""Special tokens of a tokenizer: named ids that enter only by name, never from text.

:class:`SpecialTokensMixin` gives every tokenizer class (byte-level :class:`~app.engine.Encoding`, the classic
:class:`~app.engine.training.char_bpe.CharBPEEncoding`) the same special-token surface and rules:

* a special id must not be an ordinary token's id (``ValueError`` at construction);
* several names may map to one id (o200k_harmony 200018 is ``<|endofprompt|>`` and ``<|reserved_200018|>``):
  all of them encode to it, and decoding names it by the first name in manifest order, as tiktoken does;
* an unknown name raises :class:`~app.engine.errors.UnknownSpecialTokenError`, which lists the allowed names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .errors import UnknownSpecialTokenError


@dataclass(frozen=True)
class Special:
    """A special token, by name, as one part of :meth:`SpecialTokensMixin.encode_parts`."""

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


class SpecialTokensMixin:
    """Special-token lookups for a tokenizer class that sets ``name``, calls :meth:`_init_special_tokens` and
    provides ``_encode_text(text) -> list[int]`` (ordinary text only).

    ``template`` (what ``add_special_tokens=True`` adds) is built from ``template_names`` (prefix and suffix names,
    checked against the table) or set directly by a family whose post-processor defines it."""

    name: str
    _special_tokens: dict[str, int]
    _special_by_id: dict[int, str]
    _template: Template

    _encode_text: Callable[[str], list[int]]

    def _init_special_tokens(self, special_tokens: Mapping[str, int], is_ordinary: Callable[[int], bool],
                             template_names: tuple[Sequence[str], Sequence[str]] = ((), ())) -> None:
        """Store the table and the template; raises ``ValueError`` if a special id is also an ordinary token's id
        or a template name is not a special token."""
        self._special_tokens = dict(special_tokens)
        self._special_by_id = {}
        for special, token_id in self._special_tokens.items():
            if is_ordinary(token_id):
                raise ValueError(f"{self.name}: special token {special!r} reuses ordinary id {token_id}")
            self._special_by_id.setdefault(token_id, special)
        pre, suf = template_names
        unknown = [n for n in (*pre, *suf) if n not in self._special_tokens]
        if unknown:
            raise ValueError(f"{self.name}: template names unknown special tokens {unknown}")
        self._template = Template(tuple((n, self._special_tokens[n]) for n in pre),
                                  tuple((n, self._special_tokens[n]) for n in suf))

    @property
    def template(self) -> Template:
        """What ``add_special_tokens=True`` puts around a text."""
        return self._template

    @property
    def added_tokens(self) -> dict[str, int]:
        """Non-special added tokens matched in text; none for families without them."""
        return {}

    def _around(self, prefix: Sequence[str], suffix: Sequence[str],
                add_special_tokens: bool) -> tuple[list[int], list[int]]:
        """The ids before and after a text: the template's (when asked) outside the named ``prefix``/``suffix``.
        Raises :class:`UnknownSpecialTokenError` for an unknown name."""
        before = [self.special_token_id(n) for n in prefix]
        after = [self.special_token_id(n) for n in suffix]
        if add_special_tokens:
            before = [*self._template.prefix_ids, *before]
            after = [*after, *self._template.suffix_ids]
        return before, after

    def _around_count(self, prefix: Sequence[str], suffix: Sequence[str], add_special_tokens: bool) -> int:
        """How many ids :meth:`_around` puts around a text (same errors)."""
        before, after = self._around(prefix, suffix, add_special_tokens)
        return len(before) + len(after)

    @property
    def special_tokens(self) -> dict[str, int]:
        """Special-token string -> id (a copy)."""
        return dict(self._special_tokens)

    def special_token_id(self, name: str) -> int:
        """The id of a special token by name; raises :class:`UnknownSpecialTokenError` listing the allowed ones."""
        try:
            return self._special_tokens[name]
        except (KeyError, TypeError):
            raise UnknownSpecialTokenError(str(name), self.name, self._special_tokens) from None

    def is_special(self, token_id: int) -> bool:
        """True if ``token_id`` is a special token's id."""
        return token_id in self._special_by_id

    def encode_parts(self, parts: Sequence[str | Special], *, add_special_tokens: bool = False) -> list[int]:
        """Ids of an ordered mix of texts and :class:`Special` tokens, e.g. ``["sys", Special("<|eot_id|>"), "hi"]``.

        Texts are encoded separately (pre-tokenization does not run across a part boundary); the template wraps the
        whole sequence when ``add_special_tokens``. Raises :class:`UnknownSpecialTokenError` for an unknown name and
        ``TypeError`` for a part of another type.
        """
        out: list[int] = self._template.prefix_ids if add_special_tokens else []
        for part in parts:
            if isinstance(part, Special):
                out.append(self.special_token_id(part.name))
            elif isinstance(part, str):
                out.extend(self._encode_text(part))
            else:
                raise TypeError(f"a part must be str or Special, not {type(part).__name__}")
        if add_special_tokens:
            out.extend(self._template.suffix_ids)
        return out
