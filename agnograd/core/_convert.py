"""``as_variable`` and ``as_array``: moving between raw arrays and Variables."""

from __future__ import annotations

from agnograd.backends._backend import Array, is_array
from agnograd.core._variable import Variable


def as_variable(obj: Variable | Array) -> Variable:
    """A Variable for ``obj``: itself if it is one, else a constant wrapping the array.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> v = agnograd.as_variable(np.ones(2))
    >>> v.requires_grad
    False
    >>> agnograd.as_variable(v) is v
    True
    """
    if isinstance(obj, Variable):
        return obj
    if not is_array(obj):
        raise TypeError(
            f"as_variable: expected a Variable or an array of an array API library, got "
            f"{type(obj).__name__}"
        )
    return Variable(obj, requires_grad=False)


def as_array(obj: Variable | Array) -> Array:
    """The raw array: ``obj.array`` for a Variable, ``obj`` itself for an array.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> a = np.ones(2)
    >>> agnograd.as_array(agnograd.Variable(a)) is a
    True
    """
    if isinstance(obj, Variable):
        return obj.array
    if not is_array(obj):
        raise TypeError(
            f"as_array: expected a Variable or an array of an array API library, got "
            f"{type(obj).__name__}"
        )
    return obj
