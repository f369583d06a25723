"""Build script for the optional compiled core (metadata lives in pyproject.toml).

``app.engine._native._core`` is a C extension built with the compiler and Python headers of the machine. It is
``optional``: without a compiler (or headers) the build prints a warning, the package still installs, and the
engine runs the pure-Python reference (slower), logging that it does.
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
        )
    ],
)
