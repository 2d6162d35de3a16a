"""A ``chainer`` module made of agnograd's names, to run Chainer's own tests on agnograd.

Installed only by :func:`install` (which the runner,
:mod:`agnograd.conformance.chainer_tests`, calls inside the pytest process that runs
Chainer's tests); importing agnograd never creates ``sys.modules["chainer"]``.

The shim is a table: the agnograd objects each ``chainer`` module forwards
(``_forwards``), and the agnograd module a ``chainer`` module stands for
(:data:`DELEGATES`: ``chainer.functions.exp is agnograd.functions.exp``). A name
agnograd lacks is a :class:`Missing` placeholder: Chainer's test modules can name it
at import time (``class MulAdd(chainer.Function)``, ``F.arcsin`` in a parameter
list), and a test that calls it fails with ``NotImplementedError:
chainer.Function: agnograd has no counterpart``, which is what the runner
reports as the missing feature; the other tests of the file still run. Modules of
Chainer that agnograd has no counterpart of at all (``chainer.serializers``, ...)
exist and are empty (:data:`EMPTY`).

Chainer's test helpers (``chainer.testing``) are Chainer's own, loaded from the
checkout of the suite (``install(testing=...)``), never copied here.

What is more than a rename, and why (each is what Chainer itself does on a machine
without CUDA, ChainerX or iDeep, or a helper the test kit needs to report a result):

- ``chainerx``, ``chainer.backends.cuda``, ``chainer.backends.intel64``: CPU-only
  stand-ins saying "not available" exactly as Chainer's own modules do without those
  libraries (``is_available()`` false, dummy ``ndarray`` classes, ``cuda.cupy`` an
  inert object so ``xp is cuda.cupy`` is false). Chainer's test modules import them
  at the top; the runner deselects the GPU, ChainerX and iDeep tests.
- ``chainer.backend.CpuDevice()`` is agnograd's NumPy device with Chainer's
  ``supported_array_types``, and
  ``get_array_module`` / ``cuda.to_cpu`` the NumPy module / the identity on CPU
  arrays: Chainer's test kit compares every result through them.
- ``chainer.using_device(d)`` is ``agnograd.get_device(d).use()`` and
  ``chainer.get_array_types()`` is ``(numpy.ndarray,)``: ``BackendConfig`` enters
  the first around every backend-injected test, ``FunctionTestCase`` checks outputs
  with the second.
- ``chainer.utils.force_array``, ``_raise_from``, ``_format_array_props`` and
  ``size_of_shape``: small helpers of Chainer's test kit (making 0-d arrays of
  scalars before comparing, and formatting a failure's message).

Examples
--------
>>> import sys, agnograd
>>> from agnograd.conformance import chainer_shim
>>> chainer = chainer_shim.install()
>>> import chainer.functions as F
>>> chainer.Variable is agnograd.Variable, F.exp is agnograd.functions.exp
(True, True)
>>> chainer.Link()
Traceback (most recent call last):
...
NotImplementedError: chainer.Link: agnograd has no counterpart
>>> chainer_shim.uninstall()
>>> "chainer" in sys.modules
False
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy

import agnograd


class CpuDevice(agnograd.Device):
    """Chainer's ``CpuDevice()``: agnograd's NumPy device, with the one attribute of
    Chainer's device API that Chainer's test kit reads and agnograd's lacks
    (``FunctionTestCase`` checks every input and output against it)."""

    supported_array_types = (numpy.ndarray,)

    def __init__(self) -> None:
        numpy_device = agnograd.get_device("@numpy")
        super().__init__(numpy_device.adapter, numpy_device.native, numpy_device.local)


def _using_device(device: Any) -> Any:
    """Chainer's ``using_device(device)``: make ``device`` current in a ``with`` block."""
    return agnograd.get_device(device).use()


def _array_types() -> tuple[type, ...]:
    """Chainer's ``get_array_types()`` on a CPU-only machine."""
    return (numpy.ndarray,)


def _numpy_module(*arrays: Any) -> types.ModuleType:
    """Chainer's ``get_array_module`` on a CPU-only machine: NumPy."""
    return numpy


def _to_cpu(array: Any, stream: Any = None) -> Any:
    """Chainer's ``cuda.to_cpu`` where every array is already on the CPU."""
    if isinstance(array, list | tuple):
        return type(array)(_to_cpu(a) for a in array)
    return array


def _no_gpu(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("CUDA is not available: agnograd's chainer shim runs Chainer's tests on CPU")


def _false(*args: Any, **kwargs: Any) -> bool:
    return False


def _force_array(x: Any, dtype: Any = None) -> Any:
    """Chainer's ``utils.force_array``: a 0-d array for a NumPy scalar, else ``x``."""
    if numpy.isscalar(x):
        return numpy.asarray(x, dtype=dtype)
    return x if dtype is None else x.astype(dtype, copy=False)


def _raise_from(exc_type: type[BaseException], message: str, orig_exc: BaseException) -> None:
    """Chainer's ``utils._raise_from``: ``exc_type`` with ``orig_exc`` named as its cause,
    in Chainer's words (the runner reads the cause from the ``(caused by)`` line)."""
    text = f"{message}\n\n(caused by)\n{type(orig_exc).__name__}: {orig_exc}\n"
    raise exc_type(text).with_traceback(orig_exc.__traceback__) from None


def _format_array_props(arrays: Iterable[Any]) -> str:
    """Chainer's ``utils._format_array_props``: shapes and dtypes of arrays, one a line."""
    return "\n".join(
        "  None" if a is None else f"  {type(a).__name__} shape={a.shape} dtype={a.dtype}"
        for a in arrays
    )


def _size_of_shape(shape: Iterable[int]) -> int:
    return math.prod(shape)


def _unavailable_class(name: str) -> type:
    """A class for ``isinstance`` tests that refuses to be made, as Chainer's own
    ``chainerx.ndarray`` and ``cuda.ndarray`` are when the library is missing."""

    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"{name} is not available: the chainer shim runs on CPU only")

    return type(name.rpartition(".")[2], (), {"__init__": refuse, "__module__": name})


class Missing(Exception):  # noqa: N818 - named for what it stands for
    """What the shim gives for a name agnograd lacks: a class that Chainer's test
    modules can still name, subclass or decorate with at import time, and that
    raises ``NotImplementedError`` naming the missing feature when called or
    instantiated (a test that needs it fails; the others of its file run). It is an
    exception type, so that ``pytest.raises(type_check.InvalidType)`` reports what
    agnograd raised instead."""

    missing = "chainer"

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{cls.missing}: agnograd has no counterpart")


def _missing(name: str) -> type[Missing]:
    return type(name.rpartition(".")[2], (Missing,), {"missing": name, "__module__": name})


class _ShimModule(types.ModuleType):
    """A ``chainer`` module of the shim: its forwarded names, then those of the agnograd
    module it stands for (``delegate``), then a :class:`Missing` for anything else."""

    _delegate: types.ModuleType | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        if self._delegate is not None and hasattr(self._delegate, name):
            return getattr(self._delegate, name)
        return _missing(f"{self.__name__}.{name}")


#: ``chainer`` modules that stand for an agnograd module: they forward all its names.
DELEGATES: dict[str, str] = {
    "chainer.functions": "agnograd.functions",
    "chainer.function_hooks": "agnograd.function_hooks",
    "chainer.computational_graph": "agnograd.computational_graph",
    "chainer.gradient_check": "agnograd.testing",
    "chainer.initializers": "agnograd.initializers",
    "chainer.utils.type_check": "agnograd.type_check",
}

#: Modules of Chainer that agnograd has no counterpart of: present (so that test files
#: importing them are collected) and empty.
EMPTY: tuple[str, ...] = (
    "chainer._backprop_utils",
    "chainer.basic_math",
    "chainer.serializers",
    "chainer.training",
    "chainer.types",
    "chainer.utils.argument",
)


def _forwards() -> dict[str, dict[str, Any]]:
    """Each shim module and the objects it holds (built when installed)."""
    core = {
        "Variable": agnograd.Variable,
        "Parameter": agnograd.Parameter,
        "as_variable": agnograd.as_variable,
        "as_array": agnograd.as_array,
    }
    graph = {"FunctionNode": agnograd.FunctionNode, "grad": agnograd.grad}
    modes = {
        "no_backprop_mode": agnograd.no_backprop_mode,
        "force_backprop_mode": agnograd.force_backprop_mode,
    }
    configuration = {"config": agnograd.config, "using_config": agnograd.using_config}
    devices = {
        "Device": agnograd.Device,
        "get_device": agnograd.get_device,
        "using_device": _using_device,
    }
    trigonometric_nodes = {  # Chainer's class: the node of agnograd's function
        chainer: getattr(agnograd.functions, name).node
        for chainer, name in [
            ("Sin", "sin"),
            ("Cos", "cos"),
            ("Tan", "tan"),
            ("Arcsin", "asin"),
            ("Arccos", "acos"),
            ("Arctan", "atan"),
            ("Arctan2", "atan2"),
        ]
    }
    return {
        "chainer": {
            **core,
            **graph,
            **modes,
            **configuration,
            **devices,
            "backward": agnograd.backward,
            "Function": agnograd.Function,
            "set_debug": agnograd.set_debug,
            "is_debug": agnograd.is_debug,
            "FunctionHook": agnograd.FunctionHook,
            "get_array_types": _array_types,
        },
        "chainer.variable": {**core, "VariableNode": agnograd.VariableNode},
        "chainer.function_node": graph,
        "chainer.function_hook": {"FunctionHook": agnograd.FunctionHook},
        "chainer.function": {**modes, "Function": agnograd.Function},
        "chainer.configuration": configuration,
        "chainer.backend": {
            **devices,
            "CpuDevice": CpuDevice,
            "GpuDevice": _unavailable_class("chainer.backend.GpuDevice"),
            "ChainerxDevice": _unavailable_class("chainer.backend.ChainerxDevice"),
            "Intel64Device": _unavailable_class("chainer.backend.Intel64Device"),
            "get_device_from_array": agnograd.get_device,
            "get_array_module": _numpy_module,
        },
        "chainer.backends": {},
        "chainer.backends.cuda": {
            "available": False,
            "cudnn_enabled": False,
            # Chainer's own value without CuPy, "for `xp is cupy` to always work".
            "cupy": object(),
            "ndarray": _unavailable_class("cupy.ndarray"),
            "Device": _unavailable_class("cupy.cuda.Device"),
            "GpuDevice": _unavailable_class("chainer.backend.GpuDevice"),
            "check_cuda_available": _no_gpu,
            "to_gpu": _no_gpu,
            "to_cpu": _to_cpu,
            "get_array_module": _numpy_module,
            "get_device_from_array": agnograd.get_device,
            "should_use_cudnn": _false,
        },
        "chainer.backends.intel64": {
            "is_ideep_available": _false,
            "inputs_all_ready": _false,
            "ideep": None,
        },
        "chainer.utils": {
            "force_array": _force_array,
            "_raise_from": _raise_from,
            "_format_array_props": _format_array_props,
            "size_of_shape": _size_of_shape,
        },
        "chainerx": {
            "is_available": _false,
            "ndarray": _unavailable_class("chainerx.ndarray"),
        },
        # Chainer's node classes, by Chainer's names (agnograd names a node after the
        # standard's function: Asin for arcsin).
        "chainer.functions": trigonometric_nodes,
        "chainer.functions.math": {},
        "chainer.functions.math.trigonometric": trigonometric_nodes,
        "chainer.initializers": {"_get_initializer": agnograd.initializers.get_initializer},
    }


def _module(name: str, names: dict[str, Any], package: bool) -> types.ModuleType:
    module = _ShimModule(name, f"agnograd's chainer shim: {name} (agnograd.conformance).")
    module.__dict__.update(names)
    if name in DELEGATES:
        module._delegate = importlib.import_module(DELEGATES[name])
    if package:
        module.__path__ = []  # its submodules are the shim's only
    return module


def install(testing: str | Path | None = None) -> types.ModuleType:
    """Put the ``chainer`` shim (and a CPU-only ``chainerx``) in ``sys.modules``.

    Parameters
    ----------
    testing : path, optional
        The ``chainer/testing`` folder of a Chainer checkout: Chainer's test helpers,
        importable afterwards as ``chainer.testing`` (they need ``six``, ``mock`` and
        ``pkg_resources``).

    Returns
    -------
    module
        The shim's ``chainer`` module.

    Examples
    --------
    >>> import agnograd
    >>> from agnograd.conformance import chainer_shim
    >>> chainer = chainer_shim.install()
    >>> from chainer.backends import cuda
    >>> cuda.available, chainer.grad is agnograd.grad
    (False, True)
    >>> chainer_shim.uninstall()
    """
    if "chainer" in sys.modules and not getattr(sys.modules["chainer"], "_agnograd_shim", False):
        raise RuntimeError(
            "install: a real chainer module is already imported; run Chainer's tests through "
            "agnograd in a process that has not imported chainer"
        )
    forwards = _forwards()
    names = sorted({*forwards, *DELEGATES, *EMPTY})
    parents = {n.rpartition(".")[0] for n in names}
    modules = {name: _module(name, forwards.get(name, {}), name in parents) for name in names}
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    modules["chainer"]._agnograd_shim = True  # type: ignore[attr-defined]
    sys.modules.update(modules)
    if testing is not None:
        _load_testing(Path(testing), modules["chainer"])
    return modules["chainer"]


def _load_testing(folder: Path, chainer: types.ModuleType) -> None:
    """Import Chainer's ``chainer/testing`` package from ``folder`` as ``chainer.testing``."""
    init = folder / "__init__.py"
    if not init.is_file():
        raise FileNotFoundError(
            f"install: no Chainer test helpers at {folder} (expected chainer/testing/__init__.py "
            "of a chainer/chainer checkout)"
        )
    spec = importlib.util.spec_from_file_location(
        "chainer.testing", init, submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:  # pragma: no cover - a file location always has one
        raise ImportError(f"install: cannot import {init}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["chainer.testing"] = module
    chainer.testing = module  # type: ignore[attr-defined]
    try:
        spec.loader.exec_module(module)
    except ImportError as error:
        uninstall()
        raise ImportError(
            f"install: Chainer's test helpers at {folder} did not import ({error}); they need "
            "six, mock and pkg_resources: pip install six mock 'setuptools<81'"
        ) from error


def uninstall() -> None:
    """Remove the shim's modules (and any ``chainer.*`` module imported through it)."""
    shim = sys.modules.get("chainer")
    if shim is not None and not getattr(shim, "_agnograd_shim", False):
        return
    for name in [n for n in sys.modules if n in ("chainer", "chainerx") or n.startswith(_PREFIXES)]:
        del sys.modules[name]


_PREFIXES = ("chainer.", "chainerx.")

__all__ = ["DELEGATES", "EMPTY", "Missing", "install", "uninstall"]
