"""Neural-network functions (Chainer's ``F.*``): activations and losses, extras of
``agnograd.functions`` (not in the namespace), declared as rows (see ``_rows.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agnograd.core._config import takes_variables
from agnograd.core._fast import apply1, apply2
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import apply_nondifferentiable, held, raw_xp_device, shape_of
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)


def _shift(x: Any, axis: int) -> Any:
    """The max of ``x`` along ``axis``, a constant: softmax is shift-invariant, so the
    shift needs no gradient of its own. In a gradient graph not run yet, a node of it
    without gradient (see ``held``)."""
    data = held(x)
    if isinstance(data, Variable):
        return apply_nondifferentiable(_max, (data,), {"axis": axis, "keepdims": True})
    return namespace_of(data).max(data, axis=axis, keepdims=True)


def _max(xp: Any, x: Any, *, axis: int, keepdims: bool) -> Any:
    return xp.max(x, axis=axis, keepdims=keepdims)


def _softmax(xp: Any, x: Any, axis: int) -> Any:
    e = xp.exp(x - _shift(x, axis))
    return e / xp.sum(e, axis=axis, keepdims=True)


class Softmax(FunctionNode):
    def __init__(self, axis: int) -> None:
        self.axis = axis

    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (_softmax(self.xp, inputs[0], self.axis),)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any]:
        (y,), (t,) = outputs, tangents
        return (y * (t - xp.sum(y * t, axis=self.axis, keepdims=True)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (y,) = self.get_retained_outputs()
        (gy,) = grad_outputs
        gyy = gy * y
        return (gyy - y * namespace_of(gy).sum(gyy, axis=self.axis, keepdims=True),)


@ROWS.declare("softmax", standard=False)
def softmax(x: Any, axis: int = 1) -> Variable:
    """Softmax along ``axis`` (Chainer's default: 1, the channel axis).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.softmax(np.array([[0.0, 0.0]]))
    variable([[0.5, 0.5]])
    """
    return apply1(Softmax(axis), x)


def _log_softmax(xp: Any, x: Any, axis: int) -> Any:
    shifted = x - _shift(x, axis)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


class LogSoftmax(FunctionNode):
    def __init__(self, axis: int) -> None:
        self.axis = axis

    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (_log_softmax(self.xp, inputs[0], self.axis),)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any]:
        (y,), (t,) = outputs, tangents
        return (t - xp.sum(xp.exp(y) * t, axis=self.axis, keepdims=True),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (y,) = self.get_retained_outputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        return (gy - xp.exp(y) * xp.sum(gy, axis=self.axis, keepdims=True),)


@ROWS.declare("log_softmax", standard=False)
def log_softmax(x: Any, axis: int = 1) -> Variable:
    """Logarithm of the softmax along ``axis``, computed stably.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.log_softmax(np.array([[0.0, 0.0]]))
    variable([[-0.69314718, -0.69314718]])
    """
    return apply1(LogSoftmax(axis), x)


def _targets(ignore_label: int, xp: Any, x: Any, t: Any) -> tuple[Any, Any, Any]:
    """One-hot targets of the labels ``t`` for the logits ``x`` (ignored rows all
    zero), the valid mask and its count."""
    valid = t != ignore_label
    rxp, device = raw_xp_device(x)
    classes = rxp.arange(x.shape[1], dtype=t.dtype, device=device)
    onehot = xp.astype(t[:, None] == classes[None, :], x.dtype)
    valid = xp.astype(valid, x.dtype)
    # An array, not a Python int: lazy backends (Dask) stay lazy.
    count = xp.clip(xp.sum(valid), min=1)
    return onehot, valid, count


class SoftmaxCrossEntropy(FunctionNode):
    """Cross entropy of logits ``x`` (N, C) against integer labels ``t`` (N,).

    ``t`` is input 1 (so define-then-run can feed new labels) and gets no gradient.
    """

    _retain_in = (0, 1)

    def __init__(self, ignore_label: int, reduce: str) -> None:
        self.ignore_label = ignore_label
        self.reduce = reduce

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        x = inputs[0]
        return ((() if self.reduce == "mean" else (x.shape[0],), x.dtype),)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x, t = inputs
        xp = self.xp
        onehot, valid, count = _targets(self.ignore_label, xp, x, t)
        losses = -xp.sum(_log_softmax(xp, x, 1) * onehot, axis=1) * valid
        if self.reduce == "mean":
            return (xp.sum(losses) / count,)
        return (losses,)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any]:
        # The loss's gradient for a seed of ones (per row, its Jacobian) times the
        # tangent, summed over the classes (and the rows, for a mean).
        (x, t), (y,), (tx, _) = inputs, outputs, tangents
        if tx is None:
            return (None,)
        ones = xp.ones_like(y)
        if isinstance(x, Variable):  # watched: as a node of the reverse graph
            g = SoftmaxCrossEntropyGrad(self.ignore_label, self.reduce).apply((x, t, ones))[0]
        else:
            g = _cross_entropy_grad(self, xp, x, t, ones)
        return (xp.sum(g * tx) if self.reduce == "mean" else xp.sum(g * tx, axis=1),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x, t = self.get_retained_inputs()
        (gy,) = grad_outputs
        if not takes_variables(self):  # arrays: the gradient computed at once
            gx = _cross_entropy_grad(self, self.xp, x, t, gy)
        else:  # double backprop, or a gradient graph built before it runs: one node
            grad = SoftmaxCrossEntropyGrad(self.ignore_label, self.reduce)
            gx = grad.apply((x, t, gy))[0]
        return tuple(gx if i == 0 else None for i in indexes)


def _cross_entropy_grad(node: Any, xp: Any, x: Any, t: Any, gy: Any) -> Any:
    """``(softmax(x) - onehot(t)) * valid * scale``, the gradient of ``node``'s loss
    (its ``ignore_label`` and ``reduce``) for ``x`` of the output gradient ``gy``."""
    onehot, valid, count = _targets(node.ignore_label, xp, x, t)
    scale = gy / count if node.reduce == "mean" else xp.reshape(gy, (-1, 1))
    return (_softmax(xp, x, 1) - onehot) * (valid[:, None] * scale)


class SoftmaxCrossEntropyGrad(FunctionNode):
    """The gradient of :class:`SoftmaxCrossEntropy` for ``x``, of ``(x, t, gy)``: one
    node where double backprop or a gradient graph built before it runs would
    otherwise make one per array operation. ``t`` gets no gradient."""

    _retain_in = (0, 1, 2)

    def __init__(self, ignore_label: int, reduce: str) -> None:
        self.ignore_label = ignore_label
        self.reduce = reduce

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x, t, gy = inputs
        return (_cross_entropy_grad(self, self.xp, x, t, gy),)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any]:
        # gx = (p - onehot) * w, w = valid * scale(gy): linear in gy, and p = softmax(x)
        # moves by p * (tx - sum(p * tx)).
        (x, t, gy), (tx, _, tg) = inputs, tangents
        data, labels = held(x), held(t)
        onehot, valid, count = _targets(self.ignore_label, namespace_of(labels), data, labels)
        p = _softmax(xp, x, 1)

        def weight(g: Any) -> Any:  # (an array of the graph first: raw ones refuse it)
            return (g / count if self.reduce == "mean" else xp.reshape(g, (-1, 1))) * valid[:, None]

        total = None
        if tx is not None:
            total = p * (tx - xp.sum(p * tx, axis=1, keepdims=True)) * weight(gy)
        if tg is not None:
            term = (p - onehot) * weight(tg)
            total = term if total is None else total + term
        return (total,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # gx = (p - onehot) * w with p = softmax(x) and w = valid * scale, scale the
        # output gradient (over the count, for a mean): for the upstream g,
        # d/dx = p * (u - sum(u * p)) with u = g * w (softmax's transposed Jacobian),
        # d/dgy = sum(g * (p - onehot) * valid), over the count for a mean.
        x, t, gy = self.get_retained_inputs()
        (g,) = grad_outputs
        xp = namespace_of(g)
        data, labels = held(x), held(t)  # constants (nodes of a graph not run yet)
        onehot, valid, count = _targets(self.ignore_label, namespace_of(labels), data, labels)
        p = _softmax(xp, x, 1)
        mean = self.reduce == "mean"
        result: list[Any] = []
        for i in indexes:
            if i == 0:
                scale = gy / count if mean else xp.reshape(gy, (-1, 1))
                u = g * (valid[:, None] * scale)
                result.append(p * (u - xp.sum(u * p, axis=1, keepdims=True)))
            elif i == 2:
                per_row = xp.sum(g * (p - onehot), axis=1) * valid
                result.append(xp.sum(per_row) / count if mean else per_row)
            else:
                result.append(None)
        return tuple(result)


@ROWS.declare("softmax_cross_entropy", standard=False)
def softmax_cross_entropy(
    x: Any, t: Any, *, ignore_label: int = -1, reduce: str = "mean"
) -> Variable:
    """Cross entropy of softmax(``x``) against integer labels ``t`` (Chainer's API).

    ``x`` has shape ``(N, C)``; samples whose label is ``ignore_label`` count for
    nothing. ``reduce='mean'`` averages over the valid samples, ``'no'`` returns the
    per-sample losses. ``t`` receives no gradient.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.softmax_cross_entropy(np.zeros((2, 4)), np.array([0, 3]))
    variable(1.38629436)
    """
    xs, ts = shape_of(x), shape_of(t)
    if len(xs) != 2:
        raise ValueError(f"softmax_cross_entropy: x must be (N, C), got shape {tuple(xs)}")
    if tuple(ts) != (xs[0],):
        raise ValueError(
            f"softmax_cross_entropy: t must have shape ({xs[0]},) to match x {tuple(xs)}, "
            f"got {tuple(ts)}"
        )
    if reduce not in ("mean", "no"):
        raise ValueError(f"softmax_cross_entropy: reduce must be 'mean' or 'no', got {reduce!r}")
    return apply2(SoftmaxCrossEntropy(ignore_label, reduce), x, t)


@ROWS.declare("mean_squared_error", standard=False)
def mean_squared_error(x0: Any, x1: Any) -> Variable:
    """Mean of the squared differences of ``x0`` and ``x1``.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.mean_squared_error(np.array([1.0, 2.0]), np.array([1.0, 4.0]))
    variable(2.)
    """
    from agnograd.functions._statistical import mean

    diff = _as_variable(x0) - x1
    return mean(diff * diff)


def _as_variable(x: Any) -> Variable:
    return x if isinstance(x, Variable) else Variable._new(x, False)


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
