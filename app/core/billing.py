"""Billing fields of the ``model`` block: output reserved and priced at worst case, totals, cached-input prices."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any

from app.core.model_table import ModelInfo


def add_billing(usage: MutableMapping[str, Any], info: ModelInfo, counts: Sequence[int],
                max_output_tokens: int | None) -> None:
    """Extend a ``model`` block in place.

    ``output_tokens_reserved`` is ``max_output_tokens`` or the model's maximum (None if both are unknown); ``fits``
    (and ``fits_each``) then mean prompt + reserved output <= context window; the output cost is per text (each text
    is one request), the worst case.
    """
    reserved = max_output_tokens if max_output_tokens is not None else info.max_output_tokens
    window = info.context_window
    if window is not None:
        each = [c + (reserved or 0) <= window for c in counts]
        usage["fits"] = all(each)
        if "fits_each" in usage:
            usage["fits_each"] = each
    n_requests = len(counts)
    output_cost = info.output_cost(reserved * n_requests) if reserved is not None else None
    input_cost = usage.get("estimated_input_cost")
    cached = info.cached_input_per_million
    usage.update(
        output_tokens_reserved=reserved,
        estimated_output_cost=output_cost,
        estimated_total_cost=input_cost + output_cost if input_cost is not None and output_cost is not None else None,
        cached_input_price_per_million=cached,
        estimated_cached_input_cost=sum(counts) * cached / 1_000_000 if cached is not None else None,
    )
