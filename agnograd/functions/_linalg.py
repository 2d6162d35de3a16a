"""Linear algebra: the standard's chapter (``matmul``, ``tensordot``, ``vecdot``;
``matrix_transpose`` is declared beside its node in ``_manipulation``), Chainer's
``linear``, and the helpers of the standard's ``linalg`` extension, whose functions
(keys ``"linalg.<name>"``) live in ``_linalg_inverse`` (``inv``, ``solve``, ``det``,
``slogdet``, ``pinv``), ``_linalg_decompositions`` (``cholesky``, ``qr``, ``eigh``,
``svd``) and ``_linalg_norms`` (norms, powers, diagonals, ``cross``, ``matrix_rank``).

Conventions (PyTorch's, so that ``torch.autograd`` is an oracle):

- Complex inputs follow the conjugate Wirtinger convention: for a real loss ``L``,
  ``x.grad = dL/dRe(x) + i dL/dIm(x)``; linear maps get their adjoint (``A^H``).
- Functions of Hermitian matrices (``cholesky``, ``eigh``, ``eigvalsh``) read one
  triangle of their input; their gradient is the Hermitian matrix that acts on
  Hermitian perturbations, as PyTorch returns it (for complex ``cholesky``
  PyTorch adds a skew-Hermitian part on the diagonal, which no Hermitian input
  sees; agnograd leaves it out).
- Spectral gradients (``eigh``, ``svd``) divide by differences of eigenvalues or
  singular values: they are finite only when those are distinct. Losses of complex
  eigenvectors or singular vectors must not depend on their arbitrary phases.
- ``inv``, ``solve``, ``det``, ``slogdet``, ``qr`` and ``pinv`` differentiate where
  the matrix is invertible (``qr``, ``pinv``: of full rank).

Every backward rule is written with array API functions of ``namespace_of(gy)``,
which are themselves in these tables, so gradients of any order come free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agnograd.backends._shape_dtype import broadcast_shapes
from agnograd.core._fast import apply2
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import Spec, conjugate, input_shape, raw_xp_device, shape_of
from agnograd.functions._manipulation import matrix_transpose
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)

# -- helpers shared by the linalg modules ------------------------------------------------


def mh(xp: Any, x: Any) -> Any:
    """Conjugate transpose of the last two axes (plain transpose for real dtypes)."""
    return conjugate(xp, xp.matrix_transpose(x))


def raw_eye(like: Any, n: int, dtype: Any = None) -> Any:
    """The ``n x n`` identity as a raw array with ``like``'s dtype and device."""
    rxp, device = raw_xp_device(like)
    return rxp.eye(n, dtype=like.dtype if dtype is None else dtype, device=device)


def raw_zeros(like: Any, shape: tuple[int, ...]) -> Any:
    """Zeros of ``shape`` as a raw array with ``like``'s dtype and device."""
    rxp, device = raw_xp_device(like)
    return rxp.zeros(shape, dtype=like.dtype, device=device)


def diag_embed(xp: Any, v: Any) -> Any:
    """``(..., n) -> (..., n, n)`` with ``v`` on the diagonal."""
    return xp.expand_dims(v, axis=-2) * raw_eye(v, v.shape[-1])


def off_diagonal_inverse(xp: Any, d: Any, n: int) -> Any:
    """``1 / d`` off the diagonal and 0 on it, with ``d`` of shape ``(..., n, n)``.

    The diagonal is replaced by ones before dividing, so no division by zero
    happens (and the expression stays differentiable).
    """
    eye = raw_eye(d, n)
    # xp.divide rather than `/`: the raw numerator would not defer to a Variable.
    return xp.divide(1 - eye, d + eye)


def check_matrix(op: str, x: Any, square: bool = False, name: str = "x") -> tuple[int, ...]:
    """The shape of ``x``, refused (naming ``op`` and ``name``) unless it is a stack of
    matrices (square ones if ``square``)."""
    shape = shape_of(x)
    if len(shape) < 2:
        raise ValueError(f"{op}: {name} must have at least 2 dimensions, got shape {shape}")
    if square and shape[-1] != shape[-2]:
        raise ValueError(f"{op}: {name} must be a stack of square matrices, got shape {shape}")
    return shape


# -- matmul, tensordot, vecdot -----------------------------------------------------------


class MatMul(FunctionNode):
    bilinear = True  # forward mode: f(t1, x2) + f(x1, t2)

    _retain_in = (0, 1)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.matmul(inputs[0], inputs[1]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        a, b = self.get_retained_inputs()
        (g,) = grad_outputs
        xp = namespace_of(g)
        # Treat 1-D operands as matrices (a row on the left, a column on the right),
        # as the standard defines matmul, and drop the added axis again afterwards.
        a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
        if a_vec:
            a = xp.reshape(a, (1, a.shape[0]))
            g = xp.reshape(g, (*g.shape[:-1], 1, g.shape[-1]) if not b_vec else (1, 1))
        if b_vec:
            b = xp.reshape(b, (b.shape[0], 1))
            if not a_vec:
                g = xp.reshape(g, (*g.shape, 1))
        result = []
        for i in indexes:
            if i == 0:
                ga = xp.matmul(g, mh(xp, b))
                if a_vec:
                    ga = xp.reshape(ga, (*ga.shape[:-2], ga.shape[-1]))
                result.append(ga)
            else:
                gb = xp.matmul(mh(xp, a), g)
                if b_vec:
                    gb = xp.reshape(gb, gb.shape[:-1])
                result.append(gb)
        return tuple(result)


@ROWS.declare("matmul", "linalg.matmul")
def matmul(x1: Any, x2: Any, /, *, transa: bool = False, transb: bool = False) -> Variable:
    """Matrix product with broadcasting over leading (batch) axes.

    ``transa`` and ``transb`` (Chainer's) swap the last two axes of ``x1`` and of
    ``x2`` first; a 1-D operand is used as it is.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> a = agnograd.Variable(np.array([[1.0, 2.0]]))
    >>> y = F.matmul(a, np.array([[3.0], [4.0]]))
    >>> y
    variable([[11.]])
    >>> y.backward(); a.grad
    array([[3., 4.]])
    >>> F.matmul(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]), transb=True)
    variable([[11.]])
    """
    s1, s2 = shape_of(x1), shape_of(x2)
    for name, shape in (("x1", s1), ("x2", s2)):
        if len(shape) == 0:
            raise ValueError(f"matmul: {name} is 0-d; matmul needs at least one dimension")
    _check_matmul_shapes(s1, s2, transa, transb)
    if transa and len(s1) > 1:
        x1 = matrix_transpose(x1)
    if transb and len(s2) > 1:
        x2 = matrix_transpose(x2)
    return apply2(MatMul(), x1, x2)


def _check_matmul_shapes(s1: tuple[int, ...], s2: tuple[int, ...], ta: bool, tb: bool) -> None:
    """Refuse operands of shapes ``s1`` and ``s2`` (transposed where ``ta``, ``tb``
    say) that matmul cannot multiply, naming both shapes."""
    if ta and len(s1) > 1:
        s1 = (*s1[:-2], s1[-1], s1[-2])
    if tb and len(s2) > 1:
        s2 = (*s2[:-2], s2[-1], s2[-2])
    given = f"shapes {s1} and {s2}"
    if ta or tb:
        given += f" (after transa={ta}, transb={tb})"
    k1, k2 = s1[-1], s2[0] if len(s2) == 1 else s2[-2]
    if k1 != k2:
        axis = "only" if len(s2) == 1 else "second-to-last"
        raise ValueError(
            f"matmul: {given} do not align ({k1} != {k2}): the last axis of x1 must have the "
            f"length of the {axis} axis of x2"
        )
    try:
        broadcast_shapes(s1[:-2], s2[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: {given}: the batch axes {s1[:-2]} and {s2[:-2]} cannot be broadcast together"
        ) from None


@ROWS.declare("linear", standard=False)  # Chainer's
def linear(x: Any, W: Any, b: Any = None) -> Variable:  # noqa: N803 - Chainer's name
    """Affine map ``x @ W.T + b`` with ``W`` of shape ``(out, in)`` (Chainer's layout).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.linear(np.ones((1, 2)), np.array([[1.0, 2.0]]), np.array([0.5]))
    variable([[3.5]])
    """
    y = matmul(x, matrix_transpose(W))
    return y if b is None else y + b


class TensorDot(FunctionNode):
    """``tensordot``; the node keeps the user's ``axes``, which forward and backward
    each resolve against the inputs' shapes (backward from their nodes': a graph
    re-run on a new shape takes the new ones, and a gradient graph may be built
    before any forward ran, see ``agnograd.grad``)."""

    bilinear = True  # forward mode: f(t1, x2) + f(x1, t2)

    _retain_in = (0, 1)

    def __init__(self, axes: int | tuple[tuple[int, ...], tuple[int, ...]]) -> None:
        self.given_axes = axes

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x1, x2 = inputs
        axes = _contracted(tuple(x1.shape), tuple(x2.shape), self.given_axes)
        return (self.xp.tensordot(x1, x2, axes=axes),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        a, b = inputs
        axes1, axes2 = _contracted(a.shape, b.shape, self.given_axes)
        free1 = [s for i, s in enumerate(a.shape) if i not in axes1]
        free2 = [s for i, s in enumerate(b.shape) if i not in axes2]
        return (((*free1, *free2), a.xp.result_type(a.dtype, b.dtype)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x1, x2 = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        s1, s2 = input_shape(self, 0), input_shape(self, 1)
        a1, a2 = _contracted(s1, s2, self.given_axes)
        free1 = [i for i in range(len(s1)) if i not in a1]
        free2 = [i for i in range(len(s2)) if i not in a2]
        nf1 = len(free1)
        result = []
        for i in indexes:
            if i == 0:
                # Contract gy's x2-part with conj(x2)'s free axes; what is left of x2
                # are its contracted axes, in x2's order: map them to x1's axes.
                g = xp.tensordot(
                    gy, conjugate(xp, x2), axes=(tuple(range(nf1, nf1 + len(free2))), tuple(free2))
                )
                order = free1 + [a1[a2.index(j)] for j in sorted(a2)]
            else:
                g = xp.tensordot(conjugate(xp, x1), gy, axes=(tuple(free1), tuple(range(nf1))))
                order = [a2[a1.index(j)] for j in sorted(a1)] + free2
            perm = tuple(order.index(k) for k in range(len(order)))
            if perm != tuple(range(len(perm))):
                g = xp.permute_dims(g, perm)
            result.append(g)
        return tuple(result)


@ROWS.declare("tensordot", "linalg.tensordot")
def tensordot(
    x1: Any, x2: Any, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2
) -> Variable:
    """Sum of products over the last ``axes`` axes of ``x1`` and first of ``x2``,
    or over the axes paired in ``axes = (x1_axes, x2_axes)``.

    Contracted axes must have equal sizes (no broadcasting).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.arange(6.0).reshape(2, 3))
    >>> y = xp.tensordot(a, np.ones((3, 2)), axes=1)
    >>> y
    variable([[ 3.,  3.],
              [12., 12.]])
    >>> xp.sum(y).backward(); a.grad
    array([[2., 2., 2.],
           [2., 2., 2.]])
    """
    if not isinstance(axes, int):
        if len(axes) != 2 or len(axes[0]) != len(axes[1]):
            raise ValueError(
                f"tensordot: axes must be an int or a pair of equally long sequences, got {axes!r}"
            )
        axes = (tuple(axes[0]), tuple(axes[1]))
    _contracted(shape_of(x1), shape_of(x2), axes)  # refuses wrong axes now
    return apply2(TensorDot(axes), x1, x2)


def _contracted(
    s1: tuple[int, ...], s2: tuple[int, ...], axes: int | tuple[tuple[int, ...], tuple[int, ...]]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The non-negative axes of ``x1`` and ``x2`` (of shapes ``s1`` and ``s2``) that
    ``tensordot(x1, x2, axes=axes)`` contracts."""
    if isinstance(axes, int):
        if axes < 0 or axes > min(len(s1), len(s2)):
            raise ValueError(
                f"tensordot: axes={axes} must be between 0 and the smaller rank of x1 {s1} "
                f"and x2 {s2}"
            )
        a1 = tuple(range(len(s1) - axes, len(s1)))
        a2 = tuple(range(axes))
    else:
        a1 = tuple(_axis(a, len(s1), "tensordot", "x1") for a in axes[0])
        a2 = tuple(_axis(a, len(s2), "tensordot", "x2") for a in axes[1])
        if len(set(a1)) != len(a1) or len(set(a2)) != len(a2):
            raise ValueError(f"tensordot: repeated axis in axes={axes!r}")
    for i, j in zip(a1, a2, strict=True):
        if s1[i] != s2[j]:
            raise ValueError(
                f"tensordot: axis {i} of x1 {s1} and axis {j} of x2 {s2} have different sizes"
            )
    return a1, a2


def _axis(a: int, ndim: int, op: str, name: str) -> int:
    if not -ndim <= a < ndim:
        raise ValueError(f"{op}: axis {a} is out of range for {name} with {ndim} dimensions")
    return a % ndim


class VecDot(FunctionNode):
    bilinear = True  # forward mode: f(t1, x2) + f(x1, t2)

    _retain_in = (0, 1)

    def __init__(self, axis: int) -> None:
        self.given_axis = axis  # the user's: forward and backward resolve it for their shapes

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x1, x2 = inputs
        axis = _vecdot_axis(tuple(x1.shape), tuple(x2.shape), self.given_axis)
        return (self.xp.vecdot(x1, x2, axis=axis),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        a, b = inputs
        shape = list(broadcast_shapes(a.shape, b.shape))
        del shape[_vecdot_axis(a.shape, b.shape, self.given_axis)]
        return ((tuple(shape), a.xp.result_type(a.dtype, b.dtype)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x1, x2 = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        # Negative: counted from the end of the broadcast shape, which gy lacks.
        axis = _vecdot_axis(input_shape(self, 0), input_shape(self, 1), self.given_axis)
        g = xp.expand_dims(gy, axis=axis)
        # y = sum(conj(x1) * x2): linear in x2, conjugate-linear in x1.
        return tuple(conjugate(xp, g) * x2 if i == 0 else g * x1 for i in indexes)


@ROWS.declare("vecdot", "linalg.vecdot")
def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Variable:
    """Dot product ``sum(conj(x1) * x2, axis=axis)`` with broadcasting.

    ``axis`` counts in the broadcast shape; the contracted axis must have the same
    size in both arrays.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> y = xp.vecdot(a, np.array([1.0, -1.0]))
    >>> y
    variable([-1., -1.])
    >>> xp.sum(y).backward(); a.grad
    array([[ 1., -1.],
           [ 1., -1.]])
    """
    _vecdot_axis(shape_of(x1), shape_of(x2), axis)  # refuses a wrong axis now
    return apply2(VecDot(axis), x1, x2)


def _vecdot_axis(s1: tuple[int, ...], s2: tuple[int, ...], axis: int) -> int:
    """``vecdot``'s ``axis`` for inputs of shapes ``s1`` and ``s2``, counted from the
    end of their broadcast shape (negative)."""
    ndim = max(len(s1), len(s2))
    if not -ndim <= axis < ndim:
        raise ValueError(
            f"vecdot: axis {axis} is out of range for the broadcast shape of {s1} and {s2}"
        )
    axis = axis - ndim if axis >= 0 else axis
    for name, s in (("x1", s1), ("x2", s2)):
        if len(s) < -axis:
            raise ValueError(f"vecdot: {name} of shape {s} has no axis {axis}")
    if s1[axis] != s2[axis]:
        raise ValueError(
            f"vecdot: the contracted axis {axis} has size {s1[axis]} in x1 but {s2[axis]} in x2"
        )
    return axis


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
