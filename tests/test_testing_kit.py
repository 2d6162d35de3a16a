"""The testing kit finds wrong gradients, passes right ones, and runs on every backend.

Tests that take the ``xp`` and ``device`` fixtures (agnograd's pytest plugin) run
once per installed backend: numpy, array_api_strict, torch and jax.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import array_api_compat
import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from test_plugin_profiles import run as run_pytest

import agnograd
import agnograd.functions as F
import agnograd.testing
from agnograd import Adapter
from agnograd.backends._backend import adapters, dtype_name
from agnograd.functions._core import raw
from agnograd.testing import (
    NondifferentiableError,
    assert_allclose,
    assert_array_equal,
    backend_namespace,
    check_backward,
    check_double_backward,
    check_jvp,
    installed_backends,
    numerical_grad,
    to_numpy,
    usable_devices,
)
from agnograd.testing import strategies as ags
from agnograd.testing._backends import (
    as_device,
    backend_device,
    default_device,
    default_float,
    device_spellings,
)

pytest_plugins = ["pytester"]

# -- helpers ------------------------------------------------------------------------


def array(xp: Any, device: Any, values: Any, dtype: Any = None) -> Any:
    """An array of ``xp`` on ``device``: float64 where the device has it."""
    dtype = default_float(xp, device) if dtype is None else dtype
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=dtype, device=device)


def ones(xp: Any, device: Any, shape: tuple[int, ...]) -> Any:
    return xp.ones(shape, dtype=default_float(xp, device), device=device)


def apply(node: agnograd.FunctionNode, *inputs: Any) -> Any:
    outputs = node.apply(inputs)
    return outputs[0] if len(outputs) == 1 else outputs


# -- deliberately wrong (and right) backward rules ------------------------------------


class Square(agnograd.FunctionNode):
    """``x ** 2`` with a backward of ``factor * x * gy``: right for 2, wrong for 3."""

    def __init__(self, factor: float = 2.0) -> None:
        self.factor = factor

    def forward(self, inputs):
        self.retain_inputs((0,))
        return (inputs[0] * inputs[0],)

    def backward(self, indexes, grad_outputs):
        (x,) = self.get_retained_inputs()
        return (self.factor * x * grad_outputs[0],)


class SumOfCopies(agnograd.FunctionNode):
    """``sum(broadcast_to(x, (copies, n)), axis=0)`` == ``copies * x``.

    The right backward scales gy by the number of broadcast copies; ``mistake``
    selects a wrong one: ``"unscaled"`` returns gy as is, ``"mean"`` averages the
    copies' gradients instead of summing them.
    """

    def __init__(self, copies: int, mistake: str | None = None) -> None:
        self.copies = copies
        self.mistake = mistake

    def forward(self, inputs):
        (x,) = inputs
        spread = self.xp.broadcast_to(x, (self.copies, *x.shape))
        return (self.xp.sum(spread, axis=0),)

    def backward(self, indexes, grad_outputs):
        (gy,) = grad_outputs
        xp = gy.__array_namespace__() if isinstance(gy, agnograd.Variable) else self.xp
        copies = xp.broadcast_to(gy, (self.copies, *gy.shape))
        if self.mistake == "unscaled":
            return (gy,)
        if self.mistake == "mean":
            return (xp.mean(copies, axis=0),)
        return (xp.sum(copies, axis=0),)


class AddRow(agnograd.FunctionNode):
    """``x + row`` with ``row`` broadcast over the rows of ``x``.

    The engine sums the row's gradient over the broadcast axis; the wrong rule
    ``"first-row"`` pre-reduces it by taking one row, which has the right shape and
    so slips past the engine -- only the numbers are wrong.
    """

    def __init__(self, mistake: str | None = None) -> None:
        self.mistake = mistake

    def forward(self, inputs):
        return (inputs[0] + inputs[1],)

    def backward(self, indexes, grad_outputs):
        (gy,) = grad_outputs
        if self.mistake == "first-row":
            return tuple(gy if i == 0 else gy[0, ...] for i in indexes)
        return tuple(gy for _ in indexes)


class MatMul(agnograd.FunctionNode):
    """``a @ b`` with the right rule, or ``"no-transpose"`` / ``"swapped"`` mistakes."""

    def __init__(self, mistake: str | None = None) -> None:
        self.mistake = mistake

    def forward(self, inputs):
        self.retain_inputs((0, 1))
        return (self.xp.matmul(inputs[0], inputs[1]),)

    def backward(self, indexes, grad_outputs):
        a, b = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = gy.__array_namespace__() if isinstance(gy, agnograd.Variable) else self.xp
        if self.mistake == "no-transpose":
            ga, gb = xp.matmul(gy, b), xp.matmul(a, gy)
        elif self.mistake == "swapped":
            ga, gb = xp.matmul(xp.matrix_transpose(b), gy), xp.matmul(gy, xp.matrix_transpose(a))
        else:
            ga = xp.matmul(gy, xp.matrix_transpose(b))
            gb = xp.matmul(xp.matrix_transpose(a), gy)
        return tuple(ga if i == 0 else gb for i in indexes)


class ConstantSlope(agnograd.FunctionNode):
    """``x ** 2`` whose backward reads the raw data, so its own gradient is lost:
    right to first order, wrong to second (a classic double-backprop mistake)."""

    def forward(self, inputs):
        self.retain_inputs((0,))
        return (inputs[0] * inputs[0],)

    def backward(self, indexes, grad_outputs):
        (x,) = self.get_retained_inputs()
        return (grad_outputs[0] * (2 * raw(x)),)


class Leaky(agnograd.FunctionNode):
    """``x * scale`` with the right gradient for both inputs -- which is a mistake
    when ``scale`` should get none (an integer, or an input listed in no_grads)."""

    def forward(self, inputs):
        self.retain_inputs((0, 1))
        return (inputs[0] * self.xp.astype(inputs[1], inputs[0].dtype),)

    def backward(self, indexes, grad_outputs):
        x, scale = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = gy.__array_namespace__() if isinstance(gy, agnograd.Variable) else self.xp
        return tuple(gy * xp.astype(scale, gy.dtype) if i == 0 else gy * x for i in indexes)


# -- check_backward: right rules pass ------------------------------------------------


def test_check_backward_passes_right_rules(xp, device):
    x = array(xp, device, [[0.5, -1.2, 2.0], [0.3, 1.1, -0.7]])
    gy = array(xp, device, [[1.0, -0.5, 2.0], [0.25, 1.5, -1.0]])
    check_backward(lambda v: apply(Square(), v), x, gy)
    check_backward(F.tanh, x, gy)
    check_backward(F.exp, x, gy)
    row = array(xp, device, [0.1, -0.2, 0.3])
    check_backward(lambda a, b: apply(AddRow(), a, b), (x, row), gy)
    check_backward(lambda v: apply(SumOfCopies(4), v), row, row)
    a = array(xp, device, [[0.5, -1.0], [2.0, 0.25]])
    b = array(xp, device, [[1.5, 0.5], [-0.5, 1.0]])
    check_backward(lambda p, q: apply(MatMul(), p, q), (a, b), a)


def test_check_backward_scalar_output_and_params(xp, device):
    x = array(xp, device, [0.5, 1.5, -2.0])
    check_backward(lambda v: F.sum(v * v), x, None)
    w = agnograd.Variable(array(xp, device, [[1.0, 2.0, 0.5], [-1.0, 0.5, 0.25]]))
    before = w.array
    check_backward(lambda v: F.matmul(w, v), x, array(xp, device, [1.0, -2.0]), params=w)
    assert w.array is before
    assert w.grad is None


def test_check_backward_several_outputs(xp, device):
    x = array(xp, device, [0.5, 1.5, -2.0])
    both = lambda v: (F.exp(v), F.sin(v))  # noqa: E731
    check_backward(both, x, (ones(xp, device, (3,)), array(xp, device, [1.0, 0.0, -1.0])))
    check_backward(both, x, (None, ones(xp, device, (3,))))


# -- check_backward: wrong rules fail ------------------------------------------------


def test_wrong_factor_is_caught(xp, device):
    x = array(xp, device, [0.5, -1.0, 2.0])
    with pytest.raises(AssertionError) as info:
        check_backward(lambda v: apply(Square(factor=3.0), v), x, ones(xp, device, (3,)))
    message = str(info.value)
    assert "analytic" in message
    assert "numerical" in message
    assert "direction d" in message
    # The worst element names where the gradient is most wrong: |x| is largest at 2.
    assert "worst element: input 0 at (2,): analytic 6.0, numerical 4.0" in message


@pytest.mark.parametrize("mistake", ["unscaled", "mean"])
def test_missing_broadcast_scaling_is_caught(xp, device, mistake):
    x = array(xp, device, [0.5, -1.0, 2.0])
    with pytest.raises(AssertionError, match="disagrees with central differences"):
        check_backward(lambda v: apply(SumOfCopies(4, mistake), v), x, ones(xp, device, (3,)))


def test_wrong_broadcast_reduction_is_caught(xp, device):
    x = array(xp, device, [[0.5, -1.0, 2.0], [1.0, 0.5, -0.5]])
    row = array(xp, device, [0.1, 0.2, 0.3])
    gy = array(xp, device, [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
    with pytest.raises(AssertionError, match=r"worst element: input 1"):
        check_backward(lambda a, b: apply(AddRow("first-row"), a, b), (x, row), gy)


@pytest.mark.parametrize("mistake", ["no-transpose", "swapped"])
def test_wrong_transpose_is_caught(xp, device, mistake):
    a = array(xp, device, [[0.5, -1.0, 0.3], [2.0, 0.25, -0.6], [1.0, 1.5, 0.2]])
    b = array(xp, device, [[1.5, 0.5, -1.0], [-0.5, 1.0, 0.7], [0.4, -0.3, 0.9]])
    gy = array(xp, device, [[1.0, 0.0, -1.0], [0.5, 2.0, 1.0], [-1.5, 0.3, 0.8]])
    with pytest.raises(AssertionError, match="disagrees with central differences"):
        check_backward(lambda p, q: apply(MatMul(mistake), p, q), (a, b), gy)


def test_wrong_param_gradient_is_caught(xp, device):
    x = array(xp, device, [[0.5, -1.0], [2.0, 0.25]])
    w = agnograd.Variable(array(xp, device, [[1.0, 2.0], [3.0, 4.0]]))
    gy = ones(xp, device, (2, 2))
    with pytest.raises(AssertionError, match="worst element: param 0"):
        check_backward(lambda v: apply(MatMul("no-transpose"), v, w), x, gy, params=w)


# -- no_grads ------------------------------------------------------------------------


def test_an_input_expected_to_get_no_gradient_that_gets_one_is_reported(xp, device):
    x = array(xp, device, [0.5, -1.0, 2.0])
    scale = array(xp, device, [2.0, 2.0, 2.0])
    gy = ones(xp, device, (3,))
    check_backward(lambda v, s: apply(Leaky(), v, s), (x, scale), gy)  # both differentiable
    with pytest.raises(AssertionError, match=r"input 1 .* must get no gradient"):
        check_backward(
            lambda v, s: apply(Leaky(), v, s), (x, scale), gy, expect_no_grads=[False, True]
        )


def test_no_grads_skips_an_input_as_chainer_does(xp, device):
    # Chainer's meaning: the input is neither perturbed nor checked, whatever its
    # gradient; a wrong rule for it goes unnoticed, a right one for x is still checked.
    x = array(xp, device, [0.5, -1.0, 2.0])
    scale = array(xp, device, [2.0, 2.0, 2.0])
    gy = ones(xp, device, (3,))
    check_backward(lambda v, s: apply(Leaky(), v, s), (x, scale), gy, no_grads=[False, True])
    with pytest.raises(AssertionError):  # x is still checked: a wrong direction fails
        check_backward(
            lambda v, s: apply(Leaky(), v, s) * 2.0 + v.array,
            (x, scale),
            gy,
            no_grads=[False, True],
        )


def test_integer_input_gets_no_gradient_whatever_the_rule_returns(xp, device):
    # An integer Variable requires no gradient, so the engine never asks the rule
    # for one: a rule that would leak one into it passes.
    x = array(xp, device, [0.5, -1.0, 2.0])
    counts = xp.asarray([1, 2, 3], device=device)
    check_backward(lambda v, c: apply(Leaky(), v, c), (x, counts), ones(xp, device, (3,)))


def test_integer_input_without_gradient_passes(xp, device):
    x = array(xp, device, [0.5, -1.0, 2.0])
    positive = xp.asarray([True, False, True], device=device)
    check_backward(lambda v, c: F.where(c, v, v * 2.0), (x, positive), ones(xp, device, (3,)))


def test_no_grads_must_match_inputs():
    with pytest.raises(ValueError, match="no_grads has 2 entries but x_data has 1"):
        check_backward(F.exp, np.ones(2), np.ones(2), no_grads=[False, True])


# -- second order --------------------------------------------------------------------


def test_check_double_backward_passes_right_rules(xp, device):
    x = array(xp, device, [0.5, -1.0, 2.0])
    gy = array(xp, device, [1.0, -0.5, 0.25])
    ggx = array(xp, device, [0.3, 1.0, -2.0])
    check_double_backward(lambda v: apply(Square(), v), x, gy, ggx)
    check_double_backward(F.tanh, x, gy, ggx)
    a = array(xp, device, [[0.5, -1.0], [2.0, 0.25]])
    b = array(xp, device, [[1.5, 0.5], [-0.5, 1.0]])
    check_double_backward(lambda p, q: apply(MatMul(), p, q), (a, b), a, (b, a))


def test_check_double_backward_with_params(xp, device):
    x = array(xp, device, [0.5, -1.0])
    w = agnograd.Variable(array(xp, device, [[1.0, 2.0], [0.5, -1.5]]))
    check_double_backward(
        lambda v: F.tanh(F.matmul(w, v)),
        x,
        array(xp, device, [1.0, -1.0]),
        array(xp, device, [0.5, 0.25]),
        params=w,
        params_grad_grad=array(xp, device, [[0.1, -0.2], [0.3, 0.4]]),
    )


def test_backward_on_raw_data_fails_at_second_order(xp, device):
    x = array(xp, device, [0.5, -1.0, 2.0])
    gy = ones(xp, device, (3,))
    check_backward(lambda v: apply(ConstantSlope(), v), x, gy)  # right to first order
    with pytest.raises(
        AssertionError, match=r"^check_double_backward: the gradient from backward disagrees"
    ):
        check_double_backward(lambda v: apply(ConstantSlope(), v), x, gy, gy)


# -- forward mode: check_jvp -----------------------------------------------------------


class SquareWithJvp(Square):
    """``x ** 2`` with a ``jvp`` of ``factor * x * t``: right for 2, wrong for 3; with
    ``detached``, right to first order but built from the raw data, so that the jvp of
    the jvp misses the derivative of ``x``."""

    def __init__(self, factor: float = 2.0, detached: bool = False) -> None:
        super().__init__()
        self.jvp_factor = factor
        self.detached = detached

    def jvp(self, inputs, tangents):
        (x,), (t,) = inputs, tangents
        if self.detached:
            x = agnograd.Variable(raw(x), requires_grad=False)
        return (self.jvp_factor * x * t,)


def test_check_jvp_passes_right_jvps(xp, device):
    x = array(xp, device, [[0.5, -1.0], [2.0, 0.25]])
    b = array(xp, device, [[1.5, 0.5], [-0.5, 1.0]])
    check_jvp(SquareWithJvp(), x)
    check_jvp(lambda v: apply(SquareWithJvp(), v), x, ones(xp, device, (2, 2)))
    check_jvp(F.tanh, x)
    check_jvp(lambda p, q: (F.matmul(p, q), F.sum(p * q)), (x, b))
    # No jvp: its backward, transposed (which forward mode cannot differentiate again).
    check_jvp(lambda p, q: apply(MatMul(), p, q), (x, b), second_order=False)


def test_check_jvp_catches_a_wrong_jvp(xp, device):
    x = array(xp, device, [[0.5, -1.0], [2.0, 0.25]])
    with pytest.raises(AssertionError) as caught:
        check_jvp(SquareWithJvp(3.0), x)
    message = str(caught.value)
    assert message.startswith(
        "check_jvp: the jvp of SquareWithJvp disagrees with central differences along d"
    )
    assert "direction d (w: a random weight of the outputs):\n    input 0 (2, 2)" in message
    # The jvp claims 3 x t where the derivative is 2 x t: the largest |x t| is worst.
    assert "worst element: output 0 at " in message


def test_check_jvp_catches_a_jvp_wrong_at_second_order(xp, device):
    x = array(xp, device, [0.5, -1.0, 2.0])
    check_jvp(SquareWithJvp(detached=True), x, second_order=False)  # right to first order
    with pytest.raises(
        AssertionError,
        match=r"^check_jvp: the jvp of SquareWithJvp along d \(second order: the jvp of the "
        r"jvp\) disagrees with central differences along e",
    ):
        check_jvp(SquareWithJvp(detached=True), x)


def test_check_jvp_directions_and_no_grads(xp, device):
    x = array(xp, device, [0.5, -1.0, 2.0])
    k = xp.asarray([2, 0], device=device)
    take = lambda v, i: F.tanh(v)[i]  # noqa: E731
    d = array(xp, device, [1.0, 0.0, -1.0])
    check_jvp(take, (x, k), d, d)  # the integer input is left out, as no_grads says
    check_jvp(take, (x, k), (d, None), (d, None))
    with pytest.raises(ValueError, match=r"x_tangent for input 0 of .*<lambda> has shape"):
        check_jvp(take, (x, k), ones(xp, device, (2,)))
    with pytest.raises(ValueError, match=r"input 1 of .*<lambda> has dtype int"):
        check_jvp(take, (x, k), no_grads=[False, False])


def test_check_jvp_complex_and_float32(xp, device):
    x = array(xp, device, [0.5, -1.0, 2.0], dtype=xp.float32)
    check_jvp(F.tanh, x)
    with pytest.raises(AssertionError, match="the jvp of SquareWithJvp disagrees"):
        check_jvp(SquareWithJvp(3.0), x)
    z = xp.asarray([1.0 + 2.0j, 0.5 - 1.0j], device=device)
    check_jvp(F.exp, z)
    check_jvp(lambda v: F.sum(v * v), z)


# -- numerical_grad ------------------------------------------------------------------


@pytest.mark.parametrize("wrapped", [False, True], ids=["array", "variable"])
def test_numerical_grad(xp, device, wrapped):
    data = array(xp, device, [[0.5, -1.0], [2.0, 3.0]])
    x = agnograd.Variable(data) if wrapped else data
    k = xp.asarray([1, 2], device=device)
    if not wrapped and not _writable(data):
        with pytest.raises(TypeError, match="pass it wrapped in a Variable"):
            numerical_grad(lambda: data * data, (x,), (ones(xp, device, (2, 2)),))
        return
    read = (lambda: x.array) if wrapped else (lambda: x)
    gx, gk = numerical_grad(lambda: read() ** 3, (x, k), (ones(xp, device, (2, 2)),), eps=1e-3)
    assert gk is None
    assert gx.dtype == data.dtype
    assert array_api_compat.device(gx) == device
    # Central differences of x**3 are off by eps**2 (the third derivative is 6).
    tol = 1e-5 if data.dtype == xp.float64 else 2e-3
    assert_allclose(gx, 3 * to_numpy(data) ** 2, rtol=tol, atol=tol)
    assert_array_equal(raw(x), [[0.5, -1.0], [2.0, 3.0]])  # restored
    if wrapped:
        assert x.array is data


def _writable(a: Any) -> bool:
    try:
        a[(0,) * len(a.shape)] = a[(0,) * len(a.shape)]
    except Exception:
        return False
    return True


def test_numerical_grad_several_outputs(xp, device):
    x = agnograd.Variable(array(xp, device, [0.5, 2.0]))
    f = lambda: (x.array * x.array, x.array * 3.0)  # noqa: E731
    (g,) = numerical_grad(f, (x,), (ones(xp, device, (2,)), None))
    assert_allclose(g, [1.0, 4.0], rtol=1e-3)
    with pytest.raises(ValueError, match="f returned 2 outputs but grad_outputs has 1"):
        numerical_grad(f, (x,), (ones(xp, device, (2,)),))


@pytest.mark.parametrize(
    ("function", "at"),
    [(F.absolute, 0.0), (F.relu, 0.0), (lambda v: F.floor_divide(v, 1.0), 1.0)],
    ids=["abs", "relu", "floor"],
)
def test_detect_nondifferentiable(xp, device, function, at):
    x = agnograd.Variable(array(xp, device, [at, 0.5]))
    f = lambda: function(x)  # noqa: E731
    with pytest.raises(NondifferentiableError, match=r"element \(0,\) of input 0"):
        numerical_grad(f, (x,), (ones(xp, device, (2,)),), detect_nondifferentiable=True)
    with pytest.raises(NondifferentiableError, match="along the direction d"):
        check_backward(function, x.array, ones(xp, device, (2,)), detect_nondifferentiable=True)


def test_smooth_functions_are_not_flagged(xp, device):
    x = array(xp, device, [0.0, 0.5, -1.5])
    for function in (F.exp, F.tanh, F.sin, lambda v: v * v * v):
        check_backward(function, x, ones(xp, device, (3,)), detect_nondifferentiable=True)


# -- complex inputs ------------------------------------------------------------------


class ExpWithoutConj(agnograd.FunctionNode):
    """``exp`` whose rule forgets to conjugate: right for real inputs only."""

    def forward(self, inputs):
        self.retain_outputs((0,))
        return (self.xp.exp(inputs[0]),)

    def backward(self, indexes, grad_outputs):
        (y,) = self.get_retained_outputs()
        return (grad_outputs[0] * y,)


def test_complex_inputs(xp, device):
    complex_dtype = xp.complex128 if default_float(xp, device) == xp.float64 else xp.complex64
    z = xp.asarray([0.5 + 1.0j, -1.0 + 0.25j], dtype=complex_dtype, device=device)
    gy = xp.asarray([1.0 - 0.5j, 2.0 + 0.0j], dtype=complex_dtype, device=device)
    check_backward(F.exp, z, gy)
    check_backward(lambda v: apply(ExpWithoutConj(), v), xp.real(z), xp.real(gy))
    with pytest.raises(AssertionError, match="disagrees with central differences"):
        check_backward(lambda v: apply(ExpWithoutConj(), v), z, gy)
    # d/dz of <gy, exp(z)> in PyTorch's convention: gy * conj(exp(z)).
    v = agnograd.Variable(z)
    (gz,) = numerical_grad(lambda: xp.exp(v.array), (v,), (gy,))
    expected = to_numpy(gy) * np.conj(np.exp(to_numpy(z)))
    tol = 1e-6 if complex_dtype == xp.complex128 else 1e-2
    assert_allclose(gz, expected, rtol=tol, atol=tol)


# -- dtypes and devices --------------------------------------------------------------


def test_float32_passes_with_default_tolerances_and_fails_when_wrong(xp, device):
    x = array(xp, device, np.linspace(-2, 2, 24).reshape(4, 6), dtype=xp.float32)
    gy = array(xp, device, np.cos(np.arange(24.0)).reshape(4, 6), dtype=xp.float32)
    check_backward(F.exp, x, gy)
    check_backward(F.tanh, x, gy)
    check_backward(lambda v: F.sum(v * v, axis=1), x, gy[:, 0])
    with pytest.raises(AssertionError):
        check_backward(lambda v: apply(Square(factor=2.2), v), x, gy)


def test_dtype_argument_checks_float16_code_in_float64():
    x = np.array([0.5, -1.0, 2.0], dtype=np.float16)
    gy = np.ones(3, dtype=np.float16)
    with pytest.raises(ValueError, match="below the resolution"):
        check_backward(F.exp, x, gy)
    check_backward(F.exp, x, gy, dtype="float64", rtol=1e-2, atol=1e-2)


def test_devices_without_float64():
    import array_api_strict as xps

    device = xps.Device("no_float64")
    x = xps.asarray([0.5, -1.0, 2.0], dtype=xps.float32, device=device)
    gy = xps.ones(3, dtype=xps.float32, device=device)
    check_backward(F.tanh, x, gy)
    check_double_backward(F.tanh, x, gy, gy)
    (g,) = numerical_grad(lambda: x * x, (x,), (gy,))
    assert g.device == device
    assert g.dtype == xps.float32
    with pytest.raises(AssertionError):
        check_backward(lambda v: apply(Square(factor=3.0), v), x, gy)


def test_gradient_on_the_wrong_device_is_reported():
    import array_api_strict as xps

    class Misplaced(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 2.0,)

        def backward(self, indexes, grad_outputs):
            return (xps.asarray(grad_outputs[0], device=xps.Device("device2")) * 2.0,)

    x = xps.asarray([0.5, 1.0], device=xps.Device("device1"))
    with pytest.raises((AssertionError, ValueError)):
        check_backward(lambda v: apply(Misplaced(), v), x, xps.ones(2, device=x.device))


# -- hypothesis property tests -------------------------------------------------------


def _small_shapes() -> st.SearchStrategy[tuple[int, ...]]:
    # Few distinct shapes: JAX compiles every operation once per shape.
    return ags.shapes(max_dims=2, max_side=3)


@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_property_elementwise_and_sum(xp, device, data):
    x = data.draw(ags.arrays(xp, shape=_small_shapes(), device=device), label="x")
    gy = data.draw(ags.arrays(xp, shape=x.shape, device=device), label="gy")
    for function in (F.exp, F.tanh):
        check_backward(function, x, gy)
    axis = data.draw(st.none() | st.integers(0, max(len(x.shape) - 1, 0)), label="axis")
    if len(x.shape) == 0:
        axis = None
    y = F.sum(x, axis=axis)
    seed = data.draw(ags.arrays(xp, shape=tuple(y.shape), device=device), label="seed")
    check_backward(lambda v: F.sum(v, axis=axis), x, seed)


@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_property_matmul(xp, device, data):
    n, k, m = (data.draw(st.integers(1, 3)) for _ in range(3))
    a = data.draw(ags.arrays(xp, shape=(n, k), device=device), label="a")
    b = data.draw(ags.arrays(xp, shape=(k, m), device=device), label="b")
    gy = data.draw(ags.arrays(xp, shape=(n, m), device=device), label="gy")
    check_backward(F.matmul, (a, b), gy)
    square = data.draw(ags.arrays(xp, shape=(2, 2), device=device), label="square")
    if abs(float(to_numpy(square)[0, 1] - to_numpy(square)[1, 0])) > 0.1:
        # Transposing a non-symmetric square matrix by mistake keeps the shapes.
        wrong = lambda p, q: apply(MatMul("no-transpose"), p, q)  # noqa: E731
        with pytest.raises(AssertionError):
            check_backward(wrong, (square, square), ones(xp, device, (2, 2)))


@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_property_check_jvp(xp, device, data):
    """check_jvp on points hypothesis draws from the functions' domains."""
    for name in ("log", "tanh", "matmul", "sum"):
        case = data.draw(ags.function_inputs(xp, name, device=device), label=name)
        check_jvp(case, case.inputs)


# -- strategies ----------------------------------------------------------------------


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_variables_strategy(xp, device, data):
    v = data.draw(ags.variables(xp, shape=ags.shapes(max_dims=2), device=device, name="v"))
    assert isinstance(v, agnograd.Variable)
    assert v.name == "v"
    assert array_api_compat.device(v.array) == device
    assert v.dtype == default_float(xp, device)
    values = to_numpy(v)
    assert np.all(np.abs(values) <= 2.0)


def test_strategies_on_a_chosen_device():
    import array_api_strict as xps

    @settings(max_examples=10, deadline=None, database=None)
    @given(
        x=ags.arrays(xps, shape=(2,), device=xps.Device("device1")),
        dtype=ags.floating_dtypes(xps, xps.Device("no_float64")),
    )
    def check(x, dtype):
        assert x.device == xps.Device("device1")
        assert dtype == xps.float32

    check()


def test_strategies_round_bounds_inwards_to_the_dtype_drawn():
    # JAX draws float32 by default, which cannot hold 0.2 or 1.1: hypothesis refuses
    # such bounds unless they are rounded, and inwards, so values stay within them.
    jnp = pytest.importorskip("jax.numpy")
    elements = {"min_value": 0.2, "max_value": 1.1, "exclude_max": True}

    @settings(max_examples=20, deadline=None, database=None)
    @given(
        x=ags.arrays(jnp, shape=(3,), elements=elements),
        v=ags.variables(jnp, "float32", (2,), elements={"min_value": -0.1, "max_value": 0.1}),
    )
    def check(x: Any, v: Any) -> None:
        assert x.dtype == jnp.float32
        assert bool(jnp.all(x >= 0.2))
        assert bool(jnp.all(x < 1.1))
        assert bool(jnp.all(jnp.abs(v.array) <= 0.1))

    check()


@settings(max_examples=30, deadline=None)
@given(
    shapes=ags.mutually_broadcastable_shapes(3),
    index=ags.indices((3, 4), allow_negative_step=False),
)
def test_shape_and_index_strategies(shapes, index):
    np.broadcast_shapes(*shapes.input_shapes)
    items = index if isinstance(index, tuple) else (index,)
    assert all(not isinstance(k, slice) or k.step is None or k.step > 0 for k in items)
    np.zeros((3, 4))[index]


def test_every_domain_calls_the_backends_own_function():
    """The domains give inputs and keywords the standard's own functions accept."""
    import array_api_strict as xps

    for name in ags.registered_domains():
        function = xps
        for part in name.split("."):  # "linalg.solve" is xps.linalg.solve
            function = getattr(function, part)

        @settings(max_examples=3, deadline=None, database=None)
        @given(case=ags.function_inputs(xps, name, function=function))
        def check(case):
            case(*case.inputs)

        check()


def test_strategies_take_a_librarys_module_through_its_adapter(scratch_registry):
    import types

    import array_api_strict

    assert ags.array_api_strategies(np).name == "array_api_compat.numpy"
    scratch_registry(
        Adapter(name="fakelib", modules=("fakelib",), namespace=lambda: array_api_strict)
    )
    assert ags.array_api_strategies(types.ModuleType("fakelib.api")).name == "array_api_strict"


def test_a_dask_falsifying_example_shows_its_values():
    da = pytest.importorskip("dask.array")
    from hypothesis.vendor.pretty import pretty

    # Reported as found, unshrunk, as the plugin runs property tests on Dask: the
    # first example hypothesis tries is its simplest, and shrinking it again would
    # build and print about a hundred Dask arrays.
    @settings(max_examples=5, deadline=None, database=None, phases=[Phase.generate])
    @given(x=ags.arrays(da, shape=(2,)))
    def fails(x):
        raise AssertionError("always")

    with pytest.raises(AssertionError, match="always") as info:
        fails()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "x=dask.array([0., 0.], dtype=float64)" in notes, notes
    chunked = da.from_array(np.array([0.5, -1.0, 2.0, 0.25]), chunks=2)
    assert pretty(chunked) == (
        "dask.array([ 0.5 , -1.  ,  2.  ,  0.25], dtype=float64, chunks=((2, 2),))"
    )


def test_a_case_with_a_scalar_type_argument_describes_itself():
    # astype's domain passes NumPy's scalar types (classes with shape and dtype
    # descriptors), which hypothesis prints with a failing example.
    case = ags.FunctionCase("astype", (np.ones(2),), args=(np.float32,))
    assert case.describe() == "astype(float64[1., 1.], float32)"
    assert repr(case) == "astype((2,) float64, float32)"


def test_function_inputs_unknown_name():
    with pytest.raises(KeyError, match="no input domain is registered for 'nope'"):
        ags.function_inputs(np, "nope")


def test_function_inputs_is_built_once_per_what_it_depends_on():
    # Tests draw it inside the test, at each example: the same strategy each time,
    # another one for another dtype, function or namespace.
    import array_api_strict as xps

    log = ags.function_inputs(np, "log")
    assert ags.function_inputs(np, "log") is log
    assert ags.function_inputs(np, "log", dtype="float32") is not log
    assert ags.function_inputs(xps, "log") is not log
    assert ags.function_inputs(np, "log", function=np.log) is not log

    @settings(max_examples=1, database=None)
    @given(case=ags.function_inputs(np, "log", dtype="float32"))
    def float32(case: ags.FunctionCase) -> None:
        assert case.inputs[0].dtype == np.float32

    float32()

    class Unhashable:  # a function nothing can be kept for: built at each call
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, x: Any) -> Any:
            return np.log(x)

    function = Unhashable()
    built = ags.function_inputs(np, "log", function=function)
    assert built is not ags.function_inputs(np, "log", function=function)


def test_function_inputs_follows_a_domain_registered_again():
    # The strategies kept are built from the registered domains: registering another
    # one for a name is followed, as is putting the old one back.
    from agnograd.testing import _cases

    drawn: list[Any] = []

    @settings(max_examples=1, database=None)
    @given(data=st.data())
    def draw(data: Any) -> None:
        drawn.append(data.draw(ags.function_inputs(np, "log")))

    old = _cases._DOMAINS["log"]
    exp_cases = ags.function_inputs(np, "exp")
    try:
        _cases.register_domain("log")(lambda ctx, name: exp_cases)
        draw()
        assert drawn[-1].name == "exp"
    finally:
        _cases.register_domain("log")(old)
    draw()
    assert drawn[-1].name == "log"


def test_every_differentiable_function_has_a_domain():
    from agnograd.functions._table import DIFFERENTIABLE

    missing = sorted(set(DIFFERENTIABLE) - set(ags.registered_domains()))
    assert not missing, f"register an input domain in agnograd/testing/_domains.py: {missing}"


# -- assertions ----------------------------------------------------------------------


def test_assert_allclose_across_backends():
    import array_api_strict as xps
    import jax.numpy as jnp
    import torch

    assert_allclose(torch.tensor([1.0, 2.0]), jnp.asarray([1.0, 2.0]))
    assert_allclose(xps.asarray([1.0, 2.0]), np.array([1.0, 2.0 + 1e-12]), rtol=1e-9)
    assert_allclose(agnograd.Variable(np.ones(2)), torch.ones(2, dtype=torch.float64))
    with pytest.raises(AssertionError, match=r"shapes differ, \(2,\) and \(1, 2\)"):
        assert_allclose(np.ones(2), np.ones((1, 2)))
    with pytest.raises(AssertionError, match="dtypes differ, float32 and float64"):
        assert_allclose(torch.ones(2), np.ones(2), check_dtype=True)
    with pytest.raises(AssertionError, match=r"worst at \(1,\): actual nan"):
        assert_allclose(jnp.asarray([1.0, float("nan")]), np.array([1.0, 2.0]))
    assert_array_equal(jnp.asarray([1.0, float("nan")]), np.array([1.0, np.nan]))


# -- public surface and the pytest plugin ---------------------------------------------


@pytest.mark.parametrize("module", [agnograd.testing, ags], ids=["testing", "strategies"])
def test_all_is_complete(module):
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, type(sys))
        and getattr(value, "__module__", module.__name__).startswith("agnograd")
    } - {"annotations"}
    assert public == set(module.__all__)


def _pytest(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    """pytest, as in a fresh interpreter (test_plugin_profiles.run), on ``source``
    as test_probe.py."""
    pytester.makepyfile(test_probe=textwrap.dedent(source))
    return run_pytest(pytester, "-q", "-rA", *args)


def test_plugin_fixtures_option_and_profiles(pytester, monkeypatch):
    source = """
        import json
        import array_api_compat
        from hypothesis import settings

        def test_probe(xp, device, agnograd_backend):
            x = xp.asarray([1.0], device=device)
            assert array_api_compat.device(x) == device
            print("SEEN", json.dumps([agnograd_backend.name, str(device)]))

        def test_profile():
            print("PROFILE", settings.get_current_profile_name(), settings().max_examples)
    """
    chosen = "numpy,array_api_strict:device1"
    monkeypatch.setenv("CI", "true")
    result = _pytest(pytester, source, "-s", "--agnograd-backend", chosen)
    assert result.ret == 0, str(result.stdout) + str(result.stderr)
    lines = result.outlines
    seen = [json.loads(line.partition("SEEN ")[2]) for line in lines if "SEEN " in line]
    assert seen == [["numpy", "cpu"], ["array_api_strict", "array_api_strict.Device('device1')"]]
    assert "test_probe[array_api_strict:device1]" in str(result.stdout)
    assert "PROFILE ci 10" in str(result.stdout)

    monkeypatch.delenv("CI")
    result = _pytest(pytester, source, "--agnograd-backend", "nosuchlib")
    assert result.ret != 0
    assert "backend 'nosuchlib' is unknown" in str(result.stderr)

    # A device is spelled as in its specifier after '@NAME:'; a wrong one lists them.
    result = _pytest(pytester, source, "--agnograd-backend", "array_api_strict:device9")
    assert result.ret != 0
    assert (
        "--agnograd-backend array_api_strict:device9: array_api_strict has no device "
        "'device9' (valid spellings: array_api_strict:CPU_DEVICE, array_api_strict:device1,"
    ) in str(result.stdout)


def test_devices_are_found_and_named_by_the_adapters():
    import array_api_strict as xps
    import jax
    import torch

    assert backend_device("torch", "cpu") == torch.device("cpu")
    assert backend_device("array_api_strict", "no_float64") == xps.Device("no_float64")
    assert backend_device("jax", "cpu:1") == jax.devices("cpu")[1]
    assert backend_device("jax", None) == default_device(backend_namespace("jax"))
    assert backend_device("numpy", "") == "cpu"
    with pytest.raises(ValueError, match=r"valid spellings: torch:cpu\b"):
        backend_device("torch", "meta")
    assert device_spellings("jax")[:2] == ["jax:cpu:0", "jax:cpu:1"]
    assert device_spellings("numpy") == ["numpy"]
    assert as_device("jax", jax.devices("cpu")[1]).name == "@jax:cpu:1"
    # usable_devices: the adapter's devices, placeholders (meta, None) left out.
    assert torch.device("meta") not in usable_devices(array_api_compat.torch)
    assert torch.device("cpu") in usable_devices(array_api_compat.torch)
    assert None not in usable_devices(jax.numpy)
    assert usable_devices(jax.numpy)[:2] == jax.devices("cpu")[:2]
    assert usable_devices(xps) == list(xps.__array_namespace_info__().devices())
    assert usable_devices(np) == ["cpu"]  # NumPy itself, not only array-api-compat's
    assert default_device(agnograd.namespace(np)) == "cpu"  # no adapter: its info


def test_dtype_names_of_every_library():
    import array_api_strict as xps
    import dask.array as da
    import jax.numpy as jnp
    import torch

    arrays = [np.ones(1), xps.ones(1), torch.ones(1), jnp.ones(1), da.ones(1)]
    assert {dtype_name(a.dtype) for a in arrays} == {"float32", "float64"}
    assert dtype_name(torch.complex64) == dtype_name(xps.complex64) == "complex64"
    assert dtype_name(np.dtype("bool")) == dtype_name(torch.bool) == "bool"


def test_dtype_names_of_scalar_types():
    import jax.numpy as jnp

    assert dtype_name(np.float32) == "float32"
    assert dtype_name(jnp.float64) == "float64"
    assert dtype_name(jnp.bfloat16) == "bfloat16"


def test_local_profile_is_loaded_outside_ci():
    import os

    from hypothesis import settings as current

    expected = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes", "on") else "local"
    assert current.get_current_profile_name() == expected


def test_plugin_imports_no_array_library():
    probe = (
        "import sys, agnograd.testing._plugin as p\n"
        "from agnograd.testing._backends import installed_backends\n"
        "installed_backends()\n"
        "print(sorted(m for m in ('torch', 'jax', 'array_api_strict', 'cupy', 'dask') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_kit_lists_the_backends_of_the_adapter_registry(scratch_registry):
    assert installed_backends() == [a.name for a in adapters() if a.is_installed()]
    assert installed_backends()[0] == "numpy"  # the adapters' order, not discovery's
    scratch_registry(Adapter(name="numpy_again", modules=("numpy",), namespace=lambda: np))
    assert installed_backends()[-1] == "numpy_again"
    assert backend_namespace("numpy_again") is np  # the adapter's own namespace hook
    assert backend_namespace("numpy") is array_api_compat.numpy
    with pytest.raises(ValueError, match="backend_namespace: unknown backend 'nosuchlib'"):
        backend_namespace("nosuchlib")
    scratch_registry(Adapter(name="no_asarray", modules=("textwrap",)))
    with pytest.raises(ValueError, match="module textwrap of adapter 'no_asarray' has no asarray"):
        backend_namespace("no_asarray")


def test_the_xp_fixture_skips_an_installed_but_unusable_backend(
    pytester, monkeypatch, scratch_registry
):
    # Registered in a conftest.py: before the plugin reads --agnograd-backend (in the
    # registry of this process: scratch_registry forgets it after).
    monkeypatch.delenv("CI", raising=False)
    (pytester.path / "conftest.py").write_text(
        "import agnograd\n"
        "agnograd.register_adapter(\n"
        '    agnograd.Adapter(name="no_gpu_lib", modules=("numpy",), unusable=lambda: "no GPU")\n'
        ")\n"
    )
    source = """
        def test_probe(xp):
            pass
    """
    result = _pytest(pytester, source, "--agnograd-backend", "numpy,no_gpu_lib")
    assert result.ret == 0, str(result.stdout) + str(result.stderr)
    assert "backend no_gpu_lib is installed but unusable: no GPU" in str(result.stdout)
