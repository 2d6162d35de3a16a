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
from agnograd.core._function_checks import combined_namespace, combines
from agnograd.core._variable import Variable


def namespace_of(array: Any) -> Any:
    """The namespace to compute with ``array``: differentiable for a Variable.

    For a raw array, its library's own namespace (through array-api-compat, so
    torch's tensors have one too); for a Variable, agnograd's differentiable
    namespace of its library. This is how a :class:`~agnograd.FunctionNode`'s
    ``backward`` finds its functions: it receives raw arrays in ordinary backprop
    and Variables in double backprop, and ``namespace_of(gy)`` suits both.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace_of(np.ones(2)).__name__
    'array_api_compat.numpy'
    >>> agnograd.namespace_of(agnograd.Variable(np.ones(2)))
    <agnograd namespace for numpy (wrap raw arrays with agnograd.as_variable to mix them)>
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


def namespace(obj: Any, /, *objs: Any) -> Any:
    """agnograd's differentiable namespace for a backend namespace, arrays or Variables.

    With one argument: the namespace for that backend namespace, array or Variable.
    With several, each an array or a Variable (Python scalars and ``None`` are
    skipped): the namespace of their one library. Unlike
    ``array_api_compat.array_namespace``, which refuses a Variable beside a raw
    array of its library (it sees two namespaces), this accepts any mix: the
    namespace's functions take raw arrays as constants. Where third-party code
    calls ``array_namespace`` itself, wrap raw arrays with
    :func:`agnograd.as_variable` instead.

    Raises
    ------
    TypeError
        If the arrays and Variables belong to several libraries, or, with several
        arguments, one is a module or no argument is an array or a Variable.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace(np)
    <agnograd namespace for numpy (wrap raw arrays with agnograd.as_variable to mix them)>
    >>> agnograd.namespace(np.ones(2)) is agnograd.namespace(np)
    True
    >>> w, x = agnograd.Variable(np.array([1.0, 2.0])), np.array([3.0, 4.0])
    >>> xp = agnograd.namespace(w, x)  # array_namespace(w, x) raises
    >>> xp.sum(w * x)
    variable(11.)
    """
    if not objs:
        return _namespace_of_one(obj)
    found: list[tuple[int, Any, Any]] = []  # (position, argument, its namespace)
    for i, a in enumerate((obj, *objs)):
        if a is None or isinstance(a, bool | int | float | complex):
            continue
        if not isinstance(a, Variable) and not _is_array_like(a):
            raise TypeError(
                f"namespace: argument {i} is a {type(a).__name__}; with several arguments, "
                "each must be an array or a Variable (pass a namespace module alone)"
            )
        found.append((i, a, _namespace_of_one(a)))
    if not found:
        raise TypeError("namespace: no argument is an array or a Variable")
    i, first, xp = found[0]
    for j, other, other_xp in found[1:]:
        if other_xp is not xp and combines(xp._raw, other_xp._raw):
            # vmap's batched arrays beside their library's: the batching namespace
            xp = differentiable_namespace(combined_namespace(None, xp._raw, other_xp._raw)[0])
        elif other_xp is not xp:
            raise TypeError(
                f"namespace: argument {j} is {_describe(other)} but argument {i} is "
                f"{_describe(first)}; move them to one library first "
                "(agnograd.functions.copy(x, device))"
            )
    return xp


def _namespace_of_one(obj: Any) -> Any:
    if isinstance(obj, Variable):
        if obj._data is None:  # define-then-run: from the graph
            return obj.__array_namespace__()
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


def _describe(obj: Any) -> str:
    """``'a numpy Variable'`` or ``'a raw torch array'``, for messages."""
    if isinstance(obj, Variable):
        raw = obj.array
        return "an uninitialised Variable" if raw is None else f"a {_library(raw)} Variable"
    return f"a raw {_library(obj)} array"


def _library(array: Any) -> str:
    return backend_name(raw_namespace(array))


def _is_array_like(obj: Any) -> bool:
    from agnograd.backends._backend import is_array

    return is_array(obj)


_extension.namespace = differentiable_namespace

__all__ = ["backend_name", "differentiable_namespace", "namespace", "namespace_of"]
