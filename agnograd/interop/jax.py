"""Bridges between agnograd and JAX, in both directions.

- :func:`function` turns a Python function of Variables into a JAX function (a
  ``jax.custom_vjp``) that ``jax.jit``, ``jax.grad`` and ``jax.vmap`` accept. Its
  forward runs the function on Variables that wrap JAX arrays or tracers; its
  backward runs agnograd's backward pass (:func:`agnograd.grad`), again on JAX
  arrays or tracers, so JAX traces and compiles both.
- :func:`node` turns a JAX function into an agnograd operation on Variables of
  NumPy, PyTorch, JAX or any library that JAX can read through DLPack. Its forward
  runs the function (compiled by ``jax.jit``), its backward ``jax.vjp`` of it on
  the saved inputs, and its double backward a bridged node of that pullback (a vjp
  of the vjp), so gradients of every order flow.

Both save the inputs for backward and compute the forward again there, as
``jax.checkpoint`` does: nothing but arrays crosses from forward to backward, which
is what makes the JAX side safe under ``jax.jit``.

Gradients of complex functions follow agnograd's (PyTorch's) convention on the
agnograd side and JAX's on the JAX side; the bridges convert between them (the
two differ by a complex conjugation).

Importing this module imports JAX; ``import agnograd`` does not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from agnograd.backends._backend import is_array
from agnograd.core._config import eager_recording
from agnograd.core._engine import grad
from agnograd.core._variable import Variable
from agnograd.interop._jax_arrays import _FLOAT0, _conj, _inexact
from agnograd.interop._jax_node import node

__all__ = ["function", "node"]


def function(f: Callable[..., Any] | None = None, /, *, nondiff_argnums: Sequence[int] = ()) -> Any:
    """A JAX function (``jax.custom_vjp``) that runs ``f`` on Variables.

    ``f`` takes Variables and returns a Variable or a pytree (tuple, list, dict)
    of Variables, computed with agnograd: operators, :mod:`agnograd.functions`,
    the differentiable namespace, your own :class:`~agnograd.FunctionNode`\\ s.
    The result takes JAX arrays (or pytrees of them) in the same positions and
    returns JAX arrays in the structure ``f`` returned, and works under
    ``jax.jit``, ``jax.grad``, ``jax.vjp`` and ``jax.vmap``.

    The backward pass saves only the inputs: it runs ``f`` again with the graph
    recorded and then agnograd's backward on it, both on JAX values, so the
    residuals are arrays and the rule is safe under ``jax.jit`` (like
    ``jax.checkpoint``: one more forward per backward, which XLA may merge with the
    first under ``jit``). Because that backward is itself made of JAX operations,
    ``jax.grad(jax.grad(...))``, ``jax.hessian`` and ``jax.jacrev`` work too;
    forward mode (``jax.jvp``, ``jax.jacfwd`` applied directly) does not, as for
    every ``custom_vjp``.

    Parameters
    ----------
    f : callable
        A function of Variables returning a Variable or a pytree of Variables.
        Used as ``@function`` or ``@function(nondiff_argnums=...)``.
    nondiff_argnums : sequence of int
        Positions of arguments that are not arrays (flags, sizes, functions): they
        reach ``f`` as they are and get no gradient (``jax.custom_vjp``'s own
        argument; they must be hashable under ``jax.jit``). Constants can also be
        closed over.

    Returns
    -------
    callable
        ``f`` as a function of JAX arrays.

    Examples
    --------
    >>> import numpy as np, jax, jax.numpy as jnp
    >>> import agnograd.functions as F
    >>> import agnograd.interop.jax as bridge
    >>> @bridge.function
    ... def loss(x, w):
    ...     return F.sum(F.tanh(x @ w) ** 2)
    >>> x = jnp.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    >>> w = jnp.array([0.5, -0.25])
    >>> np.asarray(jax.jit(jax.grad(loss, argnums=1))(x, w)).round(4)
    array([ 1.1873, -0.9933], dtype=float32)
    >>> np.asarray(jax.vmap(loss, in_axes=(0, None))(x, w)).round(4)  # one loss per row
    array([0.2136, 0.2136, 0.06  ], dtype=float32)
    """
    if f is None:
        return functools.partial(function, nondiff_argnums=nondiff_argnums)
    if not callable(f):
        raise TypeError(
            f"agnograd.interop.jax.function(f): f must be a function of Variables, got "
            f"{type(f).__name__}"
        )
    static = tuple(sorted({int(i) for i in nondiff_argnums}))
    if any(i < 0 for i in static):
        raise ValueError(
            f"agnograd.interop.jax.function: nondiff_argnums must be non-negative positions, "
            f"got {tuple(nondiff_argnums)}"
        )
    name = getattr(f, "__name__", type(f).__name__)

    def primal(*args: Any) -> Any:
        _, outputs, tree = _run(f, name, args, static)
        return jax.tree.unflatten(tree, [y.array for y in outputs])

    def forward(*args: Any) -> tuple[Any, tuple[Any, ...]]:
        # The residuals are the inputs, arrays or tracers: nothing of Python's, so
        # that the rule works under jax.jit, where forward and backward are traced
        # apart.
        residuals = tuple(arg for i, arg in enumerate(args) if i not in static)
        return primal(*args), residuals

    def backward(*rest: Any) -> tuple[Any, ...]:
        *fixed, residuals, cotangents = rest
        args = _merge(fixed, residuals, static)
        variables, outputs, tree = _run(f, name, args, static)
        return _pull_back(name, args, static, variables, outputs, tree, cotangents)

    core = jax.custom_vjp(primal, nondiff_argnums=static)
    core.defvjp(forward, backward)

    @functools.wraps(f)
    def bridged(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(
                f"{name} (agnograd.interop.jax.function): keyword arguments "
                f"{sorted(kwargs)} are not supported; pass them by position, or bind "
                "non-array ones with functools.partial before bridging"
            )
        for i in static:
            if i >= len(args):
                raise TypeError(
                    f"{name} (agnograd.interop.jax.function): nondiff_argnums names "
                    f"position {i}, but the call has {len(args)} arguments"
                )
        for i, arg in enumerate(args):
            if i not in static:
                _check_argument(name, i, arg)
        return core(*args)

    return bridged


def _check_argument(name: str, index: int, arg: Any) -> None:
    for leaf in jax.tree.leaves(arg, is_leaf=lambda v: isinstance(v, Variable)):
        if isinstance(leaf, Variable):
            raise TypeError(
                f"{name} (agnograd.interop.jax.function): argument {index} holds a "
                "Variable; the bridged function takes JAX arrays -- pass x.array, or "
                "call the undecorated function on Variables"
            )
        if not (isinstance(leaf, jax.Array | np.ndarray | np.generic | int | float | complex)):
            raise TypeError(
                f"{name} (agnograd.interop.jax.function): argument {index} holds a "
                f"{type(leaf).__name__}, which is not an array; list its position in "
                "nondiff_argnums, or close over it"
            )


def _merge(fixed: Sequence[Any], residuals: Sequence[Any], static: tuple[int, ...]) -> list[Any]:
    """The arguments in their positions, from the static ones and the residuals."""
    fixed_it, res_it = iter(fixed), iter(residuals)
    total = len(fixed) + len(residuals)
    return [next(fixed_it) if i in static else next(res_it) for i in range(total)]


def _is_variable(v: Any) -> bool:
    return isinstance(v, Variable)


def _run(
    f: Callable[..., Any], name: str, args: Sequence[Any], static: tuple[int, ...]
) -> tuple[list[list[Variable]], list[Variable], Any]:
    """Run ``f`` on Variables wrapping ``args``: the Variables of each argument, the
    output Variables (flattened) and the outputs' tree structure."""
    variables: list[list[Variable]] = []
    call_args = list(args)
    for i, arg in enumerate(args):
        if i in static:
            variables.append([])
            continue
        leaves, tree = jax.tree.flatten(arg)
        wrapped = []
        for leaf in leaves:
            a = jnp.asarray(leaf)
            wrapped.append(Variable(a, requires_grad=_inexact(a.dtype)))
        variables.append(wrapped)
        call_args[i] = jax.tree.unflatten(tree, wrapped)
    with eager_recording():
        result = f(*call_args)
    outputs, tree = jax.tree.flatten(result, is_leaf=_is_variable)
    for k, y in enumerate(outputs):
        if isinstance(y, Variable):
            continue
        where = f"output {k} of {name}" if len(outputs) > 1 else f"the output of {name}"
        if is_array(y):
            raise TypeError(
                f"agnograd.interop.jax.function: {where} is a "
                f"{type(y).__module__.split('.')[0]} array, not a Variable: {name} computed "
                "it outside agnograd's graph (e.g. with jax.numpy on x.array), so it would "
                "get no gradient; compute with agnograd.functions or "
                "x.__array_namespace__()"
            )
        raise TypeError(
            f"agnograd.interop.jax.function: {where} is a {type(y).__name__}; {name} must "
            "return a Variable or a pytree (tuple, list, dict) of Variables"
        )
    return variables, outputs, tree


def _pull_back(
    name: str,
    args: Sequence[Any],
    static: tuple[int, ...],
    variables: list[list[Variable]],
    outputs: list[Variable],
    tree: Any,
    cotangents: Any,
) -> tuple[Any, ...]:
    """JAX's cotangents of the arguments, from agnograd's backward pass."""
    cts = tree.flatten_up_to(cotangents)
    seeded: dict[int, Variable] = {}
    for y, ct in zip(outputs, cts, strict=True):
        if not y.requires_grad or ct.dtype == _FLOAT0:
            continue
        seed = _conj(ct)
        if id(y) in seeded:  # the same Variable returned twice: its cotangents add up
            seed = y._grad_var.array + seed  # type: ignore[union-attr]
        # The seed is set as the output's gradient directly rather than passed as
        # grad_outputs, whose device check refuses a concrete cotangent for a traced
        # output (JAX tracers report no device), as jax.grad(jax.grad(...)) gives.
        y._grad_var = Variable._new(seed, False)
        seeded[id(y)] = y
    targets = [v for vs in variables for v in vs if v.requires_grad]
    found: dict[int, Any] = {}
    if seeded and targets:
        ys = list(seeded.values())
        gxs = grad(ys, targets)
        for v, g in zip(targets, gxs, strict=True):
            if g is not None:
                found[id(v)] = _conj(g.array)
    result = []
    for i, arg in enumerate(args):
        if i in static:
            continue
        # None is JAX's symbolic zero: an input with no gradient allocates nothing.
        grads = [found.get(id(v)) for v in variables[i]]
        result.append(jax.tree.unflatten(jax.tree.structure(arg), grads))
    return tuple(result)
