"""Abstract shape/dtype evaluation, the build step of define-then-run.

With auto-forward off, each function's own forward runs on ``Abstract`` values
that carry a shape and a dtype but no data. For every function of
``agnograd.functions``, on random shapes (with broadcasting) and dtypes, the
inferred shape and dtype must equal those of the eager result on the same inputs,
on every backend; the deferred graph, once run, must also give the eager values.
Operations whose result depends on the data must be refused when the graph is
built, with a TypeError that says what to do.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import agnograd
import agnograd.functions as F
from agnograd import FunctionNode, Variable
from agnograd.backends._abstract import Abstract, AbstractNamespace, DataDependentError
from agnograd.backends._shape_dtype import broadcast_shapes


class Case(NamedTuple):
    """One call: ``fn(*Variables around inputs)``; inputs are NumPy arrays."""

    fn: Callable[..., Any]
    inputs: tuple[np.ndarray, ...]


# -- drawing inputs ------------------------------------------------------------------


def float_dtypes(backend: str) -> list[str]:
    # JAX computes in 32 bits unless its x64 mode is on (the suite leaves it off).
    return ["float32"] if backend == "jax" else ["float32", "float64"]


def int_dtypes(backend: str) -> list[str]:
    return ["int32"] if backend == "jax" else ["int32", "int64"]


def shapes(min_dims: int = 0, max_dims: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=4)


def values(shape: tuple[int, ...], dtype: str, *, positive: bool = False) -> np.ndarray:
    """Deterministic inputs: the values only matter for the forward comparison."""
    size = int(np.prod(shape))
    if dtype == "bool":
        return (np.arange(size) % 3 == 0).reshape(shape)
    if dtype.startswith("int"):
        return (np.arange(size) % 5 + 1).astype(dtype).reshape(shape)
    low = 0.5 if positive else -2.0
    return np.linspace(low, 2.0, size, dtype=dtype).reshape(shape)


@st.composite
def unary(
    draw: Any,
    backend: str,
    fn: Any,
    *,
    ints: bool = False,
    positive: bool = False,
    min_dims: int = 0,
) -> Case:
    dtype = draw(st.sampled_from(float_dtypes(backend) + (int_dtypes(backend) if ints else [])))
    return Case(fn, (values(draw(shapes(min_dims)), dtype, positive=positive),))


@st.composite
def binary(draw: Any, backend: str, fn: Any, *, ints: bool = True, positive: bool = False) -> Case:
    """Two broadcastable arrays of any float/int dtypes, or one array and a Python scalar."""
    pool = float_dtypes(backend) + (int_dtypes(backend) if ints else [])
    pair = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4))
    s1, s2 = pair.input_shapes
    d1, d2 = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
    x1, x2 = values(s1, d1, positive=positive), values(s2, d2, positive=True)
    scalar = draw(st.sampled_from([None, "left", "right"]))
    if scalar is None:
        return Case(fn, (x1, x2))
    value = draw(st.sampled_from([2, 0.5] if d1.startswith("float") or not ints else [2]))
    if scalar == "left":
        return Case(lambda a: fn(value, a), (x2,))
    return Case(lambda a: fn(a, value), (x1,))


def axes(ndim: int) -> st.SearchStrategy[Any]:
    if ndim == 0:
        return st.none()
    some = st.lists(
        st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim, unique_by=lambda a: a % ndim
    )
    return st.none() | st.integers(-ndim, ndim - 1) | some.map(tuple)


@st.composite
def reduction(draw: Any, backend: str, fn: Any, *, ints: bool) -> Case:
    dtype = draw(st.sampled_from(float_dtypes(backend) + (int_dtypes(backend) if ints else [])))
    shape = draw(shapes())
    axis, keepdims = draw(axes(len(shape))), draw(st.booleans())
    return Case(lambda a: fn(a, axis=axis, keepdims=keepdims), (values(shape, dtype),))


@st.composite
def softmaxes(draw: Any, backend: str, fn: Any) -> Case:
    shape = draw(shapes(min_dims=1))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    dtype = draw(st.sampled_from(float_dtypes(backend)))
    return Case(lambda a: fn(a, axis=axis), (values(shape, dtype),))


@st.composite
def matmuls(draw: Any, backend: str) -> Case:
    n, k, m = (draw(st.integers(1, 3)) for _ in range(3))
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
    b1, b2 = batch.input_shapes
    kind = draw(st.sampled_from(["matrix", "vector-left", "vector-right", "vectors"]))
    s1 = (k,) if kind in ("vector-left", "vectors") else (*b1, n, k)
    s2 = (k,) if kind in ("vector-right", "vectors") else (*b2, k, m)
    d1, d2 = (draw(st.sampled_from(float_dtypes(backend))) for _ in range(2))
    return Case(F.matmul, (values(s1, d1), values(s2, d2)))


@st.composite
def linears(draw: Any, backend: str) -> Case:
    lead = draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=3))
    k, m = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(float_dtypes(backend)))
    x, W, b = values((*lead, k), dtype), values((m, k), dtype), values((m,), dtype)
    if draw(st.booleans()):
        return Case(F.linear, (x, W, b))
    return Case(F.linear, (x, W))


@st.composite
def broadcasts(draw: Any, backend: str) -> Case:
    pair = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4))
    target = pair.result_shape
    return Case(lambda a: F.broadcast_to(a, target), (values(pair.input_shapes[0], "float32"),))


@st.composite
def reshapes(draw: Any, backend: str) -> Case:
    shape = draw(shapes())
    size = int(np.prod(shape))
    target = draw(st.sampled_from([(size,), (-1,), (*shape, 1), tuple(reversed(shape)), (1, -1)]))
    return Case(
        lambda a: F.reshape(a, target),
        (values(shape, draw(st.sampled_from(float_dtypes(backend) + int_dtypes(backend)))),),
    )


@st.composite
def permutations(draw: Any, backend: str, fn: Any, *, optional: bool = False) -> Case:
    shape = draw(shapes())
    perm = tuple(draw(st.permutations(range(len(shape)))))
    if optional and draw(st.booleans()):
        return Case(fn, (values(shape, "float32"),))
    return Case(lambda a: fn(a, perm), (values(shape, "float32"),))


@st.composite
def expand_dims(draw: Any, backend: str) -> Case:
    shape = draw(shapes())
    axis = draw(st.integers(-len(shape) - 1, len(shape)))
    return Case(lambda a: F.expand_dims(a, axis=axis), (values(shape, "float32"),))


@st.composite
def squeezes(draw: Any, backend: str) -> Case:
    shape = list(draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=2, max_side=3)))
    for _ in range(draw(st.integers(1, 2))):
        shape.insert(draw(st.integers(0, len(shape))), 1)
    unit = [i for i, s in enumerate(shape) if s == 1]
    chosen = tuple(draw(st.lists(st.sampled_from(unit), min_size=1, unique=True)))
    axis = chosen[0] if len(chosen) == 1 and draw(st.booleans()) else chosen
    return Case(lambda a: F.squeeze(a, axis=axis), (values(tuple(shape), "float32"),))


@st.composite
def joins(draw: Any, backend: str, name: str) -> Case:
    n = draw(st.integers(1, 3))
    shape = list(draw(shapes(min_dims=1 if name == "concat" else 0)))
    ndim = len(shape)
    dtypes = [draw(st.sampled_from(float_dtypes(backend))) for _ in range(n)]
    if name == "concat":
        axis = draw(st.none() | st.integers(-ndim, ndim - 1))
        inputs = []
        for dtype in dtypes:
            if axis is not None:
                shape[axis] = draw(st.integers(1, 3))
            inputs.append(values(tuple(shape), dtype))
        return Case(lambda *xs: F.concat(list(xs), axis=axis), tuple(inputs))
    axis = draw(st.integers(-ndim - 1, ndim))
    return Case(
        lambda *xs: F.stack(list(xs), axis=axis), tuple(values(tuple(shape), d) for d in dtypes)
    )


@st.composite
def astypes(draw: Any, backend: str) -> Case:
    pool = float_dtypes(backend) + int_dtypes(backend)
    source, target = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
    return Case(lambda a: F.astype(a, getattr(a.xp, target)), (values(draw(shapes()), source),))


@st.composite
def wheres(draw: Any, backend: str) -> Case:
    three = draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=4))
    sc, s1, s2 = three.input_shapes
    pool = float_dtypes(backend)
    d1, d2 = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
    cond, x1, x2 = values(sc, "bool"), values(s1, d1), values(s2, d2)
    form = draw(st.sampled_from(["arrays", "scalar-left", "scalar-right", "mask-variable"]))
    if form == "scalar-left":
        return Case(lambda c, b: F.where(c, 0.5, b), (cond, x2))
    if form == "scalar-right":
        return Case(lambda c, a: F.where(c, a, 0.5), (cond, x1))
    if form == "mask-variable":  # the condition computed in the graph
        return Case(lambda a, b: F.where(a > 0, a, b), (x1, x2))
    return Case(F.where, (cond, x1, x2))


@st.composite
def get_items(draw: Any, backend: str) -> Case:
    shape = draw(shapes(min_dims=1))
    key = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return Case(lambda a: F.get_item(a, key), (values(shape, "float32"),))


@st.composite
def cross_entropies(draw: Any, backend: str) -> Case:
    n, c = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    reduce = draw(st.sampled_from(["mean", "no"]))
    labels = (np.arange(n) % c).astype("int32" if backend == "jax" else "int64")
    dtype = draw(st.sampled_from(float_dtypes(backend)))
    return Case(
        lambda x, t: F.softmax_cross_entropy(x, t, reduce=reduce), (values((n, c), dtype), labels)
    )


@st.composite
def squared_errors(draw: Any, backend: str) -> Case:
    shape = draw(shapes())
    dtype = draw(st.sampled_from(float_dtypes(backend)))
    return Case(F.mean_squared_error, (values(shape, dtype), values(shape, dtype) * 2))


def _sum_with_dtype(draw_backend: str) -> st.SearchStrategy[Case]:
    # F.sum(x, dtype=...) casts first; the rest of sum's forms are in `reduction`.
    target = "float32" if draw_backend == "jax" else "float64"
    plain = reduction(draw_backend, F.sum, ints=True)
    cast = shapes().map(
        lambda s: Case(lambda a: F.sum(a, dtype=getattr(a.xp, target)), (values(s, "float32"),))
    )
    return plain | cast


Strategy = Callable[[str], st.SearchStrategy[Case]]


def family(strategy: Callable[..., Any], names: str, **options: Any) -> dict[str, Strategy]:
    """The same strategy for several functions: ``strategy(backend, F.<name>, **options)``."""
    return {
        name: functools.partial(strategy, fn=getattr(F, name), **options) for name in names.split()
    }


# One strategy per public function of agnograd.functions (test_every_function_has_a_case
# keeps the table complete). Floating-only functions get float inputs: integer inputs
# are covered by test_integer_inputs_of_floating_functions.
CASES: dict[str, Strategy] = {
    **family(unary, "cos exp sin tanh sigmoid"),
    **family(unary, "log sqrt", positive=True),
    **family(unary, "absolute identity negative relu sign square", ints=True),
    **family(binary, "add subtract multiply equal not_equal less less_equal greater greater_equal"),
    "floor_divide": lambda b: binary(b, F.floor_divide, positive=True),
    "divide": lambda b: binary(b, F.divide, ints=False),
    "pow": lambda b: binary(b, F.pow, ints=False, positive=True),
    "sum": _sum_with_dtype,
    "mean": lambda b: reduction(b, F.mean, ints=False),
    "softmax": lambda b: softmaxes(b, F.softmax),
    "log_softmax": lambda b: softmaxes(b, F.log_softmax),
    "matmul": matmuls,
    "linear": linears,
    "broadcast_to": broadcasts,
    "reshape": reshapes,
    "permute_dims": lambda b: permutations(b, F.permute_dims),
    "transpose": lambda b: permutations(b, F.transpose, optional=True),
    "matrix_transpose": lambda b: shapes(min_dims=2, max_dims=4).map(
        lambda s: Case(F.matrix_transpose, (values(s, "float32"),))
    ),
    "expand_dims": expand_dims,
    "squeeze": squeezes,
    "concat": lambda b: joins(b, "concat"),
    "stack": lambda b: joins(b, "stack"),
    "astype": astypes,
    "where": wheres,
    "get_item": get_items,
    "softmax_cross_entropy": cross_entropies,
    "mean_squared_error": squared_errors,
}


def compare_with_eager(backend: Any, case: Case) -> bool:
    """Check the deferred call against the eager one; False if eager refuses the inputs."""
    arrays = [backend.xp.asarray(a) for a in case.inputs]
    try:
        want = case.fn(*[Variable(a) for a in arrays])
    except Exception:  # outside the function's domain on this library (strictness)
        return False
    leaves = [Variable(a) for a in arrays]
    with agnograd.auto_forward(False):
        got = case.fn(*leaves)
    assert got.array is None, "define-then-run computed eagerly"
    assert got.shape == tuple(want.shape), f"shape {got.shape}, eager {tuple(want.shape)}"
    assert got.dtype == want.dtype, f"dtype {got.dtype}, eager {want.dtype}"
    got.forward()
    assert tuple(got.d.shape) == tuple(want.shape)
    assert got.d.dtype == want.dtype
    np.testing.assert_allclose(
        backend.to_numpy(got.d), backend.to_numpy(want.d), rtol=1e-6, equal_nan=True
    )
    return True


def examples(backend: Any) -> settings:
    """The active profile's number of examples; fewer for JAX, which compiles every
    new shape on first use (a few milliseconds per operation)."""
    n = settings.default.max_examples
    return settings(max_examples=2 if backend.name == "jax" else n, deadline=None)


def test_every_function_of_issue_2_has_a_case():
    # The functions of agnograd.functions from the core issue; the namespace chapters
    # added later check define-then-run inference in their own test files
    # (tests/test_namespace_*.py).
    assert set(CASES) <= set(F.__all__)
    assert len(CASES) >= 45


@pytest.mark.parametrize("name", sorted(CASES))
def test_inferred_shape_and_dtype_equal_eager(backend, name):
    @examples(backend)
    @given(case=CASES[name](backend.name))
    def check(case: Case) -> None:
        compare_with_eager(backend, case)

    check()


def test_random_chains_infer_what_eager_computes(backend):
    """Chains of random functions, each applied to the previous result (and, for the
    binary ones, to a fresh input that broadcasts against it)."""
    menu = ["add", "multiply", "exp", "tanh", "sum", "transpose", "expand_dims", "where", "square"]

    @examples(backend)
    @given(
        names=st.lists(st.sampled_from(menu), min_size=1, max_size=6),
        shape=shapes(min_dims=1),
        dtype=st.sampled_from(float_dtypes(backend.name)),
        data=st.data(),
    )
    def check(names: list[str], shape: tuple[int, ...], dtype: str, data: Any) -> None:
        extras = [
            values(data.draw(hnp.broadcastable_shapes(shape, max_dims=3)), dtype)
            for name in names
            if name in ("add", "multiply")
        ]

        def chain(x: Variable, *others: Variable) -> Variable:
            it = iter(others)
            for name in names:
                if name in ("add", "multiply"):
                    x = getattr(F, name)(x, next(it))
                elif name == "sum":
                    x = F.sum(x, axis=0, keepdims=True)
                elif name == "expand_dims":
                    x = F.expand_dims(x, axis=-1)
                elif name == "where":
                    x = F.where(x > 0, x, 0.0)
                elif name == "transpose":
                    x = F.transpose(x)
                else:
                    x = getattr(F, name)(x)
            return x

        compare_with_eager(backend, Case(chain, (values(shape, dtype), *extras)))

    check()


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(F.exp, id="exp"),
        pytest.param(F.sqrt, id="sqrt"),
        pytest.param(F.tanh, id="tanh"),
        pytest.param(F.log, id="log"),
        pytest.param(lambda a: F.divide(a, a), id="divide"),
        pytest.param(lambda a: a / 2, id="divide-scalar"),
        pytest.param(lambda a: 1 / a, id="scalar-divide"),
        pytest.param(F.mean, id="mean"),
    ],
)
def test_integer_inputs_of_floating_functions(backend, call):
    case = Case(call, (values((2, 3), "int32"),))
    if not compare_with_eager(backend, case):
        # The library refuses integer inputs eagerly (array-api-strict, torch for some):
        # the deferred graph refuses them too, by the time it runs.
        leaf = Variable(backend.xp.asarray(case.inputs[0]))

        def define_then_run() -> None:
            with agnograd.auto_forward(False):
                out = case.fn(leaf)
            out.forward()

        with pytest.raises(Exception):  # noqa: B017, PT011 - the library's own error
            define_then_run()


@pytest.mark.parametrize("second", ["float64", "int64"])
def test_torch_zero_d_operands_do_not_promote(second):
    # PyTorch lets a dimensioned operand's dtype win over a 0-d one of the same kind
    # (float32 (3,) * float64 () is float32): the probe keeps 0-d operands 0-d.
    torch = pytest.importorskip("torch")

    class Torch:
        xp = torch

        @staticmethod
        def to_numpy(x: Any) -> np.ndarray:
            return np.asarray(x)

    first = "float32" if second == "float64" else "int32"
    case = Case(lambda a, b: a * b, (values((3,), first), values((), second)))
    assert compare_with_eager(Torch, case)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda a: a + 1, id="int-plus-int"),
        pytest.param(lambda a: a * 2.5, id="int-times-float"),
        pytest.param(lambda a: a**2, id="int-power"),
        pytest.param(lambda a: a // 2, id="floor-divide"),
        pytest.param(lambda a: F.sum(a), id="sum"),
        pytest.param(lambda a: a == 1, id="equal"),
        pytest.param(lambda a: F.astype(a, a.xp.float32) + a, id="float-plus-int"),
    ],
)
def test_integer_arithmetic_promotes_like_the_library(backend, call):
    compare_with_eager(backend, Case(call, (values((2, 3), "int32"),)))


# -- the abstract evaluator itself -------------------------------------------------------


@given(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=4))
def test_broadcast_shapes_follows_numpy(shapes3):
    assert broadcast_shapes(*shapes3.input_shapes) == shapes3.result_shape


def test_broadcast_shapes_refuses_incompatible_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\), \(4,\) cannot be broadcast"):
        broadcast_shapes((2, 3), (4,))
    assert broadcast_shapes() == ()


@given(data=st.data(), shape=shapes(min_dims=1, max_dims=4))
def test_abstract_basic_indexing_follows_numpy(data, shape):
    import array_api_compat.numpy as xp

    key = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    a = Abstract(shape, xp.float32, xp)
    assert a[key].shape == np.zeros(shape)[key].shape


def test_abstract_values_have_no_data():
    import array_api_compat.numpy as xp

    a = Abstract((2, 3), xp.float32, xp)
    ns = a.__array_namespace__()
    assert isinstance(ns, AbstractNamespace)
    b = ns.exp(a @ a.mT + 1.0)
    assert isinstance(b, Abstract)
    assert (b.shape, b.dtype) == ((2, 2), np.float32)
    assert ns.sum(a, axis=1, keepdims=True).shape == (2, 1)
    assert ns.reshape(a, (-1,)).shape == (6,)
    assert ns.argmax(a, axis=0).dtype == np.int64
    assert ns.astype(a, xp.float64).dtype == np.float64
    assert (a.ndim, a.size, len(a), a.T.shape) == (2, 6, 2, (3, 2))
    with pytest.raises(DataDependentError):
        bool(a)
    with pytest.raises(DataDependentError):
        float(a)


def test_data_dependent_is_a_type_error():
    assert issubclass(DataDependentError, TypeError)


def test_boolean_mask_in_a_forward_is_refused_at_build_time(backend):
    class Positive(FunctionNode):
        def forward(self, inputs):
            (x,) = inputs
            return (x[x > 0],)

    x = Variable(backend.asarray([1.0, -1.0, 2.0]))
    with agnograd.auto_forward(False), pytest.raises(TypeError) as info:
        Positive().apply((x,))
    message = str(info.value)
    assert "Positive" in message
    assert "boolean mask" in message
    assert "auto_forward(True)" in message
    assert "infer" in message
    assert Positive().apply((x,))[0].shape == (2,)  # eagerly it works


def test_python_value_of_an_array_in_a_forward_is_refused_at_build_time():
    class Ones(FunctionNode):
        def forward(self, inputs):
            (x,) = inputs
            return (self.xp.ones(int(self.xp.sum(x))),)

    x = Variable(np.ones(3, np.float32))
    with agnograd.auto_forward(False), pytest.raises(TypeError, match=r"Ones.*without data"):
        Ones().apply((x,))


def test_infer_override_declares_a_data_dependent_output():
    class FirstPositive(FunctionNode):
        """The first ``n`` positive entries; ``n`` is known to the caller."""

        def __init__(self, n: int) -> None:
            self.n = n

        def forward(self, inputs):
            (x,) = inputs
            return (x[x > 0][: self.n],)

        def infer(self, inputs):
            return (((self.n,), inputs[0].dtype),)

    x = Variable(np.array([-1.0, 3.0, 4.0, -2.0], np.float32))
    with agnograd.auto_forward(False):
        (y,) = FirstPositive(2).apply((x,))
    assert (y.shape, y.dtype, y.d) == ((2,), np.float32, None)
    y.forward()
    np.testing.assert_array_equal(y.d, [3.0, 4.0])


def test_build_time_errors_name_the_problem():
    x = Variable(np.ones((2, 3), np.float32))
    with agnograd.auto_forward(False):
        with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(2, 3\) do not align"):
            x @ x
        with pytest.raises(ValueError, match="cannot be broadcast"):
            F.broadcast_to(x, (3, 3))


def test_out_of_range_axis_is_refused_at_build_time():
    x = Variable(np.ones((2, 3), np.float32))
    with agnograd.auto_forward(False), pytest.raises((ValueError, IndexError)):
        F.sum(x, axis=2)


def test_concat_of_mismatched_shapes_is_refused_at_build_time():
    x, y = Variable(np.ones((2, 3), np.float32)), Variable(np.ones(4, np.float32))
    with agnograd.auto_forward(False), pytest.raises(ValueError, match="concat"):
        F.concat([x, y], axis=0)


@pytest.mark.parametrize("name", ["sum", "prod", "cumulative_sum", "cumulative_prod"])
@pytest.mark.parametrize("dtype", ["uint8", "uint32", "int8", "bool"])
def test_integer_reductions_infer_the_dtype_they_compute(name: str, dtype: str) -> None:
    # Unsigned in, the unsigned default out (uint64 for NumPy), as the standard says.
    xp = agnograd.namespace(np)
    with agnograd.auto_forward(False):
        v = agnograd.Variable.from_array(np.ones(3, dtype=dtype))
        y = getattr(xp, name)(v)
        inferred = y.dtype
        y.forward()
    assert inferred == y.array.dtype


# -- the elementwise rule: the backend's own function, probed ---------------------------

# The standard's elementwise functions of two arrays; the others take one (clip: three).
_BINARY_NAMES = {
    "add", "atan2", "bitwise_and", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift",
    "bitwise_xor", "copysign", "divide", "equal", "floor_divide", "greater", "greater_equal",
    "hypot", "less", "less_equal", "logaddexp", "logical_and", "logical_or", "logical_xor",
    "maximum", "minimum", "multiply", "nextafter", "not_equal", "pow", "remainder", "subtract",
}  # fmt: skip


def _kinds(backend_name: str) -> list[str]:
    return [*float_dtypes(backend_name), *int_dtypes(backend_name), "bool"]


def _abstract_of(v: Any, xp: Any) -> Any:
    return Abstract(tuple(v.shape), v.dtype, xp) if hasattr(v, "dtype") else v


def _ones_like(v: Any, xp: Any) -> Any:
    return xp.ones(tuple(v.shape), dtype=v.dtype) if hasattr(v, "dtype") else v


def _check_like_backend(
    xp: Any, fn: Any, args: list[Any], what: str, abstract_fn: Any = None
) -> None:
    """``abstract_fn`` (default ``fn``) on Abstract values gives the shape and dtype
    ``fn`` gives on ``args``; where the backend refuses the dtypes (not merely these
    values: integer division by zero), the abstract call raises too."""
    abstract = [_abstract_of(a, xp) for a in args]
    abstract_call = fn if abstract_fn is None else abstract_fn

    def quietly(*values: Any) -> Any:  # overflow and nan warnings are not refusals
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*values)

    try:
        want = quietly(*args)
    except Exception:
        try:
            quietly(*[_ones_like(a, xp) for a in args])
        except Exception:
            with pytest.raises(Exception):  # noqa: B017, PT011 - the library's own error
                abstract_call(*abstract)
        return
    got = abstract_call(*abstract)
    assert (got.shape, got.dtype) == (tuple(want.shape), want.dtype), what


def test_every_elementwise_function_of_the_standard_is_registered():
    from agnograd.backends._abstract import _ELEMENTWISE
    from agnograd.functions._standard import ELEMENTWISE

    assert set(ELEMENTWISE) <= _ELEMENTWISE


def test_elementwise_functions_infer_what_the_backend_computes(backend):
    """Every elementwise function of the standard, on arrays of every dtype (pair),
    broadcast, and with Python scalars: the abstract result has the shape and dtype
    of the backend's own function, found by probing it."""
    from agnograd.functions._standard import ELEMENTWISE

    if backend.name == "jax":
        pytest.skip(
            "JAX compiles every call anew: minutes for this table; the drawn cases cover it"
        )
    xp = backend.xp
    ns = Abstract((), xp.float32, xp).__array_namespace__()
    kinds = _kinds(backend.name)
    for name in ELEMENTWISE:

        def check(*args: Any, name: str = name) -> None:
            what = f"{name}{tuple(getattr(a, 'dtype', a) for a in args)}"
            _check_like_backend(xp, getattr(xp, name), list(args), what, getattr(ns, name))

        for first in kinds:
            x = xp.asarray(values((2, 3), first, positive=True))
            if name == "clip":
                check(x, 1, 3)
                check(x, 0.5, None)
                check(x, xp.asarray(values((3,), first)), None)
            elif name in _BINARY_NAMES:
                for second in kinds:
                    check(x, xp.asarray(values((2, 1), second, positive=True)))
                check(x, 2)
                check(x, 1.5)
                check(2, x)
            else:
                check(x)


def test_operators_on_abstract_values_infer_what_the_backend_computes(backend):
    import operator

    if backend.name == "jax":
        pytest.skip(
            "JAX compiles every call anew: minutes for this table; the drawn cases cover it"
        )
    xp = backend.xp
    ops = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
           operator.pow, operator.mod, operator.lt, operator.eq, operator.and_,
           operator.lshift]  # fmt: skip
    kinds = _kinds(backend.name)
    for op in ops:
        for first in kinds:
            a = xp.asarray(values((2, 3), first, positive=True))
            for second in kinds:
                b = xp.asarray(values((3,), second, positive=True))
                _check_like_backend(xp, op, [a, b], f"{op.__name__} {first} {second}")
            for scalar in (3, 2.5, True):
                _check_like_backend(xp, op, [a, scalar], f"{op.__name__} {first} {scalar}")
                _check_like_backend(xp, op, [scalar, a], f"{op.__name__} {scalar} {first}")
    for unary in (operator.neg, operator.pos, operator.abs, operator.invert):
        for kind in kinds:
            a = xp.asarray(values((2,), kind))
            _check_like_backend(xp, unary, [a], f"{unary.__name__} {kind}")


def test_a_function_registered_as_elementwise_gets_the_rule(monkeypatch):
    import array_api_compat.numpy as xp

    from agnograd.backends import _abstract

    monkeypatch.setattr(_abstract, "_ELEMENTWISE", set(_abstract._ELEMENTWISE))
    ns = Abstract((), xp.float32, xp).__array_namespace__()
    a, b = Abstract((4, 1), xp.float32, xp), Abstract((3,), xp.int16, xp)
    with pytest.raises(DataDependentError, match="no abstract rule for 'fmod'"):
        ns.fmod(a, b)
    _abstract.register_elementwise("fmod")
    out = ns.fmod(a, b)
    assert (out.shape, out.dtype) == (
        (4, 3),
        np.fmod(np.ones(1, np.float32), np.ones(1, np.int16)).dtype,
    )


def test_probing_warns_of_nothing_and_is_cached(monkeypatch):
    import array_api_compat.numpy as xp

    from agnograd.backends import _abstract

    monkeypatch.setattr(_abstract, "_probed", {})
    calls = []
    original = xp.atanh

    def counting(*args: Any) -> Any:
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(xp, "atanh", counting)
    ns = Abstract((), xp.float32, xp).__array_namespace__()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # atanh(1) is inf: NumPy warns, the probe must not
        for shape in [(2,), (5, 2), (7,)]:
            assert ns.atanh(Abstract(shape, xp.float32, xp)).shape == shape
        ns.divide(Abstract((2,), xp.float32, xp), 0)
    assert len(calls) == 1


def test_the_dtype_probe_tells_python_ints_apart_by_size() -> None:
    # uint8 + 1 is uint8, uint8 + 300 overflows in NumPy 2: the first must not answer
    # for the second.
    import array_api_compat.numpy as cnp

    from agnograd.backends._abstract import Abstract

    a = Abstract((2,), cnp.uint8, cnp)
    assert (a + 1).dtype == cnp.uint8
    with pytest.raises(OverflowError):
        a + 300  # evaluated for its error
