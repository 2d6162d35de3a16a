"""Entry points between agnograd and other libraries never lose a gradient silently,
and printing never raises.

- ``xp.from_dlpack(v)`` and ``xp.asarray(v, device=..., dtype=..., copy=...)`` of
  agnograd's namespace are operations in the graph: gradients flow back to ``v``'s
  library and device, first and second order, and ``device``, ``dtype`` and ``copy``
  mean what the standard says.
- Other libraries' importers (``numpy.from_dlpack``, ``torch.from_dlpack``,
  ``torch.as_tensor``, ...) get a ``BufferError`` from a Variable that requires a
  gradient, as ``numpy.asarray`` gets a ``TypeError``; agnograd's own conversions
  (``view``, ``to_chx``, ``copy``) still work on such Variables.
- ``repr``, ``str`` and ``debug_print`` describe data they cannot show.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Variable

xs = pytest.importorskip("array_api_strict")
torch = pytest.importorskip("torch")

DEVICE1 = xs.Device("device1")


def host(a: Any) -> np.ndarray:
    """A NumPy view of a host-memory array of any library."""
    return np.from_dlpack(a)


# -- from_dlpack of the differentiable namespace ---------------------------------------


@pytest.mark.parametrize(
    ("source", "target"),
    [("numpy", "numpy"), ("numpy", "torch"), ("numpy", "array_api_strict"), ("torch", "numpy")],
)
def test_from_dlpack_of_a_variable_keeps_the_graph(source: str, target: str) -> None:
    make = {"numpy": np.asarray, "torch": torch.tensor}[source]
    x = Variable(make([1.5, 2.5]))
    xp = agnograd.namespace({"numpy": np, "torch": torch, "array_api_strict": xs}[target])
    y = xp.from_dlpack(x * x)
    assert y.requires_grad
    assert y.device.backend == target
    F.sum(xp.from_dlpack(x) * y).backward()  # x**3
    assert x.grad.__class__ is x.array.__class__
    np.testing.assert_allclose(host(x.grad), [3 * 1.5**2, 3 * 2.5**2])


def test_from_dlpack_supports_double_backprop() -> None:
    x = Variable(np.array([1.0, 2.0]))
    y = agnograd.namespace(torch).from_dlpack(x)
    (gx,) = agnograd.grad([F.sum(y * y * y)], [x], enable_double_backprop=True)
    assert gx is not None
    assert isinstance(gx.array, np.ndarray)
    np.testing.assert_allclose(gx.array, np.array([3.0, 12.0]))
    F.sum(gx).backward()
    np.testing.assert_allclose(x.grad, [6.0, 12.0])


def test_from_dlpack_copy_and_device_follow_the_standard() -> None:
    a = np.array([1.0, 2.0])
    x = Variable(a)
    xp = agnograd.namespace(np)
    shared, fresh = xp.from_dlpack(x), xp.from_dlpack(x, copy=True)
    a[0] = 7.0
    assert shared.array[0] == 7.0  # copy=None shares where it can
    assert fresh.array[0] == 1.0

    s = Variable(xs.asarray([1.0, 2.0]))
    on1 = agnograd.namespace(xs).from_dlpack(s, device=DEVICE1)
    assert on1.device == DEVICE1
    F.sum(on1 * on1).backward()
    assert s.grad.device == xs.Device("CPU_DEVICE")
    np.testing.assert_allclose(host(s.grad), [2.0, 4.0])


def test_from_dlpack_copy_false_refuses_to_copy() -> None:
    a = np.array([1.0, 2.0])
    a.flags.writeable = False  # torch cannot share a read-only buffer
    with pytest.raises(BufferError, match=r"from_dlpack: copy=False, but Variable"):
        agnograd.namespace(torch).from_dlpack(Variable(a), copy=False)
    t = agnograd.namespace(torch).from_dlpack(Variable(a), copy=True)
    assert t.requires_grad


def test_from_dlpack_of_arrays_and_constants_still_requires_no_gradient() -> None:
    xp = agnograd.namespace(torch)
    assert not xp.from_dlpack(np.ones(2)).requires_grad
    assert not xp.from_dlpack(Variable(np.ones(2), requires_grad=False)).requires_grad


# -- asarray of the differentiable namespace -------------------------------------------


@pytest.mark.parametrize(
    "device",
    [DEVICE1, "@array_api_strict:device1", agnograd.get_device("@array_api_strict:device1")],
)
def test_asarray_moves_to_the_device_differentiably(device: object) -> None:
    x = Variable(xs.asarray([1.0, 2.0]))
    xp = x.__array_namespace__()
    y = xp.asarray(x * x, device=device)
    assert y.device == DEVICE1
    F.sum(y * xp.asarray(x, device=device)).backward()  # x**3
    assert x.grad.device == xs.Device("CPU_DEVICE")
    np.testing.assert_allclose(host(x.grad), [3.0, 12.0])


def test_asarray_copy_true_is_a_new_array_in_the_graph() -> None:
    x = Variable(np.array([1.0, 2.0]))
    xp = agnograd.namespace(np)
    y = xp.asarray(x, copy=True)
    assert y is not x
    assert not np.shares_memory(y.array, x.array)
    F.sum(y * y).backward()
    np.testing.assert_allclose(x.grad, [2.0, 4.0])
    assert xp.asarray(x) is x
    assert xp.asarray(x, copy=False) is x


def test_asarray_dtype_is_a_differentiable_cast() -> None:
    x = Variable(np.array([1.0, 2.0]))
    y = agnograd.namespace(np).asarray(x, dtype=np.float32)
    assert y.dtype == np.float32
    F.sum(y * y).backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad, [2.0, 4.0])
    with pytest.raises(ValueError, match=r"copy=False, but .* float32, which needs a copy"):
        agnograd.namespace(np).asarray(x, dtype=np.float32, copy=False)


def test_asarray_of_another_library_moves_into_the_namespace_library() -> None:
    a = np.array([1.0, 2.0])
    x = Variable(a)
    y = agnograd.namespace(torch).asarray(x)
    assert isinstance(y.array, torch.Tensor)
    assert np.shares_memory(a, y.array.numpy())  # copy=None shares on the same device
    F.sum(y * y).backward()
    np.testing.assert_allclose(x.grad, [2.0, 4.0])
    z = agnograd.namespace(torch).asarray(x, device="cpu", copy=True)
    assert not np.shares_memory(a, z.array.numpy())


def test_asarray_refuses_a_device_of_another_library() -> None:
    x = Variable(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"asarray: device @array_api_strict:device1 is a device"):
        agnograd.namespace(np).asarray(x, device=DEVICE1)


def test_asarray_in_define_then_run() -> None:
    x = Variable(xs.asarray([1.0, 2.0]))
    xp = x.__array_namespace__()
    with agnograd.auto_forward(False):
        y = F.exp(x)
        assert xp.asarray(y) is y
        z = xp.asarray(y, dtype=xs.float32)
        w = xp.asarray(y, device=DEVICE1)
        v = xp.from_dlpack(y)
        assert w.device == DEVICE1
        assert v.device == y.device
    z.forward()
    assert z.dtype == xs.float32
    np.testing.assert_allclose(host(z.array), np.exp([1.0, 2.0]), rtol=1e-6)
    w.forward()
    np.testing.assert_allclose(host(w.array), np.exp([1.0, 2.0]), rtol=1e-6)


@pytest.mark.gpu
def test_asarray_and_from_dlpack_onto_a_gpu_send_gradients_back() -> None:
    if not torch.cuda.is_available():
        pytest.skip("torch.cuda.is_available() is False")
    x = Variable(np.array([1.0, 2.0]))
    xp = agnograd.namespace(torch)
    y = xp.asarray(x, device="cuda")
    z = xp.from_dlpack(x * x, device=torch.device("cuda"))
    assert y.array.is_cuda
    assert z.array.is_cuda
    F.sum(y * z).backward()  # x**3
    assert isinstance(x.grad, np.ndarray)
    np.testing.assert_allclose(x.grad, [3.0, 12.0])
    with pytest.raises(ValueError, match=r"asarray: copy=False, but"):
        xp.asarray(x, device="cuda", copy=False)
    with pytest.raises(BufferError, match=r"from_dlpack: copy=False, but"):
        xp.from_dlpack(x, device="cuda", copy=False)


# -- other libraries' importers --------------------------------------------------------


@pytest.mark.parametrize(
    "importer",
    [np.from_dlpack, torch.from_dlpack, torch.as_tensor, torch.tensor, xs.from_dlpack],
    ids=["numpy.from_dlpack", "torch.from_dlpack", "torch.as_tensor", "torch.tensor", "strict"],
)
def test_foreign_importers_refuse_a_variable_that_requires_grad(importer: object) -> None:
    x = Variable(np.array([1.0, 2.0]))
    with pytest.raises(BufferError, match=r"requires a gradient: .* take x\.array explicitly"):
        importer(x * x)  # type: ignore[operator]
    constant = Variable(np.array([1.0, 2.0]), requires_grad=False)
    np.testing.assert_array_equal(host(importer(constant)), [1.0, 2.0])  # type: ignore[operator]
    np.testing.assert_array_equal(host(importer(x.array)), [1.0, 2.0])  # type: ignore[operator]


def test_agnograd_own_conversions_of_a_variable_that_requires_grad() -> None:
    x = Variable(np.array([1.0, 2.0]))
    assert isinstance(x.view.torch, torch.Tensor)
    y = F.copy(x, "@torch:cpu")
    assert isinstance(y.array, torch.Tensor)
    z = Variable(np.array([3.0, 4.0]))
    z.to_chx("torch")
    assert isinstance(z.array, torch.Tensor)
    z.from_chx()
    assert isinstance(z.array, np.ndarray)
    w = Variable(np.array([5.0]))
    w.to_device("@array_api_strict:device1")
    assert w.device == DEVICE1
    assert "variable([5.])" in repr(w)


# -- printing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "shown"),
    [
        (lambda: torch.ones(2, dtype=torch.bfloat16), "variable([1., 1.])"),
        (lambda: torch.ones(2, dtype=torch.complex64).conj(), "variable([1.-0.j, 1.-0.j])"),
        (lambda: np.float64(3.0), "variable(3.)"),
        (lambda: None, "variable(None)"),
    ],
    ids=["bfloat16", "conjugate-bit", "0-d", "no-data"],
)
def test_repr_shows_values_numpy_cannot_import_directly(make: object, shown: str) -> None:
    v = Variable(make())  # type: ignore[operator]
    assert repr(v) == shown
    str(v)
    v.debug_print()


@pytest.mark.parametrize(
    ("make", "described"),
    [
        (lambda: torch.ones(2).to_sparse(), "(2), float32, torch, on @torch:cpu"),
        (lambda: torch.empty(3, device="meta"), "(3), float32, torch, on @torch:meta"),
    ],
    ids=["sparse", "meta"],
)
def test_repr_describes_data_it_cannot_show(make: object, described: str) -> None:
    v = Variable(make(), name="w")  # type: ignore[operator]
    for text in (repr(v), str(v)):
        assert text.startswith(f"variable w(<{described}; values not shown (")
    assert "- data: values not shown (" in v.debug_print()
    assert v.summary() == f"<variable w: {described.partition(', on')[0]}>"


def test_repr_of_a_large_array_is_summarised() -> None:
    text = repr(Variable(np.zeros((2000, 3000))))
    assert "..." in text
    assert len(text) < 1000
