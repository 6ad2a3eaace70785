"""Compiles the cleaning engine with mypyc: the same source, run as C, about 1.6x faster.

`SESSION_STREAM_PURE_PYTHON=1` installs the engine as plain Python instead, for a machine
without a C compiler; it behaves the same (the CI runs the engine's tests both ways).
"""

import os
from pathlib import Path

from setuptools import setup

ENGINE = sorted(str(path) for path in Path("stream/engine").rglob("*.py"))


def ext_modules() -> list:
    if os.environ.get("SESSION_STREAM_PURE_PYTHON") == "1":
        return []
    from mypyc.build import mypycify

    # mypy checks the engine's types to compile it; the libraries it calls stay Python objects.
    options = ["--ignore-missing-imports", "--follow-imports=silent"]
    return mypycify([*options, *ENGINE], opt_level="3", group_name="stream_engine")


setup(ext_modules=ext_modules())
