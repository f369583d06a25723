"""Run the fuzz harness or pytest with the sanitized compiled core (``fuzz/build_asan.sh`` calls this).

``$TOKENIZER_SANITIZED_CORE`` names the ASan+UBSan build of ``_core``. It is loaded under the real module name
``app.engine._native._core`` *before* anything imports the engine, so every ``backend="native"`` encoding in this
process runs the sanitized C code; the process checks that libasan and that file are mapped and stops otherwise.

    python fuzz/run_sanitized.py fuzz [atheris args...]
    python fuzz/run_sanitized.py pytest [pytest args...]
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def load_sanitized_core() -> Path:
    """Load ``$TOKENIZER_SANITIZED_CORE`` as ``app.engine._native._core``; returns its path."""
    path = Path(os.environ["TOKENIZER_SANITIZED_CORE"]).resolve()
    name = "app.engine._native._core"
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[name] = module
    maps = Path("/proc/self/maps").read_text()
    if "libasan" not in maps or str(path) not in maps:
        raise SystemExit(f"sanitized core not active (libasan mapped: {'libasan' in maps}; {path} mapped: "
                         f"{str(path) in maps}); run through fuzz/build_asan.sh")
    sys.path.insert(0, str(REPO_ROOT))
    from app.engine import native

    assert native.available() and native._core is module, "the engine did not pick up the sanitized core"
    print(f"sanitized core: {path}", file=sys.stderr)
    return path


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("fuzz", "pytest"):
        print(__doc__, file=sys.stderr)
        return 2
    load_sanitized_core()
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "pytest":
        import pytest

        return int(pytest.main(rest))
    sys.path.insert(0, str(REPO_ROOT / "fuzz"))
    import fuzz_engine

    sys.argv = [sys.argv[0], *rest]
    fuzz_engine.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
