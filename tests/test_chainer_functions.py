"""Chainer's signatures and functions in agnograd.functions, on every backend.

``matmul`` with ``transa``/``transb`` and the deprecated ``batch_matmul``, ``add`` of
any number of arrays, ``broadcast``, ``split_axis``, Chainer's names of the standard's
inverse trigonometric functions, ``concat``'s positional ``axis``, ``broadcast_to``
and ``reshape`` that give the input back where its shape is right, and indexing and
transposition as NumPy reads them (``x[[]]``, ``x.transpose(None)``). Gradients are
checked to second order; the namespace keeps the standard's signatures.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.functions import _table
from agnograd.testing import backend_namespace, check_backward, check_double_backward

BACKENDS = ["numpy", "array_api_strict", "torch"]


@pytest.fixture(params=BACKENDS)
def xp(request: pytest.FixtureRequest) -> Any:
    pytest.importorskip(request.param)
    return backend_namespace(request.param)


def uniform(xp: Any, shape: tuple[int, ...], seed: int, low: float = -1.0) -> Any:
    rng = np.random.default_rng(seed)
    return xp.asarray(rng.uniform(low, 1.0, shape))


def numpy_of(x: Any) -> np.ndarray:
    return np.asarray(agnograd.as_array(x) if isinstance(x, Variable) else x)


def check_gradients(xp: Any, func: Any, inputs: tuple[Any, ...], seed: int = 0) -> None:
    """First- and second-order gradients of ``func`` (one output) against central
    differences."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        y = func(*inputs)
    shapes = [tuple(o.shape) for o in (y if isinstance(y, tuple) else (y,))]
    gy = tuple(uniform(xp, s, seed + 1 + k) for k, s in enumerate(shapes))
    ggx = tuple(uniform(xp, tuple(x.shape), seed + 10 + k) for k, x in enumerate(inputs))
    gy_arg = gy if isinstance(y, tuple) else gy[0]

    def quiet(*args: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return func(*args)

    check_backward(quiet, inputs, gy_arg, eps=1e-4, atol=1e-6, rtol=1e-5)
    check_double_backward(quiet, inputs, gy_arg, ggx, eps=1e-4, atol=1e-5, rtol=1e-4)


# -- matmul(a, b, transa=, transb=), batch_matmul ----------------------------------------

MATMUL_CASES = [
    ((2, 5), (5, 3), False, False),
    ((5, 2), (5, 3), True, False),
    ((2, 5), (3, 5), False, True),
    ((5, 2), (3, 5), True, True),
    ((5,), (5,), True, True),  # a 1-D operand is never transposed
    ((5,), (2, 5), False, True),
    ((5, 2), (5,), True, False),
    ((4, 5, 2), (4, 3, 5), True, True),
    ((2, 1, 5, 2), (3, 5, 4), True, False),
]


@pytest.mark.parametrize(("s1", "s2", "transa", "transb"), MATMUL_CASES)
def test_matmul_transposes_as_chainer_does(
    xp: Any, s1: tuple[int, ...], s2: tuple[int, ...], transa: bool, transb: bool
) -> None:
    a, b = uniform(xp, s1, 0), uniform(xp, s2, 1)
    na, nb = numpy_of(a), numpy_of(b)
    if transa and na.ndim > 1:
        na = np.swapaxes(na, -1, -2)
    if transb and nb.ndim > 1:
        nb = np.swapaxes(nb, -1, -2)
    y = F.matmul(a, b, transa=transa, transb=transb)
    np.testing.assert_allclose(numpy_of(y), np.matmul(na, nb), rtol=1e-12)
    check_gradients(xp, lambda p, q: F.matmul(p, q, transa=transa, transb=transb), (a, b))


def test_matmul_refuses_shapes_naming_them_after_transposition() -> None:
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(2, 3\) do not align"):
        F.matmul(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\(3, 2\) \(after transa=True, transb=False\) do not"):
        F.matmul(np.ones((2, 3)), np.ones((3, 2)), transa=True)
    with pytest.raises(ValueError, match=r"batch axes \(2,\) and \(3,\) cannot be broadcast"):
        F.matmul(np.ones((2, 3, 4)), np.ones((3, 4, 3)))
    with pytest.raises(ValueError, match="x1 is 0-d"):
        F.matmul(np.ones(()), np.ones(3))


def test_the_namespace_matmul_is_the_standards_with_chainers_keywords() -> None:
    xp = agnograd.namespace(np)
    assert xp.matmul is F.matmul is _table.DIFFERENTIABLE["linalg.matmul"]
    params = inspect.signature(xp.matmul).parameters
    assert [p.kind for p in params.values()][:2] == [inspect.Parameter.POSITIONAL_ONLY] * 2
    assert all(params[k].kind is inspect.Parameter.KEYWORD_ONLY for k in ("transa", "transb"))


@pytest.mark.parametrize(
    ("s1", "s2", "transa", "transb", "out"),
    [
        ((3, 5), (3, 1, 4), False, False, (3, 5, 4)),  # 2-D: a batch of columns
        ((3, 5), (3, 5, 4), True, False, (3, 1, 4)),
        ((3, 2, 5), (3, 4, 5), False, True, (3, 2, 4)),
        ((3, 1, 2), (3, 5), True, True, (3, 2, 5)),
        ((2, 3, 2, 2), (2, 3, 5), True, False, (2, 4, 5)),  # trailing axes flattened
    ],
)
def test_batch_matmul_reads_batches_of_matrices_and_is_deprecated(
    xp: Any,
    s1: tuple[int, ...],
    s2: tuple[int, ...],
    transa: bool,
    transb: bool,
    out: tuple[int, ...],
) -> None:
    a, b = uniform(xp, s1, 2), uniform(xp, s2, 3)
    with pytest.warns(DeprecationWarning, match="batch_matmul is deprecated"):
        y = F.batch_matmul(a, b, transa, transb)
    na = numpy_of(a).reshape(s1[0], s1[1], -1)
    nb = numpy_of(b).reshape(s2[0], s2[1], -1)
    na = np.swapaxes(na, 1, 2) if transa else na
    nb = np.swapaxes(nb, 1, 2) if transb else nb
    assert y.shape == out
    np.testing.assert_allclose(numpy_of(y), na @ nb, rtol=1e-12)
    check_gradients(xp, lambda p, q: F.batch_matmul(p, q, transa, transb), (a, b))


def test_batch_matmul_refuses_a_vector() -> None:
    with (
        pytest.warns(DeprecationWarning, match="batch_matmul is deprecated"),
        pytest.raises(ValueError, match=r"batch_matmul: a of shape \(3,\) is not a batch"),
    ):
        F.batch_matmul(np.ones(3), np.ones((3, 2)))


# -- add(*xs) --------------------------------------------------------------------------


@pytest.mark.parametrize("shapes", [[(3, 2)] * 3, [(3, 1), (2,), (1, 1)], [(2,)] * 5])
def test_add_sums_any_number_of_arrays_broadcast(xp: Any, shapes: list[tuple[int, ...]]) -> None:
    xs = tuple(uniform(xp, s, k) for k, s in enumerate(shapes))
    y = F.add(*(Variable(x) for x in xs))
    np.testing.assert_allclose(numpy_of(y), sum(numpy_of(x) for x in xs), rtol=1e-12)
    assert type(y.creator).__name__ == "MultiAdd"
    check_gradients(xp, F.add, xs)


def test_add_of_one_two_and_no_arrays() -> None:
    x = Variable(np.array([1.0, 2.0]))
    y = F.add(x)
    assert y is not x
    assert y.array is x.array
    y.grad = np.ones(2)
    y.backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])
    assert F.add(2.0, x).creator.label == "AddConstant"  # the standard's add
    with pytest.raises(TypeError, match="add: no arrays to add"):
        F.add()
    with pytest.raises(TypeError, match="add: operand 1 of 3 is a Python scalar"):
        F.add(x, 2.0, x)


def test_the_namespace_add_keeps_the_standards_two_operands() -> None:
    xp = agnograd.namespace(np)
    assert xp.add is not F.add
    assert list(inspect.signature(xp.add).parameters) == ["x1", "x2"]
    assert xp.add.__name__ == "add"
    with pytest.raises(TypeError):
        xp.add(np.ones(2), np.ones(2), np.ones(2))
    row = F._arithmetic.ROWS.rows["add"]
    assert row.function is F.add
    assert row.namespace is _table.DIFFERENTIABLE["add"] is xp.add


# -- broadcast, broadcast_to, reshape ------------------------------------------------------


@pytest.mark.parametrize("shapes", [[(3, 1, 4), (1, 2, 4)], [(3, 2), ()], [(3, 1), (2,), (1, 1)]])
def test_broadcast_gives_a_tuple_and_sums_gradients_back(
    xp: Any, shapes: list[tuple[int, ...]]
) -> None:
    xs = tuple(uniform(xp, s, k) for k, s in enumerate(shapes))
    ys = F.broadcast(*xs)
    assert isinstance(ys, tuple)
    assert len(ys) == len(xs)
    expected = np.broadcast_arrays(*(numpy_of(x) for x in xs))
    for y, e in zip(ys, expected, strict=True):
        np.testing.assert_array_equal(numpy_of(y), e)
    check_gradients(xp, F.broadcast, xs)


def test_broadcast_of_one_array_is_one_new_variable(xp: Any) -> None:
    x = Variable(uniform(xp, (3,), 0))
    y = F.broadcast(x)
    assert isinstance(y, Variable)
    assert y is not x  # Chainer returns x itself
    y.backward(grad=xp.asarray([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(numpy_of(x.grad), [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="broadcast: no arrays given"):
        F.broadcast()
    with pytest.raises(ValueError, match="cannot be broadcast together"):
        F.broadcast(np.ones((3, 2)), np.ones(3))


def test_broadcast_to_and_reshape_make_a_node_where_the_shape_is_right(xp: Any) -> None:
    # Chainer returns x itself there; agnograd's graph does not depend on the shapes
    # it was built for, and the gradient reaches x.
    x = Variable(uniform(xp, (2, 3), 0))
    for y in (F.broadcast_to(x, (2, 3)), F.reshape(x, (2, 3)), x.reshape(2, 3)):
        assert y is not x
        assert y.creator is not None
        x.cleargrad()
        y.backward(grad=xp.ones((2, 3)))
        np.testing.assert_array_equal(numpy_of(x.grad), np.ones((2, 3)))
    check_gradients(xp, lambda v: F.broadcast_to(v, (4, 2, 3)), (uniform(xp, (2, 3), 1),))


def test_broadcast_to_refuses_a_shape_naming_both() -> None:
    with pytest.raises(ValueError, match=r"broadcast_to: x of shape \(3, 2\) cannot be broad"):
        F.broadcast_to(np.ones((3, 2)), (3, 1))
    with pytest.raises(ValueError, match=r"x of shape \(3, 2\) cannot be broadcast to \(2,\)"):
        F.broadcast_to(np.ones((3, 2)), (2,))


# -- split_axis ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "cuts", "axis"),
    [
        ((2, 7, 3), [2, 5], 1),
        ((7, 3), [0, 0, 5], 0),
        ((2, 9), 3, -1),
        ((4, 2), [], 0),
        ((5, 2), [-2], 0),
        ((10, 3), np.array([2, 3, 3, 5]), 0),
    ],
)
def test_split_axis_cuts_as_numpy_split(
    xp: Any, shape: tuple[int, ...], cuts: Any, axis: int
) -> None:
    x = uniform(xp, shape, 0)
    pieces = F.split_axis(x, cuts, axis)
    expected = np.split(numpy_of(x), cuts, axis)
    assert len(pieces) == len(expected)
    for piece, e in zip(pieces, expected, strict=True):
        np.testing.assert_array_equal(numpy_of(piece), e)
    check_gradients(xp, lambda v: F.split_axis(v, cuts, axis), (x,))


def test_split_axis_gives_zeros_to_pieces_without_a_gradient(xp: Any) -> None:
    x = Variable(uniform(xp, (2, 7), 0))
    a, _, c = F.split_axis(x, [2, 5], 1)
    (F.sum(a) + F.sum(c * 2)).backward()
    np.testing.assert_array_equal(numpy_of(x.grad), [[1, 1, 0, 0, 0, 2, 2]] * 2)
    # and to second order: the gradient graph concatenates zeros too
    (gx,) = agnograd.grad([F.sum(a * a)], [x], enable_double_backprop=True)
    (ggx,) = agnograd.grad([F.sum(gx)], [x])
    np.testing.assert_array_equal(numpy_of(ggx), [[2, 2, 0, 0, 0, 0, 0]] * 2)


def test_split_axis_force_tuple_and_errors() -> None:
    x = np.zeros((2, 6))
    (one,) = F.split_axis(x, 1, 1)
    assert one.shape == (2, 6)
    assert isinstance(F.split_axis(x, 1, 1, force_tuple=False), Variable)
    assert len(F.split_axis(x, 2, 1, force_tuple=False)) == 2
    with pytest.raises(ValueError, match="do not split into 4 equal sections"):
        F.split_axis(x, 4, 1)
    with pytest.raises(ValueError, match="index 1 is before the one preceding it"):
        F.split_axis(x, [2, 1], 1)
    with pytest.raises(ValueError, match="index 0 is past the end"):
        F.split_axis(x, [7], 1)
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        F.split_axis(x, 2, 2)
    with pytest.raises(TypeError, match="indices_or_sections must be an integer"):
        F.split_axis(x, [1.5], 1)


def test_split_axis_runs_deferred_and_compiled() -> None:
    with agnograd.auto_forward(False):
        x = Variable(np.arange(6.0).reshape(2, 3))
        a, b = F.split_axis(x, [1], 1)
        assert (a.shape, b.shape) == ((2, 1), (2, 2))
        y = F.sum(F.add(a, a, b[:, :1]) ** 2)
    plan = agnograd.compile(y)
    plan.forward()
    plan.backward()
    np.testing.assert_array_equal(y.array, 1.0 + 100.0)
    np.testing.assert_array_equal(x.grad, [[4.0, 2.0, 0.0], [40.0, 20.0, 0.0]])


# -- Chainer's names of the standard's functions -------------------------------------------


@pytest.mark.parametrize(
    ("chainer", "standard"), [("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan")]
)
def test_chainer_names_of_inverse_trigonometric_functions(
    xp: Any, chainer: str, standard: str
) -> None:
    fn = getattr(F, chainer)
    assert fn.__name__ == chainer  # Chainer's test kit finds numpy.<name> by it
    x = uniform(xp, (3, 2), 0, low=-0.9) * 0.9
    y = fn(Variable(x))
    assert type(y.creator) is getattr(F, standard).node
    np.testing.assert_array_equal(numpy_of(y), numpy_of(getattr(F, standard)(x)))
    check_gradients(xp, fn, (x,))
    assert not hasattr(agnograd.namespace(np), chainer)  # agnograd.functions' only


def test_arctan2_is_atan2(xp: Any) -> None:
    x1, x2 = uniform(xp, (3,), 0), uniform(xp, (3,), 1, low=0.5)
    np.testing.assert_array_equal(numpy_of(F.arctan2(x1, x2)), numpy_of(F.atan2(x1, x2)))
    assert F.arctan2(np.array([1.0]), 1.0).array == pytest.approx(np.pi / 4)
    check_gradients(xp, F.arctan2, (x1, x2))


# -- concat(xs, axis) ------------------------------------------------------------------


def test_concat_takes_axis_positionally_with_the_standards_default(xp: Any) -> None:
    a, b = uniform(xp, (2, 1), 0), uniform(xp, (2, 2), 1)
    y = F.concat([a, b], 1)
    np.testing.assert_array_equal(numpy_of(y), np.concatenate([numpy_of(a), numpy_of(b)], 1))
    assert F.concat([a, b], axis=-1).shape == (2, 3)
    assert F.concat([a, a]).shape == (4, 1)  # the default is the standard's, 0
    check_gradients(xp, lambda p, q: F.concat((p, q), 1), (a, b))
    with pytest.raises(TypeError, match="concat: axis must be an integer or None, got str"):
        F.concat([a, b], "a")


# -- NumPy's readings: x[[]], x.transpose(None) -----------------------------------------


@pytest.mark.parametrize(("key", "shape"), [([], (0, 2)), (([],), (0, 2)), ([[]], (1, 0, 2))])
def test_an_empty_list_index_selects_nothing(key: Any, shape: tuple[int, ...]) -> None:
    data = np.arange(6.0).reshape(3, 2)
    assert data[key].shape == shape  # NumPy's
    x = Variable(data)
    y = x[key]
    assert y.shape == shape
    assert y.dtype == np.float64
    F.sum(y * 2).backward()
    np.testing.assert_array_equal(x.grad, np.zeros((3, 2)))


def test_an_empty_list_index_on_every_backend(xp: Any) -> None:
    # array-api-strict takes an integer array only as a key of every axis: a 1-D x.
    x = Variable(xp.arange(3.0))
    y = x[[]]
    assert y.shape == (0,)
    check_gradients(xp, lambda v: F.get_item(v, []), (xp.arange(3.0),))


def test_transpose_of_none_reverses_the_axes(xp: Any) -> None:
    x = Variable(uniform(xp, (1, 2, 3), 0))
    assert x.transpose(None).shape == x.transpose().shape == (3, 2, 1)
    assert x.transpose((2, 0, 1)).shape == x.transpose(2, 0, 1).shape == (3, 1, 2)
