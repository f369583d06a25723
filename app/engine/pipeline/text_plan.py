"""A text plan: what the pipeline's steps before the model amount to, when a compiled model can run all of them
itself in one call per text (``Pipeline.text_path == "text-plan"``).

The plan holds only what the compiled side needs, decided once per pipeline:

- the raw added tokens to find (every pattern of the pipeline's raw :class:`~app.engine.pipeline.added.AddedMatcher`,
  in its order, with its id, or -1 for a special token, whose match is skipped and stays ordinary text);
- the normalizer as one character replaced by a string (a :class:`~app.engine.pipeline.normalizers.Replace` with a
  one-character literal pattern), or none;
- a pre-tokenizer that never cuts: none, or a :class:`~app.engine.pipeline.pre_tokenizers.Split` on a literal that
  the normalizer has removed from every text it returns (Gemma's files: spaces become U+2581, then split on
  spaces).

Anything else (normalized added tokens, ``single_word``/``lstrip``/``rstrip`` on a matchable token, another
normalizer or pre-tokenizer) has no plan, and the pipeline keeps its other paths. The ids are the reference's:
the compiled side runs exactly these steps, and the tests compare it with the pure-Python pipeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .added import AddedToken
from .normalizers import Replace
from .pre_tokenizers import Split


@dataclass(frozen=True)
class TextPlan:
    """The steps before the model, as data (see the module docstring)."""

    #: Added-token patterns in the raw matcher's order (leftmost-longest; of equal patterns the first listed).
    patterns: tuple[str, ...]
    #: Per pattern, the id it becomes, or -1 (a special token: its match is skipped).
    token_ids: tuple[int, ...]
    #: The one character the normalizer replaces (None: no normalizer) and what it becomes.
    replace_from: str | None
    replace_to: str

    @classmethod
    def of(cls, raw_added: Sequence[tuple[str, AddedToken]], normalizer: object,
           pre_tokenizer: object) -> TextPlan | None:
        """The plan of a pipeline whose raw matcher holds ``raw_added`` (pattern, token; first listed wins), or
        None when its steps are not ones the compiled side runs (the caller has already ruled out normalized
        added tokens)."""
        replace_from: str | None = None
        replace_to = ""
        if normalizer is not None:
            if type(normalizer) is not Replace:
                return None
            literal = normalizer.pattern.string
            if literal is None or len(literal) > 1 or _has_surrogate(normalizer.content):
                return None
            if literal:
                replace_from, replace_to = literal, normalizer.content
        if pre_tokenizer is not None:
            if type(pre_tokenizer) is not Split or pre_tokenizer.invert:
                return None
            cut = pre_tokenizer.pattern.string
            # the split never matches: an empty literal, or one the normalizer removed from every text
            if cut is None or (cut and not (replace_from == cut and cut not in replace_to)):
                return None
        patterns: dict[str, AddedToken] = {}
        for pattern, token in raw_added:
            if pattern:
                patterns.setdefault(pattern, token)
        for token in patterns.values():
            if not token.special and (token.single_word or token.lstrip or token.rstrip):
                return None
        return cls(tuple(patterns), tuple(-1 if t.special else t.id for t in patterns.values()),
                   replace_from, replace_to)


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)
