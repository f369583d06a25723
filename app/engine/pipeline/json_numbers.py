"""JSON numbers read the way Hugging Face ``tokenizers`` reads them.

``tokenizers`` parses ``tokenizer.json`` with Rust's ``serde_json`` in its default configuration, which is not
correctly rounded: the decimal significand is gathered into a 64-bit integer (digits that do not fit are dropped;
dropped integer digits raise the exponent), converted to a double, then multiplied or divided by the double nearest
``10**|exponent|``. About one score in eight of a typical Unigram vocabulary comes out one unit in the last place
away from Python's ``float()``, enough to break exact score ties the other way. :func:`serde_f64` reproduces that
arithmetic; pass it as ``json.loads(..., parse_float=serde_f64)``. :func:`f32` rounds to float32, as SentencePiece
keeps its scores.
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Sequence

_U64_MAX = (1 << 64) - 1
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_POW10 = [float(f"1e{k}") for k in range(309)]
_F32 = struct.Struct("<f")


def f32(x: float) -> float:
    """``x`` rounded to the nearest 32-bit float (the exact result of a float32 addition of two float32s)."""
    return _F32.unpack(_F32.pack(x))[0]  # type: ignore[no-any-return]


def f32_list(values: Sequence[float]) -> list[float]:
    """``[f32(x) for x in values]`` in one conversion: the same roundings (both are C's ``(float)`` cast), and the
    same ``OverflowError`` for a finite value beyond float32's range (the cast would give an infinity)."""
    out: list[float] = array("f", values).tolist()
    if math.inf in out or -math.inf in out:
        return [f32(x) for x in values]
    return out


def serde_f64(literal: str) -> float:
    """The double ``serde_json`` (without ``float_roundtrip``) parses from the JSON number ``literal``. Raises
    ``ValueError`` where it refuses the number (out of range)."""
    positive = not literal.startswith("-")
    body = literal if positive else literal[1:]
    mantissa, _, exp_text = body.replace("E", "e").partition("e")
    int_digits, _, frac_digits = mantissa.partition(".")
    if len(int_digits) + len(frac_digits) <= 19:  # always fits in 64 bits: no digit dropped
        significand = int(int_digits + frac_digits)
        exponent = -len(frac_digits)
    else:
        significand, exponent = _gather(int_digits, frac_digits)
    if exp_text:
        exp_positive = not exp_text.startswith("-")
        exp = int(exp_text.lstrip("+-"))
        if exp > _I32_MAX:  # the exponent itself overflows: zero, or refused if the number would be huge
            if significand != 0 and exp_positive:
                raise ValueError(f"number out of range: {literal}")
            return 0.0 if positive else -0.0
        exponent = max(_I32_MIN, min(_I32_MAX, exponent + exp if exp_positive else exponent - exp))
    value = _from_parts(significand, exponent, literal)
    return value if positive else -value


def _gather(int_digits: str, frac_digits: str) -> tuple[int, int]:
    """Significand and decimal exponent of a long literal: integer digits that overflow 64 bits are dropped and
    counted in the exponent; fraction digits are taken while they fit, the rest ignored."""
    significand = exponent = 0
    overflowed = False
    for ch in int_digits:
        grown = significand * 10 + ord(ch) - 48
        if overflowed or grown > _U64_MAX:
            overflowed = True
            exponent += 1
        else:
            significand = grown
    for ch in frac_digits:
        grown = significand * 10 + ord(ch) - 48
        if grown > _U64_MAX:
            break
        significand = grown
        exponent -= 1
    return significand, exponent


def _from_parts(significand: int, exponent: int, literal: str) -> float:
    value = float(significand)
    while True:
        if abs(exponent) < len(_POW10):
            if exponent >= 0:
                value *= _POW10[exponent]
                if value == float("inf"):
                    raise ValueError(f"number out of range: {literal}")
            else:
                value /= _POW10[-exponent]
            return value
        if value == 0.0:
            return value
        if exponent >= 0:
            raise ValueError(f"number out of range: {literal}")
        value /= 1e308
        exponent += 308
