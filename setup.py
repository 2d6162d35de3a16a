"""Builds the optional C extension; everything else is in pyproject.toml.

``agnograd/_speedups.c`` speeds up FunctionNode.apply and the backward loop. It is
optional: where it cannot be compiled, agnograd runs its Python reference code.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[Extension("agnograd._speedups", ["agnograd/_speedups.c"], optional=True)],
)
