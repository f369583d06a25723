"""(b) Every Unicode scalar value, in a few contexts, through each pattern: ids must equal tiktoken's.

The suite sweeps planes 0-3 and 14 whole and samples the uniform planes (``harness.texts.plane_sample``: no assigned
character, or private use only; 31% of all scalar values in all); ``CODEPOINT_SWEEP_FULL=1`` sweeps every one.

This pins the Unicode tables of both our pre-tokenizers (the ``regex`` module of the Python engine and the tables
generated into the compiled core) to tiktoken's (both Unicode 16): an upgrade that moves a code point between
\\p{L}, \\p{N}, \\p{M}, \\s, upper/lower case or case folding fails here.

Per pattern and context, every batch of ``BATCH`` consecutive code points is rendered into one string and its
tiktoken ids are compared with

* the native backend's ids (compiled pre-tokenizer + C BPE);
* the Python engine's pre-tokenizer (``regex``) pieces, merged by the C BPE: this isolates the ``regex`` tables
  at a fraction of the pure-Python cost;
* the full pure-Python engine's ids on every ``PYTHON_STRIDE``-th batch (its BPE is covered by the other suites).

Without the compiled core, the pure-Python engine's ids are compared on every batch instead (slower). A differing
batch is bisected down to the code points that differ on their own (or the smallest differing sub-batch), and the
failure names them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

import pytest

from harness.texts import swept_scalars

from .reference import PATTERN_TOKENIZERS, TALLY, native_available, ours, reference_encoding

#: The code point next to letters, spaces, digits, a contraction and a newline; then next to contraction letters,
#: case classes, slashes, CRLF and digits.
CONTEXTS = (
    "a{c}b {c}{c}1 {c}'s x{c} \n{c}",
    "'{c} A{c}a/{c}\r\n9{c}9",
)
BATCH = 2048
PYTHON_STRIDE = 32
SCALARS: tuple[int, ...] = swept_scalars(full=bool(os.environ.get("CODEPOINT_SWEEP_FULL")))

Encoder = Callable[[str], list[int]]


def render(context: str, cps: Sequence[int]) -> str:
    """``context`` with every ``{c}`` replaced by each code point of ``cps`` in turn, concatenated."""
    parts = context.split("{c}")
    return "".join(chr(c).join(parts) for c in cps)


def bisect(encode: Encoder, reference: Encoder, context: str, cps: Sequence[int]) -> list[Sequence[int]]:
    """Minimal differing groups of a differing batch (single code points where the difference is local)."""
    if len(cps) == 1:
        return [cps]
    mid = len(cps) // 2
    found = []
    for half in (cps[:mid], cps[mid:]):
        text = render(context, half)
        if encode(text) != reference(text):
            found.extend(bisect(encode, reference, context, half))
    return found or [cps]


def sweep(name: str, context: str, encoders: dict[str, tuple[Encoder, int]]) -> dict[str, list[Sequence[int]]]:
    """Compare each encoder (label -> (encode, stride)) with tiktoken on every ``stride``-th batch of all scalar
    values in ``context``; tally the batches and return the differing code-point groups per label."""
    reference = reference_encoding(name).encode_ordinary
    bad: dict[str, list[Sequence[int]]] = {label: [] for label in encoders}
    batches = dict.fromkeys(encoders, 0)
    for index, start in enumerate(range(0, len(SCALARS), BATCH)):
        chunk = SCALARS[start : start + BATCH]
        text = render(context, chunk)
        want = reference(text)
        for label, (encode, stride) in encoders.items():
            if index % stride:
                continue
            batches[label] += 1
            if encode(text) != want:
                bad[label].extend(bisect(encode, reference, context, chunk))
    for label in encoders:
        TALLY.add(f"{name}/{label.split(':')[0]}", f"sweep_batches[{label}]", batches[label], len(bad[label]))
    return bad


def encoders_for(name: str) -> dict[str, tuple[Encoder, int]]:
    """What the sweep compares for ``name``: see the module docstring."""
    python = ours(name, "python")
    if not native_available():
        return {"python": (python.encode, 1)}
    native = ours(name, "native")
    split = python._pretokenizer.pieces  # the regex pre-tokenizer under test
    merge = native._native.encode_pieces  # type: ignore[union-attr]

    def python_pieces_native_merge(text: str) -> list[int]:
        return merge(split(text))  # type: ignore[no-any-return]

    return {
        "native": (native.encode, 1),
        "python:regex-split": (python_pieces_native_merge, 1),
        "python": (python.encode, PYTHON_STRIDE),
    }


def test_render_puts_each_code_point_in_every_slot() -> None:
    assert render("a{c}b {c}", [0x41, 0x42]) == "aAb AaBb B"
    assert render(CONTEXTS[0], [0x263A]) == "a☺b ☺☺1 ☺'s x☺ \n☺"


def test_bisect_names_the_differing_code_point() -> None:
    """The bisection finds a planted difference (a fake reference that disagrees on one code point)."""
    tokenizer = ours("gpt2", "python").encode

    def planted(text: str) -> list[int]:
        return [0] if "\u0bb8" in text else tokenizer(text)

    assert bisect(tokenizer, planted, CONTEXTS[0], list(range(0xB00, 0xC00))) == [[0xBB8]]
    assert bisect(tokenizer, planted, CONTEXTS[1], list(range(0xBB8, 0xBB9))) == [[0xBB8]]


@pytest.mark.slow
@pytest.mark.parametrize("pattern_id", sorted(PATTERN_TOKENIZERS))
def test_every_code_point(pattern_id: str) -> None:
    name = PATTERN_TOKENIZERS[pattern_id]
    started = time.perf_counter()
    encoders = encoders_for(name)
    failures: dict[str, list[str]] = {}
    for context in CONTEXTS:
        for label, groups in sweep(name, context, encoders).items():
            if groups:
                failures[f"{label} in {context!r}"] = [" ".join(f"U+{c:04X}" for c in g[:8]) for g in groups[:20]]
    TALLY.note(
        f"sweep {pattern_id:7s} ({name}): {len(SCALARS):,} scalar values x {len(CONTEXTS)} contexts, "
        f"batches of {BATCH}, compared as {', '.join(f'{k} (every {v[1]})' for k, v in encoders.items())}: "
        f"{sum(len(v) for v in failures.values())} differing groups, {time.perf_counter() - started:.0f}s"
    )
    assert not failures, f"{name}: code points whose ids differ from tiktoken's: {failures}"
