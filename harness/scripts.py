"""The repository's generator scripts (``scripts/gen_*.py``) as modules, for the tests that regenerate a committed
table and compare: ``load_script("gen_nfc_tables").render(...)``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` imported as the module ``name`` (once per process); ``FileNotFoundError`` without it."""
    if name in sys.modules:
        return sys.modules[name]
    path = SCRIPTS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise FileNotFoundError(path)
    if str(SCRIPTS) not in sys.path:  # the scripts import their shared module (scripts/generated_file.py)
        sys.path.append(str(SCRIPTS))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
