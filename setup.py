"""Build script for the optional compiled extensions (metadata lives in pyproject.toml).

``app.engine._native._core`` (the encoding core) and ``app.engine._native._trainer`` (pre-token counting and merge
learning for the BPE trainer) are C extensions built with the compiler and Python headers of the machine. Each is
``optional``: without a compiler (or headers) the build prints a warning, the package still installs, and the
engine and the trainer run their pure-Python references (slower), logging that they do.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "app.engine._native._core",
            sources=["app/engine/_native/tokcore.c"],
            depends=["app/engine/_native/pretokenizer.h", "app/engine/_native/unicode_tables.h"],
            extra_compile_args=["-O3", "-std=c11", "-fno-strict-aliasing"],
            optional=True,
        ),
        Extension(
            "app.engine._native._trainer",
            sources=["app/engine/_native/trainer.c"],
            depends=["app/engine/_native/pretokenizer.h", "app/engine/_native/unicode_tables.h"],
            extra_compile_args=["-O3", "-std=c11", "-fno-strict-aliasing"],
            optional=True,
        ),
    ],
)
