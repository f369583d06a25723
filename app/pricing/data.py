"""The price data in force: genai-prices' bundled snapshot, or an operator's newer genai-prices data file.

Prices come from ``genai-prices`` (pinned in pyproject.toml). Nothing here reaches the network: genai-prices only
fetches when its ``UpdatePrices`` task is started, which this service never does; a newer snapshot enters only as a
local file (``TOKENIZER_PRICE_DATA_FILE``, the JSON of genai-prices' ``prices/data.json``: a list of providers).
:func:`load_price_data` reads and validates that file (every model's current prices must compute), installs it
with ``genai_prices.data_snapshot.set_custom_snapshot`` so ``genai_prices.calc_price`` agrees with this service, and
records its provenance: the package version or the file's sha256, and a date.

The file is parsed the way genai-prices parses a fetched snapshot (``genai_prices/types.py``,
``_providers_from_raw``: each ``prices`` value becomes a ``ModelPrice``, then pydantic validates the providers).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import genai_prices
import pydantic
from genai_prices import Usage, data_snapshot
from genai_prices.types import ConditionalPrice, ModelPrice, Provider, StartDateConstraint, TieredPrices

PACKAGE = "genai-prices"


class PriceDataError(ValueError):
    """A price data file that cannot be read or does not validate; the message names the file and the fault."""


@dataclass(frozen=True)
class Provenance:
    """Which price data is in force.

    ``source`` is ``"bundled"`` (the snapshot inside the genai-prices wheel) or ``"file"``; ``sha256`` is the hex
    digest of the data file (for the bundled snapshot, of the package's ``data.py``); ``date`` is the file's
    modification date (UTC) for a file, else None (the wheel carries no date); ``latest_price_change`` is the latest
    start date of a dated price in the data.
    """

    source: str
    package_version: str
    path: str | None
    sha256: str
    date: str | None
    latest_price_change: str | None
    providers: int
    models: int

    @property
    def version(self) -> str:
        """A short label: ``genai-prices 0.2.3 (bundled)`` or ``file sha256:<first 12 hex>``."""
        if self.source == "bundled":
            return f"{PACKAGE} {self.package_version} (bundled)"
        return f"file sha256:{self.sha256[:12]}"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``/models``, ``/price``)."""
        return {"version": self.version, "source": self.source, "package": PACKAGE,
                "package_version": self.package_version, "path": self.path, "sha256": self.sha256,
                "date": self.date, "latest_price_change": self.latest_price_change,
                "providers": self.providers, "models": self.models}


@dataclass(frozen=True)
class PriceData:
    """A loaded snapshot and its provenance."""

    snapshot: data_snapshot.DataSnapshot
    provenance: Provenance

    @property
    def providers(self) -> list[Provider]:
        return self.snapshot.providers


_MODEL_PRICE_FIELDS = pydantic.TypeAdapter(dict[str, Decimal | TieredPrices | None])
_PROVIDERS = pydantic.TypeAdapter(list[Provider], config=pydantic.ConfigDict(defer_build=True,
                                                                             arbitrary_types_allowed=True))


def _normalize(value: Any) -> Any:
    """Every ``prices`` mapping of the raw data -> ``ModelPrice`` (lists of conditional prices recursed)."""
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, raw in value.items():
        if key == "prices" and isinstance(raw, dict):
            out[key] = ModelPrice(**_MODEL_PRICE_FIELDS.validate_python(raw))
        else:
            out[key] = _normalize(raw)
    return out


def _latest_change(providers: list[Provider], today: date) -> str | None:
    dates = [c.constraint.start_date for p in providers for m in p.models if isinstance(m.prices, list)
             for c in m.prices if isinstance(c, ConditionalPrice) and isinstance(c.constraint, StartDateConstraint)
             and c.constraint.start_date <= today]
    return max(dates).isoformat() if dates else None


def _check_computes(providers: list[Provider], where: str) -> None:
    """Every model's current standard prices must compute for a small usage (a broken price is caught here)."""
    now = datetime.now(tz=UTC)
    usage = Usage(input_tokens=1, output_tokens=1)
    for provider in providers:
        for model in provider.models:
            try:
                model.calc_price(usage, provider, genai_request_timestamp=now)
            except (ValueError, TypeError, ArithmeticError) as exc:
                raise PriceDataError(f"{where}: provider {provider.id!r} model {model.id!r}: {exc}") from None


def _count_models(providers: list[Provider]) -> int:
    return sum(len(p.models) for p in providers)


def bundled() -> PriceData:
    """genai-prices' own snapshot, installed as the one in force (undoing a custom one)."""
    data_snapshot.set_custom_snapshot(None)
    snapshot = data_snapshot.get_snapshot()
    data_py = Path(genai_prices.__file__).with_name("data.py")
    digest = hashlib.sha256(data_py.read_bytes()).hexdigest()
    prov = Provenance("bundled", package_version(PACKAGE), None, digest, None,
                      _latest_change(snapshot.providers, datetime.now(tz=UTC).date()),
                      len(snapshot.providers), _count_models(snapshot.providers))
    return PriceData(snapshot, prov)


def from_file(path: Path) -> PriceData:
    """Read, validate and install a genai-prices data file. Raises :class:`PriceDataError` naming the file."""
    try:
        raw_bytes = Path(path).read_bytes()
        raw = json.loads(raw_bytes)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PriceDataError(f"{path}: cannot read price data: {exc}") from None
    if not isinstance(raw, list) or not raw:
        raise PriceDataError(f"{path}: expected a non-empty JSON list of providers (genai-prices data.json)")
    try:
        providers = _PROVIDERS.validate_python(_normalize(raw))
    except (pydantic.ValidationError, ValueError, TypeError) as exc:
        first = str(exc).splitlines()
        raise PriceDataError(f"{path}: not genai-prices data: {' '.join(first[:3])}") from None
    _check_computes(providers, str(path))
    snapshot = data_snapshot.DataSnapshot(providers=providers, from_auto_update=False)
    mtime = datetime.fromtimestamp(Path(path).stat().st_mtime, tz=UTC).date().isoformat()
    prov = Provenance("file", package_version(PACKAGE), str(path), hashlib.sha256(raw_bytes).hexdigest(), mtime,
                      _latest_change(providers, datetime.now(tz=UTC).date()), len(providers),
                      _count_models(providers))
    data_snapshot.set_custom_snapshot(snapshot)
    return PriceData(snapshot, prov)


def load_price_data(path: Path | None) -> PriceData:
    """The data file at ``path`` if given (validated; :class:`PriceDataError` otherwise), else the bundled one."""
    return from_file(path) if path is not None else bundled()
