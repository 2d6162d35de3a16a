"""Variable and VariableNode: construction, attributes, gradients, graph links, printing."""

from __future__ import annotations

import copy
import gc
import pickle

import array_api_compat
import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import FunctionNode, Variable, VariableNode

# -- construction -------------------------------------------------------------------


def test_constructor_holds_the_array_as_is(backend):
    data = backend.asarray([1.0, 2.0])
    v = Variable(data)
    assert v.array is data
    assert v.data is data
    assert v.grad is None
    assert v.grad_var is None
    assert v.name is None
    assert v.requires_grad is True
    assert v.creator is None
    assert v.rank == 0


def test_constructor_keywords(backend):
    data = backend.asarray([1.0, 2.0])
    grad = backend.asarray([3.0, 4.0])
    v = Variable(data, name="x", grad=grad, requires_grad=False)
    assert v.name == "x"
    assert v.grad is grad
    assert isinstance(v.grad_var, Variable)
    assert v.grad_var.array is grad
    assert v.requires_grad is False


def test_constructor_takes_data_positionally_only_others_by_keyword(backend):
    with pytest.raises(TypeError):
        Variable(backend.asarray([1.0]), "x")


def test_uninitialised_variable():
    v = Variable()
    assert v.array is None
    assert v.data is None
    assert v.shape is None
    assert v.dtype is None
    assert v.grad is None
    assert v.label == "None"
    assert repr(v) == "variable(None)"


@pytest.mark.parametrize("data", [1.0, 3, True, [1.0, 2.0], (1, 2)], ids=repr)
def test_constructor_rejects_python_values(data):
    with pytest.raises(TypeError, match="Variable"):
        Variable(data)


def test_constructor_rejects_a_variable(backend):
    v = Variable(backend.asarray([1.0]))
    with pytest.raises(TypeError, match="already a Variable"):
        Variable(v)


def test_array_setter_replaces_the_data_and_the_node_metadata(backend):
    v = Variable()
    data = backend.asarray([[1.0, 2.0, 3.0]])
    v.array = data
    assert v.array is data
    assert v.shape == (1, 3)
    assert v.node.shape == (1, 3)
    assert v.label == "(1, 3), float32"
    with pytest.raises(TypeError):
        v.array = [1.0, 2.0]


# -- attributes -----------------------------------------------------------------------


def test_shape_ndim_size_dtype_len(backend):
    v = Variable(backend.asarray(np.zeros((2, 5))))
    assert v.shape == (2, 5)
    assert isinstance(v.shape, tuple)
    assert v.ndim == 2
    assert v.size == 10
    assert v.dtype == backend.dtype("float32")
    assert len(v) == 2


@pytest.mark.parametrize(
    ("shape", "label"),
    [((2, 5), "(2, 5), float32"), ((3,), "(3), float32"), ((), "float32")],
)
def test_label(backend, shape, label):
    v = Variable(backend.asarray(np.zeros(shape)))
    assert v.label == label
    assert v.node.label == label


def test_label_of_other_dtypes(backend):
    assert Variable(backend.asarray([1, 2], dtype="int32")).label == "(2), int32"
    assert Variable(backend.asarray([True], dtype="bool")).label == "(1), bool"


def test_len_of_0d_variable_is_a_type_error(backend):
    v = Variable(backend.asarray(1.0))
    with pytest.raises(TypeError, match="0-d"):
        len(v)


def test_xp_is_the_arrays_namespace(backend):
    data = backend.asarray([1.0])
    assert Variable(data).xp is array_api_compat.array_namespace(data)


def test_device_is_the_arrays_device(backend):
    data = backend.asarray([1.0])
    assert Variable(data).device == array_api_compat.device(data)


def test_T_reverses_the_axes_and_backprops(backend):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    v = Variable(backend.asarray(a))
    t = v.T
    assert isinstance(t, Variable)
    backend.assert_close(t, a.T)
    F.sum(t * backend.asarray(a.T)).backward()
    backend.assert_close(v.grad, a)


def test_mT_swaps_the_last_two_axes(backend):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    v = Variable(backend.asarray(a))
    backend.assert_close(v.mT, np.swapaxes(a, -1, -2))
    F.sum(v.mT).backward()
    backend.assert_close(v.grad, np.ones_like(a))


def test_name_is_shared_with_the_node(backend):
    v = Variable(backend.asarray([1.0]), name="x")
    assert v.node.name == "x"
    v.name = "y"
    assert v.node.name == "y"
    assert repr(v).startswith("variable y(")


def test_requires_grad_false_leaf_gets_no_gradient(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    c = Variable(backend.asarray([3.0, 4.0]), requires_grad=False)
    F.sum(x * c).backward()
    backend.assert_close(x.grad, [3.0, 4.0])
    assert c.grad is None


def test_requires_grad_is_settable(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    x.requires_grad = False
    assert x.node.requires_grad is False
    y = x * 2.0
    assert y.creator is None
    assert y.requires_grad is False


def test_all_constant_inputs_give_a_constant_result(backend):
    x = Variable(backend.asarray([1.0]), requires_grad=False)
    y = F.exp(x)
    assert y.requires_grad is False
    assert y.creator is None


# -- graph links ------------------------------------------------------------------------


def test_node_and_creator(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = x * 2.0
    assert isinstance(y.node, VariableNode)
    assert y.node.get_variable() is y
    assert isinstance(y.creator, FunctionNode)
    assert y.creator is y.creator_node
    assert y.node.creator_node is y.creator_node
    assert y.rank == 1
    assert (y * 3.0).rank == 2


def test_creator_node_set_to_none_unchains_and_can_be_restored(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = x * 2.0
    creator = y.creator_node
    y.creator_node = None
    assert y.creator is None
    y.grad = backend.asarray([1.0, 1.0])
    y.backward()
    assert x.grad is None  # backprop stopped at y
    y.creator_node = creator
    assert y.rank == 1
    y.backward()
    backend.assert_close(x.grad, [2.0, 2.0])


def test_set_creator_and_set_creator_node(backend):
    x = Variable(backend.asarray([1.0]))
    func = (x * 2.0).creator
    for method in ("set_creator", "set_creator_node"):
        v = Variable(backend.asarray([5.0]))
        getattr(v, method)(func)
        assert v.creator is func
        assert v.creator_node is func
        assert v.rank == func.rank + 1


def test_unchain_cuts_only_one_link(backend):
    x = Variable(backend.asarray([1.0]))
    h = x * 2.0
    y = h * 3.0
    y.unchain()
    assert y.creator is None
    assert h.creator is not None
    h.backward()
    backend.assert_close(x.grad, [2.0])


def test_unchain_backward_cuts_the_whole_graph(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    h1 = x * 2.0
    h2 = F.exp(h1)
    y = h1 + h2
    y.unchain_backward()
    assert y.creator is None
    assert h1.creator is None
    assert h2.creator is None
    y.grad = backend.asarray([1.0, 1.0])
    y.backward()
    assert x.grad is None


def test_retain_data_keeps_the_array_in_the_node(backend):
    data = backend.asarray([1.0, 2.0])
    v = Variable(data)
    node = v.node
    v.retain_data()
    del v
    gc.collect()
    assert node.get_variable_or_none() is None
    assert node.data is data


# -- gradients -----------------------------------------------------------------------


def test_cleargrad(backend):
    v = Variable(backend.asarray([1.0]), grad=backend.asarray([2.0]))
    v.cleargrad()
    assert v.grad is None
    assert v.grad_var is None


def test_zerograd_warns_and_fills_zeros(backend):
    v = Variable(backend.asarray([[1.0, 2.0]]), grad=backend.asarray([[3.0, 4.0]]))
    with pytest.warns(DeprecationWarning, match="cleargrad"):
        v.zerograd()
    assert v.grad.shape == (1, 2)
    assert v.grad.dtype == backend.dtype("float32")
    backend.assert_close(v.grad, [[0.0, 0.0]])


def test_zerograd_on_uninitialised_variable_keeps_grad_none():
    v = Variable()
    with pytest.warns(DeprecationWarning, match="cleargrad"):
        v.zerograd()
    assert v.grad is None


def test_addgrad_adds(backend):
    a = Variable(backend.asarray([0.0, 0.0]), grad=backend.asarray([1.0, 2.0]))
    b = Variable(backend.asarray([0.0, 0.0]), grad=backend.asarray([10.0, 20.0]))
    a.addgrad(b)
    backend.assert_close(a.grad, [11.0, 22.0])
    backend.assert_close(b.grad, [10.0, 20.0])


def test_addgrad_into_no_grad_copies(backend):
    a = Variable(backend.asarray([0.0, 0.0]))
    b = Variable(backend.asarray([0.0, 0.0]), grad=backend.asarray([1.0, 2.0]))
    a.addgrad(b)
    backend.assert_close(a.grad, [1.0, 2.0])
    assert a.grad is not b.grad
    if backend.name != "jax":  # JAX arrays are immutable: there is nothing to alias
        b.grad[0] = 100.0
        backend.assert_close(a.grad, [1.0, 2.0])


def test_addgrad_from_no_grad_is_a_no_op(backend):
    a = Variable(backend.asarray([0.0]), grad=backend.asarray([1.0]))
    a.addgrad(Variable(backend.asarray([0.0])))
    backend.assert_close(a.grad, [1.0])


def test_addgrad_initialises_an_uninitialised_variable(backend):
    a = Variable()
    b = Variable(backend.asarray([[5.0, 6.0]]), grad=backend.asarray([[1.0, 2.0]]))
    a.addgrad(b)
    assert a.shape == (1, 2)
    assert a.dtype == backend.dtype("float32")
    backend.assert_close(a.array, [[0.0, 0.0]])
    backend.assert_close(a.grad, [[1.0, 2.0]])


def test_copydata_copies_values_in_place(backend):
    dst_array = backend.asarray([0.0, 0.0])
    dst = Variable(dst_array)
    src = Variable(backend.asarray([1.0, 2.0]))
    dst.copydata(src)
    backend.assert_close(dst, [1.0, 2.0])
    assert dst.array is not src.array
    if backend.name != "jax":  # only mutable arrays can be written in place
        assert dst.array is dst_array


def test_copydata_casts_to_the_destination_dtype(backend):
    dst = Variable(backend.asarray([0, 0], dtype="int32"))
    dst.copydata(Variable(backend.asarray([1, 2], dtype="int64")))
    assert dst.dtype == backend.dtype("int32")
    backend.assert_close(dst, [1, 2])


def test_copydata_into_uninitialised(backend):
    src = Variable(backend.asarray([1.0, 2.0]))
    dst = Variable()
    dst.copydata(src)
    backend.assert_close(dst, [1.0, 2.0])
    assert dst.array is not src.array


def test_copydata_from_uninitialised_initialises_the_source(backend):
    src = Variable()
    dst = Variable(backend.asarray([3.0, 4.0]))
    dst.copydata(src)
    backend.assert_close(src, [3.0, 4.0])
    backend.assert_close(dst, [3.0, 4.0])
    assert src.array is not dst.array


def test_copydata_both_uninitialised_does_nothing():
    a, b = Variable(), Variable()
    a.copydata(b)
    assert a.array is None
    assert b.array is None


def test_copydata_from_another_library_keeps_the_destination_library(backend):
    # Chainer copies across devices; agnograd also across libraries (issue 4).
    other = np if backend.name != "numpy" else __import__("array_api_strict")
    src = Variable(other.asarray(np.asarray([1.0], dtype=np.float32)))
    dst = Variable(backend.asarray([0.0]))
    dst.copydata(src)
    assert type(dst.array) is type(backend.asarray([0.0]))
    backend.assert_close(dst, [1.0])


def test_copydata_shape_mismatch(backend):
    with pytest.raises(ValueError, match="shape"):
        Variable(backend.asarray([0.0])).copydata(Variable(backend.asarray([1.0, 2.0])))


# -- setting .grad ---------------------------------------------------------------------


def test_set_grad_checks_dtype(backend):
    v = Variable(backend.asarray([1.0, 2.0]))
    with pytest.raises(TypeError, match="dtype"):
        v.grad = backend.asarray([1.0, 2.0], dtype="int32")


def test_set_grad_checks_shape(backend):
    v = Variable(backend.asarray([1.0, 2.0]))
    with pytest.raises(ValueError, match="shape"):
        v.grad = backend.asarray([1.0, 2.0, 3.0])


def test_set_grad_checks_backend(backend):
    v = Variable(backend.asarray([1.0, 2.0]))
    if backend.name == "numpy":
        import array_api_strict as other
    else:
        other = np
    g = other.asarray(np.asarray([1.0, 2.0], dtype=np.float32))
    with pytest.raises(TypeError, match="array"):
        v.grad = g
    with pytest.raises(TypeError):
        Variable(backend.asarray([1.0, 2.0]), grad=g)


def test_set_grad_checks_device(backend):
    xp = backend.xp
    if backend.name == "array_api_strict":
        other = xp.Device("device1")
    elif backend.name == "torch":
        other = "meta"  # a second device that every PyTorch build has
    elif backend.name == "jax":
        import jax

        other = jax.devices()[1]  # conftest.py asks JAX for two CPU devices
    else:
        pytest.skip("NumPy has a single device")
    v = Variable(xp.asarray([1.0, 2.0], dtype=xp.float32))
    g = xp.zeros((2,), dtype=xp.float32, device=other)
    with pytest.raises(TypeError, match="device"):
        v.grad = g


def test_set_grad_var_checks_too(backend):
    v = Variable(backend.asarray([1.0, 2.0]))
    with pytest.raises(ValueError, match="shape"):
        v.grad_var = Variable(backend.asarray([1.0]))
    with pytest.raises(TypeError):
        v.grad_var = backend.asarray([1.0, 2.0])
    g = Variable(backend.asarray([5.0, 6.0]))
    v.grad_var = g
    assert v.grad_var is g
    assert v.grad is g.array


def test_set_grad_to_a_variable_is_refused(backend):
    v = Variable(backend.asarray([1.0]))
    with pytest.raises(TypeError, match="grad_var"):
        v.grad = Variable(backend.asarray([1.0]))


def test_set_grad_none_clears(backend):
    v = Variable(backend.asarray([1.0]), grad=backend.asarray([1.0]))
    v.grad = None
    assert v.grad is None


# -- reshape, transpose, item -----------------------------------------------------------


@pytest.mark.parametrize("args", [((3, 2),), (3, 2), (-1, 2), ((3, -1),), ([3, 2],)], ids=str)
def test_reshape_forms(backend, args):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = Variable(backend.asarray(a))
    y = v.reshape(*args)
    assert y.shape == (3, 2)
    backend.assert_close(y, a.reshape(3, 2))
    F.sum(y * backend.asarray(a.reshape(3, 2))).backward()
    backend.assert_close(v.grad, a)


@pytest.mark.parametrize(
    ("args", "axes"),
    [((), (2, 1, 0)), ((1, 0, 2), (1, 0, 2)), (((2, 0, 1),), (2, 0, 1)), ((-1, 0, 1), (2, 0, 1))],
    ids=str,
)
def test_transpose_forms(backend, args, axes):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    v = Variable(backend.asarray(a))
    y = v.transpose(*args)
    backend.assert_close(y, a.transpose(axes))
    w = np.arange(24, dtype=np.float32).reshape(a.transpose(axes).shape)
    F.sum(y * backend.asarray(w)).backward()
    backend.assert_close(v.grad, w.transpose(np.argsort(axes)))


def test_item(backend):
    v = Variable(backend.asarray([2.5]))
    assert v.item() == 2.5
    assert type(v.item()) is float
    assert Variable(backend.asarray(3, dtype="int32")).item() == 3
    assert type(Variable(backend.asarray(3, dtype="int32")).item()) is int
    with pytest.raises(ValueError, match="one-element"):
        Variable(backend.asarray([1.0, 2.0])).item()


# -- indexing ------------------------------------------------------------------------


_A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# Keys that index every axis (or use an ellipsis): the array API standard's form,
# which array-api-strict insists on.
@pytest.mark.parametrize(
    "key",
    [
        (-1, slice(None), slice(None)),
        (0, 1, slice(None)),
        (slice(0, 2), slice(1, None), slice(None, None, 2)),
        (Ellipsis, 2),
        (1, None, slice(None), 3),
        (0, 1, 2),
    ],
    ids=repr,
)
def test_getitem_basic(backend, key):
    v = Variable(backend.asarray(_A))
    y = v[key]
    assert y.shape == _A[key].shape
    backend.assert_close(y, _A[key])
    w = np.arange(1, _A[key].size + 1, dtype=np.float32).reshape(_A[key].shape)
    F.sum(y * backend.asarray(w)).backward()
    expected = np.zeros_like(_A)
    expected[key] = w
    backend.assert_close(v.grad, expected)


@pytest.mark.parametrize(
    "key",
    [1, (slice(None), 1), (None, 0)],
    ids=repr,
)
def test_getitem_numpy_style_partial_keys(backend, key):
    # Chainer (and NumPy) fill the missing trailing axes with ':'.
    test_getitem_basic(backend, key)


def test_getitem_integer_array_repeats_accumulate(backend):
    a = np.arange(5, dtype=np.float32)
    v = Variable(backend.asarray(a))
    index = backend.asarray([0, 3, 3, 1, 3], dtype="int64")
    y = v[index]
    backend.assert_close(y, a[[0, 3, 3, 1, 3]])
    F.sum(y * backend.asarray([1.0, 2.0, 3.0, 4.0, 5.0])).backward()
    backend.assert_close(v.grad, [1.0, 4.0, 0.0, 10.0, 0.0])


def test_getitem_integer_array_on_an_axis(backend):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = Variable(backend.asarray(a))
    index = backend.asarray([2, 0, 2], dtype="int64")
    if backend.name == "array_api_strict":
        # The standard allows integer-array indices beside integers only, not slices.
        with pytest.raises(IndexError):
            v[index, :]
        return
    y = v[index, :]
    backend.assert_close(y, a[[2, 0, 2], :])
    F.sum(y).backward()
    backend.assert_close(v.grad, np.array([[1.0] * 4, [0.0] * 4, [2.0] * 4]))


def test_getitem_boolean_mask(backend):
    a = np.array([[1.0, -2.0], [-3.0, 4.0]], dtype=np.float32)
    v = Variable(backend.asarray(a))
    mask = backend.asarray(a > 0, dtype="bool")
    y = v[mask]
    backend.assert_close(y, [1.0, 4.0])
    F.sum(y * backend.asarray([2.0, 3.0])).backward()
    backend.assert_close(v.grad, [[2.0, 0.0], [0.0, 3.0]])


def test_getitem_with_python_lists(backend):
    v = Variable(backend.asarray([1.0, 2.0, 3.0, 4.0]))
    backend.assert_close(v[[0, 2, 2]], [1.0, 3.0, 3.0])
    F.sum(v[[0, 2, 2]]).backward()
    backend.assert_close(v.grad, [1.0, 0.0, 2.0, 0.0])
    backend.assert_close(v[[True, False, True, True]], [1.0, 3.0, 4.0])


def test_getitem_with_variable_index(backend):
    v = Variable(backend.asarray([1.0, 2.0, 3.0]))
    index = Variable(backend.asarray([2, 2], dtype="int64"), requires_grad=False)
    y = v[index]
    F.sum(y).backward()
    backend.assert_close(v.grad, [0.0, 0.0, 2.0])


def test_getitem_double_backprop_with_repeated_indices(backend):
    x = Variable(backend.asarray([1.0, 2.0, 3.0]))
    index = backend.asarray([1, 1, 2], dtype="int64")
    y = F.sum(x[index] ** 2)
    (gx,) = agnograd.grad([y], [x], enable_double_backprop=True)
    backend.assert_close(gx, [0.0, 8.0, 6.0])  # 2 * x * count
    (ggx,) = agnograd.grad([F.sum(gx)], [x])
    backend.assert_close(ggx, [0.0, 4.0, 2.0])


# -- printing, pickling --------------------------------------------------------------


def test_repr_and_str_follow_chainer(backend):
    v = Variable(backend.asarray([1.0, 2.0, 3.0]))
    assert repr(v) == "variable([1., 2., 3.])"
    assert str(v) == "variable([1. 2. 3.])"
    v.name = "x"
    assert repr(v) == "variable x([1., 2., 3.])"
    assert str(v) == "variable x([1. 2. 3.])"


def test_repr_of_2d_aligns_rows(backend):
    v = Variable(backend.asarray([[1.0, 2.0], [3.0, 4.0]]))
    assert repr(v) == "variable([[1., 2.],\n          [3., 4.]])"


def test_repr_of_0d(backend):
    assert repr(Variable(backend.asarray(3.5))) == "variable(3.5)"


def test_summary(backend):
    v = Variable(backend.asarray(np.zeros((2, 3))), name="w")
    text = v.summary()
    assert text.startswith("<variable w: (2, 3), float32, ")
    assert backend.name.partition("_")[0] in text
    assert "uninitialised" in Variable().summary()


def test_debug_print(backend):
    v = Variable(backend.asarray([1.0, 3.0]), name="v")
    text = v.debug_print()
    assert text.splitlines()[0] == v.summary()
    assert "mean=2.00000000" in text
    assert "std=1.00000000" in text
    assert "- grad: None" in text
    v.grad = backend.asarray([0.0, 0.0])
    assert "- grad: mean=0.00000000" in v.debug_print()


def test_pickle_round_trip(backend):
    v = Variable(backend.asarray([1.0, 2.0]), name="x", grad=backend.asarray([3.0, 4.0]))
    w = pickle.loads(pickle.dumps(v))
    assert isinstance(w, Variable)
    assert w.name == "x"
    assert w.requires_grad is True
    assert w.dtype == v.dtype
    backend.assert_close(w, [1.0, 2.0])
    backend.assert_close(w.grad, [3.0, 4.0])
    assert pickle.loads(pickle.dumps(Variable(requires_grad=False))).requires_grad is False


def test_deepcopy_of_a_leaf(backend):
    v = Variable(backend.asarray([1.0, 2.0]), name="x", grad=backend.asarray([3.0, 4.0]))
    w = copy.deepcopy(v)
    assert w.name == "x"
    assert w.requires_grad is True
    assert w.array is not v.array
    assert w.grad is not v.grad
    backend.assert_close(w, [1.0, 2.0])
    backend.assert_close(w.grad, [3.0, 4.0])
    pair = copy.deepcopy([v, v])  # the memo: one copy
    assert pair[0] is pair[1]
    constant = Variable(backend.asarray([5.0]), requires_grad=False)
    assert copy.deepcopy(constant).requires_grad is False


def test_a_constant_made_by_an_operation_pickles_and_deepcopies(backend):
    # Results of operations that need no gradient have no creator: they are leaves.
    c = Variable(backend.asarray([1.0, 2.0]), requires_grad=False) * 2.0
    for clone in (pickle.loads(pickle.dumps(c)), copy.deepcopy(c)):
        assert clone.requires_grad is False
        backend.assert_close(clone, [2.0, 4.0])


@pytest.mark.parametrize("how", ["pickle", "copy.deepcopy", "copy.copy"])
@pytest.mark.parametrize("cls", [Variable, agnograd.Parameter])
def test_a_copy_keeps_persistent(backend, how, cls):
    # nnabla's flag: forward(clear_buffer=True) keeps the data of a persistent Variable
    copier = {"pickle": lambda v: pickle.loads(pickle.dumps(v)), "copy.deepcopy": copy.deepcopy,
              "copy.copy": copy.copy}[how]  # fmt: skip
    for persistent in (True, False):
        v = cls(backend.asarray([1.0, 2.0]), name="v")
        v.persistent = persistent
        clone = copier(v)
        assert clone.persistent is persistent
        assert clone.name == "v"
        backend.assert_close(clone, [1.0, 2.0])


@pytest.mark.parametrize("how", ["pickle", "copy.deepcopy", "copy.copy"])
def test_copying_a_non_leaf_is_refused(backend, how):
    # The copy would be a leaf whose backward() does nothing: the graph is not copied.
    x = Variable(backend.asarray([1.0, 2.0]))
    y = x * 3.0
    y.name = "y"
    copier = {"pickle": lambda v: pickle.loads(pickle.dumps(v)), "copy.deepcopy": copy.deepcopy,
              "copy.copy": copy.copy}[how]  # fmt: skip
    op = "pickling" if how == "pickle" else rf"{how}\(\) of"
    with pytest.raises(TypeError, match=rf"^{op} Variable 'y' .* output of MulConstant.*unchain"):
        copier(y)
    if how != "copy.copy":  # a shallow copy of a list does not copy its items
        with pytest.raises(TypeError, match=rf"^{op} Variable 'y'"):
            copier([x, y])  # inside a container too
    # the fixes the message names
    z = copier(Variable(y.array, requires_grad=False))
    backend.assert_close(z, [3.0, 6.0])
    y.unchain()
    backend.assert_close(copier(y), [3.0, 6.0])


def test_copying_a_non_leaf_that_requires_no_gradient(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = x * 3.0
    y.requires_grad = False
    for clone in (pickle.loads(pickle.dumps(y)), copy.deepcopy(y), copy.copy(y)):
        assert clone.creator is None
        assert clone.requires_grad is False
        backend.assert_close(clone, [3.0, 6.0])


def test_shallow_copy_of_a_leaf_shares_its_arrays(backend):
    v = Variable(backend.asarray([1.0, 2.0]), name="x", grad=backend.asarray([3.0, 4.0]))
    w = copy.copy(v)
    assert w is not v
    assert w.node is not v.node
    assert w.array is v.array
    assert w.grad is v.grad
    assert w.name == "x"
    assert w.requires_grad is True


# -- VariableNode -----------------------------------------------------------------------


def test_variable_node_attributes(backend):
    x = Variable(backend.asarray(np.zeros((2, 5))), name="x")
    y = x * 2.0
    y.grad = backend.asarray(np.ones((2, 5)))
    node = y.node
    assert node.get_variable() is y
    assert node.get_variable_or_none() is y
    assert node.creator is y.creator
    assert node.creator_node is y.creator_node
    assert node.data is y.array
    assert node.grad is y.grad
    assert node.grad_var is y.grad_var
    assert node.label == "(2, 5), float32"
    assert node.rank == 1
    assert node.requires_grad is True
    assert node.shape == (2, 5)
    assert node.dtype == backend.dtype("float32")
    assert node.name is None
    assert x.node.name == "x"
    assert "x" in repr(x.node)


def test_variable_node_weak_reference(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = x * 3.0
    node = y.node
    data = y.array
    del y
    gc.collect()
    assert node.get_variable_or_none() is None
    assert node.grad is None
    assert node.grad_var is None
    assert node.data is None  # not retained
    rebuilt = node.get_variable()
    assert isinstance(rebuilt, Variable)
    assert rebuilt.node is node
    assert node.get_variable_or_none() is rebuilt
    assert node.shape == (2,)
    del data


def test_variable_node_rebuilt_variable_holds_retained_data_and_backprops(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = x * 3.0
    node = y.node
    node.retain_data()
    data = y.array
    del y
    gc.collect()
    rebuilt = node.get_variable()
    assert rebuilt.array is data
    rebuilt.grad = backend.asarray([1.0, 1.0])
    rebuilt.backward()
    backend.assert_close(x.grad, [3.0, 3.0])


def test_variable_node_retain_data_after_variable_is_gone_raises(backend):
    node = Variable(backend.asarray([1.0])).node
    gc.collect()
    with pytest.raises(RuntimeError, match="retain_data"):
        node.retain_data()


def test_variable_node_set_creator_and_unchain(backend):
    x = Variable(backend.asarray([1.0]))
    func = (x * 2.0).creator
    v = Variable(backend.asarray([1.0]))
    v.node.set_creator(func)
    assert v.creator is func
    v.node.unchain()
    assert v.creator is None
    v.node.set_creator_node(func)
    assert v.node.creator_node is func
    assert v.rank == func.rank + 1
    v.node.creator = None
    assert v.creator is None
    v.node.creator = func
    assert v.creator_node is func


def test_variable_node_requires_grad_follows_variable(backend):
    v = Variable(backend.asarray([1.0]), requires_grad=False)
    assert v.node.requires_grad is False


def test_a_node_copies_as_a_node_of_the_same_variable():
    # A VariableNode is the weak reference to its Variable; copy and deepcopy still
    # give a node of that Variable, as they did when the node held the reference.

    x = Variable(np.ones(2), name="x")
    for made in (copy.copy(x.node), copy.deepcopy({"n": x.node})["n"]):
        assert made is not x.node
        assert made != x.node
        assert made.get_variable() is x
        assert (made.name, made.shape, made.requires_grad) == ("x", (2,), True)
    node = x.node
    del x
    assert copy.copy(node).get_variable_or_none() is None
