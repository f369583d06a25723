"""Differential fuzz harness for the engine: the compiled core against the pure-Python reference.

One input is raw bytes: byte 0 picks the operation, byte 1 the tokenizer, the rest is the payload.

* ``TEXT``: payload decoded as UTF-8 (invalid bytes -> U+FFFD): ``encode``, ``count``, ``encode_with_offsets`` and
  the pre-tokenizer's pieces agree between backends; decode round-trips; offsets tile the text.
* ``SURROGATES``: payload decoded as UTF-16-LE with ``surrogatepass`` (lone surrogates, astral pairs): both
  backends give the same ids (lone surrogates count as U+FFFD).
* ``BPE``: payload as one raw byte string through the core's BPE and the reference's ``byte_pair_encode``.
* ``DECODE``: payload as little-endian signed 32-bit ids (some pushed past the vocabulary): both backends decode
  to the same bytes, or both raise ``InvalidTokenIdError`` for the same position.

:func:`check` raises ``AssertionError`` on any disagreement (a crash or sanitizer report aborts the process).
Run with atheris (coverage-guided on the Python side; the C core is driven but not coverage-instrumented, since
gcc has no libFuzzer instrumentation)::

    python fuzz/fuzz_engine.py -max_total_time=60 -max_len=4096 fuzz/corpus
    bash fuzz/build_asan.sh          # the same under AddressSanitizer + UndefinedBehaviorSanitizer
"""

from __future__ import annotations

import struct
import sys
from functools import cache
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

TEXT, SURROGATES, BPE, DECODE = range(4)
NAMES = ("gpt2", "cl100k_base", "o200k_base", "o200k_harmony", "llama3")


@cache
def _pair(name: str) -> tuple[Any, Any]:
    from app.engine import get_tokenizer

    return get_tokenizer(name, backend="native"), get_tokenizer(name, backend="python")


def _same_decode(nat: Any, ref: Any, ids: list[int]) -> None:
    from app.engine.errors import InvalidTokenIdError

    outcomes = []
    for enc in (nat, ref):
        try:
            outcomes.append(("ok", enc.decode_bytes(ids)))
        except InvalidTokenIdError as exc:
            outcomes.append(("bad", (exc.index, exc.token_id)))
    assert outcomes[0] == outcomes[1], (ids[:20], outcomes)


def _offsets(enc: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    ids, spans = enc.encode_with_offsets(text)
    return list(ids), [(int(a), int(b)) for a, b in spans]


def check(data: bytes) -> None:
    """Run one fuzz input (see the module docstring); raises AssertionError on a disagreement."""
    if len(data) < 2:
        return
    op, name, payload = data[0] % 4, NAMES[data[1] % len(NAMES)], data[2:]
    nat, ref = _pair(name)
    if op == TEXT or op == SURROGATES:
        if op == TEXT:
            text = payload.decode("utf-8", "replace")
        else:
            text = payload[: len(payload) // 2 * 2].decode("utf-16-le", "surrogatepass")
        ids = nat.encode(text)
        assert ids == ref.encode(text), text
        assert nat.count(text) == len(ids) == ref.count(text)
        clean = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
        assert nat.decode(ids) == clean
        n_ids, spans = _offsets(nat, text)
        assert (n_ids, spans) == _offsets(ref, text), text
        assert n_ids == ids
        starts = [a for a, _ in spans]
        assert starts == sorted(starts) and all(0 <= a <= b <= len(text) for a, b in spans)
    elif op == BPE:
        from app.engine.bpe import byte_pair_encode

        piece = bytes(payload[:512])
        if piece and nat._native is not None:
            assert nat._native.bpe(piece) == byte_pair_encode(piece, ref._ranks), piece
    else:
        count = len(payload) // 4
        raw = struct.unpack(f"<{count}i", payload[: count * 4])
        ids = [v % (nat.n_vocab + 16) if i % 7 else v for i, v in enumerate(raw)]
        _same_decode(nat, ref, ids)


def main() -> None:
    """atheris entry point (arguments: libFuzzer's, from ``sys.argv``)."""
    import atheris

    if "app.engine" in sys.modules:  # already imported (run_sanitized.py): instrument what is loaded
        atheris.instrument_all()
    else:
        with atheris.instrument_imports(include=["app"]):
            import app.engine  # noqa: F401
            import app.engine.bpe  # noqa: F401
            import app.engine.pretokenize  # noqa: F401
    for name in NAMES:
        _pair(name)
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
