"""Money as exact decimals: how amounts are computed and written.

Amounts are :class:`~decimal.Decimal` from end to end (genai-prices' rates are ``Decimal`` and token counts are
integers), so a cost is ``rate x tokens / per`` computed exactly; nothing is rounded except by the decimal context's
28 significant digits (``ROUND_HALF_EVEN``), which no real bill reaches (a rate has at most a few digits and a
count at most ten). Amounts are written as JSON strings holding the decimal in plain notation (no exponent), with
trailing zeros after the point removed: ``"0.0003125"``, ``"12.5"``, ``"0"``. Parse them with a decimal type,
never a binary float, to keep them exact.
"""

from __future__ import annotations

from decimal import Decimal

ROUNDING_RULE = (
    "Amounts are exact decimals written as JSON strings in plain notation (no exponent, trailing zeros removed, "
    "e.g. \"0.0003125\"): computed in Decimal as rate x tokens / per-unit with no rounding beyond Decimal's 28 "
    "significant digits (ROUND_HALF_EVEN), which no real amount reaches. Parse them as decimals, not floats."
)


def money(value: Decimal) -> str:
    """``value`` in plain decimal notation without exponent or trailing zeros (``Decimal("2.50E-7")`` ->
    ``"0.00000025"``); ``-0`` and every zero are ``"0"``. Raises ValueError for a NaN or infinity."""
    if not value.is_finite():
        raise ValueError(f"not a finite amount: {value}")
    if value.is_zero():
        return "0"
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text
