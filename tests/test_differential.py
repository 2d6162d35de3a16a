"""Differential test: random small programs, agnograd against torch.autograd.

Hypothesis builds a program over the array API: a few inputs of small shapes that
broadcast together, then a few steps, each an elementwise function with a safe
domain (unary, or binary with broadcasting), an operator or augmented assignment
with a Python number (``c - a``, ``a -= c``), a sum or mean, a reshape or
permute_dims, or a matmul where the shapes allow. The program runs on agnograd's
namespace over NumPy (float64) and on array-api-compat's torch namespace (float64,
torch.autograd); the values of every step, the first-order gradients of a random
weighted sum of them, and the second-order ones (the gradient of
``sum(grad * v)``: agnograd with ``enable_double_backprop=True``, torch with
``create_graph=True``) must agree. Among the steps are a user's ``FunctionNode``
whose backward takes its functions from ``agnograd.namespace_of(gy)`` (raw arrays at
first order, Variables at second), and products with raw arrays, which the namespace
takes as constants; the inputs may be pickled or copied leaves.

The number of examples follows the loaded hypothesis profile (``ci``: 10,
derandomized).
"""

from __future__ import annotations

import contextlib
import copy
import math
import operator
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import agnograd
from agnograd.testing import strategies as ags

torch = pytest.importorskip("torch")
compat_torch = pytest.importorskip("array_api_compat.torch")


class UserSin(agnograd.FunctionNode):
    """``sin``, as a user writes it: its backward asks ``namespace_of`` for ``cos``."""

    def forward(self, inputs):
        self.retain_inputs((0,))
        return (self.xp.sin(inputs[0]),)

    def backward(self, target_input_indexes, grad_outputs):
        (x,) = self.get_retained_inputs()
        (gy,) = grad_outputs
        return (gy * agnograd.namespace_of(gy).cos(x),)


def _user_sin(xp: Any, a: Any) -> Any:
    return xp.sin(a) if xp is compat_torch else UserSin().apply((a,))[0]


def _times_raw(xp: Any, a: Any) -> Any:
    """``a`` times a raw array of its library: a constant beside a Variable."""
    shape = tuple(a.shape)
    raw = np.linspace(-1.0, 1.0, max(math.prod(shape), 1)).reshape(shape)
    return xp.multiply(a, torch.from_numpy(raw) if xp is compat_torch else raw)


# Smooth everywhere and slow to grow, so that no example leaves the safe domain and
# chained steps stay well conditioned.
UNARY: dict[str, Callable[[Any, Any], Any]] = {
    "sin": lambda xp, a: xp.sin(a),
    "cos": lambda xp, a: xp.cos(a),
    "tanh": lambda xp, a: xp.tanh(a),
    "atan": lambda xp, a: xp.atan(a),
    "negative": lambda xp, a: xp.negative(a),
    "square": lambda xp, a: xp.square(xp.tanh(a)) + a,
    "exp(sin)": lambda xp, a: xp.exp(xp.sin(a)),
    "log1p(a*a)": lambda xp, a: xp.log1p(a * a),
    "sqrt(1+a*a)": lambda xp, a: xp.sqrt(1.0 + a * a),
    "1/(1+a*a)": lambda xp, a: 1.0 / (1.0 + a * a),
    "user sin": _user_sin,
    "times a raw array": _times_raw,
}
BINARY: dict[str, Callable[[Any, Any, Any], Any]] = {
    "add": lambda xp, a, b: xp.add(a, b),
    "subtract": lambda xp, a, b: a - b,
    "multiply": lambda xp, a, b: xp.multiply(a, b),
    "divide": lambda xp, a, b: xp.divide(a, 1.5 + xp.sin(b)),  # denominator in [0.5, 2.5]
    "pow": lambda xp, a, b: xp.pow(1.0 + a * a, xp.tanh(b)),
}


def _augmented(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def step(a: Any, c: Any) -> Any:
        h = a * 1.0  # torch's += writes into h, agnograd's binds h anew
        h = op(h, c)
        return h

    return step


# A Python number on either side of an operator, or in an augmented assignment.
NUMBER_STEPS: dict[str, Callable[[Any, Any], Any]] = {
    "a + c": operator.add,
    "c + a": lambda a, c: c + a,
    "a - c": operator.sub,
    "c - a": lambda a, c: c - a,
    "a * c": operator.mul,
    "c * a": lambda a, c: c * a,
    "a / c": operator.truediv,
    "a += c": _augmented(operator.iadd),
    "a -= c": _augmented(operator.isub),
    "a *= c": _augmented(operator.imul),
    "a /= c": _augmented(operator.itruediv),
}
NUMBERS = (0, 2, -1, True, False, 0.5, 0.0, -0.0, -1.5)
REDUCTIONS = ("sum", "mean")
RTOL, ATOL = 1e-7, 1e-9


@dataclass(frozen=True)
class Step:
    """One step of a program: ``op`` on the values at ``args``, with ``params``."""

    op: str
    args: tuple[int, ...]
    params: tuple[Any, ...] = ()

    def run(self, xp: Any, values: list[Any]) -> Any:
        a = values[self.args[0]]
        if self.op in UNARY:
            return UNARY[self.op](xp, a)
        if self.op in BINARY:
            return BINARY[self.op](xp, a, values[self.args[1]])
        if self.op in NUMBER_STEPS:
            return NUMBER_STEPS[self.op](a, self.params[0])
        if self.op in REDUCTIONS:
            axis, keepdims = self.params
            return getattr(xp, self.op)(a, axis=axis, keepdims=keepdims)
        if self.op == "reshape":
            return xp.reshape(a, self.params[0])
        if self.op == "permute_dims":
            return xp.permute_dims(a, self.params[0])
        if self.op == "matmul":  # with the other's last two axes swapped
            b = values[self.args[1]]
            return xp.matmul(a, xp.matrix_transpose(b) if b.ndim >= 2 else b)
        raise AssertionError(f"unknown step {self.op}")

    def __str__(self) -> str:
        args = ", ".join(f"v{i}" for i in self.args)
        params = "".join(f", {p!r}" for p in self.params)
        return f"{self.op}({args}{params})"


def _broadcastable(*shapes: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


def _matmul_partner(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether ``matmul(a, b.mT)`` (or ``matmul(a, b)`` for a vector ``b``) is valid."""
    if not a or not b or a[-1] != b[-1]:
        return False
    if len(b) == 1 or len(a) == 1:
        return len(a) == 1 or len(b) == 1
    return _broadcastable(a[:-2], b[:-2])


@st.composite
def steps(draw: st.DrawFn, shapes: list[tuple[int, ...]]) -> Step:
    """One step over values of ``shapes``; appends the result's shape to ``shapes``."""
    i = draw(st.integers(0, len(shapes) - 1))
    shape = shapes[i]
    kinds = ["unary", "binary", "number", "reduction", "reshape"]
    if len(shape) >= 2:
        kinds.append("permute_dims")
    if shape:
        kinds.append("matmul")
    kind = draw(st.sampled_from(kinds))
    if kind == "unary":
        step = Step(draw(st.sampled_from(sorted(UNARY))), (i,))
    elif kind == "binary":
        partners = [j for j, s in enumerate(shapes) if _broadcastable(shape, s)]
        step = Step(draw(st.sampled_from(sorted(BINARY))), (i, draw(st.sampled_from(partners))))
    elif kind == "number":
        op = draw(st.sampled_from(sorted(NUMBER_STEPS)))
        numbers = [c for c in NUMBERS if not ("/" in op and c == 0)]  # no division by 0
        numbers = [c for c in numbers if not ("-" in op and type(c) is bool)]  # torch: no
        step = Step(op, (i,), (draw(st.sampled_from(numbers)),))
    elif kind == "reduction":
        axis = draw(st.none() | st.integers(-len(shape), len(shape) - 1)) if shape else None
        step = Step(draw(st.sampled_from(REDUCTIONS)), (i,), (axis, draw(st.booleans())))
    elif kind == "reshape":
        step = Step("reshape", (i,), (tuple(reversed(shape)) if len(shape) > 1 else (-1,),))
    elif kind == "permute_dims":
        perm = tuple(draw(st.permutations(range(len(shape)))))
        step = Step("permute_dims", (i,), (perm,))
    else:
        partners = [j for j, s in enumerate(shapes) if _matmul_partner(shape, s)]
        step = Step("matmul", (i, draw(st.sampled_from(partners))))
    # Run on NumPy's zeros (in every step's domain) to learn the result's shape.
    shapes.append(step.run(np, [np.zeros(s) for s in shapes]).shape)
    return step


@st.composite
def programs(draw: st.DrawFn) -> tuple[list[np.ndarray], list[Step]]:
    count = draw(st.integers(1, 3))
    shapes = draw(ags.mutually_broadcastable_shapes(count, max_dims=3, max_side=3))
    values = st.floats(-2.0, 2.0, allow_nan=False, allow_subnormal=False)
    inputs = [
        draw(ags.arrays(np, "float64", shape, elements=values)) for shape in shapes.input_shapes
    ]
    known = [tuple(a.shape) for a in inputs]
    program = [draw(steps(known)) for _ in range(draw(st.integers(1, 6)))]
    return inputs, program


def _run(xp: Any, inputs: list[Any], program: list[Step]) -> list[Any]:
    values = list(inputs)
    for step in program:
        values.append(step.run(xp, values))
    return values[len(inputs) :]


def _numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    return np.asarray(x.array if isinstance(x, agnograd.Variable) else x)


def _compare(what: str, ours: list[Any], theirs: list[Any], shapes: list[Any]) -> None:
    for k, (a, b, shape) in enumerate(zip(ours, theirs, shapes, strict=True)):
        expected = np.zeros(shape) if b is None else _numpy(b)
        actual = np.zeros(shape) if a is None else _numpy(a)
        scale = 1.0 + float(np.max(np.abs(expected), initial=0.0))
        np.testing.assert_allclose(
            actual, expected, rtol=RTOL, atol=ATOL * scale, err_msg=f"{what} {k}"
        )
        assert actual.shape == tuple(shape), f"{what} {k}: shape {actual.shape} != {shape}"


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=programs(), data=st.data())
def test_agnograd_agrees_with_torch_autograd(
    case: tuple[list[np.ndarray], list[Step]], data: st.DataObject
) -> None:
    inputs, program = case
    note("inputs: " + ", ".join(f"v{i}{a.shape}" for i, a in enumerate(inputs)))
    for k, step in enumerate(program):
        note(f"v{len(inputs) + k} = {step}")
    floats = st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False)

    xp = agnograd.namespace(np)
    ours_in = [agnograd.Variable(a.copy()) for a in inputs]
    copier = data.draw(st.sampled_from(["none", "pickle", "copy", "deepcopy"]), label="copy")
    if copier != "none":  # a copy is a leaf of its own, with the same gradients
        copied = {"pickle": lambda v: pickle.loads(pickle.dumps(v)), "copy": copy.copy}
        ours_in = [copied.get(copier, copy.deepcopy)(v) for v in ours_in]
    ours = _run(xp, ours_in, program)
    theirs_in = [torch.tensor(a, requires_grad=True) for a in inputs]
    theirs = _run(compat_torch, theirs_in, program)
    _compare("value of step", ours, theirs, [t.shape for t in theirs])

    # First order: the gradient of a random weighted sum of every step's value.
    weights = [data.draw(ags.arrays(np, "float64", tuple(t.shape), floats)) for t in theirs]
    loss = sum(xp.sum(y * w) for y, w in zip(ours, weights, strict=True))
    loss_t = sum(torch.sum(y * torch.from_numpy(w)) for y, w in zip(theirs, weights, strict=True))
    grads = agnograd.grad([loss], ours_in, enable_double_backprop=True)
    grads_t = torch.autograd.grad(loss_t, theirs_in, create_graph=True, allow_unused=True)
    input_shapes = [a.shape for a in inputs]
    _compare("gradient of input", grads, list(grads_t), input_shapes)

    # Second order: the gradient of sum(grad * v), v a random direction.
    directions = [data.draw(ags.arrays(np, "float64", a.shape, floats)) for a in inputs]
    used = [i for i, g in enumerate(grads_t) if g is not None and g.requires_grad]
    assert all(grads[i] is not None for i in used)
    if not used:  # the program is linear in its inputs: no second-order graph
        return
    second = agnograd.grad([sum(xp.sum(grads[i] * directions[i]) for i in used)], ours_in)
    second_t = torch.autograd.grad(
        sum(torch.sum(grads_t[i] * torch.from_numpy(directions[i])) for i in used),
        theirs_in,
        allow_unused=True,
    )
    _compare("second-order gradient of input", second, list(second_t), input_shapes)


# -- writes into the arrays that nodes keep -------------------------------------------

#: Writes into an input after the graph (and the loss) is built, each as agnograd and
#: as torch.autograd spell it: ``write(v, mode)`` on agnograd's Variable inside
#: ``mode``, ``torch_write(t)`` on the leaf tensor (under ``torch.no_grad()``, as
#: torch wants a write into a leaf that requires a gradient).
WRITES: dict[str, tuple[Callable[[Any], None], Callable[[Any], None]]] = {
    # an in-place operation through the setter: v.array = v.array.__isub__(0.25)
    "v.array -= 0.25": (lambda v: _isub(v), lambda t: t.sub_(0.25)),
    # agnograd's own write
    "v[...] = 7.0": (lambda v: v.__setitem__(Ellipsis, 7.0), lambda t: t.fill_(7.0)),
    # a raw write into the array, which on NumPy only debug mode sees
    "v.array[...] = 7.0": (
        lambda v: v.array.__setitem__(Ellipsis, 7.0),
        lambda t: t.fill_(7.0),
    ),
}
MUTABLE = ("numpy", "array_api_strict", "torch")


def _isub(v: Any) -> None:
    v.array -= 0.25


def _portable(step: Step) -> bool:
    """Whether ``step`` runs on any library's arrays through agnograd's namespace."""
    if step.op == "times a raw array":
        return False
    return not (step.op in NUMBER_STEPS and type(step.params[0]) is bool)


def _library(name: str) -> Any:
    return {"numpy": np, "torch": compat_torch}.get(name) or pytest.importorskip(name)


def _host(x: Any) -> Any:
    if x is None or isinstance(x, torch.Tensor):
        return x
    x = x.array if isinstance(x, agnograd.Variable) else x
    return np.from_dlpack(x) if not isinstance(x, np.ndarray) else x


@pytest.mark.parametrize("library", MUTABLE)
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=programs(), data=st.data())
def test_writes_into_kept_arrays_are_refused_where_torch_refuses_them(
    library: str, case: tuple[list[np.ndarray], list[Step]], data: st.DataObject
) -> None:
    # After the loss is built, one input is written in place. torch.autograd refuses
    # the backward where a node it ran kept that memory and reads it; agnograd must
    # refuse it too (on NumPy a raw write in debug mode), and where torch computes a
    # gradient agnograd must compute the same one (a node keeps what its gradients
    # read, no more: the loss's product with a constant keeps the constant).
    inputs, program = case
    # The programs' raw arrays are NumPy's and their numbers may be booleans, which
    # another library's arrays refuse (array-api-strict: a bool with a float array).
    assume(library == "numpy" or all(_portable(step) for step in program))
    i = data.draw(st.integers(0, len(inputs) - 1), label="written input")
    kind = data.draw(st.sampled_from(sorted(WRITES)), label="write")
    inside = data.draw(st.booleans(), label="inside no_backprop_mode")
    if kind == "v[...] = 7.0":
        inside = True  # outside, a write into a leaf that requires a gradient is refused
    # Writes that change nothing a node keeps: into an input before the loss is built
    # (its nodes keep the values written; * 1.0 keeps the inputs in the program's
    # domain), into an array of no node after.
    before = data.draw(st.sampled_from([None, *range(len(inputs))]), label="written before")
    elsewhere = data.draw(st.integers(0, 3), label="writes into an array of no node after")
    # An intermediate of another graph written in place (a write the graph follows),
    # alive while the program runs: it changes nothing the program reads.
    alive = data.draw(st.booleans(), label="a written intermediate alive elsewhere")
    note("inputs: " + ", ".join(f"v{k}{a.shape}" for k, a in enumerate(inputs)))
    for k, step in enumerate(program):
        note(f"v{len(inputs) + k} = {step}")
    floats = st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False)
    weights = [
        data.draw(ags.arrays(np, "float64", tuple(s), floats))
        for s in (
            v.shape for v in _run(compat_torch, [torch.from_numpy(a) for a in inputs], program)
        )
    ]
    write, torch_write = WRITES[kind]

    lib = _library(library)
    debug = kind == "v.array[...] = 7.0" and library != "torch"
    with agnograd.using_config("debug", debug):
        ours_in = [agnograd.Variable(lib.asarray(a.copy())) for a in inputs]
        other = agnograd.Variable(lib.asarray(np.zeros(2)))
        written = agnograd.Variable(lib.asarray(np.ones(3))) * 1.0 if alive else None
        if written is not None:
            written[0:2] = 5.0
        if before is not None:
            with agnograd.no_backprop_mode():
                ours_in[before].array *= 1.0
        xp = ours_in[0].__array_namespace__()
        ours = _run(xp, ours_in, program)
        loss = sum(xp.sum(y * lib.asarray(w)) for y, w in zip(ours, weights, strict=True))
        with agnograd.no_backprop_mode() if inside else contextlib.nullcontext():
            write(ours_in[i])
        for _ in range(elsewhere):
            _isub(other)
        try:
            grads = agnograd.grad([loss], ours_in)
        except RuntimeError as error:
            refused: RuntimeError | None = error
        else:
            refused = None

    theirs_in = [torch.tensor(a, requires_grad=True) for a in inputs]
    if before is not None:
        with torch.no_grad():
            theirs_in[before].mul_(1.0)
    theirs = _run(compat_torch, theirs_in, program)
    loss_t = sum(torch.sum(y * torch.from_numpy(w)) for y, w in zip(theirs, weights, strict=True))
    with torch.no_grad():
        torch_write(theirs_in[i])
    try:
        grads_t = torch.autograd.grad(loss_t, theirs_in, allow_unused=True)
    except RuntimeError as error:
        torch_refused: RuntimeError | None = error
    else:
        torch_refused = None
    if torch_refused is not None:
        assert "modified by an inplace operation" in str(torch_refused), torch_refused
        assert refused is not None, "torch refuses the backward, agnograd computed one"
        assert "written in place" in str(refused), refused
        return
    assert refused is None, f"torch computes the gradient, agnograd refused: {refused}"
    _compare(
        "gradient of input",
        [_host(g) for g in grads],
        list(grads_t),
        [a.shape for a in inputs],
    )
