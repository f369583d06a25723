"""Settings from TOKENIZER_* variables (app.core.config) and the model table (app.core.model_table)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.api.deps import ServiceState
from app.core.config import Settings, SettingsError, settings_table
from app.core.model_table import ModelTable, ModelTableError
from app.engine.store import bundled_store_dir


def test_defaults_and_env() -> None:
    s = Settings.from_env({})
    assert s == Settings()
    assert (s.port, s.workers, s.max_body_bytes, s.auth_token, s.access_log) == (8000, 1, 16 * 2**20, None, True)
    s = Settings.from_env({"TOKENIZER_PORT": "9000", "TOKENIZER_MAX_BODY_BYTES": "1_000", "TOKENIZER_ACCESS_LOG": "off",
                           "TOKENIZER_STORE": "~/x", "TOKENIZER_AUTH_TOKEN": "abc", "TOKENIZER_GRACEFUL_TIMEOUT": "2.5",
                           "TOKENIZER_WORKERS": "", "OTHER": "1"})
    assert (s.port, s.max_body_bytes, s.access_log, s.auth_token, s.graceful_timeout) == (9000, 1000, False, "abc", 2.5)
    assert s.store == Path("~/x").expanduser() and s.workers == 1
    assert Settings.from_env({"TOKENIZER_PORT": "9000"}, port=9001).port == 9001


@pytest.mark.parametrize("env", [{"TOKENIZER_PORT": "eighty"}, {"TOKENIZER_WORKERS": "0"},
                                 {"TOKENIZER_ACCESS_LOG": "maybe"}, {"TOKENIZER_MAX_BATCH_SIZE": "-1"},
                                 {"TOKENIZER_LOG_LEVEL": "loud"}, {"TOKENIZER_GRACEFUL_TIMEOUT": "soon"},
                                 {"TOKENIZER_ENGINE": "rust"}])
def test_bad_values_name_the_variable(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError, match=next(iter(env))):
        Settings.from_env(env)


def test_env_round_trip() -> None:
    s = Settings(port=1234, auth_token="x", access_log=False, uds=Path("/tmp/s.sock"))
    assert Settings.from_env(s.env()) == s


def test_settings_table_documents_every_setting() -> None:
    table = settings_table()
    for name in Settings.__dataclass_fields__:
        assert f"`TOKENIZER_{name.upper()}`" in table
    assert (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text().count(table) == 1


def test_bundled_model_table() -> None:
    table = ModelTable.load(bundled_store_dir() / "models.json")
    for model, tokenizer in {"gpt-4o": "o200k_base", "gpt-4.1": "o200k_base", "gpt-4": "cl100k_base",
                             "gpt-3.5-turbo": "cl100k_base", "llama-3.1-8b-instruct": "llama3",
                             "gpt-oss-20b": "o200k_harmony"}.items():
        info = table.get(model)
        assert info is not None and info.tokenizer == tokenizer and info.context_window
    assert table.get("chatgpt-4o-latest") == table.get("gpt-4o")


def _write(tmp_path: Path, models: object) -> Path:
    p = tmp_path / "models.json"
    p.write_text(json.dumps({"format_version": 1, "models": models}))
    return p


@pytest.mark.parametrize("models,match", [
    ({"m": {}}, "tokenizer"),
    ({"m": {"tokenizer": "gpt2", "context_window": -1}}, "context_window"),
    ({"m": {"tokenizer": "gpt2", "price": {"input_per_million": 1}}}, "genai-prices"),  # hand-typed prices refused
    ({"m": {"tokenizer": "gpt2", "pricing": {"model": "x"}}}, "pricing"),
    ({"m": {"tokenizer": "gpt2", "pricing": {"provider": ""}}}, "pricing"),
    ({"m": {"tokenizer": "gpt2"}, "n": {"tokenizer": "gpt2", "aliases": ["m"]}}, "twice"),
    ([], "models"),
])
def test_bad_model_tables_name_file_and_entry(tmp_path: Path, models: object, match: str) -> None:
    with pytest.raises(ModelTableError, match=match) as info:
        ModelTable.load(_write(tmp_path, models))
    assert str(tmp_path) in str(info.value)


def test_model_table_with_unknown_tokenizer_stops_start_up(tmp_path: Path) -> None:
    path = _write(tmp_path, {"m": {"tokenizer": "nope"}})
    with pytest.raises(ModelTableError, match="'nope'"):
        ServiceState.load(Settings(models_file=path))


def test_model_table_keeps_no_prices() -> None:
    """Prices come from genai-prices: the table names only whose price applies to an open-weight model."""
    raw = json.loads((bundled_store_dir() / "models.json").read_text())
    assert all("price" not in entry for entry in raw["models"].values())
    table = ModelTable.load(bundled_store_dir() / "models.json")
    llama = table.get("llama-3.1-8b-instruct")
    assert llama is not None and llama.pricing_provider == "together"
    assert llama.pricing_model == "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
    gpt = table.get("gpt-4o")
    assert gpt is not None and gpt.pricing_provider is None  # priced under its own name
