"""Zero-copy views between libraries (DLPack): ``view``, ``Variable.view``,
``Variable.to_chx`` / ``from_chx``.

Sharing is shown twice over: the buffers have the same address, and a value
written through one array is read through the other. Where a copy is unavoidable
the conversion raises ``BufferError`` naming the cause, or copies with a
``CopyWarning`` when ``allow_copy=True``; it never copies silently.
"""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.backends._backend import adapter_for
from agnograd.backends._device import CopyWarning, get_device, view

LIBRARIES = ["numpy", "torch", "jax", "array_api_strict"]
DTYPES = ["float32", "float64", "int32", "int64", "bool"]
WRITABLE = {"numpy", "torch", "array_api_strict"}  # JAX arrays are immutable


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _jax_x64() -> bool:
    import jax

    return bool(jax.config.jax_enable_x64)


def aligned(values: list[object], dtype: str) -> np.ndarray:
    """A NumPy array whose buffer starts on a 64-byte boundary (JAX imports no other)."""
    data = np.asarray(values, dtype=dtype)
    raw = np.empty(data.nbytes + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    out = raw[start : start + data.nbytes].view(dtype)
    out[...] = data
    return out


def make(library: str, values: list[object], dtype: str) -> object:
    """An array of ``library`` holding ``values``, in a buffer aligned to 64 bytes."""
    base = aligned(values, dtype)
    if library == "numpy":
        return base
    if library == "torch":
        import torch

        return torch.from_numpy(base)
    if library == "jax":
        import jax.numpy as jnp

        return jnp.asarray(base)  # JAX copies into its own (aligned) buffer
    import array_api_strict

    return array_api_strict.from_dlpack(base)


def address(array: object) -> int:
    address = adapter_for(array).get_data_pointer(array)
    assert address is not None
    return address


def first(array: object) -> object:
    return np.from_dlpack(array).reshape(-1)[0].item()


def put_first(array: object, value: object) -> None:
    if type(array).__module__.startswith("array_api_strict"):
        import array_api_strict

        array[0] = array_api_strict.asarray(value, dtype=array.dtype)
    else:
        array[0] = value


def _values(dtype: str) -> tuple[list[object], object]:
    if dtype == "bool":
        return [True, False, True, False], False
    return [1, 2, 3, 4], 7


PAIRS = [(s, d) for s in LIBRARIES for d in LIBRARIES if s != d]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=[f"{s}->{d}" for s, d in PAIRS])
def test_views_share_memory(src, dst, dtype):
    for name in (src, dst):
        pytest.importorskip(name)
    values, new = _values(dtype)
    a = make(src, values, dtype)
    if dst == "jax" and dtype.endswith("64") and not _jax_x64():
        # JAX without x64 holds no 64-bit types: a view is impossible, and says why.
        with pytest.raises(BufferError, match="jax_enable_x64"):
            view(a, dst)
        return
    b = view(a, dst)
    assert get_device(b).backend == dst
    assert address(b) == address(a)
    assert np.from_dlpack(b).tolist() == np.from_dlpack(a).tolist()
    # Written through one, read through the other, in each direction possible.
    if src in WRITABLE:
        put_first(a, new)
        assert first(b) == new
    if dst in WRITABLE and (src != "jax" or dst == "torch"):
        # torch ignores DLPack's read-only flag, so it can even write into JAX's
        # buffer: that shows the sharing from JAX's side (do not do it otherwise).
        put_first(b, values[1])
        assert first(a) == values[1]
    if src == "jax" and dst == "numpy":
        assert not b.flags.writeable  # NumPy keeps JAX's read-only flag


def test_view_into_the_same_library_is_the_array_itself():
    a = np.ones(3)
    assert view(a, "numpy") is a
    assert view(a, "@numpy") is a


def test_view_onto_another_device_of_the_same_host_memory():
    xs = pytest.importorskip("array_api_strict")
    a = make("array_api_strict", [1.0, 2.0], "float64")
    b = view(a, "@array_api_strict:device1")
    assert b.device == xs.Device("device1")
    a[0] = 5.0
    assert float(b[0]) == 5.0


# ---------------------------------------------------------------------------------
# Variables


def test_to_chx_converts_data_and_grad_in_place_with_shared_memory():
    torch = pytest.importorskip("torch")
    data, grad = aligned([1.0, 2.0], "float32"), aligned([0.5, 0.5], "float32")
    x = Variable(data, grad=grad, name="x")
    assert x.to_chx("torch") is x
    assert isinstance(x.array, torch.Tensor)
    assert isinstance(x.grad, torch.Tensor)
    assert x.device.name == "@torch:cpu"
    x.array[0] = 10.0
    x.grad[1] = 3.0
    assert data[0] == 10.0
    assert grad[1] == 3.0
    x.to_chx("@jax")  # a second hop; from_chx still goes back to NumPy
    assert x.device.backend == "jax"
    x.from_chx()
    assert isinstance(x.array, np.ndarray)
    assert address(x.array) == address(data)
    assert address(x.grad) == address(grad)
    assert x.from_chx() is x  # nothing recorded any more: a no-op (Chainer)


def test_to_chx_back_to_the_origin_forgets_it():
    pytest.importorskip("torch")
    x = Variable(aligned([1.0], "float32"))
    x.to_chx("torch").to_chx("numpy")
    assert isinstance(x.array, np.ndarray)
    x.from_chx()
    assert isinstance(x.array, np.ndarray)


def test_view_property_leaves_the_variable_alone():
    torch = pytest.importorskip("torch")
    a = aligned([1.0, 2.0, 3.0], "float32")
    x = Variable(a)
    t = x.view.torch
    assert isinstance(t, torch.Tensor)
    assert x.array is a
    t[2] = -1.0
    assert a[2] == -1.0
    assert x.view["@torch:cpu"].data_ptr() == address(a)
    assert x.view("numpy") is a
    with pytest.raises(AttributeError, match="no library 'nosuchlib'"):
        x.view.nosuchlib  # noqa: B018
    assert "torch" in dir(x.view)


def test_gradients_of_a_converted_leaf_land_on_its_new_library():
    torch = pytest.importorskip("torch")
    import agnograd.functions as F

    x = Variable(aligned([1.0, 2.0], "float32"))
    loss = F.sum(x * x)
    x.to_chx("torch")
    loss.backward()
    assert isinstance(x.grad, torch.Tensor)
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


# ---------------------------------------------------------------------------------
# Where a copy is unavoidable: an error, or a warned copy when allowed


def _read_only() -> np.ndarray:
    a = aligned([1.0, 2.0, 3.0], "float32")
    a.flags.writeable = False
    return a


def _negative_strides() -> np.ndarray:
    return aligned([1.0, 2.0, 3.0], "float32")[::-1]


def _requires_grad() -> object:
    import torch

    return torch.ones(3, requires_grad=True)


def _misaligned() -> np.ndarray:
    return aligned([0.0, 1.0, 2.0, 3.0], "float32")[1:]  # 4 bytes past a 64-byte boundary


def _big_endian() -> np.ndarray:
    return np.arange(3, dtype=">f4")


def _lazy() -> object:
    import dask.array as da

    return da.ones(3, chunks=2)


UNAVOIDABLE = [
    ("read-only", _read_only, "torch", "read-only", "numpy"),
    ("read-only-jax", _read_only, "jax", "read-only", "numpy"),
    ("negative-strides", _negative_strides, "torch", "negative strides", "numpy"),
    ("requires-grad", _requires_grad, "numpy", "requires grad", "torch"),
    ("misaligned", _misaligned, "jax", "64 bytes", "numpy"),
    ("byte-order", _big_endian, "torch", "byte order", "numpy"),
    ("lazy-dask", _lazy, "numpy", "not memory buffers", "dask"),
]


@pytest.mark.parametrize(
    ("make_array", "target", "reason", "needs"),
    [case[1:] for case in UNAVOIDABLE],
    ids=[case[0] for case in UNAVOIDABLE],
)
def test_unavoidable_copies_raise_or_warn(make_array, target, reason, needs):
    pytest.importorskip(needs)
    pytest.importorskip(target)
    array = make_array()
    with pytest.raises(BufferError, match=f"without a copy: .*{reason}.*allow_copy=True"):
        view(array, target)
    with pytest.warns(CopyWarning, match=reason):
        copied = view(array, target, allow_copy=True)
    assert get_device(copied).backend == target
    expected = np.asarray(array.detach() if hasattr(array, "detach") else array)
    np.testing.assert_array_equal(np.from_dlpack(copied), expected)


def test_a_variable_refuses_to_convert_without_a_copy_and_stays_as_it_was():
    pytest.importorskip("torch")
    a = _read_only()
    x = Variable(a)
    with pytest.raises(BufferError, match="read-only"):
        x.to_chx("torch")
    assert x.array is a
    with pytest.warns(CopyWarning):
        x.to_chx("torch", allow_copy=True)
    assert x.device.name == "@torch:cpu"


def test_different_physical_devices_cannot_share(monkeypatch):
    pytest.importorskip("torch")
    target = get_device("@torch:cpu")
    monkeypatch.setattr(target, "_physical", (2, 0))  # pretend torch's device is a GPU
    with pytest.raises(BufferError, match="different physical devices"):
        view(aligned([1.0], "float32"), target)


def test_empty_arrays_convert_without_complaint():
    pytest.importorskip("jax")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = view(np.zeros((0, 3), dtype=np.float32), "jax")
    assert out.shape == (0, 3)


@pytest.mark.skipif(not _installed("jax"), reason="jax is not installed")
def test_jax_views_of_torch_share_memory_in_both_directions():
    import jax.numpy as jnp
    import torch

    t = torch.arange(4.0)
    j = view(t, "jax")
    t[0] = 42.0
    assert float(j[0]) == 42.0
    back = view(j, "torch")
    assert back.data_ptr() == t.data_ptr()
    assert isinstance(j, type(jnp.zeros(1)))


@pytest.mark.skipif(not _installed("torch"), reason="torch not installed")
@pytest.mark.parametrize("target", ["@numpy", "@array_api_strict"])
@pytest.mark.parametrize(
    "move",
    [
        lambda x, target: x.to_device(target),
        lambda x, target: F.copy(x, target),
        lambda x, target: agnograd.namespace(get_device(target).xp).asarray(x),
    ],
    ids=["to_device", "copy", "asarray"],
)
def test_a_dtype_the_importer_lacks_is_named(move, target):
    # NumPy's DLPack import says only "Unsupported dtype in DLTensor".
    import torch

    x = Variable(torch.ones(2, dtype=torch.bfloat16), requires_grad=False)
    library = target.removeprefix("@")
    with pytest.raises(
        TypeError, match=rf"\(\(2,\), bfloat16\).*{library} has no bfloat16.*astype"
    ):
        move(x, target)
    with pytest.raises(TypeError, match=r"NumPy has no bfloat16 dtype.*astype"):
        np.asarray(x)
    half = Variable(torch.ones(2, dtype=torch.float16), requires_grad=False)
    assert np.asarray(half).dtype == np.float16  # a dtype NumPy has moves as before
