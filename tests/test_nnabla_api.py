"""nnabla's ``Variable`` as nnabla users write it: ``apply``, ``function_references``,
unlinked Variables in sets and dicts, augmented assignment, array-likes.

Each test runs on every backend of the ``backend`` fixture, eagerly and in
define-then-run (``auto_forward(False)``) where nnabla has both.
"""

from __future__ import annotations

import gc
import operator
from typing import Any

import array_api_compat
import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Variable

MODES = pytest.mark.parametrize("eager", [True, False], ids=["eager", "define-then-run"])


def _device(x: Variable) -> Any:
    return array_api_compat.device(x.d)


# -- apply(**attrs) -------------------------------------------------------------------


@MODES
def test_apply_sets_attributes_and_returns_the_variable(backend, eager):
    x = backend.variable([1.0, 2.0], requires_grad=False)
    assert x.apply(need_grad=True, persistent=True, name="x") is x
    assert (x.need_grad, x.persistent, x.name) == (True, True, "x")
    with agnograd.auto_forward(eager):
        y = (x * 2.0).apply(persistent=True, name="y")  # nnabla: F.mul_scalar(x, 2).apply(...)
        z = F.sum(F.exp(y))
    assert (y.persistent, y.name, z.persistent) == (True, "y", False)
    z.forward(clear_buffer=True)
    backend.assert_close(y, [2.0, 4.0])  # persistent: kept by clear_buffer


def test_apply_sets_any_settable_property(backend):
    x = Variable(shape=(2,), device=backend.variable([0.0]).device)
    x.apply(d=backend.asarray([3.0, 4.0]), g=1.0)
    backend.assert_close(x.d, [3.0, 4.0])
    backend.assert_close(x.g, [1.0, 1.0])


@pytest.mark.parametrize("name", ["need_gard", "shape", "_data", "apply"])
def test_apply_refuses_what_it_cannot_set_and_sets_nothing(backend, name):
    x = backend.variable([1.0], requires_grad=False)
    with pytest.raises(AttributeError, match=rf"Variable\.apply: .*'{name}'.*need_grad"):
        x.apply(persistent=True, **{name: True})
    assert x.persistent is False  # checked before anything is set


# -- function_references --------------------------------------------------------------
# Recorded in define-then-run graphs only: eager operations would pay for it (see the
# property's docstring).


def test_function_references_lists_the_live_consumers(backend):
    # nnabla's test_function_references, with two consumers that each make a graph.
    v = backend.variable(np.random.default_rng(0).standard_normal((2, 4)), requires_grad=False)
    w = backend.variable(np.ones((2, 4)))
    assert v.function_references == []
    with agnograd.auto_forward(False):
        h1 = v * w
        assert len(v.function_references) == 1
        assert h1.parent in v.function_references
        h2 = F.exp(v + w)
    refs = v.function_references
    assert len(refs) == 2
    assert refs[0] is h1.parent
    assert refs[1] is h2.parent.inputs[0].creator
    assert w.function_references == refs  # w feeds the same two functions
    del refs, h1
    gc.collect()
    assert v.function_references == [h2.parent.inputs[0].creator]
    del h2
    gc.collect()
    assert v.function_references == []


def test_function_references_of_an_intermediate_and_after_forward(backend):
    x = backend.variable([1.0, 2.0])
    with agnograd.auto_forward(False):
        h = x * 2.0
        y = F.sum(h * h)  # one function, listed once although h is both its inputs
    y.forward()
    assert h.function_references == [y.parent.inputs[0].creator]
    assert [f.label for f in x.function_references] == ["MulConstant"]
    assert y.function_references == []


def test_eager_operations_record_no_function_references(backend):
    x = backend.variable([1.0, 2.0])
    y = F.exp(x)
    assert y.parent is not None
    assert x.function_references == []


def test_function_references_forgets_an_unchained_function(backend):
    x = backend.variable([1.0, 2.0])
    with agnograd.auto_forward(False):
        y = F.exp(x)
    y.unchain_backward()
    assert x.function_references == []


def test_function_references_of_a_long_lived_input_stay_bounded(backend):
    x = backend.variable([1.0, 2.0])
    keep = []
    with agnograd.auto_forward(False):
        for i in range(1000):
            y = x * 2.0  # most consumers die at once
            if i % 100 == 0:
                keep.append(y)
    del y
    assert x.function_references == [k.parent for k in keep]
    assert len(x.node._consumers) < 64  # dead references are swept as they pile up


# -- unlinked Variables in sets and dicts ---------------------------------------------


@MODES
def test_an_unlinked_variable_is_a_distinct_key_and_eq_stays_elementwise(backend, eager):
    # agnograd's == is the array API's elementwise comparison, so an unlinked Variable
    # cannot be "the same key" as its original (see the docstring of unlinked).
    x = backend.variable([1.0, 2.0])
    with agnograd.auto_forward(eager):
        y = x * 2.0
    y.forward()
    z = y.unlinked()
    assert hash(z) == hash(z)
    assert hash(y) != hash(z)
    assert y in {y}
    assert z not in {y}
    assert {y: 1}.get(z) is None
    assert len({y, z}) == 2
    equal = y == z
    assert isinstance(equal, Variable)
    assert equal.shape == (2,)
    assert backend.to_numpy(equal).tolist() == [True, True]


# -- augmented assignment binds a new Variable ----------------------------------------

FLOAT_OPS = [
    (operator.iadd, operator.add),
    (operator.isub, operator.sub),
    (operator.imul, operator.mul),
    (operator.itruediv, operator.truediv),
    (operator.ipow, operator.pow),
]
INT_OPS = [
    (operator.ifloordiv, operator.floordiv),
    (operator.imod, operator.mod),
    (operator.iand, operator.and_),
    (operator.ior, operator.or_),
    (operator.ixor, operator.xor),
    (operator.ilshift, operator.lshift),
    (operator.irshift, operator.rshift),
]


@MODES
@pytest.mark.parametrize(("iop", "op"), FLOAT_OPS, ids=["+=", "-=", "*=", "/=", "**="])
def test_augmented_assignment_leaves_other_names_unchanged(backend, eager, iop, op):
    x = backend.variable([2.0, 3.0])
    a = backend.variable([1.5, 0.5])
    with agnograd.auto_forward(eager):
        h = x * 1.0
        alias = h
        h = iop(h, a)  # h <op>= a
        loss = F.sum(h * alias)
    assert h is not alias
    loss.forward()
    backend.assert_close(alias, [2.0, 3.0])
    expected = op(np.array([2.0, 3.0]), np.array([1.5, 0.5]))
    backend.assert_close(h, expected)
    loss.backward()  # the gradient flows through both names
    assert x.grad is not None
    assert a.grad is not None


@MODES
@pytest.mark.parametrize(("iop", "op"), INT_OPS, ids=["//=", "%=", "&=", "|=", "^=", "<<=", ">>="])
def test_augmented_assignment_of_integers_binds_a_new_variable(backend, eager, iop, op):
    x = backend.variable([6, 7], dtype="int32")
    with agnograd.auto_forward(eager):
        h = x * 1
        alias = h
        h = iop(h, 2)
    assert h is not alias
    h.forward()
    alias.forward()
    assert backend.to_numpy(alias).tolist() == [6, 7]
    assert backend.to_numpy(h).tolist() == op(np.array([6, 7]), 2).tolist()


@MODES
def test_matmul_assignment_binds_a_new_variable(backend, eager):
    m = backend.variable([[1.0, 2.0], [3.0, 4.0]])
    with agnograd.auto_forward(eager):
        h = m * 1.0
        alias = h
        h @= m
    assert h is not alias
    h.forward()
    backend.assert_close(h, [[7.0, 10.0], [15.0, 22.0]])
    alias.forward()
    backend.assert_close(alias, [[1.0, 2.0], [3.0, 4.0]])


def test_augmented_assignment_of_a_leaf_keeps_the_leaf(backend):
    # Chainer and nnabla make a new Variable: the parameter itself is untouched.
    w = backend.variable([1.0, 2.0])
    original = w
    w += 1.0
    assert w is not original
    assert w.creator is not None
    backend.assert_close(original, [1.0, 2.0])
    F.sum(w * w).backward()
    backend.assert_close(original.grad, [4.0, 6.0])


def test_writing_into_data_stays_explicit(backend):
    h = backend.variable([1.0, 2.0]) * 1.0
    alias = h
    h[0] = 5.0
    assert h is alias
    backend.assert_close(alias, [5.0, 2.0])


# -- array-likes ----------------------------------------------------------------------


def test_from_numpy_array_takes_array_likes_and_copies():
    v = Variable.from_numpy_array([[1.0, 2.0]])
    assert isinstance(v.d, np.ndarray)
    assert v.d.dtype == np.float64
    assert v.shape == (1, 2)
    assert v.need_grad is False
    r = Variable.from_numpy_array(range(3))
    assert r.d.tolist() == [0, 1, 2]
    assert r.d.dtype.kind == "i"
    g = Variable.from_numpy_array([1.0, 2.0], grad=[0.5, 0.25], need_grad=True)
    assert g.need_grad
    assert g.g.tolist() == [0.5, 0.25]
    assert g.g.dtype == np.float64
    a = np.ones(2)
    c = Variable.from_numpy_array(a)
    a[0] = 7.0
    assert c.d.tolist() == [1.0, 1.0]


def test_from_numpy_array_keeps_the_library_of_an_array(backend):
    data = backend.asarray([1.0, 2.0])
    v = Variable.from_numpy_array(data, grad=range(1, 3), need_grad=True)
    assert v.xp is backend.xp
    assert v.d is not data
    assert v.g.dtype == data.dtype  # the grad's values, in the data's dtype
    backend.assert_close(v.g, [1.0, 2.0])


@pytest.mark.parametrize(
    "value", [range(3), [0, 1, 2], (0.0, 1.0, 2.0)], ids=["range", "list", "tuple"]
)
def test_assigning_an_array_like_keeps_library_dtype_and_device(backend, value):
    x = backend.variable([5.0, 5.0, 5.0])
    dtype, device = x.dtype, _device(x)
    x.d = value
    x.g = [1, 2, 3]
    for a in (x.d, x.g):
        assert array_api_compat.array_namespace(a) is array_api_compat.array_namespace(x.d)
        assert a.dtype == dtype
        assert array_api_compat.device(a) == device
    backend.assert_close(x.d, [0.0, 1.0, 2.0])
    backend.assert_close(x.g, [1.0, 2.0, 3.0])


def test_assigning_a_nested_list_to_a_declared_input(backend):
    device = backend.variable([0.0]).device
    x = Variable(shape=(1, 2), need_grad=True, device=device)
    W = Variable.from_numpy_array(np.array([[2.0], [3.0]], np.float32)).to_device(device)
    with agnograd.auto_forward(False):
        y = F.sum(F.matmul(x, W))
    x.d = [[1, 2]]
    assert x.d.dtype == backend.xp.float32
    assert x.shape == (1, 2)
    y.forward()
    assert float(y.d) == 8.0
    y.backward()
    backend.assert_close(x.g, [[2.0, 3.0]])


def test_assigning_an_array_like_to_a_variable_without_data_uses_numpy():
    x = Variable()
    x.d = [1.0, 2.0]
    assert isinstance(x.d, np.ndarray)
    assert x.d.tolist() == [1.0, 2.0]
