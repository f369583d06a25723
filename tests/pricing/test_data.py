"""The price data in force (app.pricing.data): bundled provenance, an operator's file, and no network."""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from genai_prices import Usage

from app.pricing.data import PriceDataError, bundled, from_file, load_price_data
from app.pricing.pricer import Pricer

ACME = [{
    "id": "acme", "name": "Acme AI", "api_pattern": "https://api\\.acme\\.example",
    "model_match": {"starts_with": "acme-"},
    "models": [{
        "id": "acme-1", "match": {"equals": "acme-1"}, "context_window": 64000,
        "prices": [
            {"prices": {"input_mtok": "3", "output_mtok": "9"}},
            {"constraint": {"start_date": "2026-06-01"}, "prices": {
                "input_mtok": {"base": "1.5", "tiers": [{"start": 100000, "price": "2.5"}]},
                "cache_read_mtok": "0.15", "output_mtok": "6"}},
        ],
    }],
}]


@pytest.fixture
def restore_bundled() -> Iterator[None]:
    yield
    bundled()  # every test leaves genai-prices on its bundled snapshot


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data))
    return path


def test_bundled_provenance() -> None:
    data = bundled()
    prov = data.provenance
    assert prov.source == "bundled" and prov.package_version == genai_prices.__version__ == "0.2.3"
    assert prov.version == "genai-prices 0.2.3 (bundled)"
    data_py = Path(genai_prices.__file__).with_name("data.py")
    assert prov.sha256 == hashlib.sha256(data_py.read_bytes()).hexdigest()
    assert prov.providers == 47 and prov.models == 2330 and prov.latest_price_change is not None
    assert prov.as_dict()["version"] == prov.version


def test_operator_file_is_validated_installed_and_reported(tmp_path: Path, restore_bundled: None) -> None:
    path = _write(tmp_path, ACME)
    data = load_price_data(path)
    prov = data.provenance
    assert prov.source == "file" and prov.path == str(path) and prov.models == 1
    assert prov.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert prov.version == f"file sha256:{prov.sha256[:12]}" and prov.date is not None
    assert prov.latest_price_change == "2026-06-01"
    # installed for genai-prices too: its calc_price now sees the file's prices
    usage = Usage(input_tokens=200_000, cache_read_tokens=0, output_tokens=1000)
    theirs = genai_prices.calc_price(usage, "acme-1")
    pricer = Pricer(data)
    provider, model = pricer.resolve("acme-1")
    ours = pricer.quote(provider, model, usage)
    assert ours.total == theirs.total_price == Decimal("0.506")  # 200k x 2.5 (tier) + 1000 x 6
    old = pricer.quote(provider, model, usage, timestamp=__import__("datetime").datetime(2026, 5, 31))
    assert old.total == Decimal("0.609")  # before the price change: 200k x 3 + 1000 x 9


@pytest.mark.parametrize("content,match", [
    ("not json", "cannot read"),
    ("{}", "non-empty JSON list"),
    ("[]", "non-empty JSON list"),
    (json.dumps([{"id": "x"}]), "not genai-prices data"),
    (json.dumps([{**ACME[0], "models": [{**ACME[0]["models"][0], "prices": {"input_mtok": "-1"}}]}]), "acme-1"),
])
def test_bad_files_name_the_file(tmp_path: Path, content: str, match: str, restore_bundled: None) -> None:
    path = tmp_path / "data.json"
    path.write_text(content)
    with pytest.raises(PriceDataError, match=match) as info:
        from_file(path)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PriceDataError, match="cannot read"):
        from_file(tmp_path / "nope.json")


def test_no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, restore_bundled: None) -> None:
    """Loading, looking up, extracting and pricing open no socket (genai-prices fetches only from UpdatePrices,
    which nothing here starts)."""
    opened: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        opened.append(args)
        raise OSError("network refused in this test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    for data in (bundled(), from_file(_write(tmp_path, ACME)), bundled()):
        pricer = Pricer(data)
        provider, model = pricer.resolve("acme-1" if data.provenance.source == "file" else "gpt-4o")
        pricer.quote(provider, model, Usage(input_tokens=10, output_tokens=1))
    pricer.extract({"model": "gpt-4o", "usage": {"prompt_tokens": 3, "completion_tokens": 1}}, "openai")
    assert opened == []
    from genai_prices import update_prices

    assert not any(t.name == "genai_prices:update" for t in __import__("threading").enumerate())
    assert update_prices.DEFAULT_UPDATE_URL.startswith("https://")  # the only fetch path, never started here
