"""The elementwise chapter of agnograd's namespace: every function, to second order.

Each differentiable function is checked on numpy, array_api_strict and torch against
central differences (first and second order, float64), on hypothesis-drawn shapes
(0-d and broadcasting pairs included) and values drawn inside the function's smooth
domain, with Python scalars on either side of binary functions; and against
torch.autograd, to first and second order, for real and complex inputs (PyTorch's
conjugate Wirtinger convention). The conventions at kinks are pinned by explicit
cases and compared with PyTorch. Non-differentiable functions return Variables that
require no gradient and hold the backend's own results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import agnograd
from agnograd import Variable
from agnograd.functions import _elementwise, _standard
from agnograd.functions._table import DIFFERENTIABLE, NON_DIFFERENTIABLE, UNSUPPORTED
from agnograd.testing import backend_namespace, check_backward, check_double_backward
from agnograd.testing import strategies as ags

torch = pytest.importorskip("torch")

BACKENDS = ("numpy", "array_api_strict", "torch")
EXAMPLES = settings(max_examples=6, deadline=None)
# float64 central differences with a small step: truncation error ~1e-8, roundoff ~1e-12.
FIRST = {"eps": 1e-4, "atol": 1e-6, "rtol": 1e-5}
SECOND = {"eps": 1e-4, "atol": 1e-5, "rtol": 1e-4}

# -- input domains ------------------------------------------------------------------

Elements = st.SearchStrategy[float]


def interval(low: float, high: float) -> Elements:
    return st.floats(low, high, allow_nan=False, allow_subnormal=False)


def signed(low: float, high: float) -> Elements:
    """Values with ``low <= |v| <= high`` of either sign."""
    return interval(low, high) | interval(-high, -low)


def grid(step: float, offset: float, count: int = 4) -> Elements:
    """``offset + k * step`` for ``|k| <= count``: values kept apart from kinks."""
    return st.integers(-count, count).map(lambda k: offset + k * step)


ANY = interval(-2.0, 2.0)


@dataclass(frozen=True)
class Case:
    """How to test one function: elements of each operand, its PyTorch twin, complex
    domain (ranges of the real and imaginary parts of each operand) if any."""

    name: str
    elements: tuple[Elements, ...]
    torch: Callable[..., Any]
    complex_parts: tuple[tuple[tuple[float, float], tuple[float, float]], ...] | None = None
    holomorphic: bool = True

    @property
    def arity(self) -> int:
        return len(self.elements)

    def __str__(self) -> str:
        return self.name


SMALL = ((-1.0, 1.0), (-1.0, 1.0))
RIGHT = ((0.5, 2.0), (-1.0, 1.0))  # away from the negative real axis (branch cuts)
CENTRE = ((-0.5, 0.5), (-0.5, 0.5))
STRIP = ((-1.0, 1.0), (-0.5, 0.5))

CASES = [
    Case("abs", (signed(0.1, 2.0),), torch.abs, (RIGHT,), holomorphic=False),
    Case("acos", (interval(-0.8, 0.8),), torch.acos, (CENTRE,)),
    Case("acosh", (interval(1.2, 3.0),), torch.acosh, (((1.5, 2.5), (-0.5, 0.5)),)),
    Case("asin", (interval(-0.8, 0.8),), torch.asin, (CENTRE,)),
    Case("asinh", (ANY,), torch.asinh, (STRIP,)),
    Case("atan", (ANY,), torch.atan, (STRIP,)),
    Case("atanh", (interval(-0.8, 0.8),), torch.atanh, (CENTRE,)),
    Case("conj", (ANY,), torch.conj, (SMALL,), holomorphic=False),
    Case("cos", (interval(-3.0, 3.0),), torch.cos, (SMALL,)),
    Case("cosh", (ANY,), torch.cosh, (SMALL,)),
    Case("exp", (ANY,), torch.exp, (SMALL,)),
    Case("expm1", (ANY,), torch.expm1, (SMALL,)),
    Case("imag", (), torch.imag, (SMALL,), holomorphic=False),
    Case("log", (interval(0.5, 3.0),), torch.log, (RIGHT,)),
    Case("log10", (interval(0.5, 3.0),), torch.log10, (RIGHT,)),
    Case("log1p", (interval(-0.5, 2.0),), torch.log1p, (((0.0, 2.0), (-1.0, 1.0)),)),
    Case("log2", (interval(0.5, 3.0),), torch.log2, (RIGHT,)),
    Case("negative", (ANY,), torch.negative, (SMALL,)),
    Case("positive", (ANY,), torch.positive, (SMALL,)),
    Case("real", (ANY,), torch.real, (SMALL,), holomorphic=False),
    Case("reciprocal", (signed(0.5, 2.0),), torch.reciprocal, (RIGHT,)),
    Case("sin", (interval(-3.0, 3.0),), torch.sin, (SMALL,)),
    Case("sinh", (ANY,), torch.sinh, (SMALL,)),
    Case("sqrt", (interval(0.5, 3.0),), torch.sqrt, (RIGHT,)),
    Case("square", (ANY,), torch.square, (SMALL,)),
    Case("tan", (interval(-1.2, 1.2),), torch.tan, (SMALL,)),
    Case("tanh", (interval(-3.0, 3.0),), torch.tanh, (SMALL,)),
    # binary
    Case("add", (ANY, ANY), torch.add, (SMALL, SMALL)),
    Case("subtract", (ANY, ANY), torch.subtract, (SMALL, SMALL)),
    Case("multiply", (ANY, ANY), torch.multiply, (SMALL, SMALL)),
    Case("divide", (ANY, signed(0.5, 2.0)), torch.divide, (SMALL, RIGHT)),
    Case("pow", (interval(0.5, 2.0), ANY), torch.pow, (RIGHT, CENTRE)),
    # atan2 jumps by 2 pi where x1 crosses 0 with x2 < 0: keep x1 off 0.
    Case("atan2", (signed(0.1, 2.0), signed(0.5, 2.0)), torch.atan2),
    Case("copysign", (signed(0.1, 2.0), signed(0.1, 2.0)), torch.copysign),
    Case("hypot", (signed(0.2, 2.0), signed(0.2, 2.0)), torch.hypot),
    Case("logaddexp", (ANY, ANY), torch.logaddexp),
    # x1 - x2 is an odd multiple of 0.25: never a tie.
    Case("maximum", (grid(0.5, 0.125), grid(0.5, -0.125)), torch.maximum),
    Case("minimum", (grid(0.5, 0.125), grid(0.5, -0.125)), torch.minimum),
    # x1 / x2 is an odd multiple of 1/16 at least: never an integer (a jump).
    Case(
        "remainder",
        (grid(0.25, 0.125, 8), st.sampled_from([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0])),
        torch.remainder,
    ),
]
# imag has no real inputs: it is tested on complex ones only.
REAL_CASES = [c for c in CASES if c.elements]
COMPLEX_CASES = [c for c in CASES if c.complex_parts is not None]
BY_NAME = {c.name: c for c in CASES}


def namespace(backend: str) -> Any:
    return agnograd.namespace(backend_namespace(backend))


def to_backend(backend: str, a: np.ndarray) -> Any:
    return backend_namespace(backend).asarray(a)


def to_numpy(a: Any) -> np.ndarray:
    a = a.array if isinstance(a, Variable) else a
    if isinstance(a, torch.Tensor):
        return a.detach().numpy(force=True)  # resolves lazy conjugates and ZeroTensors
    return np.asarray(a)


def _as_tensor(value: float) -> Any:
    """A Python scalar as PyTorch's functions take it: a 0-d float64 tensor."""
    return torch.tensor(value, dtype=torch.float64)


@st.composite
def drawn_inputs(draw: Any, case: Case, *, scalars: bool = True) -> tuple[list[Any], int | None]:
    """float64 NumPy operands of ``case`` and which one (if any) is a Python scalar."""
    if case.arity == 1:
        shapes = [draw(ags.shapes(max_dims=3, max_side=3))]
    else:
        shapes = list(
            draw(ags.mutually_broadcastable_shapes(2, max_dims=3, max_side=3)).input_shapes
        )
    operands: list[Any] = [
        draw(hnp.arrays(np.float64, shape, elements=elements))
        for shape, elements in zip(shapes, case.elements, strict=True)
    ]
    scalar = draw(st.sampled_from([None, 0, 1])) if scalars and case.arity == 2 else None
    if scalar is not None:
        operands[scalar] = float(operands[scalar].flat[0])
    return operands, scalar


@st.composite
def drawn_complex(draw: Any, case: Case) -> list[np.ndarray]:
    """complex128 NumPy operands of ``case`` inside its complex domain."""
    assert case.complex_parts is not None
    if case.arity == 1 or len(case.complex_parts) == 1:
        shapes = [draw(ags.shapes(max_dims=2, max_side=3))]
    else:
        shapes = list(
            draw(ags.mutually_broadcastable_shapes(2, max_dims=2, max_side=3)).input_shapes
        )
    operands = []
    for shape, (re, im) in zip(shapes, case.complex_parts, strict=True):
        real = draw(hnp.arrays(np.float64, shape, elements=interval(*re)))
        imag = draw(hnp.arrays(np.float64, shape, elements=interval(*im)))
        operands.append(np.asarray(real + 1j * imag))
    return operands


def bind(fn: Callable[..., Any], operands: list[Any], scalar: int | None) -> Callable[..., Any]:
    """``fn`` of the array operands, with the Python scalar put back in its place."""
    if scalar is None:
        return fn

    def call(x: Any) -> Any:
        return fn(x, operands[1]) if scalar == 1 else fn(operands[0], x)

    return call


def seeds(seed: int, shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.uniform(-1.0, 1.0, shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.uniform(-1.0, 1.0, shape)
    return np.asarray(values, dtype=dtype)


def output_shape(operands: list[Any]) -> tuple[int, ...]:
    return np.broadcast_shapes(*[np.shape(o) for o in operands])


# -- numerical gradients, first and second order, on every backend -------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", REAL_CASES, ids=str)
@EXAMPLES
@given(data=st.data())
def test_gradients_match_central_differences(case: Case, backend: str, data: Any) -> None:
    operands, scalar = data.draw(drawn_inputs(case))
    seed = data.draw(st.integers(0, 2**16), label="seed")
    fn = bind(getattr(namespace(backend), case.name), operands, scalar)
    arrays = [to_backend(backend, o) for k, o in enumerate(operands) if k != scalar]
    gy = to_backend(backend, seeds(seed, output_shape(operands)))
    ggx = [to_backend(backend, seeds(seed + 1 + k, tuple(a.shape))) for k, a in enumerate(arrays)]
    check_backward(fn, tuple(arrays), gy, **FIRST)
    check_double_backward(fn, tuple(arrays), gy, tuple(ggx), **SECOND)


# -- torch.autograd as the oracle -----------------------------------------------------


def agnograd_grads(
    fn: Callable[..., Any], arrays: list[Any], gy: Any, ggx: list[Any] | None
) -> tuple[list[Any], list[Any] | None]:
    """First-order gradients and, with ``ggx``, the vector-Jacobian product of the
    first-order gradients with ``ggx``, both computed by agnograd."""
    xs = [Variable(a) for a in arrays]
    y = fn(*xs)
    first = agnograd.grad([y], xs, [gy], enable_double_backprop=ggx is not None)
    if ggx is None:
        return first, None
    used = [(g, gg) for g, gg in zip(first, ggx, strict=True) if g is not None]
    if not used or not any(g.requires_grad for g, _ in used):
        return first, [None] * len(xs)
    second = agnograd.grad([g for g, _ in used], xs, [gg for _, gg in used])
    return first, second


def torch_grads(
    fn: Callable[..., Any], arrays: list[np.ndarray], gy: np.ndarray, ggx: list[np.ndarray] | None
) -> tuple[list[Any], list[Any] | None]:
    xs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = fn(*xs)
    first = torch.autograd.grad(
        y, xs, torch.tensor(gy), create_graph=ggx is not None, allow_unused=True
    )
    if ggx is None:
        return list(first), None
    used = [(g, torch.tensor(gg)) for g, gg in zip(first, ggx, strict=True) if g is not None]
    used = [(g, gg) for g, gg in used if g.requires_grad]
    if not used:
        return list(first), [None] * len(xs)
    second = torch.autograd.grad(
        [g for g, _ in used], xs, [gg for _, gg in used], allow_unused=True
    )
    return list(first), list(second)


def assert_same(
    ours: list[Any], theirs: list[Any], shapes: list[tuple[int, ...]], what: str
) -> None:
    for k, (a, b, shape) in enumerate(zip(ours, theirs, shapes, strict=True)):
        a = np.zeros(shape) if a is None else to_numpy(a)
        b = np.zeros(shape) if b is None else to_numpy(b)
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=f"{what} of operand {k}")


@pytest.mark.parametrize("case", REAL_CASES, ids=str)
@EXAMPLES
@given(data=st.data())
def test_gradients_match_torch_autograd(case: Case, data: Any) -> None:
    operands, scalar = data.draw(drawn_inputs(case))
    if case.name == "pow":
        # PyTorch zeroes d/dx1 wherever x2 == 0, and with it d2/dx1dx2 = 1 / x1.
        assume(np.all(operands[1] != 0))
    seed = data.draw(st.integers(0, 2**16), label="seed")
    arrays = [o for k, o in enumerate(operands) if k != scalar]
    gy = seeds(seed, output_shape(operands))
    ggx = [seeds(seed + 1 + k, a.shape) for k, a in enumerate(arrays)]
    ours = agnograd_grads(
        bind(getattr(namespace("torch"), case.name), operands, scalar),
        [torch.asarray(a) for a in arrays],
        torch.asarray(gy),
        [torch.asarray(g) for g in ggx],
    )
    # PyTorch's functions take scalars as 0-d tensors.
    constants = [_as_tensor(o) if k == scalar else o for k, o in enumerate(operands)]
    theirs = torch_grads(bind(case.torch, constants, scalar), arrays, gy, ggx)
    shapes = [a.shape for a in arrays]
    assert_same(ours[0], theirs[0], shapes, "first-order gradient")
    assert_same(ours[1], theirs[1], shapes, "second-order gradient")  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", COMPLEX_CASES, ids=str)
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_complex_gradients_match_torch_autograd(case: Case, backend: str, data: Any) -> None:
    """PyTorch's conjugate Wirtinger convention, on complex128 inputs.

    Second order is compared for holomorphic functions; ``abs``, ``real``, ``imag``
    and ``conj`` map complex to real values (or are antiholomorphic), so their
    double backprop mixes real and complex gradients (first order only here).
    """
    operands = data.draw(drawn_complex(case))
    if case.name == "pow":  # as for real inputs: PyTorch masks x2 == 0 for x1
        assume(np.all(operands[1] != 0))
    seed = data.draw(st.integers(0, 2**16), label="seed")
    with torch.no_grad():
        out = case.torch(*[torch.asarray(o) for o in operands])
    gy = seeds(seed, tuple(out.shape), np.dtype(str(out.dtype).removeprefix("torch.")))
    ggx = [seeds(seed + 1 + k, o.shape, np.complex128) for k, o in enumerate(operands)]
    second = case.holomorphic
    ours = agnograd_grads(
        getattr(namespace(backend), case.name),
        [to_backend(backend, o) for o in operands],
        to_backend(backend, gy),
        [to_backend(backend, g) for g in ggx] if second else None,
    )
    theirs = torch_grads(case.torch, operands, gy, ggx if second else None)
    shapes = [o.shape for o in operands]
    assert_same(ours[0], theirs[0], shapes, "first-order gradient")
    if second:
        assert_same(ours[1], theirs[1], shapes, "second-order gradient")  # type: ignore[arg-type]


# -- clip ---------------------------------------------------------------------------

# x sits on odd multiples of 0.25, the bounds on multiples of 0.5: never on a kink.
CLIP_X = grid(0.5, 0.25, 5)
CLIP_LOW = st.integers(0, 4).map(lambda k: -0.5 * k)
CLIP_HIGH = st.integers(1, 4).map(lambda k: 0.5 * k)


@st.composite
def clip_inputs(draw: Any) -> tuple[list[np.ndarray], dict[str, Any]]:
    """``x`` and the bounds: each None, a Python scalar or an array (broadcasting)."""
    kinds = draw(st.tuples(*[st.sampled_from(["none", "scalar", "array"])] * 2))
    shapes = draw(ags.mutually_broadcastable_shapes(3, max_dims=3, max_side=3)).input_shapes
    x = draw(hnp.arrays(np.float64, shapes[0], elements=CLIP_X))
    arrays = [x]
    bounds: dict[str, Any] = {}
    for key, kind, shape, elements in zip(
        ("min", "max"), kinds, shapes[1:], (CLIP_LOW, CLIP_HIGH), strict=True
    ):
        if kind == "scalar":
            bounds[key] = draw(elements)
        elif kind == "array":
            bounds[key] = len(arrays)
            arrays.append(draw(hnp.arrays(np.float64, shape, elements=elements)))
    return arrays, bounds


def clip_call(clip: Callable[..., Any], bounds: dict[str, Any]) -> Callable[..., Any]:
    def call(x: Any, *rest: Any) -> Any:
        kwargs = {k: rest[v - 1] if type(v) is int else v for k, v in bounds.items()}
        return clip(x, **kwargs)

    return call


def torch_clip(x: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    """``torch.clamp``, which takes no mix of a number and a tensor, nor two Nones."""
    bounds = (min, max)
    if bounds == (None, None):
        return x * 1.0
    if any(isinstance(b, torch.Tensor) for b in bounds):
        bounds = tuple(_as_tensor(b) if isinstance(b, float) else b for b in bounds)
    return torch.clamp(x, *bounds)


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(inputs=clip_inputs(), seed=st.integers(0, 2**16))
def test_clip_gradients(backend: str, inputs: Any, seed: int) -> None:
    arrays, bounds = inputs
    xp = namespace(backend)
    call = clip_call(xp.clip, bounds)
    xs = [to_backend(backend, a) for a in arrays]
    out_shape = output_shape(arrays)
    gy = seeds(seed, out_shape)
    ggx = [seeds(seed + 1 + k, a.shape) for k, a in enumerate(arrays)]
    check_backward(call, tuple(xs), to_backend(backend, gy), **FIRST)
    check_double_backward(
        call,
        tuple(xs),
        to_backend(backend, gy),
        tuple(to_backend(backend, g) for g in ggx),
        **SECOND,
    )
    # PyTorch's clamp cannot backpropagate when array bounds broadcast x to a larger
    # shape ("output with shape [] doesn't match the broadcast shape [1]").
    if backend == "torch" and arrays[0].shape == out_shape:
        ours = agnograd_grads(call, xs, to_backend(backend, gy), None)
        theirs = torch_grads(clip_call(torch_clip, bounds), arrays, gy, None)
        assert_same(ours[0], theirs[0], [a.shape for a in arrays], "gradient")


# -- conventions at kinks, compared with PyTorch ---------------------------------------

KINKS = [
    # abs at 0, complex abs at 0
    ("abs", [[-1.0, 0.0, 2.0]], {}),
    ("abs", [[0j, 3 + 4j]], {}),
    # ties of maximum / minimum, also with a scalar
    ("maximum", [[1.0, 2.0, 3.0], [1.0, 1.0, 4.0]], {}),
    ("minimum", [[1.0, 2.0, 3.0], [1.0, 1.0, 4.0]], {}),
    ("maximum", [[0.0, -1.0, 2.0], 0.0], {}),
    ("minimum", [0.0, [0.0, -1.0, 2.0]], {}),
    # clip on and outside its bounds, scalar and array bounds, min > max
    ("clip", [[-2.0, -1.0, 0.0, 1.0, 2.0]], {"min": -1.0, "max": 1.0}),
    ("clip", [[-2.0, -1.0, 0.0, 1.0, 2.0]], {"min": -1.0}),
    ("clip", [[-2.0, -1.0, 0.0, 1.0, 2.0]], {"max": 1.0}),
    ("clip", [[-1.0, 0.0, 1.0, 2.0], [-1.0, 0.5, 1.0, 3.0], [1.0, 0.0, 1.0, 2.0]], {}),
    # copysign at 0 and with -0.0
    ("copysign", [[0.0, -0.0, 1.0, -2.0], [1.0, -1.0, -0.0, 3.0]], {}),
    # pow where x1 or x2 is 0
    ("pow", [[0.0, 0.0, 0.0, 2.0, 0.0], [0.0, 2.0, 0.5, 0.0, 1.0]], {}),
    ("pow", [[0.0, 1.5, 2.0], 0.0], {}),
    ("pow", [0.0, [0.0, 0.5, 2.0]], {}),
    ("pow", [2.0, [0.0, 0.5, -1.0]], {}),
    # remainder with operands of both signs
    ("remainder", [[3.5, -3.5, 3.5, -3.5], [2.0, 2.0, -2.0, -2.0]], {}),
    # logaddexp at ties
    ("logaddexp", [[1.0, -2.0], [1.0, -2.0]], {}),
]
TORCH_NAMES = {"clip": torch_clip}


def _kink_call(
    fn: Callable[..., Any],
    operands: list[Any],
    kwargs: dict[str, Any],
    scalar: Callable[[float], Any],
) -> Any:
    """``fn`` of the array operands, the Python-scalar ones passed as ``scalar(v)``; for
    clip the second and third arrays are the bounds."""
    arrays = [k for k, o in enumerate(operands) if not isinstance(o, float)]

    def call(*xs: Any) -> Any:
        args = [scalar(o) if isinstance(o, float) else o for o in operands]
        for k, x in zip(arrays, xs, strict=True):
            args[k] = x
        if kwargs or len(args) == 1:
            return fn(*args, **kwargs)
        if len(args) == 3:  # clip(x, min, max)
            return fn(args[0], min=args[1], max=args[2])
        return fn(*args)

    return call


@pytest.mark.parametrize(("name", "operands", "kwargs"), KINKS, ids=lambda v: str(v)[:40])
def test_kink_conventions_follow_torch(name: str, operands: list[Any], kwargs: dict) -> None:
    operands = [o if isinstance(o, float) else np.asarray(o) for o in operands]
    arrays = [o for o in operands if not isinstance(o, float)]
    theirs_fn = _kink_call(
        TORCH_NAMES.get(name) or BY_NAME[name].torch, operands, kwargs, _as_tensor
    )
    with torch.no_grad():
        out = theirs_fn(*[torch.asarray(a) for a in arrays])
    gy = np.asarray(np.arange(1.0, 1.0 + out.numel()).reshape(tuple(out.shape)))
    ours_fn = _kink_call(getattr(namespace("torch"), name), operands, kwargs, float)
    ours = agnograd_grads(ours_fn, [torch.asarray(a) for a in arrays], torch.asarray(gy), None)
    theirs = torch_grads(theirs_fn, arrays, gy, None)
    assert_same(ours[0], theirs[0], [a.shape for a in arrays], f"gradient of {name}")


def test_kink_values() -> None:
    """The documented values, independently of PyTorch."""
    xp = namespace("numpy")

    def grads(fn: Callable[..., Any], *operands: Any) -> list[Any]:
        xs = [Variable(np.asarray(o)) for o in operands]
        y = fn(*xs)
        return [to_numpy(g) for g in agnograd.grad([y], xs, [np.ones(y.shape)])]

    assert grads(xp.abs, [0.0, -2.0])[0].tolist() == [0.0, -1.0]
    assert [g.tolist() for g in grads(xp.maximum, [1.0], [1.0])] == [[0.5], [0.5]]
    assert grads(lambda x: xp.clip(x, min=0.0, max=1.0), [0.0, 1.0, 1.5])[0].tolist() == [
        1.0,
        1.0,
        0.0,
    ]
    assert grads(xp.hypot, [0.0, 3.0], [0.0, 4.0])[0].tolist() == [0.0, 0.6]
    g1, g2 = grads(xp.remainder, [3.5, -3.5], [2.0, 2.0])
    assert g1.tolist() == [1.0, 1.0]
    assert g2.tolist() == [-1.0, 2.0]
    g1, g2 = grads(xp.pow, [0.0, 0.0], [0.0, 2.0])
    assert g1.tolist() == [0.0, 0.0]
    assert g2.tolist() == [0.0, 0.0]


# -- Python scalars -----------------------------------------------------------------

BINARY = [c.name for c in REAL_CASES if c.arity == 2]


@pytest.mark.parametrize("name", BINARY)
def test_two_python_scalars_are_refused(name: str) -> None:
    with pytest.raises(TypeError):
        getattr(namespace("numpy"), name)(1.0, 2.0)


@pytest.mark.parametrize("name", BINARY)
def test_scalar_operand_keeps_the_array_dtype(name: str) -> None:
    xp = namespace("torch")
    x = Variable(torch.tensor([0.75, 1.5], dtype=torch.float32))
    for y in (getattr(xp, name)(x, 2.0), getattr(xp, name)(2.0, x)):
        assert y.dtype == torch.float32
        (g,) = agnograd.grad([y], [x], [torch.ones(2)])
        assert g is None or g.dtype == torch.float32


# -- non-differentiable functions -----------------------------------------------------

REALS = [[-1.5, -0.5, 0.0, 0.5, 2.5], [1.0, -0.5, 3.0, 0.5, -2.5]]
NONDIFF = [
    ("ceil", "float64", 1),
    ("floor", "float64", 1),
    ("round", "float64", 1),
    ("trunc", "float64", 1),
    ("sign", "float64", 1),
    ("signbit", "float64", 1),
    ("isfinite", "float64", 1),
    ("isinf", "float64", 1),
    ("isnan", "float64", 1),
    ("nextafter", "float64", 2),
    ("floor_divide", "float64", 2),
    ("equal", "float64", 2),
    ("not_equal", "float64", 2),
    ("less", "float64", 2),
    ("less_equal", "float64", 2),
    ("greater", "float64", 2),
    ("greater_equal", "float64", 2),
    ("logical_and", "bool", 2),
    ("logical_or", "bool", 2),
    ("logical_xor", "bool", 2),
    ("logical_not", "bool", 1),
    ("bitwise_and", "int64", 2),
    ("bitwise_or", "int64", 2),
    ("bitwise_xor", "int64", 2),
    ("bitwise_invert", "int64", 1),
    ("bitwise_left_shift", "int64", 2),
    ("bitwise_right_shift", "int64", 2),
]


def nondiff_operands(dtype: str, arity: int) -> list[np.ndarray]:
    values = np.asarray(REALS[:arity])
    if dtype == "bool":
        return list(values > 0)
    if dtype == "int64":
        return list(np.abs(values * 2).astype(np.int64))
    return list(values)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("name", "dtype", "arity"), NONDIFF, ids=[n for n, _, _ in NONDIFF])
def test_non_differentiable(name: str, dtype: str, arity: int, backend: str) -> None:
    raw = backend_namespace(backend)
    arrays = [raw.asarray(a) for a in nondiff_operands(dtype, arity)]
    xs = [Variable(a) for a in arrays]  # floating ones require a gradient
    y = getattr(namespace(backend), name)(*xs)
    assert isinstance(y, Variable)
    assert not y.requires_grad
    np.testing.assert_array_equal(to_numpy(y), to_numpy(getattr(raw, name)(*arrays)))
    if arity == 2 and dtype != "bool":  # a Python scalar operand
        scalar = 2 if dtype == "int64" else 0.5
        y = getattr(namespace(backend), name)(xs[0], scalar)
        assert not y.requires_grad
        np.testing.assert_array_equal(to_numpy(y), to_numpy(getattr(raw, name)(arrays[0], scalar)))


# -- the chapter is complete ----------------------------------------------------------


def test_every_elementwise_name_has_one_entry() -> None:
    for name in _standard.ELEMENTWISE:
        tables = [name in t for t in (DIFFERENTIABLE, NON_DIFFERENTIABLE, UNSUPPORTED)]
        assert tables.count(True) == 1, name
        assert name not in UNSUPPORTED, f"{name} is elementwise and must be supported"
    chapter = {**_elementwise.DIFFERENTIABLE, **_elementwise.NON_DIFFERENTIABLE}
    assert set(chapter) == set(_standard.ELEMENTWISE)


def test_every_differentiable_function_is_tested() -> None:
    tested = {c.name for c in CASES} | {"clip"}
    assert tested == set(_elementwise.DIFFERENTIABLE)
    assert {n for n, _, _ in NONDIFF} == set(_elementwise.NON_DIFFERENTIABLE)


# -- define-then-run ----------------------------------------------------------------


def test_define_then_run_infers_and_computes() -> None:
    xp = namespace("numpy")
    values = np.array([[0.25, 0.5, -0.75]])
    x = Variable(values)
    w = Variable(np.array([[1.5], [-0.5]]))

    def build(x: Any, w: Any) -> Any:
        y = xp.maximum(xp.atan2(x, w), 0.0) + xp.hypot(x, 1.0) + xp.clip(x, min=-0.5, max=w)
        return xp.sum(xp.logaddexp(y, xp.expm1(x)) * xp.remainder(w, 0.75))

    with agnograd.auto_forward(False):
        deferred = build(x, w)
    assert deferred.shape == ()
    deferred.forward()
    eager = build(Variable(values), Variable(w.array))
    np.testing.assert_allclose(to_numpy(deferred), to_numpy(eager))


def _deferred_operands(name: str) -> list[np.ndarray]:
    if name.startswith("logical"):
        operands = [np.array([[True, False]]), np.array([[True], [False]])]
    elif name.startswith("bitwise"):
        operands = [np.array([[3, 5]]), np.array([[1], [2]])]
    elif name == "imag":
        return [np.array([[0.5 + 1j, 0.75 - 2j]])]
    elif name == "clip":
        # The bound broadcasts to x's shape: the abstract clip keeps x's shape.
        return [np.array([[0.5, 0.75], [1.0, 0.25]]), np.array([[0.6], [0.5]])]
    else:
        low = 1.5 if name == "acosh" else 0.5
        operands = [np.array([[low, low + 0.25]]), np.array([[0.75], [0.625]])]
    unary = name in _elementwise.DIFFERENTIABLE and name not in BINARY and name != "clip"
    unary = unary or name in {n for n, _, arity in NONDIFF if arity == 1}
    return operands[:1] if unary else operands


@pytest.mark.parametrize("name", sorted(_standard.ELEMENTWISE))
def test_every_function_runs_deferred(name: str) -> None:
    """Define-then-run infers each result's shape and dtype, then computes it."""
    xp = namespace("numpy")
    operands = _deferred_operands(name)
    fn = getattr(xp, name)
    with agnograd.auto_forward(False):
        deferred = fn(*[Variable(o) for o in operands])
    eager = fn(*[Variable(o) for o in operands])
    assert (deferred.shape, deferred.dtype) == (eager.shape, eager.dtype)
    deferred.forward()
    np.testing.assert_array_equal(to_numpy(deferred), to_numpy(eager))
