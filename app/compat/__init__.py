"""Drop-in surfaces of other libraries over our engine, for code that already uses them.

* :mod:`app.compat.tiktoken` — tiktoken 0.14's public API (``import app.compat.tiktoken as tiktoken``).
"""
