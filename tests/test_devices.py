"""Devices as values, moving Variables between devices and libraries, ``F.copy``.

Multi-device behaviour is tested for real on a CPU-only machine with
array_api_strict's simulated devices (``device1``, ``device2``) here, and with JAX
forced to two CPU devices (the flag must be set before JAX is first imported:
tests/conftest.py sets it for this process; where it was not, a subprocess). CUDA
tests are marked ``gpu`` and run where ``torch.cuda.is_available()`` /
``cupy.is_available()`` say so.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.backends._device import Device, get_device

xs = pytest.importorskip("array_api_strict")


def host(a):
    """A NumPy view of a host-memory array of any library (array_api_strict refuses
    ``numpy.asarray`` off its CPU_DEVICE, but exports DLPack from every device)."""
    return np.from_dlpack(a)


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _torch_cuda() -> bool:
    if not _installed("torch"):
        return False
    import torch

    return bool(torch.cuda.is_available())


def _cupy_gpu() -> bool:
    if not _installed("cupy"):
        return False
    try:
        import cupy
    except ImportError:
        return False
    return bool(cupy.is_available())


SPECS = [
    ("@numpy", "@numpy", "numpy"),
    ("@numpy:cpu", "@numpy", "numpy"),
    ("@array_api_strict", "@array_api_strict:CPU_DEVICE", "array_api_strict"),
    ("@array_api_strict:device1", "@array_api_strict:device1", "array_api_strict"),
    ("@array_api_strict:device2", "@array_api_strict:device2", "array_api_strict"),
    ("@torch", "@torch:cpu", "torch"),
    ("@torch:cpu", "@torch:cpu", "torch"),
    ("@jax", "@jax:cpu:0", "jax"),
    ("@jax:cpu", "@jax:cpu:0", "jax"),
    ("@jax:cpu:0", "@jax:cpu:0", "jax"),
    ("@dask", "@dask", "dask"),
]


# ---------------------------------------------------------------------------------
# Specifiers


@pytest.mark.parametrize(("spec", "canonical", "module"), SPECS, ids=[s[0] for s in SPECS])
def test_specifier_parses_and_prints_back(spec, canonical, module):
    pytest.importorskip(module)
    device = get_device(spec)
    assert str(device) == device.name == canonical
    assert repr(device) == f"Device('{canonical}')"
    assert get_device(canonical) is device  # canonical names round-trip to one value
    assert device.backend == module
    assert device.is_cpu
    assert not device.is_gpu
    # xp is the namespace that Variable.xp reports for the library's arrays.
    assert Variable(device.xp.ones(2)).xp is device.xp
    assert pickle.loads(pickle.dumps(device)) == device


def test_native_devices_arrays_and_variables_give_devices():
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    assert get_device(torch.device("cpu")) is get_device("@torch:cpu")
    assert get_device(xs.Device("device2")) is get_device("@array_api_strict:device2")
    assert get_device(jax.devices("cpu")[0]) is get_device("@jax:cpu:0")
    assert get_device(np.zeros(2)) is get_device("@numpy")
    assert get_device(xs.ones(2, device=xs.Device("device1"))).name == "@array_api_strict:device1"
    assert get_device(Variable(torch.zeros(2))).name == "@torch:cpu"
    device = get_device("@torch:cpu")
    assert get_device(device) is device


def test_device_equals_the_library_device_object():
    torch = pytest.importorskip("torch")
    assert get_device("@torch:cpu") == torch.device("cpu")
    assert get_device("@array_api_strict:device1") == xs.Device("device1")
    assert get_device("@array_api_strict:device1") != xs.Device("device2")
    assert get_device("@numpy") == "cpu"  # NumPy's own device object is the string
    assert get_device("@numpy") != get_device("@array_api_strict")
    assert {get_device("@torch:cpu"): 1}[torch.device("cpu")] == 1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("@nosuchlib", "unknown backend 'nosuchlib'; installed backends: "),
        ("@nosuchlib:0", "unknown backend 'nosuchlib'; installed backends: "),
        ("cuda", "is not a device specifier; specifiers start with '@'"),
        ("numpy", "is not a device specifier"),
        ("@array_api_strict:device9", "array_api_strict has no device 'device9'"),
        ("@numpy:1", "numpy has one device"),
    ],
)
def test_unknown_specifiers_are_value_errors_listing_backends(spec, message):
    with pytest.raises(ValueError, match=r"installed backends|devices of") as info:
        get_device(spec)
    assert message in str(info.value)
    if "backend" in message or "specifier" in message:
        for name in ("numpy", "array_api_strict"):
            assert name in str(info.value)


def test_unknown_device_of_a_known_library_lists_its_devices():
    with pytest.raises(
        ValueError, match=r"devices of array_api_strict: .*@array_api_strict:device1"
    ):
        get_device("@array_api_strict:device9")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="'cuda:1' is not available"):
            get_device("@torch:cuda:1")
    with pytest.raises(ValueError, match="not a torch device name"):
        get_device("@torch:warp-drive")


@pytest.mark.skipif(_installed("cupy"), reason="cupy is installed here")
def test_registered_backend_without_its_library_says_so():
    with pytest.raises(ValueError, match=r"'cupy' is registered but its library cannot be"):
        get_device("@cupy:0")


def test_objects_that_are_not_devices_are_rejected():
    with pytest.raises(ValueError, match="cannot tell the device of int"):
        get_device(3)
    with pytest.raises(ValueError, match="holds no data"):
        get_device(Variable())


def test_send_moves_nested_arrays_and_keeps_what_is_there():
    device = get_device("@array_api_strict:device1")
    a = np.arange(3.0)
    out = device.send({"w": [a, (a, None)], "b": a})
    assert out["w"][0].device == xs.Device("device1")
    assert out["w"][1][1] is None
    assert isinstance(out["w"][1], tuple)
    assert device.send(out["b"]) is out["b"]  # already there: the same array
    np.testing.assert_array_equal(get_device("@numpy").send(out["b"]), a)


def test_use_sets_the_library_default_device():
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    with get_device("@torch:cpu").use():
        assert torch.zeros(1).device == torch.device("cpu")
    with get_device("@jax:cpu:0").use():
        assert jax.numpy.zeros(1).devices() == {jax.devices("cpu")[0]}
    with get_device("@numpy").use(), get_device("@array_api_strict:device1").use():
        pass  # libraries without a default-device setting: a no-op context


def test_variable_device_is_a_device_value():
    x = Variable(xs.ones(2, device=xs.Device("device1")))
    assert isinstance(x.device, Device)
    assert x.device.name == "@array_api_strict:device1"
    assert Variable().device is None


# ---------------------------------------------------------------------------------
# Moving Variables in place


def test_to_device_moves_data_and_grad_in_place_and_returns_the_variable():
    x = Variable(np.array([1.0, 2.0]), grad=np.array([0.5, 0.5]), name="x")
    assert x.to_device("@array_api_strict:device2") is x
    assert x.device.name == "@array_api_strict:device2"
    assert x.grad.device == xs.Device("device2")
    assert x.node.shape == (2,)
    assert x.name == "x"
    assert x.to_device(xs.Device("device1")).device.name == "@array_api_strict:device1"
    x.to_device("@numpy")
    assert isinstance(x.array, np.ndarray)
    np.testing.assert_array_equal(x.grad, [0.5, 0.5])


def test_to_device_across_libraries():
    torch = pytest.importorskip("torch")
    x = Variable(np.array([1.0, 2.0]), grad=np.ones(2))
    x.to_device("@torch:cpu")
    assert isinstance(x.array, torch.Tensor)
    assert isinstance(x.grad, torch.Tensor)
    assert x.xp.__name__ == "array_api_compat.torch"


def test_moved_leaf_gets_its_gradient_on_its_new_device():
    # The graph saved the leaf's old arrays; the gradient must follow the data.
    x = Variable(np.array([1.0, 2.0, 3.0]))
    loss = F.sum(x * x)
    x.to_device("@array_api_strict:device1")
    loss.backward()
    assert x.grad.device == xs.Device("device1")
    np.testing.assert_allclose(host(x.grad), [2.0, 4.0, 6.0])
    # A second backward accumulates on the new device.
    F.sum(x * 1.0).backward()
    np.testing.assert_allclose(host(x.grad), [3.0, 5.0, 7.0])


def test_an_intermediate_moves_into_a_new_variable_that_gradients_flow_through():
    # Array API code calls to_device on its intermediate results and uses what it
    # returns: a differentiable copy; the intermediate itself stays where it is.
    x = Variable(np.array([1.0, 2.0]))
    h = F.exp(x)
    y = h.to_device("@array_api_strict:device1")
    assert y is not h
    assert y.creator.label == "Copy"
    assert y.device.name == "@array_api_strict:device1"
    assert isinstance(h.array, np.ndarray)  # nothing moved
    assert h.to_device("@numpy") is h  # already there: nothing to do
    F.sum(y * y).backward()
    assert isinstance(x.grad, np.ndarray)
    np.testing.assert_allclose(x.grad, 2 * np.exp([1.0, 2.0]) ** 2)
    # to_chx swaps the data for a view in place, which the graph cannot follow.
    with pytest.raises(RuntimeError, match=r"output of Exp.*agnograd\.functions\.copy.*unchain"):
        h.to_chx("array_api_strict")
    h.unchain()  # a leaf now: it moves in place
    assert h.to_device("@array_api_strict:device1") is h
    assert h.device.name == "@array_api_strict:device1"


DEVICE1, DEVICE2 = xs.Device("device1"), xs.Device("device2")


def _strict_host(a):
    return np.from_dlpack(a)


def test_array_api_code_moves_intermediates_and_gradients_come_back():
    # What array API code does: to_device on its intermediates, through the
    # standard's method and through array_api_compat.to_device, across devices.
    import array_api_compat

    values = np.array([0.5, -1.0, 2.0])
    x = Variable(xs.asarray(values))  # on CPU_DEVICE
    xp = x.__array_namespace__()
    h1 = xp.tanh(x).to_device(DEVICE1)
    h2 = array_api_compat.to_device(h1 * 3.0, DEVICE2)
    assert h1.device == DEVICE1
    assert h2.device == DEVICE2
    loss = xp.sum(h2 * h2)
    loss.backward()
    assert x.device == xs.Device("CPU_DEVICE")
    assert x.grad.device == xs.Device("CPU_DEVICE")
    t = np.tanh(values)
    np.testing.assert_allclose(_strict_host(x.grad), 18 * t * (1 - t**2), rtol=1e-12)
    assert h1.creator.label == h2.creator.label == "Copy"


def test_to_device_of_an_intermediate_in_define_then_run():
    x = Variable(xs.asarray([1.0, 2.0]), name="x")
    with agnograd.auto_forward(False):
        h = F.exp(x)
        assert h.device == xs.Device("CPU_DEVICE")  # known before the data
        y = h.to_device(DEVICE1)
        assert y.array is None
        assert y.device == DEVICE1
        z = F.sum(y * y)
    z.forward()
    assert y.array.device == DEVICE1
    z.backward()
    np.testing.assert_allclose(_strict_host(x.grad), 2 * np.exp([1.0, 2.0]) ** 2, rtol=1e-12)
    # The graph runs again with the leaf's new data on another device: the gradient
    # follows the data.
    x.cleargrad()
    x.d = xs.asarray([0.0, 1.0], dtype=xs.float64, device=DEVICE2)
    z.forward()
    z.backward()
    assert x.grad.device == DEVICE2
    np.testing.assert_allclose(_strict_host(x.grad), 2 * np.exp([0.0, 1.0]) ** 2, rtol=1e-12)


def test_namespace_transfers_of_intermediates_in_define_then_run():
    x = Variable(np.array([1.0, 2.0]))
    xp = agnograd.namespace(xs)
    with agnograd.auto_forward(False):
        h = F.exp(x)
        y = xp.asarray(h, device=DEVICE1)
        z = F.sum(xp.from_dlpack(h, device=DEVICE1) * y)
    assert y.device == DEVICE1
    z.forward()
    z.backward()
    np.testing.assert_allclose(x.grad, 2 * np.exp([1.0, 2.0]) ** 2, rtol=1e-12)


def test_to_device_of_an_intermediate_on_jax_with_two_cpu_devices():
    jax = pytest.importorskip("jax")
    cpus = jax.devices("cpu")
    if len(cpus) < 2:
        pytest.skip("JAX has one CPU device (tests/conftest.py sets XLA_FLAGS for two)")
    values = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    for static in (False, True):
        x = Variable(jax.device_put(jax.numpy.asarray(values), cpus[0]))
        xp = x.__array_namespace__()
        with agnograd.auto_forward(not static):
            h = xp.sin(x)
            y = h.to_device(cpus[1])
            assert y.device == get_device("@jax:cpu:1")
            loss = xp.sum(y * y)
        if static:
            loss.forward()
        loss.backward()
        assert y.array.devices() == {cpus[1]}
        assert x.grad.devices() == {cpus[0]}
        np.testing.assert_allclose(
            np.asarray(x.grad), 2 * np.sin(values) * np.cos(values), rtol=1e-6
        )


# ---------------------------------------------------------------------------------
# "cpu": array-api-compat's name of NumPy's device


def test_cpu_is_numpy_s_device_wherever_a_device_is_taken():
    import array_api_compat

    numpy_device = get_device("@numpy")
    assert get_device("cpu") is numpy_device
    assert get_device(array_api_compat.device(np.ones(2))) is numpy_device
    assert Variable(shape=(2,), device="cpu").device is numpy_device
    x = Variable(np.array([1.0, 2.0]))
    assert x.to_device("cpu") is x
    assert array_api_compat.to_device(x, "cpu") is x
    xp = x.__array_namespace__()
    assert xp.asarray([1.0], device="cpu").device is numpy_device
    assert xp.zeros(2, device="cpu").device is numpy_device
    assert xp.asarray(x, device="cpu") is x
    h = x * 2
    assert h.to_device("cpu") is h
    assert array_api_compat.to_device(h, "cpu") is h
    # A Variable of another library without a device of that name goes to NumPy.
    s = Variable(xs.asarray([1.0, 2.0]), grad=xs.asarray([0.5, 0.5]))
    assert s.to_device("cpu") is s
    assert s.device is numpy_device
    assert isinstance(s.grad, np.ndarray)
    # Through an intermediate, the gradient comes back to the other library.
    t = Variable(xs.asarray([1.0, 2.0]))
    y = (t * 3).to_device("cpu")
    assert isinstance(y.array, np.ndarray)
    F.sum(y * y).backward()
    np.testing.assert_allclose(_strict_host(t.grad), [18.0, 36.0])


def test_cpu_of_a_library_that_names_a_device_so_stays_in_that_library():
    torch = pytest.importorskip("torch")
    x = Variable(torch.ones(2))
    assert x.to_device("cpu") is x
    assert x.device == get_device("@torch:cpu")
    h = x * 2
    assert h.to_device("cpu") is h
    xp = x.__array_namespace__()
    assert xp.asarray(h, device="cpu") is h
    assert isinstance(xp.asarray([1.0], device="cpu").array, torch.Tensor)


def test_constants_and_unchained_results_may_move():
    with agnograd.no_backprop_mode():
        y = Variable(np.ones(2)) * 2
    y.to_device("@array_api_strict:device1")
    assert y.device.name == "@array_api_strict:device1"


def test_to_cpu_keeps_a_host_library_and_to_gpu_goes_to_cupy_without_gpus():
    x = Variable(xs.ones(2, device=xs.Device("device1")))
    assert x.to_cpu() is x
    assert x.device.name == "@array_api_strict:device1"  # host memory already
    if _cupy_gpu():
        pytest.skip("this machine has a GPU for CuPy")
    with pytest.raises(ValueError, match="numpy has no GPU device, so the data go to CuPy"):
        Variable(np.ones(2)).to_gpu()
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="torch has no GPU device"):
            Variable(torch.ones(2)).to_gpu()


def test_to_gpu_with_a_specifier_is_to_device():
    x = Variable(np.ones(2))
    assert x.to_gpu("@array_api_strict:device2").device.name == "@array_api_strict:device2"


# ---------------------------------------------------------------------------------
# The differentiable copy


def test_copy_moves_forward_and_sends_gradients_back():
    x = Variable(xs.asarray([1.0, 2.0], device=xs.Device("device1")))
    y = F.copy(x, "@array_api_strict:device2")
    assert y.device.name == "@array_api_strict:device2"
    assert y.creator.label == "Copy"
    F.sum(y * y).backward()
    assert x.grad.device == xs.Device("device1")
    np.testing.assert_allclose(host(x.grad), [2.0, 4.0])


def test_copy_across_libraries_chains_gradients_back_to_the_source():
    torch = pytest.importorskip("torch")
    pytest.importorskip("jax")
    x = Variable(np.array([1.0, -2.0, 3.0], dtype=np.float32))
    t = F.copy(x, "@torch:cpu")
    j = F.copy(F.tanh(t), "@jax")
    s = F.copy(j * j, "@array_api_strict:device1")
    assert isinstance(t.array, torch.Tensor)
    assert j.device.backend == "jax"
    F.sum(s).backward()
    assert isinstance(x.grad, np.ndarray)
    a = np.array([1.0, -2.0, 3.0])
    np.testing.assert_allclose(x.grad, 2 * np.tanh(a) * (1 - np.tanh(a) ** 2), rtol=1e-5)


def test_copy_gives_a_fresh_array():
    a = np.array([1.0, 2.0])
    y = F.copy(Variable(a), "@numpy")
    a[0] = 100.0
    assert float(y.array[0]) == 1.0
    torch = pytest.importorskip("torch")
    t = torch.zeros(2)
    z = F.copy(t, "@numpy")  # raw arrays are constants
    t[0] = 5.0
    assert z.array[0] == 0.0
    assert not z.requires_grad


def test_copy_supports_double_backprop():
    pytest.importorskip("torch")
    x = Variable(np.array([1.0, 2.0]))
    y = F.copy(x, "@torch:cpu")
    z = F.sum(y * y * y)
    (gx,) = agnograd.grad([z], [x], enable_double_backprop=True)
    assert isinstance(gx.array, np.ndarray)
    np.testing.assert_allclose(gx.array, [3.0, 12.0])
    F.sum(gx).backward()
    np.testing.assert_allclose(x.grad, [6.0, 12.0])


def test_copy_in_define_then_run():
    torch = pytest.importorskip("torch")
    x = Variable(np.array([1.0, 2.0], dtype=np.float32))
    with agnograd.auto_forward(False):
        y = F.copy(x, "@torch:cpu")
        z = F.sum(y * y)
    assert y.array is None
    assert y.dtype == torch.float32
    z.forward()
    assert isinstance(y.array, torch.Tensor)
    z.backward()
    np.testing.assert_allclose(x.grad, [2.0, 4.0])


def test_mixed_devices_are_an_error():
    a = Variable(xs.ones(2, device=xs.Device("device1")))
    b = Variable(xs.ones(2, device=xs.Device("device2")))
    with pytest.raises(ValueError) as info:  # noqa: PT011 - the library's words; the note is ours
        a + b
    assert any("in agnograd Add.forward" in note for note in info.value.__notes__)
    np.testing.assert_array_equal(host((a + F.copy(b, a.device)).array), [2.0, 2.0])


def test_mixed_libraries_point_to_copy():
    pytest.importorskip("torch")
    a = Variable(np.ones(2))
    b = Variable(get_device("@torch:cpu").send(np.ones(2)))
    with pytest.raises(TypeError, match=r"functions\.copy"):
        F.add(a, b)


# ---------------------------------------------------------------------------------
# addgrad and copydata across devices and libraries


def test_addgrad_across_devices_keeps_the_destination_device():
    # Explicit dtypes: device2's default float is float32, device1's is float64.
    d1, d2 = xs.Device("device1"), xs.Device("device2")
    a = Variable(xs.zeros(2, dtype=xs.float32, device=d1))
    b = Variable(
        xs.zeros(2, dtype=xs.float32, device=d2), grad=xs.ones(2, dtype=xs.float32, device=d2)
    )
    a.addgrad(b)
    assert a.grad.device == xs.Device("device1")
    a.addgrad(b)
    np.testing.assert_array_equal(host(a.grad), [2.0, 2.0])
    assert b.grad.device == xs.Device("device2")


def test_addgrad_and_copydata_across_libraries():
    torch = pytest.importorskip("torch")
    a = Variable(np.zeros(2, dtype=np.float32), grad=np.ones(2, dtype=np.float32))
    b = Variable(torch.zeros(2), grad=torch.full((2,), 2.0))
    a.addgrad(b)
    assert isinstance(a.grad, np.ndarray)
    np.testing.assert_array_equal(a.grad, [3.0, 3.0])
    b.grad[0] = 10.0  # the source gradient is not aliased
    np.testing.assert_array_equal(a.grad, [3.0, 3.0])
    buffer = a.array
    a.copydata(Variable(torch.tensor([4.0, 5.0])))
    assert a.array is buffer  # NumPy: copied in place
    np.testing.assert_array_equal(buffer, [4.0, 5.0])
    c = Variable(xs.zeros(2, device=xs.Device("device1")))
    c.copydata(Variable(np.array([1.0, 2.0])))
    assert c.device.name == "@array_api_strict:device1"
    np.testing.assert_array_equal(host(c.array), [1.0, 2.0])


# ---------------------------------------------------------------------------------
# JAX with two CPU devices: a fresh interpreter, because the device count is fixed
# when JAX is first imported.

_JAX_TWO_DEVICES = textwrap.dedent(
    """
    import numpy as np
    import jax
    assert len(jax.devices("cpu")) == 2, jax.devices()
    import agnograd, agnograd.functions as F
    from agnograd import Variable
    from agnograd.backends._device import get_device
    import agnograd.functions._transfer  # installs Variable.to_device and friends

    d0, d1 = get_device("@jax:cpu:0"), get_device("@jax:cpu:1")
    assert str(d1) == "@jax:cpu:1" and get_device(jax.devices()[1]) is d1
    assert get_device("@jax") is d0

    # Round trip, with the gradient.
    x = Variable(jax.numpy.asarray([1.0, 2.0, 3.0]), grad=jax.numpy.ones(3))
    x.to_device(d1)
    assert x.array.devices() == {jax.devices()[1]} and x.grad.devices() == {jax.devices()[1]}
    assert x.device is d1
    x.to_device("@jax:cpu:0")
    assert x.device is d0 and x.grad.devices() == {jax.devices()[0]}
    x.cleargrad()

    # Gradients land on the device of the data, through a cross-device copy.
    w = Variable(jax.device_put(jax.numpy.asarray([0.5, -1.0, 2.0]), jax.devices()[1]))
    y = F.copy(x, d1) * w
    assert y.device is d1
    F.sum(F.tanh(y)).backward()
    assert x.grad.devices() == {jax.devices()[0]}
    assert w.grad.devices() == {jax.devices()[1]}
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(
        np.asarray(x.grad), b * (1 - np.tanh(a * b) ** 2), rtol=1e-5, atol=1e-6
    )

    # A leaf moved after the forward gets its gradient where its data now is.
    v = Variable(jax.numpy.asarray([1.0, 2.0]))
    loss = F.sum(v * v)
    v.to_device(d1)
    loss.backward()
    assert v.grad.devices() == {jax.devices()[1]}, v.grad.devices()

    # Mixing devices is an error (arrays committed to two devices).
    try:
        F.add(x, w)
    except ValueError as error:
        assert "device" in str(error)
    else:
        raise AssertionError("adding arrays on cpu:0 and cpu:1 did not fail")

    # cpu:1 is host memory too: NumPy views its arrays without a copy.
    n = w.view.numpy
    assert n.__array_interface__["data"][0] == w.array.unsafe_buffer_pointer()
    np.testing.assert_array_equal(n, [0.5, -1.0, 2.0])
    print("OK")
    """
)


def test_jax_with_two_cpu_devices_in_a_subprocess():
    jax = pytest.importorskip("jax")
    if jax.default_backend() == "cpu" and len(jax.devices("cpu")) == 2:
        # This process has them already (tests/conftest.py sets the flag before JAX
        # is imported): the same script runs here, without a new interpreter.
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(_JAX_TWO_DEVICES, "<two JAX devices>", "exec"), {})
        assert out.getvalue().strip().endswith("OK")
        return
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    result = subprocess.run(
        [sys.executable, "-c", _JAX_TWO_DEVICES],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("OK")


# ---------------------------------------------------------------------------------
# GPUs (skipped cleanly without one)


@pytest.mark.gpu
@pytest.mark.skipif(not _torch_cuda(), reason="torch.cuda.is_available() is False")
def test_torch_cuda_round_trip_and_gradients():
    import torch

    x = Variable(torch.tensor([1.0, 2.0]), grad=torch.ones(2))
    x.to_gpu()
    assert x.device.name == "@torch:cuda:0"
    assert x.device.is_gpu
    assert x.grad.device.type == "cuda"
    x.to_cpu()
    assert x.device.name == "@torch:cpu"
    x.cleargrad()
    y = F.copy(x, "@torch:cuda:0")
    F.sum(y * y).backward()
    assert x.grad.device.type == "cpu"
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    # A Python number reaches torch as a 0-d CPU tensor, which it takes with CUDA's.
    x.cleargrad()
    w = F.copy(x, "@torch:cuda:0") * 0.5 / 4.0 - 1.0
    assert w.creator_node.inputs[0].creator_node._operand.device.type == "cpu"
    F.sum(w).backward()
    np.testing.assert_array_equal(w.array.cpu().numpy(), [-0.875, -0.75])
    np.testing.assert_array_equal(x.grad.numpy(), [0.125, 0.125])
    z = F.copy(y, "@numpy")  # across devices and libraries
    assert isinstance(z.array, np.ndarray)


@pytest.mark.gpu
@pytest.mark.skipif(not _cupy_gpu(), reason="cupy.is_available() is False")
def test_cupy_round_trip_and_gradients():
    import cupy

    x = Variable(np.array([1.0, 2.0]), grad=np.ones(2))
    x.to_gpu()
    assert x.device.name == "@cupy:0"
    assert isinstance(x.grad, cupy.ndarray)
    x.to_cpu()
    assert isinstance(x.array, np.ndarray)  # CuPy has no CPU device: NumPy
    x.cleargrad()
    y = F.copy(x, "@cupy:0")
    F.sum(y * y).backward()
    assert isinstance(x.grad, np.ndarray)
    np.testing.assert_allclose(x.grad, [2.0, 4.0])


def test_to_device_of_a_name_no_library_knows_says_why_each_refused() -> None:
    torch = pytest.importorskip("torch")
    x = Variable(torch.ones(2))
    with pytest.raises(ValueError, match=r"to_device: 'nonsense' is neither a device of torch"):
        (x * 2).to_device("nonsense")
    with pytest.raises(ValueError, match=r"to_device: 'nonsense' is neither a device of torch"):
        x.to_device("nonsense")


def test_a_sharded_jax_array_gets_its_gradient():
    # A leaf's gradient is checked against its data's device as array_api_compat
    # reports it, which a JAX array sharded over devices has too.
    jax = pytest.importorskip("jax")
    if len(jax.devices("cpu")) < 2:
        pytest.skip("JAX has one CPU device (XLA_FLAGS was set after jax was imported)")
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices("cpu")[:2]), ("i",))
    a = jax.device_put(jax.numpy.arange(4.0), NamedSharding(mesh, PartitionSpec("i")))
    x = Variable(a)
    F.sum(x * x).backward()
    np.testing.assert_array_equal(np.asarray(x.grad), [0.0, 2.0, 4.0, 6.0])
