"""The reference side of the exactness suite: tiktoken 0.14 encodings built locally from OUR artifact files.

Nothing here touches the network: ranks come from the bundled ``.tiktoken`` files through tiktoken's own parser
(``tiktoken.load.load_tiktoken_bpe``, with its download cache disabled and the manifest's sha256 as the expected
hash); pattern strings and special-token tables come from tiktoken's own constructor functions in
``tiktoken_ext.openai_public``, called with the loader replaced by a stub so they never download anything; Llama 3
uses Meta's pattern and special-token list (``llama_models/llama3/tokenizer.py``).
``tiktoken.get_encoding`` is never called.

:class:`Tally` counts every string compared per tokenizer and every mismatch; the suite's terminal summary
prints it (see ``conftest.py``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from unittest import mock

import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

from app.engine import Encoding, get_encoding, get_store
from app.engine import native as native_module

#: Every bundled tokenizer, and the pattern family it uses.
TOKENIZERS: tuple[str, ...] = ("gpt2", "cl100k_base", "o200k_base", "o200k_harmony", "llama3")
#: One tokenizer per distinct pattern (o200k_harmony shares o200k_base's pattern and ranks).
PATTERN_TOKENIZERS: dict[str, str] = {
    "gpt2": "gpt2",
    "cl100k": "cl100k_base",
    "o200k": "o200k_base",
    "llama3": "llama3",
}

#: Meta's Llama 3 pre-tokenizer (``Tokenizer.pat_str`` in llama_models/llama3/tokenizer.py).
META_LLAMA3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"""
    r"""\s+(?!\S)|\s+"""
)

#: Meta's Llama 3.1 special tokens, in id order from 128000 (256 of them).
_LLAMA3_NAMED = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|step_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
]
META_LLAMA3_SPECIALS: dict[str, int] = {
    name: 128000 + i
    for i, name in enumerate(
        _LLAMA3_NAMED + [f"<|reserved_special_token_{2 + k}|>" for k in range(256 - len(_LLAMA3_NAMED))]
    )
}


@dataclass(frozen=True)
class ReferenceSpec:
    """What tiktoken (or Meta) defines for one encoding: its pattern string and special-token table."""

    pat_str: str
    special_tokens: dict[str, int]


def _openai_constructor(name: str) -> dict[str, Any]:
    """Call tiktoken's own constructor for ``name`` with every loader stubbed out (no file, no network)."""
    constructor = openai_public.ENCODING_CONSTRUCTORS[name]
    with (
        mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *a, **k: {}),
        mock.patch.object(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: {}),
    ):
        return constructor()


@cache
def reference_spec(name: str) -> ReferenceSpec:
    """The reference pattern and special tokens of one of :data:`TOKENIZERS`."""
    if name == "llama3":
        return ReferenceSpec(META_LLAMA3_PATTERN, dict(META_LLAMA3_SPECIALS))
    params = _openai_constructor(name)
    return ReferenceSpec(params["pat_str"], dict(params["special_tokens"]))


@contextmanager
def _no_tiktoken_cache() -> Iterator[None]:
    """Disable tiktoken's file cache (``TIKTOKEN_CACHE_DIR=""``) so it reads exactly the path it is given."""
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""
    try:
        yield
    finally:
        if old is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


@cache
def reference_ranks(artifact: str, sha256: str) -> dict[bytes, int]:
    """Ranks of a bundled artifact parsed by tiktoken's own loader (hash-checked by tiktoken)."""
    path = get_store().directory / artifact
    with _no_tiktoken_cache():
        return tiktoken.load.load_tiktoken_bpe(str(path), expected_hash=sha256)


@cache
def reference_encoding(name: str) -> tiktoken.Encoding:
    """A ``tiktoken.Encoding`` for ``name`` built from our artifact and the reference pattern/special tokens."""
    spec = get_store().spec(name)
    ref = reference_spec(name)
    ranks = reference_ranks(spec.artifact_path.name, spec.sha256)
    return tiktoken.Encoding(
        f"reference-{name}", pat_str=ref.pat_str, mergeable_ranks=ranks, special_tokens=ref.special_tokens
    )


#: Our two engines: the compiled core and the pure-Python reference engine. Both must equal tiktoken.
BACKENDS: tuple[str, ...] = ("native", "python")


def native_available() -> bool:
    """True if the compiled core imported (else the ``native`` cases skip, naming the import error)."""
    return native_module.available()


def ours(name: str, backend: str = "python") -> Encoding:
    """Our engine's encoding of ``name`` on ``backend`` (``"native"`` or ``"python"``).

    Raises ``RuntimeError`` if the native backend was asked for but the engine fell back to Python.
    """
    enc = get_encoding(name, backend=backend)
    if enc.backend != backend:
        raise RuntimeError(f"asked for the {backend} backend of {name}, got {enc.backend}")
    return enc


@dataclass
class Tally:
    """Strings compared and mismatches found, per tokenizer (thread-safe; process-wide in :data:`TALLY`)."""

    compared: dict[str, int] = field(default_factory=dict)
    mismatched: dict[str, int] = field(default_factory=dict)
    by_source: dict[tuple[str, str], int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, tokenizer: str, source: str, compared: int, mismatched: int) -> None:
        """Record ``compared`` strings (``mismatched`` of them wrong) for ``tokenizer`` from test ``source``."""
        with self._lock:
            self.compared[tokenizer] = self.compared.get(tokenizer, 0) + compared
            self.mismatched[tokenizer] = self.mismatched.get(tokenizer, 0) + mismatched
            key = (tokenizer, source)
            self.by_source[key] = self.by_source.get(key, 0) + compared

    def note(self, line: str) -> None:
        """Add a free-form line to the summary (e.g. how many code points a sweep covered)."""
        with self._lock:
            self.notes.append(line)


TALLY = Tally()


@dataclass(frozen=True)
class Mismatch:
    """One string on which our ids differ from the reference's."""

    text: str
    ours: list[int]
    reference: list[int]

    def describe(self, limit: int = 160) -> str:
        """A short human-readable account: the text and the first differing position."""
        first = next(
            (i for i, (a, b) in enumerate(zip(self.ours, self.reference, strict=False)) if a != b),
            min(len(self.ours), len(self.reference)),
        )
        return (
            f"text={self.text[:limit]!r}{'…' if len(self.text) > limit else ''} (len {len(self.text)}): "
            f"first difference at token {first}: ours {self.ours[first : first + 4]} "
            f"vs reference {self.reference[first : first + 4]} (lengths {len(self.ours)} / {len(self.reference)})"
        )


def compare(
    name: str,
    texts: Iterable[str],
    *,
    source: str,
    backend: str = "python",
    encode: Callable[[str], list[int]] | None = None,
) -> list[Mismatch]:
    """Encode every text with our engine (``encode``, default ``Encoding.encode`` of ``backend``) and with
    tiktoken's ``encode_ordinary``; record the counts in :data:`TALLY` (under ``name/backend``) and return the
    mismatches."""
    enc = ours(name, backend)
    ref = reference_encoding(name)
    ours_encode = encode or enc.encode
    n = 0
    bad: list[Mismatch] = []
    for text in texts:
        n += 1
        got = ours_encode(text)
        want = ref.encode_ordinary(text)
        if got != want:
            bad.append(Mismatch(text, got, want))
    TALLY.add(f"{name}/{backend}", source, n, len(bad))
    return bad


def assert_same(name: str, texts: Iterable[str], *, source: str, backend: str = "python", show: int = 5) -> int:
    """:func:`compare`, then fail listing up to ``show`` mismatches. Returns the number of strings compared."""
    texts = list(texts)
    bad = compare(name, texts, source=source, backend=backend)
    if bad:
        lines = "\n".join(m.describe() for m in bad[:show])
        raise AssertionError(
            f"{name} ({backend} backend): {len(bad)} of {len(texts)} strings differ from tiktoken:\n{lines}"
        )
    return len(texts)


def chunked(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of ``items`` of at most ``size`` elements."""
    for i in range(0, len(items), size):
        yield items[i : i + size]
