"""Moving Variables between devices and libraries; views; the differentiable copy.

``Variable.to_device``, ``to_cpu`` and ``to_gpu`` move data and gradient in place
(Chainer), ``to_chx``/``from_chx`` swap them for zero-copy views in another library
and back, ``Variable.view`` gives such a view without touching the Variable, and
:func:`copy` is the transfer that gradients flow through; the differentiable
namespace's ``from_dlpack`` and ``asarray`` of a Variable are that transfer with the
standard's ``device`` and ``copy`` semantics (:func:`from_dlpack`, :func:`asarray`).
``Variable``'s methods call these through the core's extension point, because they
build on the function-node machinery that itself builds on ``Variable``.
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Callable
from typing import Any

from agnograd.backends import _backend
from agnograd.backends._abstract import Abstract
from agnograd.backends._adapter import Adapter
from agnograd.backends._backend import backend_name, dtype_name, installed_backends
from agnograd.backends._device import Device, device_of, get_device, get_device_for, transfer, view
from agnograd.core import _extension, _versions
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable

# id(Variable) -> (weak reference, the Device it had before its first to_chx).
_origins: dict[int, tuple[weakref.ref[Variable], Device]] = {}


# ---------------------------------------------------------------------------------
# Variable methods


def device(self: Variable) -> Device | None:
    """``Variable.device``: the data's, or for a result of define-then-run not yet
    computed, where its data will be."""
    data = self._data
    if data is not None:
        return device_of(data)
    if self._node.creator_node is None:
        return None  # uninitialised
    return _extension.define_then_run.device_of_node(self._node)


def to_device(self: Variable, device: Any, /, *, stream: Any = None) -> Variable:
    """``Variable.to_device``: a leaf moves in place (Chainer); a function's output
    gives a new Variable, the differentiable :class:`Copy` (array API code)."""
    if self._node.creator_node is not None:
        here = _device_of_variable(self, "to_device")
        dst = get_device_for(device, here.adapter, "to_device")
        return self if dst == here else Copy(here, dst).apply((self,))[0]
    data = _data_of(self, "to_device")
    if data is None:
        get_device(device)  # still say what is wrong with the device
        return self
    dst = get_device_for(device, device_of(data).adapter, "to_device")
    if _is_on(self, dst):
        return self
    grad = self.grad
    new_data = transfer(data, dst, stream=stream)
    new_grad = None if grad is None else transfer(grad, dst, stream=stream)
    _assign(self, new_data, new_grad)
    return self


def to_cpu(self: Variable) -> Variable:
    """``Variable.to_cpu``."""
    data = _data_of(self, "to_cpu")
    if data is None:
        return self
    here = device_of(data)
    if here.is_cpu:
        return self
    adapter = here.adapter
    host = adapter.host_device()
    if host is not None:
        return to_device(self, Device(adapter, host, adapter.get_device_name(host)))
    fallback = _backend.fallback_adapter("cpu")
    if fallback is None:
        raise ValueError(
            f"Variable.to_cpu: {adapter.name} has no device in host memory, and no "
            "installed adapter declares fallback_for=('cpu',) to take its arrays"
        )
    return to_device(self, f"@{fallback.name}")


def to_gpu(self: Variable, device: Any = None) -> Variable:
    """``Variable.to_gpu``."""
    if device is not None and not isinstance(device, int):
        return to_device(self, device)
    data = _data_of(self, "to_gpu")
    if data is None:
        return self
    here = device_of(data)
    if device is None and here.is_gpu:
        return self
    adapter = here.adapter
    gpus = adapter.gpu_devices()
    if gpus:
        return to_device(self, _gpu(adapter, gpus, device))
    fallback = _backend.fallback_adapter("gpu")
    if fallback is None:
        raise ValueError(
            f"Variable.to_gpu: {adapter.name} has no GPU device, and no installed adapter "
            "declares fallback_for=('gpu',) to take its arrays"
        )
    try:
        get_device(f"@{fallback.name}")  # is it usable here? (says why not)
    except ValueError as error:
        raise ValueError(
            f"Variable.to_gpu: {adapter.name} has no GPU device, so the data go to "
            f"{fallback.title or fallback.name}, which is not usable here: {error}"
        ) from None
    return to_device(self, _gpu(fallback, fallback.gpu_devices(), device))


def _gpu(adapter: Adapter, gpus: list[tuple[int, Any]], index: int | None) -> Device:
    """GPU number ``index`` among ``gpus`` of ``adapter`` (``None``: its default GPU)."""
    native = adapter.gpu_device(index, gpus)
    if native is None:
        numbers = ", ".join(str(i) for i, _ in gpus) or "none"
        what = "GPU" if index is None else f"GPU number {index}"
        raise ValueError(f"Variable.to_gpu: {adapter.name} has no {what}; its GPUs are {numbers}")
    return Device(adapter, native, adapter.get_device_name(native))


def to_chx(self: Variable, target: Any, /, *, allow_copy: bool = False) -> Variable:
    """``Variable.to_chx``."""
    data = _data_of(self, "to_chx")
    if data is None:
        return self
    here = device_of(data)
    new_data = view(data, target, allow_copy=allow_copy)
    dst = device_of(new_data)
    if dst == here:
        return self
    _check_movable(self, "to_chx", dst)
    grad = self.grad
    new_grad = None if grad is None else view(grad, dst, allow_copy=allow_copy)
    record = _origins.get(id(self))
    if record is None or record[0]() is not self:
        _origins[id(self)] = (weakref.ref(self, _forget(id(self))), here)
    elif record[1] == dst:
        del _origins[id(self)]  # back where it started
    _assign(self, new_data, new_grad)
    return self


def _forget(key: int) -> Callable[[weakref.ref[Variable]], None]:
    # Drops the record when its Variable dies, before its id can be reused.
    def forget(_: weakref.ref[Variable]) -> None:
        _origins.pop(key, None)

    return forget


def from_chx(self: Variable, /, *, allow_copy: bool = False) -> Variable:
    """``Variable.from_chx``."""
    record = _origins.get(id(self))
    if record is None or record[0]() is not self:
        return self
    origin = record[1]
    data = self._data
    if data is not None:
        here = device_of(data)
        target: Any = origin if origin.physical == here.physical else origin.backend
        grad = self.grad
        new_data = view(data, target, allow_copy=allow_copy)
        new_grad = None if grad is None else view(grad, device_of(new_data), allow_copy=allow_copy)
        _check_movable(self, "from_chx", origin)
        _assign(self, new_data, new_grad)
    _origins.pop(id(self), None)
    return self


class ArrayViews:
    """``Variable.view``: the data as another library's array, sharing memory.

    ``x.view.torch``, ``x.view["@jax:cpu:1"]`` or ``x.view("torch",
    allow_copy=True)``; the Variable is not touched (Chainer's ``chx_array``,
    generalised to any library).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(np.zeros(3))
    >>> s = x.view.array_api_strict
    >>> x.array[1] = 4.0
    >>> float(s[1])
    4.0
    """

    __slots__ = ("_variable",)

    def __init__(self, variable: Variable) -> None:
        self._variable = variable

    def __call__(self, target: Any, /, *, allow_copy: bool = False) -> Any:
        data = self._variable._data
        if data is None:
            raise ValueError("Variable.view: the Variable holds no data (uninitialised)")
        return view(data, target, allow_copy=allow_copy)

    def __getitem__(self, target: Any) -> Any:
        return self(target)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in _backend.adapter_names():
            raise AttributeError(
                f"Variable.view has no library {name!r}; installed backends: "
                f"{', '.join(installed_backends())}"
            )
        return self(name)

    def __dir__(self) -> list[str]:
        return sorted({*object.__dir__(self), *installed_backends()})

    def __repr__(self) -> str:
        return f"<views of {self._variable._describe()} as {', '.join(installed_backends())}>"


# ---------------------------------------------------------------------------------
# addgrad and copydata across devices and libraries


def _addgrad(self: Variable, var: Variable) -> None:
    """addgrad between arrays of one library and device."""
    src = var.grad
    if src is None:
        return
    xp = _backend.raw_namespace(src)
    if self._data is None:
        self.array = xp.zeros_like(var._data)
    dst = self.grad
    # Never alias the source gradient: later in-place updates of one would leak
    # into the other.
    self.grad = xp.asarray(src, copy=True) if dst is None else dst + src


def _copydata(self: Variable, var: Variable) -> None:
    """copydata between arrays of one library and device (in place where it can)."""
    src, dst = var._data, self._data
    if src is None and dst is None:
        return
    if dst is None:
        self.array = _backend.raw_namespace(src).asarray(src, copy=True)
        return
    if src is None:
        var.array = _backend.raw_namespace(dst).asarray(dst, copy=True)
        return
    if tuple(src.shape) != tuple(dst.shape):
        raise ValueError(
            f"copydata: source shape {tuple(src.shape)} differs from destination shape "
            f"{tuple(dst.shape)}"
        )
    xp = _backend.raw_namespace(dst)
    if _backend.raw_namespace(src) is not xp:
        raise TypeError(
            f"copydata: source is a {_backend.backend_name(_backend.raw_namespace(src))} "
            f"array, destination a {_backend.backend_name(xp)} array"
        )
    try:
        dst[...] = xp.astype(src, dst.dtype)
        _versions.note_write(dst)  # what nodes kept of dst's memory is stale now
    except (TypeError, ValueError):
        # Immutable arrays (JAX): rebind to a fresh array instead.
        self.array = xp.astype(src, dst.dtype, copy=True)


def addgrad(self: Variable, var: Variable) -> None:
    """``Variable.addgrad``."""
    src, dst = var.grad, self._data
    if src is None or dst is None or _same_place(src, dst):
        _addgrad(self, var)
        return
    proxy = Variable._new(dst, False)
    proxy._grad_var = Variable._new(transfer(src, device_of(dst)), False)
    _addgrad(self, proxy)


def copydata(self: Variable, var: Variable) -> None:
    """``Variable.copydata``."""
    src, dst = var._data, self._data
    initialize = getattr(var, "initialize", None)  # an uninitialised Parameter
    if src is None and dst is not None and initialize is not None:
        # Chainer: it makes its data with its initializer, then that is copied
        initialize(tuple(dst.shape))
        src = var._data
    if src is None or dst is None or _same_place(src, dst):
        _copydata(self, var)
        return
    _copydata(self, Variable._new(transfer(src, device_of(dst)), False))


# ---------------------------------------------------------------------------------
# The differentiable transfer


class Copy(FunctionNode):
    """Transfer to another device or library; backward transfers the gradient back.

    ``copy`` as in the standard's ``from_dlpack``: ``True`` gives a fresh array,
    ``None`` shares the memory where the two libraries and devices can, ``False``
    shares it or raises ``BufferError``. The gradient always goes back as a fresh
    array.
    """

    linear = True  # forward mode: applied to the tangents

    def __init__(self, src: Device, dst: Device, copy: bool | None = True) -> None:
        self.src = src
        self.dst = dst
        self.copy = copy

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # Where the input is now: define-then-run may feed a graph's leaves with data
        # elsewhere than when it was built, and backward sends the gradient there.
        self.src = device_of(inputs[0])
        if self.copy is False:
            return (view(inputs[0], self.dst),)
        return (transfer(inputs[0], self.dst, copy=self.copy),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        (x,) = inputs
        # Define-then-run asks a deferred output's creator for the output's library:
        # unlike other functions, this one's output is not in its input's library.
        self.xp = self.dst.xp
        return ((tuple(x.shape), getattr(self.dst.xp, dtype_name(x.dtype))),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        if isinstance(gy, Variable):
            return Copy(self.dst, self.src).apply((gy,))
        return (transfer(gy, self.src, copy=True),)


def copy(x: Any, device: Any) -> Variable:
    """Copy ``x`` to ``device`` (any library), differentiably.

    The result is a fresh array on ``device``; in backward the gradient goes back to
    ``x``'s device and library.

    Parameters
    ----------
    x : Variable or array
        The input, of any installed backend.
    device : str, Device, device object or array
        Anything :func:`agnograd.get_device` accepts.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> x = agnograd.Variable(np.array([1.0, 2.0]))
    >>> y = F.copy(x, "@array_api_strict:device1")
    >>> y.device
    Device('@array_api_strict:device1')
    >>> F.sum(y * y).backward()
    >>> x.grad
    array([2., 4.])
    """
    here = _device_of_variable(x, "copy") if isinstance(x, Variable) else device_of(x)
    return Copy(here, get_device(device)).apply((x,))[0]


# ---------------------------------------------------------------------------------
# The namespace's from_dlpack and asarray of a Variable


def from_dlpack(
    raw_namespace: Any, x: Variable, /, *, device: Any = None, copy: bool | None = None
) -> Variable:
    """``from_dlpack`` of agnograd's namespace over ``raw_namespace``, for a Variable.

    A :class:`Copy` into the namespace's library, on ``device`` or else on ``x``'s
    physical device, so gradients flow back to ``x``; ``copy`` as in the standard
    (``None``: shared where the libraries can, ``False``: shared or ``BufferError``).

    Examples
    --------
    >>> import numpy as np, array_api_strict as xs, agnograd
    >>> x = agnograd.Variable(np.array([1.0, 2.0]))
    >>> y = agnograd.namespace(xs).from_dlpack(x * x)
    >>> type(y.array).__module__, y.creator.label
    ('array_api_strict._array_object', 'Copy')
    >>> agnograd.functions.sum(y).backward(); x.grad
    array([2., 4.])
    """
    here = _device_of_variable(x, "from_dlpack")
    dst = _destination(raw_namespace, here, device, "from_dlpack")
    if dst is None:
        raise BufferError(
            f"from_dlpack: {backend_name(raw_namespace)} has no device on the physical device "
            f"of {x._describe()} ({here}), so its data cannot be shared; pass device= to "
            "copy it to one"
        )
    return _move(x, here, dst, copy, "from_dlpack", BufferError)


def asarray(
    raw_namespace: Any,
    x: Variable,
    /,
    *,
    dtype: Any = None,
    device: Any = None,
    copy: bool | None = None,
) -> Variable:
    """``asarray`` of agnograd's namespace over ``raw_namespace``, for a Variable.

    Differentiable throughout: a :class:`Copy` to ``device`` (by default ``x``'s, or
    the namespace library's device on the same physical device), then ``astype``
    for ``dtype``; ``copy=True`` always gives a new array, ``copy=False`` raises
    ``ValueError`` where a copy would be needed, as the standard says.

    Examples
    --------
    >>> import array_api_strict as xs, agnograd
    >>> x = agnograd.Variable(xs.asarray([1.0, 2.0]))
    >>> y = x.__array_namespace__().asarray(x, device=xs.Device("device1"), dtype=xs.float32)
    >>> y.device, y.dtype
    (Device('@array_api_strict:device1'), array_api_strict.float32)
    >>> agnograd.functions.sum(y * y).backward(); x.grad
    Array([2., 4.], dtype=array_api_strict.float64)
    """
    from agnograd.functions._manipulation import astype
    from agnograd.functions._misc import AsArrayCopy

    y = x
    if device is not None or not _in_library(raw_namespace, x):
        here = _device_of_variable(x, "asarray")
        dst = _destination(raw_namespace, here, device, "asarray")
        if dst is None:  # no device of the library shares x's memory: its default one
            dst = device_of(raw_namespace.empty((0,)))
        if dst != here:
            y = _move(x, here, dst, copy, "asarray", ValueError)
    if dtype is not None and dtype != y.dtype:
        if copy is False:
            wanted = dtype_name(raw_namespace.empty((0,), dtype=dtype).dtype)
            raise ValueError(
                f"asarray: copy=False, but {x._describe()} must be converted to {wanted}, "
                "which needs a copy; pass copy=None to allow one"
            )
        return astype(y, dtype)
    if copy and y is x:
        # copy=True asks for an array the caller may write into: a new one.
        return AsArrayCopy().apply((x,))[0]
    return y


def _in_library(raw_namespace: Any, x: Variable) -> bool:
    """Whether ``x``'s data is (or, define-then-run, will be) an array of that library."""
    data = x._data
    if data is not None:
        return device_of(data).backend == _library(raw_namespace).name
    if x._node.creator_node is None:
        return True  # uninitialised: nothing to move
    xp = _extension.define_then_run.namespace_of_node(x._node)
    return xp is raw_namespace or _library(xp) is _library(raw_namespace)


def _device_of_variable(x: Variable, op: str) -> Device:
    """The device of ``x``'s data, or of a define-then-run result, where it will be."""
    here = device(x)
    if here is None:
        raise ValueError(f"{op}: the input Variable holds no data (uninitialised)")
    return here


@functools.cache
def _library(raw_namespace: Any) -> Any:
    """The adapter of the library whose namespace is ``raw_namespace``."""
    return device_of(raw_namespace.empty((0,))).adapter


def _destination(raw_namespace: Any, here: Device, device: Any, op: str) -> Device | None:
    """Where ``raw_namespace``'s ``op`` puts data that is on ``here``.

    ``device`` when given; else ``here`` when it is of that library, or the
    library's device on the same physical device (its default one if that is
    one), or ``None`` when it has none there.
    """
    library = _library(raw_namespace)
    if device is None:
        if library.name == here.backend:
            return here
        same = []
        for native in library.get_devices():
            candidate = Device(library, native, library.get_device_name(native))
            if candidate.physical == here.physical:
                same.append(candidate)
        default = library.get_default_device()
        return next((d for d in same if d == default), same[0] if same else None)
    try:
        dst = get_device_for(device, library)
    except ValueError:
        # The library's own spelling of a device ("cpu", "cuda:1"): it knows where.
        dst = device_of(raw_namespace.empty((0,), device=device))
    if dst.backend != library.name:
        raise ValueError(
            f"{op}: device {dst} is a device of {dst.backend}, but this is agnograd's "
            f"namespace for {library.name}; pass a device of {library.name}, or use "
            f"agnograd.functions.copy(x, '{dst}') to move the data to {dst.backend}"
        )
    return dst


def _move(
    x: Variable, here: Device, dst: Device, copy: bool | None, op: str, error: type[Exception]
) -> Variable:
    try:
        return Copy(here, dst, copy).apply((x,))[0]
    except BufferError as cause:
        if copy is not False:
            raise
        raise error(
            f"{op}: copy=False, but {x._describe()} on {here} cannot be shared with {dst} "
            "without a copy; pass copy=None to allow one"
        ) from cause


# ---------------------------------------------------------------------------------
# Helpers


def _data_of(var: Variable, op: str) -> Any:
    data = var._data
    if isinstance(data, Abstract):
        raise RuntimeError(
            f"Variable.{op}: {var._describe()} has no values yet (define-then-run); run "
            "forward first, or move its inputs"
        )
    return data


def _is_on(var: Variable, device: Device) -> bool:
    if device_of(var._data) != device:
        return False
    grad = var.grad
    return grad is None or device_of(grad) == device


def _same_place(a: Any, b: Any) -> bool:
    return device_of(a) == device_of(b)


def _check_movable(var: Variable, op: str, dst: Device) -> None:
    node = var._node
    creator = node.creator_node
    if creator is not None and node.requires_grad:
        raise RuntimeError(
            f"Variable.{op}: {var._describe()} is the output of {creator.label}, and "
            f"backward still needs the graph behind it on {device_of(var._data)}; moving "
            f"it in place to {dst} would leave that graph behind. Use "
            f"agnograd.functions.copy(x, '{dst}') for a transfer that gradients flow "
            "through, or call x.unchain() first to cut the graph here"
        )


def _assign(var: Variable, data: Any, grad: Any) -> None:
    var.array = data
    var._grad_var = None if grad is None else Variable._new(grad, False)
    # Functions that used this leaf saved its old arrays: the engine moves the
    # gradients it computes from them to where the data is now.
    var._node.moved = True


def follow_data(g: Any, data: Any) -> Any:
    """The gradient ``g`` (array or Variable) moved, if needed, to ``data``'s device.

    For the engine, after a leaf moved: a fresh array, so the gradient never aliases
    a seed that the user still holds; a differentiable :func:`copy` for Variables.
    """
    raw = g._data if isinstance(g, Variable) else g
    here, there = device_of(raw), device_of(data)
    if here == there:
        return g
    if isinstance(g, Variable):
        return Copy(here, there).apply((g,))[0]
    return transfer(raw, there, copy=True)


_extension.transfer = sys.modules[__name__]
