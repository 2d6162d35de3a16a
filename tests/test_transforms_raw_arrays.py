"""Raw arrays beside Variables in agnograd.functional's transforms.

``value_and_grad(loss)(w, X, y)`` differentiates ``w`` and passes the raw arrays of
the other arguments as constant Variables, so that array API code asking one
namespace of all three (``array_api_compat.array_namespace(w, X, y)``) runs: on
every host backend, for shapes drawn by hypothesis, with the results of the same
code on Variables throughout. Arrays of another library or device are refused with
an error naming the argument; nothing passed is changed. The transforms of
``torch.autograd.functional`` differentiate every input they pass, so data reaches
their function from outside, where they cannot wrap it: array-api-compat's refusal
becomes an error that names the transform and ``agnograd.as_variable``.
:func:`agnograd.namespace` of several arrays and Variables is checked here too.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, NamedTuple

import array_api_compat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.functional import hessian, hvp, jacobian, jvp, value_and_grad, vhp, vjp

torch = pytest.importorskip("torch")
strict = pytest.importorskip("array_api_strict")

EXAMPLES = settings(max_examples=8, deadline=None)


def loss(w: Any, x: Any, y: Any) -> Any:
    """Mean squared error, asking one namespace of all its arguments."""
    xp = array_api_compat.array_namespace(w, x, y)
    return xp.mean((x @ w - y) ** 2)


def reference(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    r = x @ w - y
    return float(np.mean(r**2)), 2.0 * x.T @ r / len(y)


def of_library(a: Any, x: Any) -> bool:
    """Whether ``a`` is a raw array (not a Variable) of ``x``'s library."""
    return not isinstance(a, Variable) and type(a) is type(x)


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, d = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return rng.standard_normal(d), rng.standard_normal((n, d)), rng.standard_normal(n)


# --- value_and_grad: the arguments it does not differentiate ----------------------


@EXAMPLES
@given(problem=problems())
def test_data_beside_the_parameters(backend: Any, problem: Any) -> None:
    w, x, y = (backend.asarray(a) for a in problem)
    expected_value, expected_grad = reference(*problem)
    calls = {
        "positional": lambda: value_and_grad(loss)(w, x, y),
        "keyword": lambda: value_and_grad(loss)(w, x, y=y),
        "in a tuple": lambda: value_and_grad(lambda w, b: loss(w, *b))(w, (x, y)),
        "in a dict": lambda: value_and_grad(lambda w, b: loss(w, b["x"], b["y"]))(
            w, {"x": x, "y": y}
        ),
        "before the parameters": lambda: value_and_grad(lambda x, w, y: loss(w, x, y), 1)(x, w, y),
    }
    for how, call in calls.items():
        value, grad = call()
        assert of_library(value, w), f"{how}: the value is a {type(value).__name__}"
        assert of_library(grad, w), f"{how}: the gradient is a {type(grad).__name__}"
        backend.assert_close(value, expected_value, rtol=1e-4, atol=1e-5)
        backend.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-5)


def test_several_argnums_and_the_rest_as_constants() -> None:
    w, x, y = np.array([0.5, -1.0]), np.array([[1.0, 2.0], [3.0, 4.0], [0.0, 1.0]]), np.ones(3)
    _, (gw, gy) = value_and_grad(loss, argnums=(0, 2))(w, x, y)
    np.testing.assert_allclose(gw, reference(w, x, y)[1])
    np.testing.assert_allclose(gy, -2.0 * (x @ w - y) / len(y))


def test_the_function_sees_constants_and_everything_else_as_passed() -> None:
    seen: dict[str, Any] = {}
    scale, name, fn = 2, "label", np.exp

    def f(w: Any, x: Any, scale: Any, name: Any, fn: Any, *, y: Any, none: Any) -> Any:
        seen.update(x=x, y=y, scale=scale, name=name, fn=fn, none=none)
        return F.sum(x @ w) * scale

    x, y = np.ones((2, 3)), np.zeros(2)
    value_and_grad(f)(np.ones(3), x, scale, name, fn, y=y, none=None)
    for key, raw in (("x", x), ("y", y)):
        assert isinstance(seen[key], Variable), key
        assert not seen[key].requires_grad, key
        assert seen[key].array is raw, f"{key}: the constant is not a view of the array passed"
    assert seen["scale"] is scale
    assert seen["name"] is name
    assert seen["fn"] is fn
    assert seen["none"] is None


class Batch(NamedTuple):
    x: Any
    y: Any


def test_nothing_passed_is_changed_and_aux_gives_the_arrays_back() -> None:
    x, y = np.arange(6.0).reshape(3, 2), np.array([1.0, 0.0, -1.0])
    x_before, y_before = x.copy(), y.copy()
    as_list, as_dict, as_tuple = [x, y], OrderedDict(x=x, y=y), Batch(x, y)

    def f(w: Any, lst: Any, dct: Any, tpl: Any) -> Any:
        assert isinstance(dct, OrderedDict)  # a copy of the caller's type
        assert isinstance(tpl, Batch)
        value = loss(w, lst[0], lst[1]) + loss(w, dct["x"], tpl.y)
        return value, {"x": lst[0], "batch": tpl, "both": [dct["y"], tpl.x]}

    for w in (np.array([0.5, -0.5]), Variable(np.array([0.5, -0.5]))):  # plain and nested
        (_, aux), _ = value_and_grad(f, has_aux=True)(w, as_list, as_dict, as_tuple)
        assert aux["x"] is x
        assert aux["batch"] == (x, y)
        assert aux["batch"].x is x
        assert isinstance(aux["batch"], Batch)
        assert aux["both"][0] is y
        assert aux["both"][1] is x
    assert as_list[0] is x
    assert as_list[1] is y
    assert as_dict["x"] is x
    assert as_dict["y"] is y
    assert as_tuple.x is x
    np.testing.assert_array_equal(x, x_before)
    np.testing.assert_array_equal(y, y_before)


def test_nested_value_and_grad_with_data() -> None:
    x, y = np.array([[1.0, 2.0], [3.0, -1.0]]), np.array([0.5, 1.0])

    def grad_norm(w: Any, x: Any, y: Any) -> Any:
        _, g = value_and_grad(loss)(w, x, y)
        return F.sum(g * g)

    w = np.array([0.3, -0.2])
    value, grad = value_and_grad(grad_norm)(w, x, y)
    # d/dw |2/n x^T (Xw - y)|^2 = 2 (2/n x^T x)^T (2/n x^T (Xw - y))
    H = 2.0 * x.T @ x / len(y)
    np.testing.assert_allclose(grad, 2.0 * H.T @ reference(w, x, y)[1])
    np.testing.assert_allclose(value, np.sum(reference(w, x, y)[1] ** 2))


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (
            (np.ones(2), np.ones((3, 2)), torch.zeros(3)),
            {},
            TypeError,
            r"value_and_grad: argument 2 is a torch array, but the differentiated arguments "
            r"are numpy arrays.*agnograd\.functions\.copy\(array, '@numpy'\)",
        ),
        (
            (np.ones(2), np.ones((3, 2))),
            {"y": strict.zeros(3)},
            TypeError,
            r"value_and_grad: keyword argument 'y' is an array_api_strict array",
        ),
        (
            (strict.ones(2), strict.ones((3, 2)), strict.zeros(3, device=strict.Device("device1"))),
            {},
            ValueError,
            r"value_and_grad: argument 2 is on @array_api_strict:device1, but the "
            r"differentiated arguments are on @array_api_strict:CPU_DEVICE; move it there",
        ),
        (
            (np.ones(2), np.ones((3, 2)), torch.zeros(3, requires_grad=True)),
            {},
            TypeError,
            r"value_and_grad: argument 2 requires a gradient in torch's own autograd.*detach",
        ),
    ],
    ids=["another-library", "keyword", "another-device", "torch-autograd"],
)
def test_an_array_the_function_cannot_take_is_refused(
    args: Any, kwargs: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        value_and_grad(loss)(*args, **kwargs)


def test_the_error_names_the_place_in_a_nest() -> None:
    w, x = np.ones(2), np.ones((3, 2))
    with pytest.raises(TypeError, match=r"argument 1\[1\]\['y'\] is a torch array"):
        value_and_grad(lambda w, b: loss(w, b[0], b[1]["y"]))(w, (x, {"y": torch.zeros(3)}))


# --- the torch.autograd.functional transforms: data from outside -------------------

X0, Y0 = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.0, 1.0])
W0 = np.array([1.0, -1.0])

TRANSFORMS = {
    "vjp": lambda f: vjp(f, W0),
    "jvp": lambda f: jvp(f, W0, np.ones(2)),
    "jacobian": lambda f: jacobian(f, W0),
    "jacobian (forward-mode)": lambda f: jacobian(f, W0, strategy="forward-mode"),
    "hessian": lambda f: hessian(f, W0),
    "hvp": lambda f: hvp(f, W0, np.ones(2)),
    "vhp": lambda f: vhp(f, W0, np.ones(2)),
    "value_and_grad": lambda f: value_and_grad(f)(W0),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_data_from_outside_gets_the_as_variable_hint(name: str) -> None:
    op = name.split()[0]
    with pytest.raises(
        TypeError, match=rf"^{op}: the function got a Variable and a raw numpy "
    ) as e:
        TRANSFORMS[name](lambda w: loss(w, X0, Y0))
    assert "agnograd.as_variable(array)" in str(e.value)
    assert "Multiple namespaces" in str(e.value.__cause__)  # array-api-compat's own, chained
    # the fixes the message gives
    wrapped = TRANSFORMS[name](
        lambda w: loss(w, agnograd.as_variable(X0), agnograd.as_variable(Y0))
    )

    def any_mix(w: Any) -> Any:
        xp = agnograd.namespace(w, X0, Y0)
        return xp.mean((X0 @ w - Y0) ** 2)

    mixed = TRANSFORMS[name](any_mix)
    for a, b in zip(_flat(wrapped), _flat(mixed), strict=True):
        assert type(a) is np.ndarray
        np.testing.assert_allclose(a, b)


def _flat(result: Any) -> list[Any]:
    if isinstance(result, tuple):
        return [a for r in result for a in _flat(r)]
    return [result]


def test_data_of_another_library_from_outside() -> None:
    with pytest.raises(TypeError, match=r"vjp: the function got Variables of numpy and raw arrays"):
        vjp(lambda w: loss(w, X0, torch.asarray(Y0)), W0)


def test_other_type_errors_of_the_function_pass_unchanged() -> None:
    def bad(w: Any) -> Any:
        raise TypeError("my own error")

    for call in TRANSFORMS.values():
        with pytest.raises(TypeError, match=r"^my own error$"):
            call(bad)


def test_v_on_another_device_is_refused() -> None:
    x = strict.asarray([1.0, 2.0])
    v = strict.asarray([1.0, 1.0], device=strict.Device("device1"))
    for call in (vjp, jvp, hvp, vhp):
        func = (lambda x: x * x) if call in (vjp, jvp) else (lambda x: F.sum(x**3))
        with pytest.raises(
            ValueError,
            match=rf"{call.__name__}: v is on @array_api_strict:device1 but the (output|input) "
            r"it pairs with is on @array_api_strict:CPU_DEVICE",
        ):
            call(func, x, v)


# --- agnograd.namespace of several arguments ---------------------------------------


def test_namespace_of_a_mix_of_variables_and_arrays(backend: Any) -> None:
    x = backend.asarray([1.0, 2.0])
    v = Variable(backend.asarray([3.0, 4.0]))
    xp = agnograd.namespace(v, x, 2.0, None)
    assert xp is agnograd.namespace(v) is agnograd.namespace(x, v)
    y = xp.sum(v * x)
    y.backward()
    backend.assert_close(v.grad, [1.0, 2.0])


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (
            (Variable(np.ones(2)), torch.ones(2)),
            r"namespace: argument 1 is a raw torch array but argument 0 is a numpy Variable; "
            r"move them to one library",
        ),
        ((np.ones(2), np), "namespace: argument 1 is a module"),
        ((1.0, None), "namespace: no argument is an array or a Variable"),
    ],
    ids=["two-libraries", "module", "no-array"],
)
def test_namespace_of_several_refuses(args: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        agnograd.namespace(*args)
