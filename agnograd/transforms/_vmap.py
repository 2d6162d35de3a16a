"""``agnograd.vmap``: a function of one example run on a batch.

The batched arguments become :class:`~agnograd.transforms._batching.BatchedArray`
values (their batch axis moved first), which report one example's shape; the
function runs once on them, every array API function batched by its rule
(:mod:`agnograd.transforms._batching_rules`), and the results' batch axes go where
``out_axes`` says. A Variable argument enters through a node (:class:`_Enter`), a
Variable result leaves through another (:class:`_Leave`), each the other's
backward, so that a backward through ``vmap`` reaches the arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from agnograd.backends._backend import is_array, raw_namespace
from agnograd.core._config import FORWARD_MODE, HOOKS, MODE
from agnograd.core._engine_loop import GradientNeedsDataError
from agnograd.core._function import FunctionNode
from agnograd.core._trees import StructureError, broadcast_prefix, flatten, leaf_paths, unflatten
from agnograd.core._variable import Variable
from agnograd.functions._namespace import namespace_of
from agnograd.transforms._batching import (
    BatchedArray,
    enter_level,
    exit_level,
    is_active,
    level_of,
)


class VmapNeedsDataError(GradientNeedsDataError):
    """``vmap`` met arguments without data: a trace of ``agnograd.jit``, which then
    runs the function eagerly, or a define-then-run graph."""


def _enter(x: Any, axis: int, level: int) -> BatchedArray:
    """``x`` batched at ``level`` along ``axis``."""
    if axis:
        x = raw_namespace(x).moveaxis(x, axis, 0)
    return BatchedArray(x, level)


def _leave(y: Any, axis: int | None, level: int, size: int) -> Any:
    """``y``'s batch at ``level`` moved to ``axis``; an unbatched ``y`` repeated
    ``size`` times there (as is, where ``axis`` is None)."""
    if level_of(y) == level:
        if axis is None:
            raise ValueError(
                "vmap: out_axes is None for a result that depends on the batch; give it an "
                "axis (out_axes=0)"
            )
        data = y.data
        return raw_namespace(data).moveaxis(data, 0, axis) if axis else data
    if axis is None:
        return y
    xp = raw_namespace(y)
    data = xp.broadcast_to(xp.expand_dims(y, axis=0), (size, *y.shape))
    return xp.moveaxis(data, 0, axis) if axis else data


class _Enter(FunctionNode):
    """A Variable's data batched: ``_enter`` forward, ``_leave`` backward."""

    def __init__(self, axis: int, level: int, size: int) -> None:
        self.axis, self.level, self.size = axis, level, size

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (_enter(inputs[0], self.axis, self.level),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self._transpose(grad_outputs[0]),)

    def jvp(self, inputs: Any, tangents: Any) -> tuple[Any, ...]:
        t = tangents[0]
        if t is None:
            return (None,)
        if isinstance(t, Variable):
            return (_Enter(self.axis, self.level, self.size).apply((t,))[0],)
        return (_enter(t, self.axis, self.level),)

    def _transpose(self, g: Any) -> Any:
        if g is None:
            return None
        if isinstance(g, Variable):
            return _Leave(self.axis, self.level, self.size).apply((g,))[0]
        return _leave(g, self.axis, self.level, self.size)


class _Leave(_Enter):
    """A Variable's batch moved out: ``_leave`` forward, ``_enter`` backward."""

    unbatched = False

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        self.unbatched = level_of(inputs[0]) != self.level
        return (_leave(inputs[0], self.axis, self.level, self.size),)

    def jvp(self, inputs: Any, tangents: Any) -> tuple[Any, ...]:
        t = tangents[0]
        if t is None:
            return (None,)
        if isinstance(t, Variable):
            return (_Leave(self.axis, self.level, self.size).apply((t,))[0],)
        return (_leave(t, self.axis, self.level, self.size),)

    def _transpose(self, g: Any) -> Any:
        if g is None:
            return None
        if self.unbatched:  # the transpose of repeating: a sum over the batch
            return namespace_of(g).sum(g, axis=self.axis)
        if isinstance(g, Variable):
            return _Enter(self.axis, self.level, self.size).apply((g,))[0]
        return _enter(g, self.axis, self.level)


class _Share(FunctionNode):
    """A Variable that every example of ``level`` shares and that requires a
    gradient: an ``in_axes=None`` argument, or one the function closes over, where
    it meets the batch (:func:`share`). Forward, itself (an unbatched operand is
    broadcast into the batch by each rule); backward, as JAX transposes that
    broadcast: its examples' gradients summed once ``level``'s vmap has returned (a
    backward run after it), passed on per example while it runs (a backward inside
    the function: per-example gradients)."""

    def __init__(self, level: int, size: int) -> None:
        self.level, self.size = level, size

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self._transpose(grad_outputs[0]),)

    def jvp(self, inputs: Any, tangents: Any) -> tuple[Any, ...]:
        return (tangents[0],)

    def _transpose(self, g: Any) -> Any:
        data = g._data if isinstance(g, Variable) else g
        if g is None or level_of(data) != self.level or is_active(self.level):
            return g
        if isinstance(g, Variable):
            stacked = _Leave(0, self.level, self.size).apply((g,))[0]
            return namespace_of(stacked).sum(stacked, axis=0)
        return raw_namespace(g.data).sum(g.data, axis=0)


def share(func: FunctionNode | None, inputs: Sequence[Any]) -> list[Any] | None:
    """``inputs`` of a node that meets batched and unbatched arrays, each unbatched
    Variable that requires a gradient passed through :class:`_Share` at each level
    above its own that the inputs hold (innermost last); None where none needs it.

    ``FunctionNode.apply`` asks this of the batching namespace, so that a Variable
    the function closes over gets its gradient summed over the batch, as an
    ``in_axes=None`` argument does; a Variable that requires no gradient costs
    nothing.
    """
    if not MODE.get()[0] or (func is not None and not func.differentiable):
        return None
    sizes: dict[int, int] = {}
    for x in inputs:
        a = x._data if isinstance(x, Variable) else x
        while a.__class__ is BatchedArray:
            sizes.setdefault(a.level, a.batch_size)
            a = a.data
    shared: list[Any] | None = None
    for i, x in enumerate(inputs):
        if not isinstance(x, Variable) or not x._node.requires_grad:
            continue
        creator = x._node.creator_node
        own = creator.level if creator.__class__ is _Share else level_of(x._data)
        for level in sorted(n for n in sizes if n > own):
            if shared is None:
                shared = list(inputs)
            x = _Share(level, sizes[level]).apply((x,))[0]
            shared[i] = x
    return shared


def _axes(op: str, given: Any, tree: Any, name: str, what: str) -> list[Any]:
    """One axis (int or None) per leaf of ``tree``, from the prefix ``given``."""
    _leaves, structure = flatten(tree)
    try:
        axes = broadcast_prefix(given, structure, leaf="one leaf")
    except StructureError as error:
        raise ValueError(
            error.message(
                op,
                name,
                what,
                f"give {name} the structure of {what} (or a prefix of it: one int or None "
                "stands for a whole subtree)",
            )
        ) from None
    paths = leaf_paths(structure, what)
    for axis, path in zip(axes, paths, strict=True):
        if axis is not None and (not isinstance(axis, int) or isinstance(axis, bool)):
            raise TypeError(
                f"{op}: {name} gives {axis!r} for {path}; each axis must be an int or None"
            )
    return axes


def _normalised(op: str, axis: int, ndim: int, path: str, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(
            f"{op}: {name} is {axis} for {path}, which has {ndim} dimension(s); give an axis "
            f"in [-{ndim}, {ndim}) or None"
        )
    return axis % ndim


def vmap(
    func: Callable[..., Any],
    in_axes: Any = 0,
    out_axes: Any = 0,
    chunk_size: int | None = None,
) -> Callable[..., Any]:
    """A function that runs ``func`` on a batch, as ``torch.func.vmap`` and ``jax.vmap``.

    ``func`` is written for one example; the returned function takes the batched
    arguments and runs ``func`` once, on arrays that report one example's shape and
    compute every array API function for the whole batch.

    Parameters
    ----------
    func : callable
        A function of arrays (of any array API library) or Variables, returning an
        array, a Variable, or a tuple, list or dict nesting them.
    in_axes : int, None, or a tuple/list/dict prefix of the positional arguments
        The batch axis of each argument (negative counts from the end); None for an
        argument that is the same for every example. One int or None stands for a
        whole subtree, as in JAX. Keyword arguments are never batched.
    out_axes : int, None, or a prefix of the results
        Where each result's batch axis goes; None for a result that does not depend
        on the batch.
    chunk_size : int, optional
        Run the batch in chunks of this many examples (less memory, more Python
        overhead) and concatenate: the same result as without it.

    Returns
    -------
    callable
        With ``func``'s arguments, batched. A result that is a Variable requiring a
        gradient comes back as a Variable connected to the arguments (a backward
        through ``vmap`` reaches them); other results as arrays.

    Raises
    ------
    ValueError
        If the batched arguments disagree on the batch size, an axis is out of
        range, no argument is batched, or ``in_axes`` does not match the arguments.
    agnograd.ConcretizationTypeError
        If ``func`` reads a batched value in Python (``if x > 0``, ``float(x)``).

    Notes
    -----
    Functions without a batching rule run once per example in a Python loop, with
    an :class:`agnograd.VmapFallbackWarning`. ``vmap(grad(f))`` gives per-sample
    gradients in one batched backward pass. See the vmap guide for what is not
    batched yet.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> def dot(a, b):
    ...     return a.__array_namespace__().vecdot(a, b)
    >>> agnograd.vmap(dot)(np.ones((3, 2)), np.arange(6.0).reshape(3, 2))
    array([1., 5., 9.])
    >>> agnograd.vmap(dot, in_axes=(0, None))(np.eye(2), np.array([3.0, 4.0]))
    array([3., 4.])

    Per-sample gradients:

    >>> def loss(w, x):
    ...     return (x @ w) ** 2
    >>> agnograd.vmap(agnograd.func.grad(loss), in_axes=(None, 0))(
    ...     np.array([1.0, 2.0]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    array([[2., 0.],
           [0., 4.]])
    """
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be a positive int or None, got {chunk_size!r}")

    @functools.wraps(func)
    def batched(*args: Any, **kwargs: Any) -> Any:
        leaves, structure = flatten(args)
        if any(isinstance(x, Variable) and x._data is None for x in leaves):
            raise VmapNeedsDataError(
                "vmap batches arrays that hold data, and its arguments hold none yet (a "
                "jit trace, or a define-then-run graph) (agnograd.jit then runs the "
                "function eagerly; in define-then-run, call vmap with auto_forward(True))"
            )
        axes = _axes("vmap", in_axes, args, "in_axes", "args")
        paths = leaf_paths(structure, "args")
        size, norm = _batch_size(leaves, axes, paths)
        if chunk_size is None or chunk_size >= size:
            return _call(func, leaves, structure, norm, size, kwargs, out_axes)
        chunks = []
        for start in range(0, size, chunk_size):
            part = [
                x if a is None else x[(slice(None),) * a + (slice(start, start + chunk_size),)]
                for x, a in zip(leaves, norm, strict=True)
            ]
            n = min(chunk_size, size - start)
            chunks.append(_call(func, part, structure, norm, n, kwargs, out_axes, flat=True))
        outs, out_structure, out_norm = chunks[0]
        joined = []
        for j, (first, axis) in enumerate(zip(outs, out_norm, strict=True)):
            if axis is None:
                joined.append(first)
            else:
                parts = [c[0][j] for c in chunks]
                joined.append(namespace_of(first).concat(parts, axis=axis))
        return unflatten(out_structure, joined)

    return batched


def _batch_size(leaves: list[Any], axes: list[Any], paths: list[str]) -> tuple[int, list[Any]]:
    sizes: dict[int, str] = {}
    norm: list[Any] = []
    for x, axis, path in zip(leaves, axes, paths, strict=True):
        if axis is None:
            norm.append(None)
            continue
        if not (isinstance(x, Variable) or is_array(x)):
            raise TypeError(
                f"vmap: in_axes gives axis {axis} for {path}, a {type(x).__name__}; batched "
                "arguments must be arrays or Variables (give None for the others)"
            )
        a = _normalised("vmap", axis, x.ndim, path, "in_axes")
        norm.append(a)
        sizes.setdefault(int(x.shape[a]), f"{path} has {x.shape[a]} along axis {axis}")
    if not sizes:
        raise ValueError(
            "vmap: no argument is batched (in_axes is None for every one); batch one "
            "(in_axes=0), or call the function without vmap"
        )
    if len(sizes) > 1:
        raise ValueError(
            "vmap: the batched arguments disagree on the batch size: "
            f"{'; '.join(sizes.values())}; give them one size (or in_axes=None for those "
            "that are not batched)"
        )
    return next(iter(sizes)), norm


def _call(
    func: Callable[..., Any],
    leaves: list[Any],
    structure: Any,
    axes: list[Any],
    size: int,
    kwargs: dict[str, Any],
    out_axes: Any,
    flat: bool = False,
) -> Any:
    level = enter_level()
    try:
        inner = [
            x if a is None else _batched_leaf(x, a, level, size)
            for x, a in zip(leaves, axes, strict=True)
        ]
        result = func(*unflatten(structure, inner), **kwargs)
        outs, out_structure = flatten(result)
        given = _axes("vmap", out_axes, result, "out_axes", "the result")
        out_paths = leaf_paths(out_structure, "result")
        norm: list[Any] = []
        done: list[Any] = []
        for y, axis, path in zip(outs, given, out_paths, strict=True):
            if y is None:
                norm.append(None)
                done.append(None)
                continue
            if not (isinstance(y, Variable) or is_array(y)):
                raise TypeError(
                    f"vmap: {path} is a {type(y).__name__}; the function must return arrays "
                    "or Variables (or tuples, lists or dicts of them)"
                )
            a = None if axis is None else _normalised("vmap", axis, y.ndim + 1, path, "out_axes")
            norm.append(a)
            done.append(_result(y, a, level, size))
    finally:
        exit_level(level)
    if flat:
        return done, out_structure, norm
    return unflatten(out_structure, done)


def _batched_leaf(x: Any, axis: int, level: int, size: int) -> Any:
    if isinstance(x, Variable):
        return _Enter(axis, level, size).apply((x,))[0]
    return _enter(x, axis, level)


def _result(y: Any, axis: int | None, level: int, size: int) -> Any:
    if isinstance(y, Variable):
        # Through a node where a backward or a running jvp (whose tangents a Variable
        # carries without requiring a gradient) needs the result connected, or where
        # the data is to come (define-then-run)
        if y.requires_grad or y._data is None or MODE.get()[HOOKS].get(FORWARD_MODE) is not None:
            return _Leave(axis, level, size).apply((y,))[0]  # type: ignore[arg-type]
        y = y.array
    return _leave(y, axis, level, size)
