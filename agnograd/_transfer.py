"""Moving Variables between devices and libraries; views; the differentiable copy.

``Variable.to_device``, ``to_cpu`` and ``to_gpu`` move data and gradient in place
(Chainer), ``to_chx``/``from_chx`` swap them for zero-copy views in another library
and back, ``Variable.view`` gives such a view without touching the Variable, and
:func:`copy` is the transfer that gradients flow through. They are installed on
:class:`Variable` by :func:`install`, at import, because they build on the
function-node machinery that itself builds on ``Variable``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from agnograd import _backend
from agnograd._abstract import Abstract
from agnograd._adapter import DLPACK_ACCELERATORS, DLPACK_CPU
from agnograd._backend import installed_backends
from agnograd._device import Device, device_of, get_device, transfer, view
from agnograd._function import FunctionNode
from agnograd._variable import Variable, dtype_name

# id(Variable) -> (weak reference, the Device it had before its first to_chx).
_origins: dict[int, tuple[weakref.ref[Variable], Device]] = {}


# ---------------------------------------------------------------------------------
# Variable methods


def _device(self: Variable) -> Device | None:
    """The :class:`~agnograd.Device` of the data (``None`` when uninitialised).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.Variable(np.ones(2)).device
    Device('@numpy')
    """
    data = self._data
    return None if data is None else device_of(data)


def to_device(self: Variable, device: Any, /, *, stream: Any = None) -> Variable:
    """Move the data and the gradient to ``device``, in place; return the Variable.

    ``device`` is anything :func:`agnograd.get_device` accepts, of any library:
    ``x.to_device('@torch:cpu')`` turns a NumPy Variable into a torch one. The graph
    stays: gradients computed later land on the new device. Moving the output of a
    function that backward still needs is an error; use
    :func:`agnograd.functions.copy` for a transfer that gradients flow through.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(np.array([1.0, 2.0]), grad=np.ones(2))
    >>> x.to_device("@array_api_strict:device1") is x
    True
    >>> x.device, x.grad.device
    (Device('@array_api_strict:device1'), array_api_strict.Device('device1'))
    """
    dst = get_device(device)
    data = _data_of(self, "to_device")
    if data is None or _is_on(self, dst):
        return self
    _check_movable(self, "to_device", dst)
    grad = self.grad
    new_data = transfer(data, dst, stream=stream)
    new_grad = None if grad is None else transfer(grad, dst, stream=stream)
    _assign(self, new_data, new_grad)
    return self


def to_cpu(self: Variable) -> Variable:
    """Move to host memory in place: the same library's CPU device if it has one
    (torch, JAX), else NumPy (CuPy → NumPy); return the Variable.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(np.ones(2))
    >>> x.to_cpu().device
    Device('@numpy')
    """
    data = _data_of(self, "to_cpu")
    if data is None:
        return self
    here = device_of(data)
    if here.is_cpu:
        return self
    adapter = here.adapter
    for native in adapter.get_devices():
        if adapter.get_dlpack_device(native)[0] == DLPACK_CPU:
            return to_device(self, Device(adapter, native, adapter.get_device_name(native)))
    return to_device(self, "@numpy")


def to_gpu(self: Variable, device: Any = None) -> Variable:
    """Move to a GPU in place: the same library's GPU if it has one (torch, JAX),
    else CuPy (NumPy → CuPy); return the Variable.

    ``device`` is a GPU number (``None``: the library's current GPU) or anything
    :func:`agnograd.get_device` accepts.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> try:  # on a machine without CuPy or without a GPU
    ...     agnograd.Variable(np.ones(2)).to_gpu()
    ... except ValueError as error:
    ...     print(str(error)[:56])
    Variable.to_gpu: numpy has no GPU device, so the data go
    """
    if device is not None and not isinstance(device, int):
        return to_device(self, device)
    data = _data_of(self, "to_gpu")
    if data is None:
        return self
    here = device_of(data)
    if device is None and here.is_gpu:
        return self
    adapter = here.adapter
    gpus = []
    for native in adapter.get_devices():
        kind, index = adapter.get_dlpack_device(native)
        if kind in DLPACK_ACCELERATORS:
            gpus.append((index, native))
    if gpus:
        if device is None:
            default = adapter.get_default_device()
            native = default if any(default == g for _, g in gpus) else gpus[0][1]
        else:
            native = next((g for i, g in gpus if i == device), None)
            if native is None:
                raise ValueError(
                    f"Variable.to_gpu: {adapter.name} has no GPU number {device}; its GPUs are "
                    f"{', '.join(str(i) for i, _ in gpus)}"
                )
        return to_device(self, Device(adapter, native, adapter.get_device_name(native)))
    spec = "@cupy" if device is None else f"@cupy:{device}"
    try:
        target = get_device(spec)
    except ValueError as error:
        raise ValueError(
            f"Variable.to_gpu: {adapter.name} has no GPU device, so the data go to CuPy, "
            f"which is not usable here: {error}"
        ) from None
    return to_device(self, target)


def to_chx(self: Variable, target: Any, /, *, allow_copy: bool = False) -> Variable:
    """Turn data and gradient into views in another library, in place (DLPack, O(1)).

    ``target`` is a library name (``'torch'``, ``'@jax'``), whose device on the same
    physical device is used, or a full specifier. Memory is shared with the old
    arrays. When a view is impossible (see :func:`agnograd.view`) this raises
    ``BufferError``, or copies with a :class:`~agnograd.CopyWarning` when
    ``allow_copy=True``. :meth:`from_chx` converts back.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> a = np.zeros(2)
    >>> x = agnograd.Variable(a).to_chx("array_api_strict")
    >>> a[0] = 7.0
    >>> float(x.array[0]), x.device
    (7.0, Device('@array_api_strict:CPU_DEVICE'))
    >>> x.from_chx().array is not a, x.device
    (True, Device('@numpy'))
    """
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
    """Undo :meth:`to_chx`: views in the original library again; return the Variable.

    A Variable that :meth:`to_chx` never converted is left as it is (Chainer).
    """
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

_addgrad = Variable.addgrad
_copydata = Variable.copydata


def addgrad(self: Variable, var: Variable) -> None:
    """Add ``var``'s gradient to this Variable's, from any device or library.

    The result stays on this Variable's device (an uninitialised Variable takes
    ``var``'s).

    Examples
    --------
    >>> import numpy as np, array_api_strict as xs, agnograd
    >>> a = agnograd.Variable(np.zeros(2), grad=np.ones(2))
    >>> b = agnograd.Variable(xs.zeros(2, dtype=xs.float64), grad=xs.ones(2, dtype=xs.float64))
    >>> a.addgrad(b); a.grad
    array([2., 2.])
    """
    src, dst = var.grad, self._data
    if src is None or dst is None or _same_place(src, dst):
        _addgrad(self, var)
        return
    proxy = Variable._new(dst, False)
    proxy._grad_var = Variable._new(transfer(src, device_of(dst)), False)
    _addgrad(self, proxy)


def copydata(self: Variable, var: Variable) -> None:
    """Copy ``var``'s data into this Variable's array, from any device or library.

    The data stays on this Variable's device and library.

    Examples
    --------
    >>> import numpy as np, array_api_strict as xs, agnograd
    >>> a = agnograd.Variable(np.zeros(2))
    >>> a.copydata(agnograd.Variable(xs.asarray([1.0, 2.0], dtype=xs.float64)))
    >>> a.array
    array([1., 2.])
    """
    src, dst = var._data, self._data
    if src is None or dst is None or _same_place(src, dst):
        _copydata(self, var)
        return
    _copydata(self, Variable._new(transfer(src, device_of(dst)), False))


# ---------------------------------------------------------------------------------
# The differentiable transfer


class Copy(FunctionNode):
    """Transfer to another device or library; backward transfers the gradient back."""

    def __init__(self, src: Device, dst: Device) -> None:
        self.src = src
        self.dst = dst

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (transfer(inputs[0], self.dst, copy=True),)

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
    data = x._data if isinstance(x, Variable) else x
    if data is None:
        raise ValueError("copy: the input Variable holds no data (uninitialised)")
    return Copy(device_of(data), get_device(device)).apply((x,))[0]


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
    _backend.moved_leaves.add(var._node)


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


def install() -> None:
    cls = Variable
    cls.device = property(_device)  # type: ignore[assignment]
    cls.to_device = to_device  # type: ignore[attr-defined]
    cls.to_cpu = to_cpu  # type: ignore[attr-defined]
    cls.to_gpu = to_gpu  # type: ignore[attr-defined]
    cls.to_chx = to_chx  # type: ignore[attr-defined]
    cls.from_chx = from_chx  # type: ignore[attr-defined]
    cls.view = property(ArrayViews, doc=ArrayViews.__doc__)  # type: ignore[attr-defined]
    cls.addgrad = addgrad  # type: ignore[method-assign]
    cls.copydata = copydata  # type: ignore[method-assign]


install()
