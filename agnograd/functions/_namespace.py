"""Looking up the namespace of Variables and raw arrays alike.

A backward rule asks ``namespace_of(gy)`` for its functions: for a raw array that is
the backend's own namespace (ordinary backprop), for a Variable it is agnograd's
differentiable namespace bound to that backend (double backprop). The rule is
therefore written once.
"""

from __future__ import annotations

import functools
from typing import Any

from agnograd.backends._backend import _namespaces, backend_name, raw_namespace
from agnograd.core import _extension
from agnograd.core._variable import Variable


def namespace_of(array: Any) -> Any:
    """The namespace to compute with ``array``: differentiable for a Variable.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> from agnograd.functions._namespace import namespace_of
    >>> namespace_of(np.ones(2)).__name__
    'array_api_compat.numpy'
    >>> namespace_of(agnograd.Variable(np.ones(2)))
    <agnograd namespace for numpy>
    """
    xp = _namespaces.get(array.__class__)
    if xp is not None:
        return xp
    if isinstance(array, Variable):
        if array._data is None:  # define-then-run: from the graph
            return array.__array_namespace__()
        return differentiable_namespace(raw_namespace(array._data))
    return raw_namespace(array)


@functools.cache
def differentiable_namespace(raw: Any) -> Any:
    """agnograd's differentiable namespace bound to the raw namespace ``raw``."""
    from agnograd.functions._table import Namespace

    return Namespace(raw)


def namespace(obj: Any) -> Any:
    """agnograd's differentiable namespace for a backend namespace, array or Variable.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace(np)
    <agnograd namespace for numpy>
    >>> agnograd.namespace(np.ones(2)) is agnograd.namespace(np)
    True
    """
    if isinstance(obj, Variable):
        return differentiable_namespace(raw_namespace(obj._data))
    if hasattr(obj, "__name__") and not _is_array_like(obj):
        import array_api_compat

        # A module: normalise it to the namespace its arrays report.
        xp = obj
        try:
            xp = array_api_compat.array_namespace(obj.asarray(0))
        except Exception:  # not a namespace we can probe
            raise TypeError(
                f"namespace: {obj!r} is not an array API namespace (it has no working asarray)"
            ) from None
        return differentiable_namespace(xp)
    return differentiable_namespace(raw_namespace(obj))


def _is_array_like(obj: Any) -> bool:
    from agnograd.backends._backend import is_array

    return is_array(obj)


_extension.namespace = differentiable_namespace

__all__ = ["backend_name", "differentiable_namespace", "namespace", "namespace_of"]
