"""agnograd's Python code alone, in a process where its C extension is loaded.

The C extension (``_speedups.c``) stands in for Python code in five places:
``FunctionNode.apply``, the backward loop, the forward and backward of the
commonest node classes, Variable's arithmetic operators and the rules'
complex conjugate. The tests compare each with the Python it stands for, and the
overhead benchmark times both; :func:`python_reference` switches all five off for
the length of a block. It rebinds class attributes and module globals, so it is
for tests and benchmarks, not for threaded code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from agnograd import _engine, _function, _operators
from agnograd._function import FunctionNode
from agnograd._variable import Variable
from agnograd.functions import _elementwise


def _switches() -> list[tuple[Any, str, Any]]:
    """(object, attribute, its Python value) for every place the C code stands in."""
    switches: list[tuple[Any, str, Any]] = [
        (FunctionNode, "apply", _function.apply_reference),
        (_engine, "speedups", None),
        (_elementwise, "_c", _elementwise.PYTHON_CONJUGATE),
    ]
    for cls, (forward, backward) in _elementwise.PYTHON_METHODS.items():
        switches += [(cls, "forward", forward), (cls, "backward", backward)]
    switches += [(Variable, name, fn) for name, fn in _operators.PYTHON_OPERATORS.items()]
    return switches


@contextlib.contextmanager
def python_reference() -> Iterator[None]:
    """Run the block on the Python code alone (without the extension: as usual)."""
    switches = _switches()
    # vars() for classes: the attribute as defined there, not as it binds.
    before = [vars(obj)[name] if isinstance(obj, type) else getattr(obj, name)
              for obj, name, _ in switches]  # fmt: skip
    for obj, name, value in switches:
        setattr(obj, name, value)
    try:
        yield
    finally:
        for (obj, name, _), value in zip(switches, before, strict=True):
            setattr(obj, name, value)
