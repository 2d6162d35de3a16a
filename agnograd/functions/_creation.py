"""Creation functions: constants on the namespace's backend, ``tril``/``triu`` and
``meshgrid`` with gradients.

Functions that take no array (``zeros``, ``arange``, ``from_dlpack``, ...) need to
know the backend, so the namespace binds them to its raw namespace (:meth:`Rows.bound`).
Their results, like those of ``zeros_like`` and friends, require no gradient.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agnograd.core import _extension
from agnograd.core._fast import apply1
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import constant, forwarding, native_kwargs, raw, shape_of
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows, namespace_tables

ROWS = Rows(__name__)


class Triangle(FunctionNode):
    """``tril`` or ``triu``: the gradient is masked the same way as the input."""

    linear = True  # forward mode: applied to the tangents

    def __init__(self, fn: str, k: int) -> None:
        self.fn = fn
        self.k = k

    @property
    def label(self) -> str:
        return self.fn.capitalize()

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (getattr(self.xp, self.fn)(inputs[0], k=self.k),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        (x,) = inputs
        return ((tuple(x.shape), x.dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        return (getattr(namespace_of(gy), self.fn)(gy, k=self.k),)


def _triangle(fn: str, x: Any, k: int) -> Variable:
    if len(shape_of(x)) < 2:
        raise ValueError(
            f"{fn}: x must have at least two dimensions (a stack of matrices), got shape "
            f"{shape_of(x)}"
        )
    return apply1(Triangle(fn, k), x)


@ROWS.declare("tril")
def tril(x: Any, /, *, k: int = 0) -> Variable:
    """The lower triangle of each matrix of ``x``: elements above diagonal ``k`` zeroed.

    The gradient is the lower triangle of the output gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.ones((2, 2)))
    >>> y = xp.tril(x)
    >>> y
    variable([[1., 0.],
              [1., 1.]])
    >>> xp.sum(y * 3.0).backward(); x.grad
    array([[3., 0.],
           [3., 3.]])
    """
    return _triangle("tril", x, k)


@ROWS.declare("triu")
def triu(x: Any, /, *, k: int = 0) -> Variable:
    """The upper triangle of each matrix of ``x``: elements below diagonal ``k`` zeroed.

    The gradient is the upper triangle of the output gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.triu(np.ones((2, 3)), k=1)
    variable([[0., 1., 1.],
              [0., 0., 1.]])
    """
    return _triangle("triu", x, k)


class Meshgrid(FunctionNode):
    """``meshgrid`` of one-dimensional inputs; output ``i`` spreads input ``i`` along
    one axis, so its gradient sums the output gradient over the other axes."""

    linear = True  # forward mode: applied to the tangents

    def __init__(self, indexing: str, n: int) -> None:
        self.indexing = indexing
        # The axis of the grid along which input i varies ('xy' swaps the first two).
        self.axes = list(range(n))
        if indexing == "xy" and n >= 2:
            self.axes[0], self.axes[1] = 1, 0

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(self.xp.meshgrid(*inputs, indexing=self.indexing))

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        shape = [0] * len(inputs)
        for axis, x in zip(self.axes, inputs, strict=True):
            shape[axis] = x.shape[0]
        dtype = self.xp.result_type(*[x.dtype for x in inputs])
        return tuple((tuple(shape), dtype) for _ in inputs)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        result: list[Any] = []
        for i in indexes:
            gy = grad_outputs[i]
            if gy is None:
                result.append(None)
                continue
            others = tuple(a for a in range(len(gy.shape)) if a != self.axes[i])
            result.append(namespace_of(gy).sum(gy, axis=others) if others else gy)
        return tuple(result)


@ROWS.declare("meshgrid")
def meshgrid(*arrays: Any, indexing: str = "xy") -> tuple[Variable, ...]:
    """Coordinate grids from one-dimensional ``arrays`` (a list of Variables).

    ``indexing='xy'`` (Cartesian) swaps the first two axes of the grids,
    ``indexing='ij'`` (matrix) keeps them in input order. The gradient of each input
    is its grid's gradient summed over the other axes.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([1.0, 2.0, 3.0]))
    >>> y = agnograd.Variable(np.array([10.0, 20.0]))
    >>> gx, gy = xp.meshgrid(x, y)
    >>> gx.shape, gy.shape
    ((2, 3), (2, 3))
    >>> xp.sum(gx * gy).backward(); x.grad, y.grad
    (array([30., 30., 30.]), array([6., 6.]))
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    for k, x in enumerate(arrays):
        if len(shape_of(x)) != 1:
            raise ValueError(
                f"meshgrid: every array must be one-dimensional, but array {k} has shape "
                f"{shape_of(x)}"
            )
    if not arrays:
        return ()
    return Meshgrid(indexing, len(arrays)).apply(arrays)


def _constant_maker(name: str) -> Any:
    """The factory of ``name`` for a raw namespace (see :meth:`Rows.bound`)."""

    def bind(raw_namespace: Any) -> Any:
        fn = getattr(raw_namespace, name)
        return forwarding(
            name,
            lambda *args, **kwargs: constant(fn(*args, **native_kwargs(kwargs))),
            f"``{name}`` of the backend, as a Variable that requires no gradient.",
        )

    return bind


ROWS.bound("arange", _constant_maker("arange"))
ROWS.bound("empty", _constant_maker("empty"))
ROWS.bound("eye", _constant_maker("eye"))
ROWS.bound("full", _constant_maker("full"))
ROWS.bound("linspace", _constant_maker("linspace"))
ROWS.bound("ones", _constant_maker("ones"))
ROWS.bound("zeros", _constant_maker("zeros"))
ROWS.nondifferentiable("empty_like")
ROWS.nondifferentiable("full_like")
ROWS.nondifferentiable("ones_like")
ROWS.nondifferentiable("zeros_like")


def _bind_from_dlpack(raw_namespace: Any) -> Any:
    fn = raw_namespace.from_dlpack

    def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Variable:
        """``x`` (any object with ``__dlpack__``) as an array of this namespace's
        library: a Variable linked to ``x`` in the graph when ``x`` is one (gradients
        flow back to its library and device), else one that requires no gradient.

        The data is shared where the two libraries and the device allow it.
        """
        if isinstance(x, Variable):
            return _extension.transfer.from_dlpack(raw_namespace, x, device=device, copy=copy)
        kwargs = {k: v for k, v in (("device", device), ("copy", copy)) if v is not None}
        return constant(fn(raw(x), **native_kwargs(kwargs)))

    return from_dlpack


ROWS.bound("from_dlpack", _bind_from_dlpack)

#: The chapter's tables, derived from its rows (the namespace's come from
#: agnograd.functions._table, which gathers every chapter's rows).
DIFFERENTIABLE, NON_DIFFERENTIABLE = namespace_tables(ROWS.rows)

# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
