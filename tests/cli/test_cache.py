"""``python -m app cache build|verify``: fills the compiled artifact cache of the configured store, verifies it
without changing it, and reports problems as one line (exit 2) or a failed verification (exit 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.engine import artifact_cache as ac
from app.engine import registry

from .test_cli_errors import one_line_error, run

NAMES = "gpt2,mistral-nemo"


@pytest.fixture(autouse=True)
def _fresh_registry() -> Any:
    registry.reset()
    yield
    registry.reset()


def test_build_then_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "cache"
    assert main(["cache", "build", "--dir", str(d), "--tokenizers", NAMES, "-q"]) == 0
    out = capsys.readouterr().out
    assert "2 tokenizers" in out and "2 files built" in out, out
    files = sorted(p.name.split(".")[1] for p in d.iterdir())
    assert files == ["tekken-ranks", "tiktoken-ranks", "xz-witness"]  # (the witness of mistral-nemo's .xz file)
    assert main(["cache", "verify", "--dir", str(d), "--tokenizers", NAMES, "-q"]) == 0
    assert "3 of 3 files verified; 2 of 2 tokenizers" in capsys.readouterr().out
    assert main(["cache", "build", "--dir", str(d), "--tokenizers", NAMES, "-q"]) == 0
    assert "0 files built (0 replaced damaged ones), 2 reused" in capsys.readouterr().out


def test_verify_reports_damage_and_gaps_without_changing_anything(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "cache"
    assert main(["cache", "build", "--dir", str(d), "--tokenizers", "gpt2", "-q"]) == 0
    (path,) = d.iterdir()
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["cache", "verify", "--dir", str(d), "--tokenizers", NAMES, "-q"]) == 1
    out = capsys.readouterr().out
    assert f"FAIL {path.name}: checksum mismatch" in out
    assert "MISSING gpt2" in out and "MISSING mistral-nemo" in out
    assert [p.name for p in d.iterdir()] == [path.name] and path.read_bytes() == bytes(data)  # untouched
    assert main(["cache", "build", "--dir", str(d), "--tokenizers", NAMES, "-q"]) == 0
    assert "2 files built (1 replaced damaged ones)" in capsys.readouterr().out
    assert main(["cache", "verify", "--dir", str(d), "--tokenizers", NAMES, "-q"]) == 0


def test_build_uses_the_setting_and_refuses_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TOKENIZER_ARTIFACT_CACHE", str(tmp_path / "env"))
    monkeypatch.setenv("TOKENIZER_TOKENIZERS", "gpt2")
    assert main(["cache", "build", "-q"]) == 0
    assert len(list((tmp_path / "env").iterdir())) == 1
    monkeypatch.setenv("TOKENIZER_ARTIFACT_CACHE", "off")
    assert main(["cache", "build", "-q"]) == 2
    assert "the artifact cache is off" in capsys.readouterr().err


def test_unwritable_cache_fails_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    def erofs(*args: Any, **kwargs: Any) -> Any:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(ac.tempfile, "mkstemp", erofs)
    assert main(["cache", "build", "--dir", str(tmp_path), "--tokenizers", "gpt2", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write the artifact cache") and "Read-only file system" in err


def test_errors_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    one_line_error(run("cache", "build", "--dir", str(tmp_path / "file" / "c"), "--tokenizers", "gpt2"),
                   "cannot create the cache directory")
    one_line_error(run("cache", "verify", "--dir", str(tmp_path / "none")), "no such cache directory")
    one_line_error(run("cache", "build", "--dir", str(tmp_path / "c"), "--tokenizers", "nope"), "nope")
