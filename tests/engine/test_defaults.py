"""app.engine.defaults: each library default comes from its variable, validated; unset gives the documented default."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine import defaults
from app.engine.registry import get_tokenizer


def test_unset_variables_give_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (defaults.ENGINE_ENV, defaults.DISABLE_ENV, defaults.CACHE_SIZE_ENV, defaults.WORD_CACHE_ENV,
                 defaults.STORE_ENV, defaults.OVERRIDE_ENV):
        monkeypatch.delenv(name, raising=False)
    assert defaults.engine() == ""
    assert not defaults.native_disabled()
    assert defaults.cache_size() == defaults.DEFAULT_CACHE_SIZE == 16_384
    assert defaults.unigram_word_cache() == 0
    assert defaults.store_dir() is None
    assert not defaults.store_override()


def test_each_variable_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(defaults.ENGINE_ENV, " Python ")
    monkeypatch.setenv(defaults.DISABLE_ENV, "1")
    monkeypatch.setenv(defaults.CACHE_SIZE_ENV, "12")
    monkeypatch.setenv(defaults.WORD_CACHE_ENV, "64")
    monkeypatch.setenv(defaults.STORE_ENV, str(tmp_path / "x" / ".." / "store"))
    monkeypatch.setenv(defaults.OVERRIDE_ENV, "Yes")
    assert defaults.engine() == "python"
    assert defaults.native_disabled()
    assert defaults.cache_size() == 12
    assert defaults.unigram_word_cache() == 64
    assert defaults.store_dir() == (tmp_path / "store").resolve()
    assert defaults.store_override()
    monkeypatch.setenv(defaults.DISABLE_ENV, "0")
    monkeypatch.setenv(defaults.OVERRIDE_ENV, "off")
    assert not defaults.native_disabled() and not defaults.store_override()


@pytest.mark.parametrize("name", [defaults.CACHE_SIZE_ENV, defaults.WORD_CACHE_ENV])
def test_counts_are_validated(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "-1")
    read = defaults.cache_size if name == defaults.CACHE_SIZE_ENV else defaults.unigram_word_cache
    with pytest.raises(ValueError, match=name):
        read()
    monkeypatch.setenv(name, "many")
    with pytest.raises(ValueError):
        read()


def test_an_explicit_argument_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(defaults.CACHE_SIZE_ENV, "-1")  # raises wherever it is read
    monkeypatch.setenv(defaults.WORD_CACHE_ENV, "-1")
    assert get_tokenizer("cl100k_base", cache_size=7, unigram_word_cache=0).cache_stats().max_size == 7
    xlmr = get_tokenizer("xlm-roberta", cache_size=5, unigram_word_cache=0)  # the service passes both down
    assert xlmr.encode("hello world") == get_tokenizer("xlm-roberta", backend="python", cache_size=5,
                                                      unigram_word_cache=0).encode("hello world")
    with pytest.raises(ValueError, match=defaults.WORD_CACHE_ENV):
        get_tokenizer("xlm-roberta", cache_size=6)  # left unset: the library's default, read from the environment
