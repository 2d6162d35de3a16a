"""A Python number in ``x * 0.5`` reaches the library's operator as a 0-d array of
``x``'s dtype, made once per number and dtype (``Adapter.scalar_operand``: NumPy and
PyTorch convert a number at every call), and never changes an answer: the values,
dtypes and gradients are those of the operator with the number itself, bit for bit.
Numbers a 0-d array cannot stand for (signed zeros, NaN, complex numbers, booleans,
NumPy's scalars, dtypes other than float32 and float64) are passed as they are.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agnograd
from agnograd import Variable
from agnograd.backends import _backend

OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def _libraries() -> list[Any]:
    libs: list[Any] = [np]
    try:
        import torch
    except ImportError:
        return libs
    return [*libs, torch]


LIBS = _libraries()
DTYPES = ["float32", "float64"]


def _array(lib: Any, values: list[float], dtype: str) -> Any:
    if lib is np:
        return np.asarray(values, dtype=dtype)
    return lib.tensor(values, dtype=getattr(lib, dtype))


def _same(a: Any, b: Any) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)  # NaN where NaN, the same bits elsewhere
    if not np.iscomplexobj(a):
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


@pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.__name__)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("symbol", list(OPS))
@settings(max_examples=25, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=5),
    number=st.one_of(st.floats(allow_nan=False, allow_infinity=True), st.integers(-(2**62), 2**62)),
)
def test_the_answer_is_the_numbers(
    lib: Any, dtype: str, symbol: str, values: list[float], number: float
) -> None:
    op = OPS[symbol]
    data = _array(lib, values, dtype)
    seed = data * 0 + 1
    x = Variable(data)
    with np.errstate(all="ignore"):
        y = op(x, number)
        y.grad = seed
        y.backward()
        _same(y.array, op(data, number))
        _same(x.grad, op(seed, number) if symbol in "*/" else seed)


@pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.__name__)
def test_one_array_per_number_and_dtype(lib: Any) -> None:
    x32 = Variable(_array(lib, [1.0, 2.0], "float32"))
    x64 = Variable(_array(lib, [1.0, 2.0], "float64"))
    a, b, c = (x32 * 0.5).creator_node, (x32 * 0.5).creator_node, (x64 * 0.5).creator_node
    assert a._operand is b._operand  # made once
    assert a._operand.dtype == x32.dtype
    assert c._operand.dtype == x64.dtype
    assert (x32 * 2).creator_node._operand is (x32 * 2.0).creator_node._operand  # one value


@pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.__name__)
@pytest.mark.parametrize(
    "number", [0.0, -0.0, float("nan"), 1j, True, np.float64(0.5), np.float32(0.5)], ids=repr
)
def test_numbers_no_array_stands_for_keep_their_meaning(lib: Any, number: Any) -> None:
    data = _array(lib, [1.0, -2.0], "float32")
    y = Variable(data) * number
    assert y.creator_node._operand is None
    with np.errstate(all="ignore"):
        _same(y.array, data * number)


@pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.__name__)
def test_other_dtypes_take_the_number(lib: Any) -> None:
    half = _array(lib, [1.0, 3.0], "float16")
    y = Variable(half) * 0.1
    assert y.creator_node._operand is None
    _same(y.array, half * 0.1)
    ints = Variable(_array(lib, [1.0, 3.0], "float64")) * 1
    assert ints.creator_node._operand is not None
    integer = lib.asarray([1, 3])
    _same((Variable(integer) * 2.5).array, integer * 2.5)  # promoted to floating


def test_a_sign_of_zero_is_kept() -> None:
    x = Variable(np.asarray([1.0, 2.0]))
    assert np.all(np.signbit((x * -0.0).array))
    assert not np.any(np.signbit((x * 0.0).array))
    assert not np.any(np.signbit((x * 0.5).array))


def test_second_order_through_a_scalar_node() -> None:
    x = Variable(np.asarray([1.0, 2.0]))
    y = (x * x) * 0.5
    (gx,) = agnograd.grad([agnograd.functions.sum(y)], [x], enable_double_backprop=True)
    np.testing.assert_allclose(gx.array, [1.0, 2.0])
    (ggx,) = agnograd.grad([agnograd.functions.sum(gx * 3.0)], [x])
    np.testing.assert_allclose(ggx.array, [3.0, 3.0])


def test_the_arrays_are_bounded() -> None:
    x = Variable(np.asarray([1.0], dtype=np.float32))
    for i in range(1, 1500):
        x * float(i)
    cache = _backend.scalar_operands[_backend.raw_namespace(x.array)]
    assert 0 < len(cache) <= 1024


def test_a_library_without_the_hook_takes_numbers() -> None:
    xp = pytest.importorskip("array_api_strict")
    x = Variable(xp.asarray([1.0, 2.0]))
    y = x * 0.5
    assert y.creator_node._operand is None
    assert _backend.scalar_operands[_backend.raw_namespace(x.array)] is False


@pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.__name__)
@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=25, deadline=None)
@given(
    values=st.lists(st.floats(-100, 100, width=32), min_size=1, max_size=5),
    number=st.sampled_from([2.0, 3.0, -1.0, 0.5, 2, 3, 1.5, -2.5]),
)
def test_a_power_takes_the_number(lib: Any, dtype: str, values: list[float], number: float) -> None:
    # NumPy and PyTorch compute x ** 2.0 otherwise than x ** a (a squaring, a power).
    data = _array(lib, values, dtype)
    with np.errstate(all="ignore"):
        y = Variable(data) ** number
        _same(y.array, data**number)
    assert y.creator_node._operand is None


def test_a_rerun_of_another_dtype_takes_its_own_number() -> None:
    # The eager forward kept a float32 array for 0.1; a run of the graph with float64
    # data must not multiply its gradient by that rounded 0.1.
    x = Variable(np.asarray([1.0, 2.0], dtype=np.float32))
    y = x * 0.1 / 10.0
    x.array = np.asarray([1.0, 2.0])
    y.forward()
    y.grad = np.ones(2)
    y.backward()
    _same(x.grad, np.ones(2) / 10.0 * 0.1)  # the backward's order


def test_large_integers_round_as_the_library_rounds_them() -> None:
    torch = pytest.importorskip("torch")
    for number in (2**60 + 2**36 + 1, -(2**55) - 3, 2**53 + 1):
        data = torch.tensor([1.0, 3.0])
        y = Variable(data) * number
        assert y.creator_node._operand is None
        _same(y.array, data * number)
    with pytest.raises((OverflowError, RuntimeError)):
        Variable(torch.tensor([1.0])) * 2**70  # as torch itself refuses


def test_numbers_a_dtype_holds_only_as_inf_or_subnormal_keep_the_number() -> None:
    x = Variable(np.asarray([1.0, 2.0], dtype=np.float32))
    assert (x * 1e-40).creator_node._operand is None  # subnormal in float32
    with np.errstate(over="ignore"):
        assert (x * 1e39).creator_node._operand is None  # beyond float32
    for _ in range(2):  # NumPy says so at every operation, as for its own numbers
        with np.errstate(over="raise"), pytest.raises(FloatingPointError):
            x * 1e39


def test_an_array_made_under_a_torch_mode_is_not_kept() -> None:
    torch = pytest.importorskip("torch")
    with torch.device("meta"):
        Variable(torch.ones(3)) * 0.25  # the default device is meta here
    y = Variable(torch.ones(3)) * 0.25
    assert y.creator_node._operand.device.type == "cpu"
    _same(y.array, torch.ones(3) * 0.25)


# -- every operator with every kind of Python number, on either side ----------------

# The operators of a Variable and a Python number, as Python spells them.
ALL_OPS = {**OPS, "**": operator.pow, "//": operator.floordiv, "%": operator.mod}
# Values where results differ in a sign of zero: zeros, and tiny ones whose products
# underflow.
_PARTS = [0.0, -0.0, 1e-300, -1e-300, 1e-200, -1e-200, 1e-30, -1e-30, 2.5, -1.0]
_ELEMENTS = st.one_of(st.sampled_from(_PARTS), st.floats())
NUMBERS = st.one_of(
    st.sampled_from([0, False, True, 0.0, -0.0, math.inf, -math.inf, math.nan]),
    st.integers(-(2**62), 2**62),
    st.floats(),
    st.sampled_from(_PARTS),
    st.complex_numbers(),
    st.builds(complex, st.sampled_from(_PARTS), st.sampled_from(_PARTS)),
)


def _bits(a: Any) -> np.ndarray:
    """The bits of an array's elements (NaN's payload left out: the libraries differ)."""
    a = np.asarray(a)
    if a.dtype.kind == "c":
        a = np.stack([a.real, a.imag])
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), np.nan, a).view(f"u{a.itemsize}")
    return a


def _outcome(compute: Any) -> tuple[Any, ...]:
    """What ``compute()`` gives: its dtype and bits, or the type of its error."""
    try:
        y = compute()
    except Exception as error:  # what the library raises, agnograd must raise
        return (type(error),)
    y = y.array if isinstance(y, Variable) else y
    a = np.asarray(y)
    return (str(a.dtype), a.shape, _bits(a).tolist())


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_an_operator_with_a_number_is_the_librarys_own(backend: Any, dtype: str) -> None:
    """``x OP c`` and ``c OP x`` give the dtype, the bits (the sign of a zero too) or
    the error of the library's own expression, eagerly and in define-then-run."""
    if backend.name == "jax" and dtype in ("float64", "complex128"):
        pytest.skip("JAX holds no 64-bit dtype outside its x64 mode")

    # JAX compiles each operation anew for each number and shape: a few examples.
    @settings(max_examples=3 if backend.name == "jax" else 25, deadline=None)
    @given(reals=st.lists(_ELEMENTS, min_size=1, max_size=6),
           imags=st.lists(_ELEMENTS, max_size=6), number=NUMBERS)  # fmt: skip
    @example(reals=[-0.0], imags=[], number=0)  # x - 0 is -0.0, not x + -0
    @example(reals=[-0.0], imags=[], number=False)
    @example(reals=[1.0], imags=[-0.0], number=1.0)  # z - 1.0 keeps the imaginary -0.0
    @example(reals=[2.5], imags=[1e-300], number=-1e-200)  # NumPy: c * z != z * c there
    def check(reals: list[float], imags: list[float], number: Any) -> None:
        values = np.asarray(reals)
        if dtype.startswith("complex"):
            values = values.astype(complex)  # the parts set apart: 1j * x mixes their signs
            values.imag = np.resize(np.asarray(imags or [0.0]), values.shape)
        with np.errstate(all="ignore"):
            data = backend.asarray(values, dtype)
            for symbol, op in ALL_OPS.items():
                for reflected in (False, True):
                    written = f"{number!r} {symbol} x" if reflected else f"x {symbol} {number!r}"

                    def compute(x: Any, op: Any = op, reflected: bool = reflected) -> Any:
                        return op(number, x) if reflected else op(x, number)

                    def later(compute: Any = compute) -> Any:
                        with agnograd.auto_forward(False):
                            y = compute(Variable(data))
                        y.forward()
                        return y

                    expected = _outcome(lambda compute=compute: compute(data))
                    eager = _outcome(lambda compute=compute: compute(Variable(data)))
                    assert eager == expected, f"{written} on {values!r}"
                    assert _outcome(later) == expected, f"{written} in define-then-run"

    check()


@pytest.mark.parametrize("symbol", ["-", "*"])
def test_a_compiled_plan_keeps_the_sign_of_a_zero(symbol: str) -> None:
    # A plan writes the scalar nodes' expressions into its code: the same expressions.
    data = np.asarray([-0.0, 2.5 + 1e-300j]) if symbol == "*" else np.asarray([-0.0, 1.0])
    with agnograd.auto_forward(False):
        x = Variable(data)
        y = -1e-200 * x if symbol == "*" else x - 0
    for _ in range(agnograd.config.compile_after + 2):
        y.forward()
    expected = -1e-200 * data if symbol == "*" else data - 0
    assert _bits(y.array).tolist() == _bits(expected).tolist()
