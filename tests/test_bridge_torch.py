"""The bridges between agnograd and torch.autograd (``agnograd.interop.torch``).

``function``: agnograd code inside torch, checked with torch's own ``gradcheck`` and
``gradgradcheck`` on every backend it can compute with. ``node``: torch code inside
agnograd, checked against torch.autograd running the same code alone. Zero-copy is
shown by buffer addresses (``tensor.data_ptr()`` against NumPy's
``__array_interface__``).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F

torch = pytest.importorskip("torch")

from agnograd.interop.torch import function, node  # noqa: E402 - needs torch

BACKENDS = ["torch", "numpy", "array_api_strict"]
HAS_CUDA = torch.cuda.is_available()


def _address(a: Any) -> int:
    return int(a.__array_interface__["data"][0])


def _numpy(a: Any) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        return a.detach().numpy()
    return np.asarray(a)


def _tensor(*shape: int, seed: int = 0, requires_grad: bool = True) -> Any:
    gen = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, dtype=torch.float64, generator=gen)
    return t.requires_grad_(requires_grad)


# ---------------------------------------------------------------------------------
# agnograd inside torch: function(f)


def _two_in_two_out(x: agnograd.Variable, w: agnograd.Variable, c: Any, scale: float) -> Any:
    h = F.tanh(x * w) * scale + c
    return F.sum(h * h), F.exp(x) * w


@pytest.mark.parametrize("backend", BACKENDS)
def test_function_passes_gradcheck_and_gradgradcheck(backend: str) -> None:
    f = function(_two_in_two_out, backend=backend)
    x, w = _tensor(3, seed=1), _tensor(3, seed=2)
    c = _tensor(3, seed=3, requires_grad=False)  # a tensor that needs no gradient
    args = (x, w, c, 0.5)  # and a number passed through to f
    assert torch.autograd.gradcheck(f, args)
    assert torch.autograd.gradgradcheck(f, args)


def test_function_matches_torch_alone() -> None:
    f = function(_two_in_two_out, backend="numpy")
    x, w, c = _tensor(4, seed=1), _tensor(4, seed=2), _tensor(4, seed=3, requires_grad=False)
    s, e = f(x, w, c, 2.0)
    (s + e.sum()).backward()
    ours = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    h = torch.tanh(x * w) * 2.0 + c
    ((h * h).sum() + (torch.exp(x) * w).sum()).backward()
    torch.testing.assert_close(ours, (x.grad, w.grad))


def test_function_third_order_gradient() -> None:
    f = function(lambda v: F.sum(F.sin(v) * v), backend="numpy")
    x = _tensor(3)
    g = f(x)
    ref = (torch.sin(x) * x).sum()
    for _ in range(3):
        (g,) = torch.autograd.grad(g.sum(), x, create_graph=True)
        (ref,) = torch.autograd.grad(ref.sum(), x, create_graph=True)
        assert g.grad_fn is not None
    torch.testing.assert_close(g, ref)


def test_function_complex_gradcheck() -> None:
    f = function(lambda z: F.sum(F.real(z * F.conj(z) * z)), backend="numpy")
    z = torch.randn(3, dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(f, (z,))
    assert torch.autograd.gradgradcheck(f, (z,))


def test_function_numpy_backend_views_the_tensors() -> None:
    seen: dict[str, Any] = {}

    @function(backend="numpy")
    def f(x: agnograd.Variable, y: agnograd.Variable) -> agnograd.Variable:
        seen["x"], seen["y"] = x.array, y.array
        out = x * y
        seen["out"] = out.array
        return out

    x = _tensor(4, 3)
    y = _tensor(3, 4).T  # not contiguous: viewed with its strides
    out = f(x, y)
    assert type(seen["x"]) is np.ndarray
    assert _address(seen["x"]) == x.data_ptr()
    assert _address(seen["y"]) == y.data_ptr()
    assert seen["y"].strides == tuple(8 * s for s in y.stride())
    assert out.data_ptr() == _address(seen["out"])  # the result came back without a copy
    gx = torch.ones_like(out)
    out.backward(gx)
    torch.testing.assert_close(x.grad, y.detach())


def test_function_torch_backend_computes_on_the_tensors() -> None:
    seen = {}

    def f(x: agnograd.Variable) -> agnograd.Variable:
        seen["x"] = x.array
        return F.sum(x * x)

    x = _tensor(3)
    function(f)(x)
    assert isinstance(seen["x"], torch.Tensor)
    assert not seen["x"].requires_grad
    assert seen["x"].data_ptr() == x.data_ptr()


def test_function_gradients_reach_parameters() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    model = model.double()
    x = _tensor(5, 3, requires_grad=False)
    loss_fn = function(lambda y: F.sum(y * y) / 5.0, backend="numpy")
    loss_fn(model(x)).backward()
    ours = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ((model(x) ** 2).sum() / 5.0).backward()
    torch.testing.assert_close(ours, [p.grad for p in model.parameters()])


def test_function_takes_nested_and_keyword_arguments() -> None:
    @function(backend="numpy")
    def f(pair: Any, *, weights: dict[str, Any], power: int) -> Any:
        a, b = pair
        return [F.sum(a * weights["w"]) ** power, b * 1.0]

    a, b, w = _tensor(2, seed=1), _tensor(2, seed=2), _tensor(2, seed=3)
    s, bb = f((a, b), weights={"w": w}, power=2)
    assert isinstance(bb, torch.Tensor)
    s.backward()
    torch.testing.assert_close(a.grad, 2 * (a * w).sum().detach() * w.detach())
    assert b.grad is None  # its output received no gradient


def test_function_constant_and_integer_outputs_need_no_gradient() -> None:
    @function(backend="numpy")
    def f(x: agnograd.Variable) -> Any:
        xp = x.__array_namespace__()
        return F.sum(x), xp.argmax(x), agnograd.Variable(np.arange(3))

    x = _tensor(4)
    s, i, k = f(x)
    assert s.requires_grad
    assert not i.requires_grad
    assert not k.requires_grad
    assert int(i) == int(torch.argmax(x))
    s.backward()
    torch.testing.assert_close(x.grad, torch.ones_like(x))


def test_function_under_no_grad_records_nothing() -> None:
    f = function(lambda v: F.exp(v), backend="numpy")
    x = _tensor(3)
    with torch.no_grad():
        y = f(x)
    assert not y.requires_grad
    assert y.grad_fn is None


def test_function_gradients_never_alias() -> None:
    # a + b hands both inputs the very seed: torch would keep it as .grad and add the
    # next gradient into it in place, writing into the seed and into each other.
    for backend in ("torch", "numpy"):
        f = function(lambda a, b: a + b, backend=backend)
        x, w = _tensor(3, seed=1), _tensor(3, seed=2)
        seed = torch.ones(3, dtype=torch.float64)
        for _ in range(3):
            f(x, w).backward(seed)
        torch.testing.assert_close(seed, torch.ones(3, dtype=torch.float64))
        torch.testing.assert_close(x.grad, torch.full((3,), 3.0, dtype=torch.float64))
        torch.testing.assert_close(w.grad, torch.full((3,), 3.0, dtype=torch.float64))


def test_function_output_never_aliases_an_input() -> None:
    x = _tensor(3)
    for backend in ("torch", "numpy"):
        y = function(lambda v: v, backend=backend)(x)
        assert y.data_ptr() != x.data_ptr()
        y.backward(torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0, dtype=torch.float64))


def test_function_refuses_backward_after_an_in_place_change() -> None:
    f = function(lambda v: F.sum(F.exp(v)), backend="numpy")
    x = _tensor(3)
    h = x * 1.0
    y = f(h)
    h.mul_(2.0)  # agnograd's graph kept a view of h's memory
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


@pytest.mark.parametrize(
    ("returns", "message"),
    [
        (lambda v: v.array, r"f returned a numpy array as its result, not a Variable"),
        (lambda v: 3.0, r"must return a Variable or a tuple \(or list\) of Variables, got float"),
        (lambda v: (v, torch.ones(1)), r"returned a torch array as output 1, not a Variable"),
    ],
    ids=["array", "float", "tensor-in-tuple"],
)
def test_function_refuses_what_is_not_a_variable(returns: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        function(returns, backend="numpy")(_tensor(2))


def test_function_refuses_mixed_devices() -> None:
    # The meta device stands for a second device on a machine without a GPU.
    f = function(lambda a, b: a + b)
    with pytest.raises(ValueError, match=r"several devices \(cpu, meta\).*tensor.to\(device\)"):
        f(_tensor(2), torch.ones(2, device="meta"))


def test_function_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="backend='tensorflow': unknown backend"):
        function(lambda v: v, backend="tensorflow")
    with pytest.raises(TypeError, match="f must be a callable"):
        function(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="called without a tensor argument"):
        function(lambda v: v)(np.ones(2))


# ---------------------------------------------------------------------------------
# The refusal that points at the bridges


def test_variable_of_a_tensor_requiring_grad_names_the_bridge() -> None:
    t = torch.ones(2, requires_grad=True)
    with pytest.raises(
        TypeError, match=r"Variable\(data\): the torch array requires a gradient"
    ) as e:
        agnograd.Variable(t)
    message = str(e.value)
    assert "tensor.detach()" in message
    assert "agnograd.interop.torch.function(f)" in message
    assert "agnograd.interop.torch.node(fn)" in message


# ---------------------------------------------------------------------------------
# torch inside agnograd: node(fn)


def _asarray(backend: str, a: np.ndarray) -> Any:
    if backend == "numpy":
        return a.copy()
    if backend == "torch":
        return torch.asarray(a.copy())
    import array_api_strict

    return array_api_strict.asarray(a.copy())


def _model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)
    ).double()


@pytest.mark.parametrize("backend", BACKENDS)
def test_node_matches_torch_alone(backend: str) -> None:
    model = _model()
    a = np.random.default_rng(0).standard_normal((5, 3))
    x = agnograd.Variable(_asarray(backend, a))
    y = node(model)(x)
    assert type(y.array) is type(x.array)  # NumPy in, NumPy out
    F.sum(F.sin(y) * y).backward()
    ours = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    t = torch.tensor(a, requires_grad=True)
    out = model(t)
    (torch.sin(out) * out).sum().backward()
    np.testing.assert_allclose(_numpy(y.array), out.detach().numpy())
    np.testing.assert_allclose(_numpy(x.grad), t.grad.numpy())
    torch.testing.assert_close(ours, [p.grad for p in model.parameters()])


@pytest.mark.parametrize("backend", BACKENDS)
def test_node_double_backprop_matches_torch(backend: str) -> None:
    model = _model()
    a = np.random.default_rng(1).standard_normal((4, 3))
    x = agnograd.Variable(_asarray(backend, a))
    loss = F.sum(F.tanh(node(model)(x)) ** 2)
    (gx,) = agnograd.grad([loss], [x], enable_double_backprop=True)
    first = [p.grad.clone() for p in model.parameters()]
    F.sum(gx * gx).backward()
    both = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    t = torch.tensor(a, requires_grad=True)
    ref = (torch.tanh(model(t)) ** 2).sum()
    (gt,) = torch.autograd.grad(ref, t, create_graph=True)
    params = list(model.parameters())
    ref_first = torch.autograd.grad(ref, params, retain_graph=True)
    (gt * gt).sum().backward()
    np.testing.assert_allclose(_numpy(gx.array), gt.detach().numpy())
    np.testing.assert_allclose(_numpy(x.grad), t.grad.numpy())
    torch.testing.assert_close(first, list(ref_first))
    torch.testing.assert_close(both, [f + p.grad for f, p in zip(ref_first, params, strict=True)])


def test_node_reaches_parameters_when_no_input_requires_a_gradient() -> None:
    model = _model()
    x = agnograd.Variable(np.ones((2, 3)), requires_grad=False)
    y = node(model)(x)
    assert y.requires_grad
    F.sum(y).backward()
    assert all(p.grad is not None for p in model.parameters())
    assert x.grad is None


def test_node_in_no_backprop_mode_records_nothing() -> None:
    model = _model()
    x = agnograd.Variable(np.ones((2, 3)))
    with agnograd.no_backprop_mode():
        y = node(model)(x)
    assert not y.requires_grad
    assert y.creator is None


def test_node_with_grad_accumulates_the_parameters_gradients() -> None:
    # agnograd.grad leaves agnograd's .grad alone, but torch's leaves accumulate.
    w = torch.nn.Parameter(torch.tensor([2.0, 3.0], dtype=torch.float64))
    x = agnograd.Variable(np.array([1.0, 4.0]))
    y = F.sum(node(lambda t: t * w)(x))
    (gx,) = agnograd.grad([y], [x])
    np.testing.assert_allclose(gx.array, [2.0, 3.0])
    assert x.grad is None
    torch.testing.assert_close(w.grad, torch.tensor([1.0, 4.0], dtype=torch.float64))


def test_node_views_numpy_arrays() -> None:
    seen = {}

    def fn(t: Any) -> Any:
        seen["t"] = t
        seen["out"] = out = torch.exp(t)
        return out

    a = np.arange(6.0).reshape(2, 3)
    y = node(fn)(agnograd.Variable(a))
    assert seen["t"].data_ptr() == _address(a)
    assert _address(y.array) == seen["out"].data_ptr()


def test_node_passes_other_arguments_and_returns_tuples() -> None:
    x = agnograd.Variable(np.array([[1.0, 5.0], [3.0, 2.0]]))
    values, indices = node(torch.max)(x, dim=1)
    np.testing.assert_allclose(values.array, [5.0, 3.0])
    np.testing.assert_array_equal(indices.array, [1, 0])
    F.sum(values).backward()
    np.testing.assert_allclose(x.grad, [[0.0, 1.0], [1.0, 0.0]])


def test_node_gradients_leave_the_seed_alone() -> None:
    b = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    x = agnograd.Variable(np.zeros(3))
    seed = np.ones(3)
    for _ in range(3):
        y = node(lambda t: t + b)(x)
        y.grad = seed
        y.backward()
    np.testing.assert_array_equal(seed, np.ones(3))
    np.testing.assert_array_equal(x.grad, [3.0, 3.0, 3.0])
    torch.testing.assert_close(b.grad, torch.full((3,), 3.0, dtype=torch.float64))


def test_bridges_compose() -> None:
    # torch inside agnograd inside torch: gradcheck sees one function.
    inner = node(torch.sin)
    f = function(lambda v: F.sum(inner(v * v)), backend="numpy")
    assert torch.autograd.gradcheck(f, (_tensor(3),))
    assert torch.autograd.gradgradcheck(f, (_tensor(3),))


def test_node_refuses_what_it_cannot_run() -> None:
    x = agnograd.Variable(np.ones(2))
    with pytest.raises(TypeError, match=r"node\(<lambda>\): fn must return a tensor"):
        node(lambda t: t.tolist())(x)
    with pytest.raises(TypeError, match=r"node\(add\): argument 1: the torch array requires"):
        node(torch.add)(x, torch.ones(2, requires_grad=True))
    with pytest.raises(TypeError, match="mix arrays of numpy, torch"):
        node(torch.add)(x, agnograd.Variable(torch.ones(2)))
    with pytest.raises(TypeError, match="called without a Variable or array argument"):
        node(torch.ones)(2)
    with pytest.raises(TypeError, match="fn must be a torch function"):
        node(3)  # type: ignore[arg-type]
    with agnograd.auto_forward(False), pytest.raises(RuntimeError, match="define-then-run"):
        node(torch.sin)(x)


# ---------------------------------------------------------------------------------
# GPUs


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device (torch.cuda.is_available())")
def test_function_on_cuda_torch_backend() -> None:
    f = function(lambda v: F.sum(F.exp(v) * v))
    x = _tensor(3).cuda().detach().requires_grad_()
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device (torch.cuda.is_available())")
def test_function_numpy_backend_is_cupy_on_cuda() -> None:
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("needs CuPy")
    import cupy

    if not cupy.is_available():
        pytest.skip("needs CuPy with a usable GPU (cupy.is_available())")
    seen = {}

    def f(v: agnograd.Variable) -> agnograd.Variable:
        seen["v"] = v.array
        return F.sum(F.exp(v))

    x = _tensor(3).cuda().detach().requires_grad_()
    function(f, backend="numpy")(x).backward()
    assert isinstance(seen["v"], cupy.ndarray)
    assert seen["v"].data.ptr == x.data_ptr()
    torch.testing.assert_close(x.grad, torch.exp(x.detach()))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device (torch.cuda.is_available())")
def test_node_on_cuda_tensors() -> None:
    model = _model().cuda()
    x = agnograd.Variable(torch.ones((2, 3), dtype=torch.float64, device="cuda"))
    y = node(model)(x)
    assert y.array.is_cuda
    F.sum(y).backward()
    assert x.grad.is_cuda
    assert all(p.grad is not None for p in model.parameters())
