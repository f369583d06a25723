"""When a model's price set can change: the price period around a timestamp.

genai-prices picks a model's prices by timestamp (``ModelInfo.get_prices``) from constraints of two kinds:
``StartDateConstraint`` (active from UTC midnight of ``start_date``) and ``TimeOfDateConstraint`` (active daily
from ``start_time`` to ``end_time``, UTC). Whether each constraint is active can change only at those instants, so
``get_prices(t, context)`` is the same for every ``t`` between two consecutive instants: :func:`price_period`
returns that interval, and a price set resolved once may be reused for any timestamp inside it
(:meth:`app.pricing.pricer.Pricer.prices_at`).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from genai_prices.types import ModelInfo, StartDateConstraint, TimeOfDateConstraint

#: Bounds of an unbounded period (a model whose prices never change by timestamp).
EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)


def _utc_time(value: time) -> time:
    """``value`` as a UTC time of day (naive means UTC), as genai-prices compares it."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return datetime.combine(date(1970, 1, 1), value).astimezone(UTC).timetz()


def _constraints(model: ModelInfo) -> list[StartDateConstraint | TimeOfDateConstraint]:
    out: list[StartDateConstraint | TimeOfDateConstraint] = []
    if isinstance(model.prices, list):
        out.extend(c.constraint for c in model.prices if c.constraint is not None)
    out.extend(v.constraint for v in model.price_variants or () if v.constraint is not None)
    return out


def change_instants(model: ModelInfo, around: datetime) -> list[datetime]:
    """Every instant near ``around`` (aware) at which one of the model's price constraints may switch: each start
    date's UTC midnight, and each time-of-day bound on the day before, the day of and the day after ``around``."""
    day = around.astimezone(UTC).date()
    out: list[datetime] = []
    for constraint in _constraints(model):
        if isinstance(constraint, StartDateConstraint):
            out.append(datetime.combine(constraint.start_date, time(0), UTC))
        else:
            for bound in (constraint.start_time, constraint.end_time):
                t = _utc_time(bound)
                out.extend(datetime.combine(day + timedelta(days=d), t) for d in (-1, 0, 1))
    return out


def price_period(model: ModelInfo, when: datetime) -> tuple[datetime, datetime]:
    """``[start, end)`` around ``when`` (aware, or naive = UTC) in which ``model.get_prices(t, context)`` gives the
    same answer for every ``t`` and every context: from the last change instant at or before ``when`` to the first
    one after it (:data:`EARLIEST` / :data:`LATEST` when there is none)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    instants = change_instants(model, when)
    start = max((t for t in instants if t <= when), default=EARLIEST)
    end = min((t for t in instants if t > when), default=LATEST)
    return start, end
