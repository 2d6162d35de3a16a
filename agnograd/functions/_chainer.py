"""Chainer's functions built on the standard's: its names of standard functions
(``arcsin`` for ``asin``, ...), ``broadcast``, ``split_axis`` and the deprecated
``batch_matmul``. Extras of ``agnograd.functions``, not in the namespace, declared as
rows (see ``_rows.py``).

Chainer's spellings of the standard's signatures live with the standard's
functions: ``matmul``'s ``transa``/``transb`` (``_linalg``), ``add`` of any number
of arrays (``_elementwise``), ``concat``'s positional ``axis`` (``_manipulation``).
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._binary import atan2
from agnograd.functions._core import input_shape, raw_xp_device, shape_of
from agnograd.functions._linalg import matmul
from agnograd.functions._manipulation import reshape
from agnograd.functions._namespace import namespace_of
from agnograd.functions._repetition import broadcast_arrays
from agnograd.functions._rows import Rows
from agnograd.functions._unary import acos, asin, atan

ROWS = Rows(__name__)

# -- Chainer's (and NumPy 1's) names of standard functions: the same nodes


@ROWS.declare("arcsin", standard=False, arity=1)
def arcsin(x: Any, /) -> Variable:
    """Elementwise inverse sine: Chainer's name of :func:`asin`.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.arcsin(np.array([0.0, 1.0]))
    variable([0.        , 1.57079633])
    """
    return asin(x)


@ROWS.declare("arccos", standard=False, arity=1)
def arccos(x: Any, /) -> Variable:
    """Elementwise inverse cosine: Chainer's name of :func:`acos`.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.arccos(np.array([1.0, 0.0]))
    variable([0.        , 1.57079633])
    """
    return acos(x)


@ROWS.declare("arctan", standard=False, arity=1)
def arctan(x: Any, /) -> Variable:
    """Elementwise inverse tangent: Chainer's name of :func:`atan`.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.arctan(np.array([0.0, 1.0]))
    variable([0.        , 0.78539816])
    """
    return atan(x)


@ROWS.declare("arctan2", standard=False)
def arctan2(x1: Any, x2: Any, /) -> Variable:
    """Elementwise angle of the point ``(x2, x1)``: Chainer's name of :func:`atan2`;
    either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.arctan2(np.array([1.0, 0.0]), 1.0)
    variable([0.78539816, 0.        ])
    """
    return atan2(x1, x2)


# -- broadcast, split_axis


@ROWS.declare("broadcast", standard=False)
def broadcast(*args: Any) -> Variable | tuple[Variable, ...]:
    """Broadcast the arrays against each other (Chainer's; the standard's
    :func:`broadcast_arrays`): a tuple of Variables, or for one array one Variable
    (a new one: Chainer returns the input itself). Each gradient is summed back to
    its input's shape.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> x = agnograd.Variable(np.array([1.0, 2.0]))
    >>> a, b = F.broadcast(x, np.zeros((3, 1)))
    >>> a.shape, b.shape
    ((3, 2), (3, 2))
    >>> F.sum(a).backward(); x.grad
    array([3., 3.])
    >>> F.broadcast(x)
    variable([1., 2.])
    """
    if not args:
        raise TypeError("broadcast: no arrays given; pass one or more (F.broadcast(x1, x2, ...))")
    ys = broadcast_arrays(*args)
    return ys[0] if len(ys) == 1 else ys


class SplitAxis(FunctionNode):
    """``split_axis``: the pieces of ``x`` along ``axis`` between the ``indices``,
    or ``sections`` pieces of equal length. The cuts are found from the input's
    shape at every run; the number of pieces is the graph's."""

    linear = True  # forward mode: applied to the tangents

    def __init__(self, indices: tuple[int, ...] | None, sections: int | None, axis: int) -> None:
        self.indices = indices
        self.sections = sections
        self.axis = axis  # as given (counted from the end where negative)

    def bounds(self, shape: tuple[int, ...]) -> tuple[int, list[tuple[int, int]]]:
        """The axis (non-negative) and the ``(start, stop)`` of each piece."""
        ndim = len(shape)
        if not -ndim <= self.axis < ndim:
            raise ValueError(f"split_axis: axis {self.axis} is out of range for x of shape {shape}")
        axis = self.axis % ndim
        n = shape[axis]
        if self.sections is not None:
            if n % self.sections:
                raise ValueError(
                    f"split_axis: x of shape {shape} has {n} elements along axis {self.axis}, "
                    f"which do not split into {self.sections} equal sections; give a number "
                    "that divides it, or the indices where to cut"
                )
            step = n // self.sections
            cuts = [step * i for i in range(1, self.sections)]
        else:
            cuts = [i + n if i < 0 else i for i in self.indices or ()]
            for i, (a, b) in enumerate(zip([0, *cuts], [*cuts, n], strict=True)):
                if not a <= b <= n:
                    raise ValueError(
                        f"split_axis: indices {list(self.indices or ())} do not cut axis "
                        f"{self.axis} of x of shape {shape} in order: index {i} is "
                        f"{'past the end' if b > n else 'before the one preceding it'}; give "
                        f"non-decreasing indices from 0 to {n}"
                    )
        return axis, list(zip([0, *cuts], [*cuts, n], strict=True))

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        axis, bounds = self.bounds(tuple(x.shape))
        lead = (slice(None),) * axis
        return tuple(x[(*lead, slice(a, b), ...)] for a, b in bounds)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        shape = input_shape(self)
        axis, bounds = self.bounds(shape)
        present = next(g for g in grad_outputs if g is not None)
        rxp, device = raw_xp_device(present)
        # A piece that received no gradient contributes zeros (constants).
        parts = [
            rxp.zeros(
                (*shape[:axis], b - a, *shape[axis + 1 :]), dtype=present.dtype, device=device
            )
            if g is None
            else g
            for (a, b), g in zip(bounds, grad_outputs, strict=True)
        ]
        return (namespace_of(present).concat(parts, axis=axis),)


@ROWS.declare("split_axis", standard=False, arity=1)
def split_axis(
    x: Any, indices_or_sections: int | Sequence[int], axis: int, force_tuple: bool = True
) -> Variable | tuple[Variable, ...]:
    """Split ``x`` along ``axis`` into ``indices_or_sections`` pieces of equal length,
    or at the given indices (as ``numpy.split``; Chainer's API).

    A tuple of Variables; with ``force_tuple=False`` a single piece is returned
    alone. The gradient of ``x`` joins the pieces' gradients (zeros for a piece
    without one).

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> x = agnograd.Variable(np.arange(5.0))
    >>> a, b = F.split_axis(x, [2], axis=0)
    >>> a, b
    (variable([0., 1.]), variable([2., 3., 4.]))
    >>> F.sum(b * b).backward(); x.grad
    array([0., 0., 4., 6., 8.])
    >>> F.split_axis(np.zeros((2, 6)), 3, 1)[0].shape
    (2, 2)
    """
    axis = operator.index(axis)
    if isinstance(indices_or_sections, int | numbers.Integral):  # NumPy integers too
        sections = operator.index(indices_or_sections)
        if sections < 1:
            raise ValueError(f"split_axis: {sections} sections; give at least one")
        node = SplitAxis(None, sections, axis)
    else:
        try:
            indices = tuple(operator.index(i) for i in indices_or_sections)
        except TypeError:
            raise TypeError(
                "split_axis: indices_or_sections must be an integer (the number of equal "
                f"pieces) or a sequence of integer indices, got {indices_or_sections!r}"
            ) from None
        node = SplitAxis(indices, None, axis)
    node.bounds(shape_of(x))  # refuses the cuts now
    pieces = node.apply((x,))
    return pieces if force_tuple or len(pieces) > 1 else pieces[0]


# -- batch_matmul (deprecated in Chainer)


@ROWS.declare("batch_matmul", standard=False)
def batch_matmul(a: Any, b: Any, transa: bool = False, transb: bool = False) -> Variable:
    """Matrix products of two batches (Chainer's deprecated ``batch_matmul``).

    The first axis is the batch; each of ``a`` and ``b`` is read as a batch of
    matrices with the second axis for rows and all further axes flattened into
    columns (a 2-D operand is a batch of column vectors). ``transa`` and ``transb``
    transpose those matrices. Use :func:`matmul`, which broadcasts batch axes:
    this warns with a ``DeprecationWarning``, as Chainer does.

    Examples
    --------
    >>> import warnings, numpy as np, agnograd.functions as F
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     y = F.batch_matmul(np.ones((4, 3)), np.full((4, 3), 2.0), transa=True)
    >>> y.shape  # 4 dot products, as 1 x 1 matrices
    (4, 1, 1)
    """
    warnings.warn(
        "batch_matmul is deprecated (as in Chainer): use matmul, which broadcasts batch axes",
        DeprecationWarning,
        stacklevel=2,
    )
    matrices = []
    for name, x in (("a", a), ("b", b)):
        shape = shape_of(x)
        if len(shape) < 2:
            raise ValueError(
                f"batch_matmul: {name} of shape {shape} is not a batch of vectors or matrices "
                "(it needs at least 2 dimensions, the first one the batch)"
            )
        matrices.append(reshape(x, (shape[0], shape[1], math.prod(shape[2:]))))
    return matmul(matrices[0], matrices[1], transa=transa, transb=transb)


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
