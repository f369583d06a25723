"""The compiled core (``_core``, built from ``tokcore.c`` by ``setup.py``). Importing this package fails with
``ImportError`` when the extension was not built; :mod:`app.engine.native` handles that and falls back."""

from ._core import REGEX_VERSION, SCAN_CL100K, SCAN_GPT2, SCAN_LLAMA3, SCAN_NONE, SCAN_O200K, Core

__all__ = ["Core", "REGEX_VERSION", "SCAN_CL100K", "SCAN_GPT2", "SCAN_LLAMA3", "SCAN_NONE", "SCAN_O200K"]
