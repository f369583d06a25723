"""The engine's public surface: ``app.engine.__all__`` is pinned, importable, documented and typed (py.typed)."""

from __future__ import annotations

import tomllib

import pytest

import app
import app.engine
from tests.conftest import REPO_ROOT

#: Changing this set changes the library's contract: do it on purpose (and say so in docs/library.md).
PUBLIC = {
    "get_tokenizer", "list_tokenizers", "get_store", "load_tokenizer", "LoadOptions", "Store", "TokenizerSpec",
    "Tokenizer", "RankBPETokenizer", "Special", "Template", "CacheStats", "Sample",
    "EngineError", "UnknownTokenizerError", "UnknownSpecialTokenError", "InvalidTokenIdError", "ArtifactError",
    "ManifestError", "SamplingError",
}  # fmt: skip


def test_all_is_pinned() -> None:
    assert set(app.engine.__all__) == PUBLIC
    assert len(app.engine.__all__) == len(PUBLIC)  # no duplicates


def test_star_import_gives_exactly_the_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from app.engine import *", namespace)
    assert {k for k in namespace if k != "__builtins__"} == PUBLIC


def test_every_public_name_is_documented() -> None:
    for name in PUBLIC:
        obj = getattr(app.engine, name)
        assert (getattr(obj, "__doc__", None) or "").strip(), f"app.engine.{name} has no docstring"
        module = getattr(obj, "__module__", "")
        assert module.startswith("app.engine"), f"app.engine.{name} comes from {module}"


def test_errors_share_one_base() -> None:
    for name in PUBLIC:
        obj = getattr(app.engine, name)
        if isinstance(obj, type) and name.endswith("Error") and name != "EngineError":
            assert issubclass(obj, app.engine.EngineError), name


def test_py_typed_marker_is_shipped() -> None:
    marker = REPO_ROOT / "app" / "py.typed"
    assert marker.is_file() and marker.parent == __import__("pathlib").Path(app.__file__).parent
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["app"]


def test_the_old_names_warn_and_give_the_new_objects() -> None:
    """The names replaced by the renaming (issue 25) still resolve, to the same objects, with a DeprecationWarning
    on every use; they are not part of ``__all__``."""
    assert app.engine.DEPRECATED == {
        "get_encoding": "get_tokenizer",  # old name kept
        "list_encodings": "list_tokenizers",  # old name kept
        "Encoding": "RankBPETokenizer",  # old name kept
    }
    for old, new in app.engine.DEPRECATED.items():
        assert old not in app.engine.__all__ and new in app.engine.__all__
        for _ in range(2):  # not cached: the second use warns too
            with pytest.warns(DeprecationWarning, match=f"app.engine.{old} is deprecated; use app.engine.{new}"):
                assert getattr(app.engine, old) is getattr(app.engine, new)
    with pytest.warns(DeprecationWarning):
        from app.engine import get_encoding  # old name kept
    assert get_encoding("cl100k_base") is app.engine.get_tokenizer("cl100k_base")  # old name kept
    with pytest.raises(AttributeError):
        app.engine.get_encodings  # noqa: B018 -- not a name at all
