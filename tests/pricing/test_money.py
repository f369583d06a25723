"""Exact money strings (app.pricing.money)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.pricing.money import ROUNDING_RULE, money


@pytest.mark.parametrize("value,text", [
    (Decimal("0.16385"), "0.16385"),
    (Decimal("2.50E-7"), "0.00000025"),
    (Decimal("1E+3"), "1000"),
    (Decimal("12.500"), "12.5"),
    (Decimal("0E-10"), "0"),
    (Decimal("-0"), "0"),
    (Decimal(3) * Decimal("2.5") / Decimal(1_000_000), "0.0000075"),
])
def test_plain_notation_without_trailing_zeros(value: Decimal, text: str) -> None:
    assert money(value) == text
    assert Decimal(text) == value  # nothing is lost


def test_binary_float_noise_never_appears() -> None:
    # the float sum that motivated the change: 0.16385000000000002
    exact = Decimal("124") * Decimal("2.5") / Decimal(1_000_000) + Decimal("16384") * Decimal("10") / Decimal(1_000_000)
    assert money(exact) == "0.16415"
    assert repr(124 * 2.5 / 1e6 + 16384 * 10.0 / 1e6) != "0.16415"  # what a binary float would have written


def test_rejects_non_finite() -> None:
    with pytest.raises(ValueError):
        money(Decimal("NaN"))
    with pytest.raises(ValueError):
        money(Decimal("Infinity"))
    assert "ROUND_HALF_EVEN" in ROUNDING_RULE and "string" in ROUNDING_RULE
