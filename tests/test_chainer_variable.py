"""Chainer's Variable semantics: 0-d results, Parameter and initializers, the gradient
setter, Variable().xp and debug mode, on NumPy, array-api-strict and PyTorch."""

from __future__ import annotations

import copy
import pickle
import warnings
from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Parameter, Variable, initializers

DEVICES = ["@numpy", "@array_api_strict", "@torch:cpu"]


@pytest.fixture(params=DEVICES, ids=lambda d: d.split(":")[0].lstrip("@"))
def device(request: pytest.FixtureRequest) -> agnograd.Device:
    if request.param.startswith("@torch"):
        pytest.importorskip("torch")
    return agnograd.get_device(request.param)


def array(device: agnograd.Device, values: Any, dtype: str = "float32") -> Any:
    return device.send(np.asarray(values, dtype=dtype))


def is_0d_array(value: Any, device: agnograd.Device) -> bool:
    """An array (not a NumPy scalar) of ``device``'s library, of shape ()."""
    return (
        type(value) not in agnograd.backends._backend.NUMPY_SCALARS
        and agnograd.get_device(value) == device
        and tuple(value.shape) == ()
    )


# -- 0-d results are 0-d arrays ------------------------------------------------------


@pytest.mark.parametrize(
    "op",
    [
        lambda x: F.sum(x),
        lambda x: F.max(x),
        lambda x: F.mean(x * 2),
        lambda x: F.exp(F.sum(x)),
        lambda x: F.tanh(x[0]),
        lambda x: x[1] * 3.0 + 1.0,
        lambda x: -x[0] / x[1],
    ],
    ids=["sum", "max", "mean", "exp-of-sum", "tanh-of-item", "scalar-ops", "neg-div"],
)
def test_a_0d_result_and_its_gradient_are_0d_arrays(device: agnograd.Device, op: Any) -> None:
    x = Variable(array(device, [1.0, 2.0]))
    y = op(x)
    assert is_0d_array(y.array, device)
    y.backward()
    assert tuple(x.grad.shape) == (2,)
    s = Variable(array(device, 3.0))  # a 0-d leaf gets a 0-d array as gradient
    F.exp(s * s).backward()
    assert is_0d_array(s.grad, device)
    assert is_0d_array(F.exp(s).array, device)


def test_a_0d_numpy_result_can_be_written_and_exported() -> None:
    y = F.sum(Variable(np.ones(3)))
    y.array[...] = 5.0  # a NumPy scalar has no __setitem__
    assert float(y.array) == 5.0
    assert np.from_dlpack(y.array).shape == ()  # nor __dlpack__


def test_a_numpy_scalar_given_as_data_is_held_as_a_0d_array() -> None:
    v = Variable(np.float32(2.0))
    assert type(v.array) is np.ndarray
    assert v.array.dtype == np.float32
    v.array = np.float64(3.0)
    assert type(v.array) is np.ndarray
    assert v.dtype == np.float64


def test_a_numpy_scalar_is_refused_as_a_gradient() -> None:
    v = Variable(np.empty((), np.float32))
    with pytest.raises(TypeError, match=r"NumPy scalar.*numpy\.asarray"):
        v.grad = np.float32(1.0)


def test_device_send_gives_a_0d_array_for_a_numpy_scalar(device: agnograd.Device) -> None:
    sent = device.send(np.dot(np.ones(2), np.ones(2)))
    assert is_0d_array(sent, device)
    assert float(sent) == 2.0
    nested = device.send({"a": [np.float32(1.0)], "b": None})
    assert is_0d_array(nested["a"][0], device)
    assert nested["b"] is None


# -- the gradient setter, Variable().xp -----------------------------------------------


@pytest.mark.parametrize("requires_grad", [True, False])
def test_a_gradient_set_as_an_array_is_a_variable_that_requires_a_gradient(
    device: agnograd.Device, requires_grad: bool
) -> None:
    v = Variable(array(device, [1.0, 2.0]), requires_grad=requires_grad)
    v.grad = array(device, [0.5, 0.5])
    assert v.grad_var.requires_grad is True  # Variable(g), as Chainer makes it
    assert v.requires_grad is requires_grad
    gv = Variable(array(device, [1.0, 1.0]), requires_grad=False)
    v.grad_var = gv
    assert v.grad_var is gv
    assert gv.requires_grad is False


def test_the_gradient_of_integer_data_requires_none() -> None:
    v = Variable(np.arange(3))
    v.grad = np.zeros(3, np.int64)
    assert v.grad_var.requires_grad is False


def test_a_variable_without_data_has_numpys_namespace() -> None:
    assert Variable().xp is Variable(np.ones(1)).xp
    assert Variable().device is None  # and no device: it has no data


# -- initializers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("initializer", "expected"),
    [
        (initializers.Zero(), np.zeros((2, 3))),
        (initializers.One(), np.ones((2, 3))),
        (initializers.Constant(0.25), np.full((2, 3), 0.25)),
        (initializers.Constant(np.arange(3.0)), np.tile(np.arange(3.0), (2, 1))),
        (initializers.NaN(), np.full((2, 3), np.nan)),
    ],
    ids=["zero", "one", "constant", "constant-array", "nan"],
)
def test_constant_initializers_make_arrays_on_any_device(
    device: agnograd.Device, initializer: Any, expected: np.ndarray
) -> None:
    made = initializers.generate_array(initializer, (2, 3), device=device)
    assert agnograd.get_device(made) == device
    assert str(made.dtype).endswith("float32")  # config.dtype unset: Chainer's float32
    np.testing.assert_array_equal(np.asarray(agnograd.get_device("@numpy").send(made)), expected)


def test_a_constant_of_another_library_fills_an_array_of_this_one(device: agnograd.Device) -> None:
    source = agnograd.get_device("@array_api_strict").send(np.array([1.0, 2.0]))
    made = initializers.generate_array(initializers.Constant(source), (2,), device=device)
    assert agnograd.get_device(made) == device
    assert [float(v) for v in made] == [1.0, 2.0]


@pytest.mark.parametrize(
    ("cls", "half_width"),
    [
        (initializers.Uniform, 0.05),
        (initializers.LeCunUniform, np.sqrt(3 / 12)),
        (initializers.GlorotUniform, np.sqrt(6 / 20)),
        (initializers.HeUniform, np.sqrt(6 / 12)),
    ],
)
def test_uniform_initializers_stay_within_their_bounds(
    device: agnograd.Device, cls: Any, half_width: float
) -> None:
    init = cls(dtype="float64", rng=np.random.default_rng(0))
    made = initializers.generate_array(init, (8, 3, 4), device=device)
    values = np.asarray(agnograd.get_device("@numpy").send(made))
    assert values.dtype == np.float64
    assert np.all(np.abs(values) <= half_width)
    assert values.std() > half_width / 4


@pytest.mark.parametrize(
    ("cls", "std"),
    [
        (initializers.Normal, 0.05),
        (initializers.LeCunNormal, np.sqrt(1 / 200)),
        (initializers.GlorotNormal, np.sqrt(2 / 400)),
        (initializers.HeNormal, np.sqrt(2 / 200)),
    ],
)
def test_normal_initializers_have_their_spread(cls: Any, std: float) -> None:
    made = initializers.generate_array(cls(rng=np.random.default_rng(1)), (200, 200), np)
    assert made.dtype == np.float32
    assert abs(made.std() / std - 1) < 0.05


def test_random_initializers_follow_numpys_global_seed() -> None:
    np.random.seed(3)
    a = initializers.generate_array(initializers.Normal(), (4,), np)
    np.random.seed(3)
    b = initializers.generate_array(initializers.Normal(), (4,), np)
    np.testing.assert_array_equal(a, b)


def test_an_initializer_fills_an_array_in_place(device: agnograd.Device) -> None:
    target = array(device, np.zeros((2, 2)))
    initializers.Identity(scale=2.0)(target)
    np.testing.assert_array_equal(
        np.asarray(agnograd.get_device("@numpy").send(target)), 2 * np.eye(2)
    )
    with pytest.raises(ValueError, match=r"2-D square"):
        initializers.Identity()(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"float64.*float32"):
        initializers.Zero(dtype=np.float32)(np.zeros(2))


def test_generate_array_dtypes() -> None:
    assert (
        initializers.generate_array(initializers.One(), 2, np, dtype="float64").dtype == np.float64
    )
    with agnograd.using_config("dtype", np.float16):
        assert initializers.generate_array(initializers.One(), 2, np).dtype == np.float16
        # the initializer's own dtype wins over config.dtype
        assert initializers.generate_array(initializers.Zero("float64"), 2, np).dtype == np.float64
    with pytest.raises(ValueError, match="asked for"):
        initializers.generate_array(initializers.Zero(np.float16), 2, np, dtype=np.float32)
    # a plain function that fills its argument is an initializer too
    made = initializers.generate_array(lambda a: a.fill(7), (2,), np, dtype="int32")
    assert made.tolist() == [7, 7]
    assert made.dtype == np.int32


def test_get_fans_and_get_initializer() -> None:
    assert initializers.get_fans((2, 3, 4)) == (12, 8)
    with pytest.raises(ValueError, match="two axes"):
        initializers.get_fans((3,))
    assert isinstance(initializers.get_initializer(None), initializers.LeCunNormal)
    assert isinstance(initializers.get_initializer(np.ones(2)), initializers.Constant)
    with pytest.raises(TypeError, match="callable"):
        initializers.get_initializer("zeros")
    with pytest.raises(ValueError, match="fan_option"):
        initializers.HeNormal(fan_option="fan_avg")


# -- Parameter ----------------------------------------------------------------------------


def test_an_uninitialised_parameter_is_filled_on_the_device_chosen(device: agnograd.Device) -> None:
    p = Parameter(initializers.Constant(np.arange(6.0).reshape(3, 2), dtype="float64"))
    assert p.array is None
    assert p.shape is None
    assert p.to_device(device) is p
    assert p.device == device
    assert p.xp is device.xp
    assert "float64" in str(p.dtype)
    with pytest.raises(RuntimeError, match="initialize"):
        _ = p.grad
    p.initialize((3, 2))
    assert agnograd.get_device(p.array) == device
    assert agnograd.get_device(p.grad) == device
    assert p.node.shape == (3, 2)
    assert "float64" in str(p.node.dtype)
    values = np.asarray(agnograd.get_device("@numpy").send(p.array))
    np.testing.assert_array_equal(values, np.arange(6.0).reshape(3, 2))
    assert np.isnan(np.asarray(agnograd.get_device("@numpy").send(p.grad))).all()


def test_parameter_forms() -> None:
    data = np.array([1.0, 2.0], np.float32)
    assert Parameter(data).array is data
    assert Parameter(shape=(2,)).initializer is not None
    np.testing.assert_array_equal(Parameter(2.0, (3,)).array, [2.0, 2.0, 2.0])
    assert np.isnan(Parameter(None, (2,)).array).all()
    np.testing.assert_array_equal(Parameter(initializers.One(), 2).array, [1.0, 1.0])
    named = Parameter(name="w")
    assert named.name == "w"
    assert repr(named) == "variable w(None)"
    with pytest.raises(RuntimeError, match="names no dtype"):
        _ = Parameter(lambda a: None).dtype


def test_a_parameter_is_a_leaf_of_the_graph() -> None:
    w = Parameter(initializers.Constant(2.0), (3,))
    w.cleargrad()
    F.sum(w * w).backward()
    np.testing.assert_array_equal(w.grad, [4.0, 4.0, 4.0])


def test_the_gradient_an_uninitialised_parameter_will_get() -> None:
    cleared = Parameter()
    cleared.cleargrad()
    cleared.initialize((2,))
    assert cleared.grad is None
    zeroed = Parameter(initializers.One(dtype=np.float16))
    with pytest.warns(DeprecationWarning, match="cleargrad"):
        zeroed.zerograd()
    zeroed.initialize((2,))
    assert zeroed.grad.dtype == np.float16
    assert not zeroed.grad.any()


def test_copies_of_an_uninitialised_parameter_share_its_data() -> None:
    x = Parameter()
    y = copy.copy(x)
    x.initialize((3, 2))
    assert y.array is x.array
    z = copy.deepcopy(x)
    assert z.array is not x.array
    assert z.array.shape == (3, 2)


def test_a_parameter_pickles_with_its_initializer_and_device() -> None:
    p = Parameter(initializers.Constant(1.5, dtype="float32"))
    p.to_device("@array_api_strict:device1")
    q = pickle.loads(pickle.dumps(p))
    assert isinstance(q, Parameter)
    assert q.array is None
    assert q.device == p.device
    q.initialize((2,))
    assert [float(v) for v in q.array] == [1.5, 1.5]
    r = pickle.loads(pickle.dumps(Parameter(np.ones(2), name="b")))
    assert r.name == "b"
    assert r.array.tolist() == [1.0, 1.0]


def test_copydata_and_addgrad_initialise_an_uninitialised_parameter(
    device: agnograd.Device,
) -> None:
    src = Variable(np.array([1.0, 2.0], np.float32), grad=np.array([3.0, 4.0], np.float32))
    dst = Parameter().to_device(device)
    dst.copydata(src)
    assert dst.device == device
    assert [float(v) for v in dst.array] == [1.0, 2.0]
    acc = Parameter().to_device(device)
    acc.cleargrad()
    acc.addgrad(src)
    assert acc.device == device
    assert [float(v) for v in acc.grad] == [3.0, 4.0]
    # the uninitialised source is initialised by its own initializer
    target = Variable(np.array([9.0, 9.0], np.float32))
    target.copydata(Parameter(initializers.Zero()))
    assert target.array.tolist() == [0.0, 0.0]


# Operations on an uninitialised Parameter ``w`` and a Variable ``x`` of shape (2, 2),
# and the name of the operation each error names (None: its checks refuse first).
UNINITIALISED_USES = {
    "w * x": (lambda w, x: w * x, "Mul: input 0"),
    "x * w": (lambda w, x: x * w, "Mul: input 1"),
    "w + 1.0": (lambda w, x: w + 1.0, "AddConstant: input 0"),
    "exp(w)": (lambda w, x: F.exp(w), "Exp: input 0"),
    "sum(w)": (lambda w, x: x.__array_namespace__().sum(w), "Sum: input 0"),
    "matmul(x, w)": (lambda w, x: F.matmul(x, w), None),
    "linear(x, w)": (lambda w, x: F.linear(x, w), None),
    "w[0]": (lambda w, x: w[0], None),
}


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "define-then-run"])
@pytest.mark.parametrize("use", sorted(UNINITIALISED_USES))
def test_an_uninitialised_parameter_in_an_operation_is_named(
    device: agnograd.Device, use: str, eager: bool
) -> None:
    """The error names the Parameter and ``initialize``, eagerly and while a graph is
    built, whichever library the other operand is of."""
    op, where = UNINITIALISED_USES[use]
    x = Variable(array(device, [[1.0, 2.0], [3.0, 4.0]]))
    for w, named in ((Parameter(name="W"), "the Parameter 'W'"), (Parameter(), "a Parameter")):
        with agnograd.auto_forward(eager), pytest.raises(RuntimeError) as refused:
            op(w, x)
        message = str(refused.value)
        assert named in message, message
        assert "uninitialised" in message, message
        assert "initialize(shape)" in message, message
        if where is not None and eager:
            assert message.startswith(where), message


def test_update_calls_the_update_rule() -> None:
    calls = []

    class Rule:
        def update(self, param: Parameter) -> None:
            calls.append(param)

    p = Parameter(np.ones(2))
    p.update()  # no rule: nothing
    p.update_rule = Rule()
    p.update()
    assert calls == [p]


# -- debug mode ----------------------------------------------------------------------------


def test_debug_mode_is_a_hook_while_it_is_on() -> None:
    assert not agnograd.is_debug()
    assert "agnograd.debug" not in agnograd.config.function_hooks
    agnograd.set_debug(True)
    try:
        assert agnograd.is_debug()
        assert agnograd.config.debug
        assert "agnograd.debug" in agnograd.config.function_hooks
    finally:
        agnograd.set_debug(False)
    assert "agnograd.debug" not in agnograd.config.function_hooks
    with agnograd.using_config("debug", True):
        assert "agnograd.debug" in agnograd.config.function_hooks
        with agnograd.using_config("debug", False):
            assert "agnograd.debug" not in agnograd.config.function_hooks
        assert agnograd.is_debug()
    assert not agnograd.is_debug()
    assert not agnograd.config.function_hooks


def test_debug_mode_raises_on_nan_gradients_naming_the_function(device: agnograd.Device) -> None:
    x = Variable(array(device, [1.0, 2.0]))
    nan = array(device, [float("nan"), 1.0])
    with agnograd.using_config("debug", True):
        y = F.exp(x)  # recorded with the stack of this call
        with pytest.raises(RuntimeError, match=r"(?s)NaN is detected on backward.*Exp.*Stacktrace"):
            y.backward(grad=nan)
    y.backward(grad=nan)  # without debug mode, NaN flows
    assert np.isnan(float(x.grad[0]))


def test_debug_mode_names_where_a_failing_function_was_called() -> None:
    class Wrong(agnograd.FunctionNode):
        def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
            return (inputs[0] * 2,)

        def backward(self, indexes: Any, grad_outputs: Any) -> Any:
            raise ValueError("broken backward")

    x = Variable(np.ones(2))
    with agnograd.using_config("debug", True):
        y = Wrong().apply((x,))[0]  # recorded: this file and line
        with pytest.raises(
            ValueError, match=r"(?s)broken backward.*Stacktrace.*test_chainer_variable"
        ):
            y.backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="broken backward") as info:
            Wrong().apply((x,))[0].backward()
    assert "Stacktrace" not in str(info.value)


def test_debug_mode_raises_on_nan_outputs_of_a_forward(device: agnograd.Device) -> None:
    x = Variable(array(device, [float("nan"), 0.0]))
    with agnograd.using_config("debug", True):
        with pytest.raises(RuntimeError, match=r"(?s)NaN is detected on forward.*Exp"):
            F.exp(x)
        assert float(F.exp(x[1:])[0]) == 1.0  # no NaN: no error
    assert np.isnan(float(F.exp(x)[0]))  # without debug mode, NaN is a value


def test_the_repr_of_an_empty_variable_of_several_axes_gives_its_shape():
    assert repr(agnograd.Variable(np.zeros((0, 3)), name="x")) == "variable x([], shape=(0, 3))"
    assert repr(agnograd.Variable(np.zeros((0,)))) == "variable([])"  # as NumPy's repr
    assert str(agnograd.Variable(np.zeros((0, 3)))) == "variable([])"
