"""Adapters: discovery through entry points, ownership without imports, the hooks
and their standard-based defaults, and a third-party adapter installed for real."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _session import computed_once

from agnograd import Adapter, Variable
from agnograd.backends._backend import (
    adapter_for,
    adapter_named,
    adapter_names,
    adapters,
    fallback_adapter,
    installed_backends,
    register_adapter,
    scatter_add_flat,
)
from agnograd.backends._device import get_device

BUILT_IN = ["numpy", "torch", "jax", "cupy", "dask", "array_api_strict"]
PLUGIN = Path(__file__).resolve().parent / "fake_adapter_pkg"


def test_every_built_in_adapter_is_registered_as_an_entry_point():
    assert set(BUILT_IN) <= set(adapter_names())
    for name in BUILT_IN:
        adapter = adapter_named(name)
        assert isinstance(adapter, Adapter)
        assert adapter.name == name
    assert "numpy" in installed_backends()


def test_loading_every_adapter_imports_no_array_library():
    probe = textwrap.dedent(
        """
        import json, sys
        import numpy as np
        from agnograd.backends._backend import _adapters, adapter_for
        from agnograd.backends._device import get_device
        names = [a.name for a in _adapters()]
        assert adapter_for(np.ones(1)).name == "numpy"
        assert str(get_device("@numpy")) == "@numpy"
        print(json.dumps([names, sorted({m.partition(".")[0] for m in sys.modules})]))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    names, modules = json.loads(result.stdout.splitlines()[-1])
    assert set(BUILT_IN) <= set(names)
    forbidden = {"torch", "jax", "jaxlib", "cupy", "dask", "array_api_strict"}
    assert not forbidden & set(modules), sorted(forbidden & set(modules))


def _arrays() -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = [("numpy", np.ones(2))]
    if importlib.util.find_spec("torch"):
        import torch

        out.append(("torch", torch.ones(2)))
    if importlib.util.find_spec("jax"):
        import jax.numpy as jnp

        out.append(("jax", jnp.ones(2)))
    if importlib.util.find_spec("array_api_strict"):
        import array_api_strict as xs

        out.append(("array_api_strict", xs.ones(2)))
    if importlib.util.find_spec("dask"):
        import dask.array as da

        out.append(("dask", da.ones(2)))
    return out


@pytest.mark.parametrize(("name", "array"), _arrays(), ids=[n for n, _ in _arrays()])
def test_ownership_and_devices_of_each_library(name, array):
    adapter = adapter_for(array)
    assert adapter.name == name
    assert adapter.owns(type(array))
    assert sum(a.owns(type(array)) for a in map(adapter_named, BUILT_IN)) == 1
    device = get_device(array)
    assert device.backend == name
    assert device.native == adapter.get_device_of(array)
    assert adapter.get_namespace() is get_device(array).xp
    assert device.physical == (1, 0)
    native = adapter.get_device_of(array)
    if not isinstance(native, str):  # NumPy and Dask name their device with a string
        assert adapter.owns_device(native)


@pytest.mark.parametrize(("name", "array"), _arrays(), ids=[n for n, _ in _arrays()])
def test_scatter_add_accumulates_repeats_on_every_backend(name, array):
    xp = get_device(array).xp
    dst = xp.zeros(4, dtype=xp.float32)
    positions = xp.asarray([1, 3, 1])
    values = xp.asarray([1.0, 2.0, 5.0], dtype=xp.float32)
    out = scatter_add_flat(dst, positions, values)
    assert adapter_for(out).name == name  # dask stays dask (and lazy)
    if name == "dask":
        out = out.compute()
    np.testing.assert_array_equal(np.asarray(out), [0.0, 6.0, 0.0, 2.0])


def test_an_adapter_with_only_a_name_uses_the_standard():
    xs = pytest.importorskip("array_api_strict")
    bare = Adapter(name="strict_again", modules=("array_api_strict",))  # not registered
    assert bare.get_namespace() is xs
    d1 = xs.Device("device1")
    assert d1 in bare.get_devices()
    assert bare.get_device_name(d1) == "device1"
    assert bare.find_device("device2") == xs.Device("device2")
    assert bare.find_device("") == xs.Device("CPU_DEVICE")
    with pytest.raises(ValueError, match="no device called 'device9'"):
        bare.find_device("device9")
    a = xs.asarray([1.0, 2.0])
    assert bare.get_device_of(a) == xs.Device("CPU_DEVICE")
    assert bare.move(a, d1).device == d1
    assert bare.get_dlpack_device(d1) == (1, 0)
    b = bare.import_dlpack(np.arange(3.0), d1, False)
    assert b.device == d1
    assert bare.get_data_pointer(b) == bare.get_data_pointer(b[0:])
    assert bare.get_view_problem(a) is None
    assert float(bare.copy_for_export(a)[1]) == 2.0
    with bare.use(d1):
        pass


def test_register_adapter_adds_a_library_for_this_process(scratch_registry):
    assert scratch_registry is register_adapter  # forgotten after the test
    register_adapter(Adapter(name="test_adapters_lib", modules=("test_adapters_lib",)))
    assert "test_adapters_lib" in adapter_names()
    assert "test_adapters_lib" not in installed_backends()  # its library cannot be found
    with pytest.raises(ValueError, match="'test_adapters_lib' is registered but its library"):
        get_device("@test_adapters_lib")
    owned = type("Array", (), {"__module__": "test_adapters_lib.core"})()
    assert adapter_for(owned).name == "test_adapters_lib"


# ---------------------------------------------------------------------------------
# The registry: one list of backends, and what it says about each


def test_the_registry_lists_each_backend_once_in_order(scratch_registry):
    assert [a.name for a in adapters()][: len(BUILT_IN)] == [
        "numpy",
        "array_api_strict",
        "torch",
        "jax",
        "cupy",
        "dask",
    ]
    assert adapter_names() == [a.name for a in adapters()]
    again = Adapter(name="array_api_strict", modules=("array_api_strict",), order=1)
    scratch_registry(again)
    assert adapters()[0] is again  # the last registered wins, at its own place
    assert adapter_names().count("array_api_strict") == 1


def test_why_unusable(scratch_registry):
    assert adapter_named("numpy").why_unusable() is None
    missing = Adapter(name="missing_lib", modules=("surely_not_an_installed_lib",))
    assert not missing.is_installed()
    assert missing.why_unusable() == "not installed"
    no_gpu = Adapter(name="no_gpu_lib", modules=("numpy",), unusable=lambda: "no GPU here")
    assert no_gpu.is_installed()
    assert no_gpu.why_unusable() == "no GPU here"

    def broken() -> object:
        raise ImportError("libfoo.so: no such file")

    bad = Adapter(name="bad_lib", modules=("numpy",), namespace=broken)
    assert bad.why_unusable() == "cannot import (ImportError: libfoo.so: no such file)"


def test_host_and_gpu_capabilities():
    numpy_adapter = adapter_named("numpy")
    assert numpy_adapter.host_device() == "cpu"
    assert numpy_adapter.gpu_devices() == []
    assert numpy_adapter.gpu_device() is None
    assert numpy_adapter.representative_devices() == ["cpu"]
    xs = pytest.importorskip("array_api_strict")
    strict = adapter_named("array_api_strict")
    assert strict.host_device() == xs.Device("CPU_DEVICE")  # the default, of several
    assert strict.representative_devices() == [xs.Device("CPU_DEVICE")]
    torch = pytest.importorskip("torch")
    torch_adapter = adapter_named("torch")
    assert torch_adapter.host_device() == torch.device("cpu")
    expected = [torch.device("cpu")]
    if torch.cuda.is_available():
        expected.append(torch.device("cuda", torch.cuda.current_device()))
    assert torch_adapter.representative_devices() == expected


def test_fallbacks_come_from_the_registry(scratch_registry):
    assert fallback_adapter("cpu").name == "numpy"
    assert fallback_adapter("gpu").name == "cupy"  # declared, installed or not
    assert fallback_adapter("tpu") is None
    host = Adapter(name="host_lib", modules=("numpy",), fallback_for=("cpu",), order=5)
    scratch_registry(host)
    assert fallback_adapter("cpu") is host
    ghost = Adapter(name="ghost", modules=("surely_not_an_installed_lib",), order=1)
    scratch_registry(dataclasses.replace(ghost, fallback_for=("cpu",)))
    assert fallback_adapter("cpu") is host  # an installed library comes first


class _GpuArray(np.ndarray):
    """A toy GPU library's array: NumPy memory that says it is on a GPU."""

    __module__ = "fake_gpu_lib"


def test_to_gpu_and_to_cpu_go_to_the_registrys_fallbacks(scratch_registry, tmp_path, monkeypatch):
    # A library without a GPU (NumPy) moves to the adapter that declares
    # fallback_for=("gpu",), whatever its name, and back to the "cpu" fallback.
    (tmp_path / "fake_gpu_lib.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    scratch_registry(
        Adapter(
            name="fake_gpu",
            modules=("fake_gpu_lib",),
            namespace=lambda: get_device("@numpy").xp,
            devices=lambda: ["gpu0", "gpu1"],
            default_device=lambda: "gpu0",
            device_of=lambda array: "gpu0",
            dlpack_device=lambda device: (2, int(device[-1])),
            from_dlpack=lambda obj, device, copy: np.from_dlpack(obj, copy=copy).view(_GpuArray),
            fallback_for=("gpu",),
            order=1,
        )
    )
    x = Variable(np.array([1.0, 2.0]), grad=np.ones(2))
    with pytest.raises(ValueError, match="fake_gpu has no GPU number 7; its GPUs are 0, 1"):
        x.to_gpu(7)
    assert x.to_gpu() is x
    assert x.device.name == "@fake_gpu:gpu0"
    assert x.device.is_gpu
    assert type(x.array) is _GpuArray
    assert type(x.grad) is _GpuArray
    x.to_cpu()  # the toy library has no host device: NumPy's
    assert x.device.name == "@numpy"
    assert type(x.array) is np.ndarray


# ---------------------------------------------------------------------------------
# A third-party adapter, installed with pip and discovered in a fresh interpreter

_DISCOVERY = textwrap.dedent(
    """
    import sys
    import numpy as np
    import agnograd, agnograd.functions as F
    from agnograd import Variable
    from agnograd.backends._backend import adapter_for, adapter_names, installed_backends
    from agnograd.backends._device import get_device, view
    import agnograd.functions._transfer  # Variable.to_device, F.copy

    assert "tinylib" in adapter_names() and "tinylib" in installed_backends()
    assert "tinylib" not in sys.modules  # found, not imported

    import tinylib
    a = tinylib.asarray([1.0, 2.0, 3.0])
    assert adapter_for(a).name == "tinylib"
    device = get_device("@tinylib")
    assert str(device) == "@tinylib" and get_device(a) is device

    # Its arrays are differentiable like any other.
    x = Variable(a)
    F.sum(x * x).backward()
    assert isinstance(x.grad, np.ndarray)
    np.testing.assert_array_equal(x.grad, [2.0, 4.0, 6.0])

    # Moves and views go through DLPack, without the plug-in knowing other libraries.
    y = Variable(np.array([1.0, 2.0])).to_device("@tinylib")
    assert type(y.array) is tinylib.Array and y.device is device
    v = view(a, "numpy")
    a[0] = 9.0
    assert v[0] == 9.0
    z = agnograd.functions._transfer.copy(Variable(np.array([3.0])), "@tinylib")
    assert type(z.array) is tinylib.Array

    # A broken plug-in does not break agnograd, and errors say what happened.
    try:
        get_device("@broken")
    except ValueError as error:
        assert "failed to load" in str(error) and "tinylib" in str(error), error
    else:
        raise AssertionError("@broken resolved")
    print("OK")
    """
)


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a Python that has the plug-in package pip-installed."""
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("building the plug-in needs setuptools")
    target = computed_once(tmp_path_factory, "plugin", lambda: _install(tmp_path_factory))
    path = os.pathsep.join(filter(None, [target, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _install(tmp_path_factory: pytest.TempPathFactory) -> str:
    """pip-installs the plug-in package into a new directory, which it returns."""
    tmp_path = tmp_path_factory.mktemp("plugin")
    source, target = tmp_path / "src", tmp_path / "site"
    # Built from a copy: pip builds in the source tree and would leave files there.
    shutil.copytree(
        PLUGIN, source, ignore=shutil.ignore_patterns("conftest.py", "build", "*.egg-info")
    )
    install = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"),
            *("--no-build-isolation", "--no-index", "--target", str(target), str(source)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    assert list(target.glob("agnograd_tinylib-*.dist-info"))
    return str(target)


def _run(env: dict[str, str], *args: str, cwd: Path | None = None) -> str:
    result = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.slow
def test_third_party_adapter_is_discovered_after_pip_install(plugin_env):
    assert _run(plugin_env, "-c", _DISCOVERY).strip().endswith("OK")


_PROBE = """
def test_probe(xp, device):
    assert float(xp.sum(xp.asarray([1.0, 2.0], device=device))) == 3.0
"""


@pytest.mark.slow
def test_a_plugin_is_in_the_demo_the_fixtures_and_the_conformance_report(plugin_env, tmp_path):
    # The demo: a row of its own, checked like the built-in libraries.
    out = _run(plugin_env, "-m", "agnograd", "demo", "--backend", "tinylib")
    (row,) = [line for line in out.splitlines() if line.startswith("tinylib ")]
    assert " ok (max error " in row, out
    assert "tinylib" in _run(plugin_env, "-m", "agnograd", "demo", "--help")

    # The pytest plugin: the xp/device fixtures run on it, by default and by name.
    (tmp_path / "test_probe.py").write_text(_PROBE)
    pytest_args = ("-m", "pytest", "-q", "-p", "no:cacheprovider")
    out = _run(plugin_env, *pytest_args, "--collect-only", cwd=tmp_path)
    assert "test_probe.py::test_probe[tinylib]" in out, out
    out = _run(plugin_env, *pytest_args, "-rA", "--agnograd-backend", "tinylib", cwd=tmp_path)
    assert "PASSED test_probe.py::test_probe[tinylib]" in out, out

    # The conformance suite: among the backends of --backend all, and its report
    # names it and the version of the package that provides it.
    code = "from agnograd.conformance.__main__ import _targets; print(_targets(['all']))"
    assert "('tinylib', None)" in _run(plugin_env, "-c", code)
    reports = tmp_path / "reports"
    conformance = ("-m", "agnograd.conformance", "--backend", "tinylib", "--out", str(reports))
    _run(plugin_env, *conformance, "--function", "exp", "--check", "backward", cwd=tmp_path)
    report = (reports / "conformance-tinylib.md").read_text()
    assert report.startswith("# Conformance of agnograd on tinylib")
    assert "agnograd-tinylib 0.1.0" in report
