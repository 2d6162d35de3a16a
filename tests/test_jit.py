"""``agnograd.jit``: a function traced once per signature, its plan re-run.

A jitted function must return what the function returns when it runs eagerly, bit
for bit (to rounding on JAX, whose plans run as one XLA program). Programs drawn by
hypothesis (elementwise functions, arithmetic, reductions, matrix products) are
compared on NumPy, array-api-strict and PyTorch; the other tests check the cache
(several signatures, static arguments, its bound), the arguments and results it
takes and gives, and that nothing a user can change between calls (the data,
shapes, dtypes, a closed-over Variable, the configuration) nor an exception in the
middle of a call makes the cache give another answer. The refusals (data-dependent
Python, bad arguments) are tested in ``test_jit_refusals.py``, the transforms of
``agnograd.functional`` under ``jit`` in ``test_jit_transforms.py``.
"""

from __future__ import annotations

import inspect
import threading
import warnings
from collections import namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.functions as F
from agnograd import FunctionNode, Variable
from agnograd.function_hooks import FunctionHook
from agnograd.functional import value_and_grad
from agnograd.static._jit import JitWarning

Conv = tuple[Callable[[np.ndarray], Any], Callable[[Any], np.ndarray]]


def _numpy() -> Conv:
    return (lambda a: a), np.asarray


def _strict() -> Conv:
    xp = pytest.importorskip("array_api_strict")
    return xp.asarray, np.asarray


def _torch() -> Conv:
    torch = pytest.importorskip("torch")
    return torch.from_numpy, (lambda a: a.numpy())


BACKENDS = {"numpy": _numpy, "array_api_strict": _strict, "torch": _torch}


@pytest.fixture(params=list(BACKENDS))
def conv(request: pytest.FixtureRequest) -> Conv:
    return BACKENDS[request.param]()


def same(got: Any, want: Any, back: Callable[[Any], np.ndarray] = np.asarray) -> None:
    """Equal bit for bit, in the same structure, NaN where NaN."""
    if isinstance(want, tuple | list):
        assert type(got) is type(want)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            same(g, w, back)
    elif isinstance(want, dict):
        assert type(got) is dict
        assert list(got) == list(want)
        for k in want:
            same(got[k], want[k], back)
    elif want is None or isinstance(want, int | float | str):
        assert got == want
    else:
        assert type(got) is type(want)
        g, w = back(got), back(want)
        np.testing.assert_array_equal(g, w, strict=True)
        if g.dtype.kind in "fc":  # the signs of zeros (and of NaNs) too
            for part in (np.real, np.imag):
                np.testing.assert_array_equal(np.signbit(part(g)), np.signbit(part(w)))


def eager(fun: Callable[..., Any], *arrays: Any) -> Any:
    """``fun`` run eagerly on Variables of ``arrays``, Variables returned as arrays."""
    out = fun(*[Variable(a) for a in arrays])
    if isinstance(out, tuple):
        return tuple(o.array for o in out)
    return out.array


# -- programs drawn by hypothesis ------------------------------------------------------


def full(xp: Any, a: Any) -> Any:
    """``a`` broadcast to (3, 4)."""
    return a if a.shape == (3, 4) else xp.broadcast_to(a, (3, 4))


# Every value has a shape that broadcasts to (3, 4); the leaves are x (3, 4), b (4,)
# and m (4, 4), float64, and c (3, 1) float32 (mixing dtypes makes results promote).
OPS: dict[str, Callable[[Any, Any, Any, Any, int], Any]] = {
    "tanh": lambda xp, m, a, b, k: xp.tanh(a),
    "exp_sin": lambda xp, m, a, b, k: xp.exp(xp.sin(a)),
    "log1p_abs": lambda xp, m, a, b, k: xp.log1p(xp.abs(a)),
    "sqrt": lambda xp, m, a, b, k: xp.sqrt(a * a + 0.25),
    "add": lambda xp, m, a, b, k: a + b,
    "subtract": lambda xp, m, a, b, k: a - b,
    "multiply": lambda xp, m, a, b, k: a * b,
    "divide": lambda xp, m, a, b, k: a / (b * b + 1.0),
    "scalars": lambda xp, m, a, b, k: (2.0 - a) * 0.5 + 0.25,
    "maximum": lambda xp, m, a, b, k: xp.maximum(a, b),
    "where": lambda xp, m, a, b, k: xp.where(a > b, a, b * 2.0),
    "sum": lambda xp, m, a, b, k: xp.sum(full(xp, a), axis=k % 2, keepdims=True),
    "mean": lambda xp, m, a, b, k: xp.mean(full(xp, a), axis=k % 2, keepdims=True),
    "max": lambda xp, m, a, b, k: xp.max(full(xp, a), axis=k % 2, keepdims=True),
    "prod": lambda xp, m, a, b, k: xp.prod(full(xp, a), axis=k % 2, keepdims=True),
    "std": lambda xp, m, a, b, k: xp.std(a),
    "matmul": lambda xp, m, a, b, k: xp.matmul(full(xp, a), m),
    "matmul_t": lambda xp, m, a, b, k: full(xp, a) @ m.T,
}
op = st.tuples(
    st.sampled_from(sorted(OPS)), st.integers(0, 30), st.integers(0, 30), st.integers(0, 3)
)
Program = list[tuple[str, int, int, int]]


def program_fun(program: Program) -> Callable[..., Any]:
    """The program as a function of (x, b, c, m), returning the last value and the
    sum of all of them (so that every value is computed)."""

    def fun(x: Any, b: Any, c: Any, m: Any) -> Any:
        xp = agnograd.namespace(x)
        values = [x, b, c]
        for name, i, j, k in program:
            a, bb = values[i % len(values)], values[j % len(values)]
            values.append(OPS[name](xp, m, a, bb, k))
        total = values[0]
        for v in values[1:]:
            total = total + v
        return values[-1], xp.sum(total)

    return fun


def leaves(seed: int, scale: float = 1.0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = [((3, 4), np.float64), ((4,), np.float64), ((3, 1), np.float32), ((4, 4), np.float64)]
    return [(rng.uniform(-1.0, 1.0, s) * scale).astype(t) for s, t in shapes]


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=st.lists(op, min_size=1, max_size=12))
def test_programs_equal_eager_bit_for_bit(conv: Conv, program: Program) -> None:
    to, back = conv
    fun = program_fun(program)
    jitted = agnograd.jit(fun)
    with np.errstate(all="ignore"):
        for seed in range(3):  # the first call traces, the others run the plan
            arrays = [to(a) for a in leaves(seed, scale=1.0 + seed)]
            same(jitted(*arrays), eager(fun, *arrays), back)
    assert jitted.cache_info()[:3] == (2, 1, 0)


@pytest.mark.parametrize("name", sorted(OPS))
def test_each_op_bit_for_bit(conv: Conv, name: str) -> None:
    to, back = conv
    fun = program_fun([(name, i, i + 1, i) for i in range(4)])
    jitted = agnograd.jit(fun)
    for seed in range(2):
        arrays = [to(a) for a in leaves(seed)]
        same(jitted(*arrays), eager(fun, *arrays), back)


# -- signatures and the cache ------------------------------------------------------------


def mlp(x: Any, w: Any, b: Any) -> Any:
    xp = agnograd.namespace(x)
    return xp.tanh(x @ w + b)


def test_several_signatures_in_one_cache() -> None:
    """Batch sizes and dtypes: a plan each, all kept, each giving eager's answer."""
    jitted = agnograd.jit(mlp)
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((3, 2)), rng.standard_normal(2)
    calls = [(n, dtype) for n in (1, 4, 7) for dtype in (np.float64, np.float32)] * 2
    for n, dtype in calls:
        x = rng.standard_normal((n, 3)).astype(dtype)
        same(jitted(x, w, b), eager(mlp, x, w, b))
    assert jitted.cache_info() == (6, 6, 0, 6, 8)


def test_signature_includes_the_library() -> None:
    torch = pytest.importorskip("torch")
    jitted = agnograd.jit(lambda x: x * 2.0)
    a = np.arange(3.0)
    same(jitted(a), a * 2.0)
    got = jitted(torch.from_numpy(a))
    assert isinstance(got, torch.Tensor)
    same(got, torch.from_numpy(a * 2.0), lambda t: t.numpy())
    assert jitted.cache_info().misses == 2


def test_least_recently_used_plan_goes() -> None:
    jitted = agnograd.jit(lambda x: x + 1.0, cache_size=2)
    for n in (1, 2, 1, 3):  # 2 is the least recently used when 3 comes
        same(jitted(np.zeros(n)), np.ones(n))
    assert jitted.cache_info() == (1, 3, 0, 2, 2)
    jitted(np.zeros(1))  # kept
    jitted(np.zeros(2))  # gone: traced again
    assert jitted.cache_info() == (2, 4, 0, 2, 2)


def test_too_many_traces_warn_once_then_run_eagerly() -> None:
    """A function whose shapes change every call stops compiling: one warning, then
    eager runs with eager's answers; the plans it has keep running; clear_cache()
    compiles again."""
    traced = []

    def f(x: Any) -> Any:
        traced.append(x.shape)
        return F.sum(x * x)

    jitted = agnograd.jit(f, max_traces=3)
    for n in (1, 2, 3):
        same(jitted(np.ones(n)), np.asarray(float(n)))
    with pytest.warns(JitWarning, match=r"jit\(.*f\): 3 traces, the most max_traces allows"):
        same(jitted(np.ones(4)), np.asarray(4.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        same(jitted(np.ones(5)), np.asarray(5.0))
        same(jitted(np.ones(2)), np.asarray(2.0))  # a plan it has
    assert len(traced) == 5  # three traces, two eager runs
    assert jitted.cache_info() == (1, 3, 2, 3, 8)
    jitted.clear_cache()
    assert jitted.cache_info() == (0, 0, 0, 0, 8)
    same(jitted(np.ones(6)), np.asarray(6.0))
    assert jitted.cache_info().misses == 1


def chain_loss(x: Any, w: Any, seen: list[int]) -> Any:
    """A loss of 40 elementwise blocks, counting in ``seen`` the blocks it built."""
    xp = agnograd.namespace(x)
    h = x
    for i in range(40):
        seen.append(i)
        h = xp.sin(xp.tanh(h) * w + x) - 0.5
    return xp.sum(h * h)


def test_a_graph_larger_than_max_functions_runs_eagerly(conv: Conv) -> None:
    """Past ``max_functions`` functions the trace stops (the loss's 40 blocks are
    not all built), the call runs eagerly with one warning naming the bound and how
    to change it, and so does every later call of that signature, with the answers
    of the plan of an unbounded jit and of eager, bit for bit."""
    to, back = conv
    seen: list[int] = []
    step = value_and_grad(lambda x, w: chain_loss(x, w, seen), argnums=(0, 1))
    bounded = agnograd.jit(step, max_functions=50)
    compiled = agnograd.jit(step, max_functions=None)
    rng = np.random.default_rng(0)
    w = to(rng.uniform(0.5, 1.5, 4))
    for k in range(3):
        x = to(rng.uniform(-1.0, 1.0, 4))
        if k == 0:
            with pytest.warns(JitWarning) as caught:
                got = bounded(x, w)
            (warning,) = caught
            message = str(warning.message)
            assert message.startswith(
                "jit(<lambda>): the graph traced for these arguments has more than 50 functions"
            )
            assert "max_functions=50; jit(<lambda>, max_functions=n) sets" in message
            assert "None compiles any size" in message
            assert len(seen) < 2 * 40  # the trace stopped at the bound; eager ran all
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # once per signature
                got = bounded(x, w)
        seen.clear()
        want = step(x, w)  # eager
        same(got, want, back)
        same(compiled(x, w), want, back)
    assert bounded.cache_info() == (0, 1, 3, 1, 8)
    assert compiled.cache_info() == (2, 1, 0, 1, 8)


def test_max_functions_is_the_most_a_plan_has() -> None:
    """A trace of exactly ``max_functions`` functions (an identity per argument, then
    the function's) is compiled; one more runs eagerly; the default is the bound of
    ``y.forward()``."""
    x = np.array([0.5, 1.0])
    exact = agnograd.jit(lambda x: F.sin(F.sin(x)), max_functions=3)
    same(exact(x), np.sin(np.sin(x)))
    assert exact.cache_info()[:3] == (0, 1, 0)
    over = agnograd.jit(lambda x: F.sin(F.sin(F.sin(x))), max_functions=3)
    with pytest.warns(JitWarning, match="more than 3 functions"):
        same(over(x), np.sin(np.sin(np.sin(x))))
    assert over.cache_info()[:3] == (0, 1, 1)
    default = inspect.signature(agnograd.jit).parameters["max_functions"].default
    assert default == agnograd.static._replay.LARGEST


def test_clear_cache_traces_again() -> None:
    jitted = agnograd.jit(lambda x: x * 3.0)
    jitted(np.ones(2))
    jitted.clear_cache()
    same(jitted(np.ones(2)), np.full(2, 3.0))
    assert jitted.cache_info()[:2] == (0, 1)


def test_static_argnums() -> None:
    def power(x: Any, n: int, scale: float) -> Any:
        out = x
        for _ in range(n - 1):  # Python control flow on a static argument
            out = out * x
        return out * scale

    jitted = agnograd.jit(power, static_argnums=(1,))
    x = np.array([1.0, 2.0])
    same(jitted(x, 3, 1.0), x**3)
    same(jitted(x, 2, 1.0), x**2)
    same(jitted(x, 3, 2.0), x**3 * 2.0)  # a Python number keys by value too
    same(jitted(x, 3, 1.0), x**3)
    assert jitted.cache_info()[:2] == (1, 3)
    negative = agnograd.jit(power, static_argnums=-2)
    same(negative(x, 2, 1.0), x**2)


# Python numbers of every kind: each its own signature, by type and exact value.
NAN = float("nan")
NUMBERS = [0, 1, -2, True, False, 0.0, -0.0, 1.0, 2.5, NAN, -NAN, float("inf"), -float("inf")]
NUMBERS += [0j, complex(0.0, -0.0), complex(-0.0, 0.0), complex(-0.0, -0.0), 1.5 - 2j]
NUMBERS += [complex(NAN, 0.0), complex(0.0, NAN)]
# Operations of an array and a number, each written as users write it.
NUMBER_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "divide": lambda x, s: x / s,
    "rdivide": lambda x, s: s / (x - 0.5),
    "multiply": lambda x, s: x * s,
    "rmultiply": lambda x, s: s * x,
    "subtract": lambda x, s: x - s,
    "rsubtract": lambda x, s: s - x,
    "add": lambda x, s: x + s,
    "power": lambda x, s: x**s,
    "maximum": lambda x, s: agnograd.namespace(x).maximum(x, s),
}


def eager_or_error(fun: Callable[..., Any], *args: Any) -> Any:
    """What ``fun`` gives eagerly on a Variable of ``args[0]``: its array, or the
    type of what it raises."""
    try:
        return eager(fun, *args[:1]) if len(args) == 1 else fun(Variable(args[0]), *args[1:]).array
    except Exception as error:
        return type(error)


def check_call(jitted: Callable[..., Any], want: Any, back: Any, *args: Any) -> None:
    if isinstance(want, type):
        with pytest.raises(want):
            jitted(*args)
    else:
        same(jitted(*args), want, back)


@pytest.mark.parametrize("static", [False, True], ids=["argument", "static"])
def test_python_numbers_key_by_type_and_exact_value(conv: Conv, static: bool) -> None:
    """``x / 0.0`` then ``x / -0.0`` (NaN, 1 and 1.0, 0j and -0j, True and 1): a plan
    each, each giving eager's answer; the same number again reuses its plan (NaN
    included, which equals nothing)."""
    to, back = conv
    x = to(np.array([1.0, -1.0, 0.0, 2.0]))
    for name, op in NUMBER_OPS.items():
        jitted = agnograd.jit(op, static_argnums=(1,) if static else (), cache_size=64)
        with np.errstate(all="ignore"):
            for s in NUMBERS + NUMBERS[::-1]:
                check_call(jitted, eager_or_error(op, x, s), back, x, s)
        assert jitted.cache_info().misses <= len(NUMBERS), name  # NaN found its plan
    tupled = agnograd.jit(lambda x, s: x / s[0], static_argnums=1)
    with np.errstate(all="ignore"):
        for s in (0.0, -0.0, 0.0):
            same(tupled(x, (s,)), eager_or_error(lambda v, s: v / s, x, s), back)
    assert tupled.cache_info()[:2] == (1, 2)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    name=st.sampled_from(sorted(NUMBER_OPS)),
    static=st.booleans(),
    numbers=st.lists(
        st.one_of(
            st.sampled_from(NUMBERS),
            st.integers(-3, 3),
            st.floats(width=32),
            st.complex_numbers(width=64),
        ),
        min_size=2,
        max_size=8,
    ),
)
def test_python_numbers_as_operands_equal_eager(
    conv: Conv, name: str, static: bool, numbers: list[Any]
) -> None:
    """One jitted function called with a run of Python numbers of every kind (signed
    zeros, NaN, infinities, bool, int, float, complex), as an argument or a static
    one: each call gives eager's answer bit for bit, or raises what eager raises."""
    to, back = conv
    op = NUMBER_OPS[name]
    x = to(np.array([1.0, -1.0, 0.0, 2.0]))
    jitted = agnograd.jit(op, static_argnums=(1,) if static else (), max_traces=64)
    with np.errstate(all="ignore"):
        for s in numbers:
            check_call(jitted, eager_or_error(op, x, s), back, x, s)


def test_static_argument_must_be_hashable() -> None:
    jitted = agnograd.jit(lambda x, axes: F.sum(x, axis=tuple(axes)), static_argnums=1)
    with pytest.raises(TypeError, match=r"jit\(<lambda>\): static argument 1 is a list, which"):
        jitted(np.ones((2, 2)), [0])
    same(jitted(np.ones((2, 2)), (0,)), np.full(2, 2.0))


def test_static_argnums_out_of_range() -> None:
    jitted = agnograd.jit(lambda x: x, static_argnums=2)
    with pytest.raises(TypeError, match=r"static_argnums=\(2,\) names argument 2, but"):
        jitted(np.ones(2))


# -- arguments and results ----------------------------------------------------------------


def test_raw_arrays_and_variables_as_arguments() -> None:
    jitted = agnograd.jit(mlp)
    x, w, b = np.ones((2, 3)), np.full((3, 2), 0.5), np.zeros(2)
    want = eager(mlp, x, w, b)
    same(jitted(x, w, b), want)
    plain = [Variable(a, requires_grad=False) for a in (x, w, b)]
    same(jitted(*plain), want)
    assert jitted.cache_info()[:2] == (1, 1)  # a Variable's signature is its array's
    same(jitted(Variable(x), plain[1], agnograd.Parameter(b)), want)
    assert jitted.cache_info()[:2] == (1, 2)  # ... and whether it requires a gradient


def test_pytrees_keywords_and_results() -> None:
    Pair = namedtuple("Pair", "w b")

    def f(params: dict[str, Any], xs: list[Any], *, scale: Any, name: str = "") -> Any:
        h = xs[0] @ params["p"].w + params["p"].b
        return {"out": (h * scale, [xs[1]]), "name": name, "none": None}

    jitted = agnograd.jit(f)
    params = {"p": Pair(np.ones((2, 2)), np.arange(2.0))}
    xs = [np.eye(2), np.full(3, 7.0)]
    got = jitted(params, xs, scale=np.asarray(2.0), name="a")
    want = {"out": ((np.eye(2) @ np.ones((2, 2)) + np.arange(2.0)) * 2.0, [xs[1]]), "name": "a"}
    same(got, {**want, "none": None})
    assert got["out"][1][0] is xs[1]  # an argument returned is the argument
    got = jitted(params, xs, name="b", scale=np.asarray(2.0))
    assert got["name"] == "b"
    assert jitted.cache_info()[:2] == (0, 2)


def test_closed_over_variable_is_read_at_each_call() -> None:
    w = Variable(np.array([1.0, 2.0]))
    jitted = agnograd.jit(lambda x: (x * w, w))
    x = np.ones(2)
    same(jitted(x), (np.array([1.0, 2.0]), np.array([1.0, 2.0])))
    w.d = np.array([3.0, 4.0])  # new data, same signature: the same plan reads it
    same(jitted(x), (np.array([3.0, 4.0]), np.array([3.0, 4.0])))
    w.array = np.array([5.0, 6.0])
    same(jitted(x), (np.array([5.0, 6.0]), np.array([5.0, 6.0])))
    w.array[0] = 7.0  # written in place
    same(jitted(x)[0], np.array([7.0, 6.0]))
    assert jitted.cache_info()[:2] == (3, 1)
    w.array = np.array([1.0, 2.0, 3.0])  # a new shape: traced again
    same(jitted(np.ones(3))[0], np.array([1.0, 2.0, 3.0]))
    w.array = np.array([1.0, 2.0], np.float32)  # a new dtype: traced again
    got = jitted(x)[0]
    same(got, np.ones(2) * np.array([1.0, 2.0], np.float32))
    assert jitted.cache_info().misses == 3


def test_each_call_gets_results_of_its_own(conv: Conv) -> None:
    """Results that the plan does not compute from the arguments (a creation
    function's result, a view of one, a raw array made while tracing, a
    closed-over Variable's data) are copies: a caller who writes into one result
    changes no later call's. An argument returned is still the argument."""
    to, back = conv
    w = Variable(to(np.array([1.0, 2.0])))

    def f(x: Any) -> Any:
        xp = agnograd.namespace(x)
        zeros = xp.zeros(3, dtype=xp.float64)
        made = to(np.full(2, 4.0))  # a raw array of the library, made while tracing
        return x * 2.0, zeros, zeros[1:], made, w, x

    jitted = agnograd.jit(f)
    x = to(np.array([1.0, -1.0]))
    want = (np.array([2.0, -2.0]), np.zeros(3), np.zeros(2), np.full(2, 4.0), [1.0, 2.0])
    for _ in range(3):
        got = jitted(x)
        assert got[-1] is x
        for g, expected in zip(got[:-1], want, strict=True):
            np.testing.assert_array_equal(back(g), expected)
            g[0] = 9.0
    np.testing.assert_array_equal(back(w.array), [1.0, 2.0])
    assert jitted.cache_info()[:2] == (2, 1)


def test_closed_over_raw_array_is_a_constant() -> None:
    """Written into, it is seen; a name bound to another array is not (as jax.jit)."""
    c = np.array([1.0, 2.0])
    jitted = agnograd.jit(lambda x: x * c)
    same(jitted(np.ones(2)), np.array([1.0, 2.0]))
    c[0] = 5.0
    same(jitted(np.ones(2)), np.array([5.0, 2.0]))
    c = np.array([7.0, 7.0])  # the plan keeps the array it traced
    same(jitted(np.ones(2)), np.array([5.0, 2.0]))


def test_argument_data_shape_and_dtype_change_between_calls(conv: Conv) -> None:
    to, back = conv
    fun = program_fun([("tanh", 0, 0, 0), ("matmul", 3, 0, 0), ("sum", 4, 1, 1)])
    jitted = agnograd.jit(fun)
    for seed, dtype in ((0, np.float64), (1, np.float64), (2, np.float32), (3, np.float64)):
        arrays = [to(a.astype(dtype)) for a in leaves(seed)]
        same(jitted(*arrays), eager(fun, *arrays), back)
    fun = program_fun([("tanh", 0, 0, 0), ("multiply", 3, 1, 0), ("exp_sin", 4, 0, 1)])
    jitted = agnograd.jit(fun)
    for n in (3, 5, 3):  # x of another shape
        _, b, _, m = leaves(n)
        arrays = [to(a) for a in (np.ones((n, 4)), b, np.ones((n, 1), np.float32), m)]
        same(jitted(*arrays), eager(fun, *arrays), back)
    assert jitted.cache_info()[:2] == (1, 2)


def test_configuration_keys_the_trace() -> None:
    """A function that reads agnograd.config: a trace per value, each right."""

    def dropout_like(x: Any) -> Any:
        return x * 0.5 if getattr(agnograd.config, "train", True) else x

    jitted = agnograd.jit(dropout_like)
    x = np.ones(2)
    same(jitted(x), np.full(2, 0.5))
    with agnograd.using_config("train", False):
        same(jitted(x), np.ones(2))
    same(jitted(x), np.full(2, 0.5))
    with agnograd.no_backprop_mode():  # enable_backprop too
        same(jitted(x), np.full(2, 0.5))
    assert jitted.cache_info()[:2] == (1, 3)
    with agnograd.using_config("train", False):
        same(jitted(x), np.ones(2))
    assert jitted.cache_info()[:2] == (2, 3)


def test_results_under_auto_forward_off_are_arrays() -> None:
    jitted = agnograd.jit(lambda x: F.exp(x))
    with agnograd.auto_forward(False):
        got = jitted(np.zeros(2))
    same(got, np.ones(2))


def test_inside_a_trace_it_inlines() -> None:
    inner = agnograd.jit(lambda x: F.sin(x) * 2.0)
    outer = agnograd.jit(lambda x: inner(x) + inner(x * 2.0))
    x = np.array([0.5, 1.0])
    same(outer(x), np.sin(x) * 2.0 + np.sin(x * 2.0) * 2.0)
    assert inner.cache_info()[:2] == (0, 0)  # inlined into outer's graph


# -- a cache never changes an answer ----------------------------------------------------


class Fuse(FunctionNode):
    """``x + 1``, whose forward raises ``Fuse.error`` while it is set."""

    error: BaseException | None = None

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        if Fuse.error is not None:
            raise Fuse.error
        return (inputs[0] + 1.0,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return grad_outputs


def fused(x: Any) -> Any:
    (y,) = Fuse().apply((F.exp(x),))
    return y * 2.0


@pytest.mark.parametrize("error", [ValueError("blown"), KeyboardInterrupt()])
def test_an_exception_in_the_first_run_keeps_nothing(error: BaseException) -> None:
    jitted = agnograd.jit(fused)
    x = np.array([0.0, 1.0])
    Fuse.error = error
    try:
        with pytest.raises(type(error)):
            jitted(x)
    finally:
        Fuse.error = None
    assert jitted.cache_info() == (0, 0, 0, 0, 8)
    same(jitted(x), (np.exp(x) + 1.0) * 2.0)
    assert jitted.cache_info()[:2] == (0, 1)


def test_an_exception_in_a_later_run_leaves_the_plan_exact() -> None:
    jitted = agnograd.jit(fused)
    x = np.array([0.0, 1.0])
    jitted(x)
    Fuse.error = ValueError("blown")
    try:
        with pytest.raises(ValueError, match="blown"):
            jitted(x * 2.0)
    finally:
        Fuse.error = None
    assert jitted.cache_info() == (0, 1, 0, 1, 8)
    same(jitted(x * 3.0), (np.exp(x * 3.0) + 1.0) * 2.0)
    assert jitted.cache_info()[:2] == (1, 1)


def test_an_exception_while_tracing_keeps_nothing() -> None:
    fail = []

    def f(x: Any) -> Any:
        if fail:
            raise RuntimeError("first trace fails")
        return x * 2.0

    jitted = agnograd.jit(f, cache_size=1)
    jitted(np.ones(3))  # a plan that a kept trace would evict
    fail.append(True)
    with pytest.raises(RuntimeError, match="first trace fails"):
        jitted(np.ones(2))
    assert jitted.cache_info() == (0, 1, 0, 1, 1)
    fail.clear()
    same(jitted(np.ones(3)), np.full(3, 2.0))  # still there
    same(jitted(np.ones(2)), np.full(2, 2.0))


def test_function_hooks_see_every_function() -> None:
    class Counter(FunctionHook):
        name = "counter"

        def __init__(self) -> None:
            self.labels: list[str] = []

        def forward_preprocess(self, function: Any, in_data: Any) -> None:
            self.labels.append(function.label)

    jitted = agnograd.jit(lambda x: F.exp(F.sin(x)))
    x = np.array([0.25])
    jitted(x)
    with Counter() as hook:
        same(jitted(x), np.exp(np.sin(x)))
    assert hook.labels == ["Sin", "Exp"]
    assert jitted.cache_info()[:2] == (1, 1)


def test_threads_share_a_jitted_function() -> None:
    jitted = agnograd.jit(lambda x: F.sum(F.tanh(x) * x))
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(50):
                x = rng.standard_normal(4 + seed % 2)
                same(jitted(x), np.asarray(np.sum(np.tanh(x) * x)))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert jitted.cache_info().misses == 2


# -- JAX: one XLA program ----------------------------------------------------------------


def test_jax_runs_one_program_to_rounding() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    fun = program_fun([("tanh", 0, 0, 0), ("matmul", 3, 1, 0), ("max", 4, 0, 1)])
    jitted = agnograd.jit(fun)
    for seed in range(3):
        arrays = [jnp.asarray(a.astype(np.float32)) for a in leaves(seed)]
        got, want = jitted(*arrays), eager(fun, *arrays)
        for g, w in zip(got, want, strict=True):
            assert isinstance(g, jax.Array)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)
    (entry,) = jitted._cache.values()
    assert entry.program is not None  # the forward runs as one jax.jit program
    assert jitted.cache_info()[:2] == (2, 1)


def test_jax_past_max_functions_runs_eagerly_bit_for_bit() -> None:
    """Past its bound a signature runs no program: eager's answers exactly."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    fun = program_fun([("tanh", 0, 0, 0), ("matmul", 3, 1, 0), ("max", 4, 0, 1)])
    jitted = agnograd.jit(fun, max_functions=6)
    for seed in range(2):
        arrays = [jnp.asarray(a.astype(np.float32)) for a in leaves(seed)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = jitted(*arrays)
        assert [w.category for w in caught] == ([JitWarning] if seed == 0 else [])
        for g, w in zip(got, eager(fun, *arrays), strict=True):
            assert isinstance(g, jax.Array)
            same(g, w)
    assert jitted.cache_info()[:3] == (0, 1, 2)
