"""Hugging Face ``tokenizers`` as the reference for ``tokenizer.json`` pipelines (built in :mod:`harness.references`,
shared with the benchmarks), and the comparison itself.

The reference is configured as the service's rule demands: special added tokens are never read from text
(``encode_special_tokens = True``). Offsets from the Python binding are character offsets into the text, as ours.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.engine import get_tokenizer
from app.engine.pipeline import Pipeline
from harness.references import hf_json_reference as reference

#: The bundled tokenizer.json tokenizers.
HF_JSON = ("qwen3", "deepseek-v3", "gemma3")


@functools.cache
def ours(name: str) -> Pipeline:
    """Our reference pipeline for ``name`` (the Python pipeline, whatever fast path the loader may pick)."""
    tok = get_tokenizer(name, backend="python")
    assert isinstance(tok, Pipeline), type(tok)
    return tok


@dataclass
class Result:
    compared: int = 0
    mismatches: list[str] = field(default_factory=list)


def compare(name: str, texts: Iterable[str], *, offsets: bool = True, decode: bool = True,
            with_template: bool = True, count: bool = True) -> Result:
    """Compare ids (``add_special_tokens`` off and, when ``with_template``, on), offsets and decoding of every
    text; a mismatch is described in one line."""
    ref, tok = reference(name), ours(name)
    out = Result()
    for text in texts:
        out.compared += 1
        expected = ref.encode(text, add_special_tokens=False)
        got = tok.encode(text)
        if got != expected.ids:
            out.mismatches.append(f"{name} ids {text[:80]!r}: ours {got[:12]} hf {expected.ids[:12]}")
            continue
        if with_template:
            full = ref.encode(text, add_special_tokens=True).ids
            if tok.encode(text, add_special_tokens=True) != full:
                out.mismatches.append(f"{name} add_special_tokens {text[:80]!r}")
        if count and tok.count(text) != len(expected.ids):
            out.mismatches.append(f"{name} count {text[:80]!r}")
        if offsets:
            ids, spans = tok.encode_with_offsets(text)
            if ids != expected.ids or spans != [tuple(o) for o in expected.offsets]:
                diff = next((i for i, (a, b) in enumerate(zip(spans, expected.offsets, strict=False))
                             if tuple(a) != tuple(b)), None)
                out.mismatches.append(f"{name} offsets {text[:80]!r} first difference at token {diff}")
        if decode:
            for skip in (False, True):
                if tok.decode(expected.ids, skip_special=skip) != ref.decode(expected.ids, skip_special_tokens=skip):
                    out.mismatches.append(f"{name} decode(skip_special={skip}) {text[:80]!r}")
    return out
