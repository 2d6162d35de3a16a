"""What a ``Variable`` holds and where: its array, shape, dtype, namespace and
device, moving it and viewing it in another library; a mixin of
:class:`agnograd.Variable`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy

from agnograd.backends import _backend
from agnograd.backends._backend import Array, raw_namespace
from agnograd.core import _extension, _versions

if TYPE_CHECKING:
    from agnograd.core._variable import Variable
    from agnograd.core._variable_node import VariableNode


class Data:
    """The array of a Variable and the device it is on, mixed into
    :class:`agnograd.Variable`."""

    __slots__ = ()

    if TYPE_CHECKING:  # what the methods below read of the Variable
        _data: Any
        _node: VariableNode

    # -- data -------------------------------------------------------------------

    @property
    def array(self) -> Array:
        """The underlying array (``None`` when uninitialised); never a copy."""
        return self._data

    @array.setter
    def array(self, data: Array | None) -> None:
        if data is not None and not _backend.is_array(data):
            raise TypeError(
                f"Variable.array: expected an array of an array API library or None, "
                f"got {type(data).__name__}"
            )
        _refuse_foreign_graph(data, "Variable.array")
        data = _backend.as_array(data)
        if data is not None and data is self._data:
            # The array came back: an in-place operation wrote into it (v.array -= 0.1
            # is v.array = v.array.__isub__(0.1)), which what nodes kept of its memory
            # must not take for the values their forward saw.
            _versions.note_write(data)
        self._data = data
        node = self._node
        node.shape = None if data is None else tuple(data.shape)
        node.dtype = None if data is None else data.dtype
        if node._data is not None:
            node._data = data

    data = array

    @property
    def shape(self) -> tuple[int, ...] | None:
        """Shape as a tuple: the data's, or the inferred one before define-then-run
        computes it (``None`` when uninitialised)."""
        data = self._data
        return self._node.shape if data is None else tuple(data.shape)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)  # type: ignore[arg-type]

    @property
    def size(self) -> int | None:
        """Number of elements (``None`` when a dimension is unknown, as in Dask)."""
        shape = self.shape
        if shape is None or not _backend.known_shape(shape):
            return None
        return math.prod(shape)

    @property
    def dtype(self) -> Any:
        """Data type of the array, as the backend spells it."""
        return self._node.dtype if self._data is None else self._data.dtype

    @property
    def xp(self) -> Any:
        """The raw array API namespace of the data (``array_api_compat.numpy``, ...);
        for a result of define-then-run not yet computed, that of its library; for a
        Variable without data (``Variable()``), NumPy's, the library it would be
        given data in by default (Chainer's answer).

        Examples
        --------
        >>> import agnograd
        >>> agnograd.Variable().xp.__name__
        'array_api_compat.numpy'
        """
        data = self._data
        if data is None:
            node = self._node
            if node.creator_node is None and node._data is None and node.shape is None:
                return raw_namespace(_NUMPY_PROBE)
            return _extension.define_then_run.namespace_of_node(node)
        return raw_namespace(data)

    @property
    def label(self) -> str:
        """Shape and dtype as short text, for example ``'(2, 5), float32'``."""
        return self._node.label

    # -- devices and views: agnograd.functions._transfer, through the extension point ------

    @property
    def device(self) -> Any:
        """The :class:`~agnograd.Device` of the data (``None`` when uninitialised).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> agnograd.Variable(np.ones(2)).device
        Device('@numpy')
        """
        return _extension.transfer.device(self)

    def to_device(self, device: Any, /, *, stream: Any = None) -> Variable:
        """Move to ``device``: a leaf in place (Chainer), a function's output into a new
        Variable that gradients flow back through (the array API standard).

        ``device`` is anything :func:`agnograd.get_device` accepts, of any library
        (``x.to_device('@torch:cpu')`` turns a NumPy Variable into a torch one), or
        the library's own name of one of its devices (``'cpu'``, ``'cuda:1'``).

        A leaf (a Variable no function made) moves its data and gradient in place and
        is returned; the graph stays, and gradients computed later land on the new
        device. The output of a function is left where it is: the result is a new
        Variable on ``device``, made by :func:`agnograd.functions.copy`, whose gradient
        goes back to the original device. That is what array API code that calls
        ``x.to_device(d)`` on its intermediate results expects, and it works in
        define-then-run before the data exist.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.array([1.0, 2.0]), grad=np.ones(2))
        >>> x.to_device("@array_api_strict:device1") is x
        True
        >>> x.device, x.grad.device
        (Device('@array_api_strict:device1'), array_api_strict.Device('device1'))
        >>> x.cleargrad()
        >>> h = x * 3
        >>> y = h.to_device("@array_api_strict:device2")
        >>> y is h, y.device, h.device
        (False, Device('@array_api_strict:device2'), Device('@array_api_strict:device1'))
        >>> agnograd.functions.sum(y * y).backward()
        >>> x.grad.device, float(x.grad[0]), float(x.grad[1])
        (array_api_strict.Device('device1'), 18.0, 36.0)
        """
        return _extension.transfer.to_device(self, device, stream=stream)

    def to_cpu(self) -> Variable:
        """Move to host memory in place: the same library's CPU device if it has one
        (torch, JAX), else NumPy (CuPy → NumPy); return the Variable.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.ones(2))
        >>> x.to_cpu().device
        Device('@numpy')
        """
        return _extension.transfer.to_cpu(self)

    def to_gpu(self, device: Any = None) -> Variable:
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
        return _extension.transfer.to_gpu(self, device)

    def to_chx(self, target: Any, /, *, allow_copy: bool = False) -> Variable:
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
        return _extension.transfer.to_chx(self, target, allow_copy=allow_copy)

    def from_chx(self, /, *, allow_copy: bool = False) -> Variable:
        """Undo :meth:`to_chx`: views in the original library again; return the Variable.

        A Variable that :meth:`to_chx` never converted is left as it is (Chainer).
        """
        return _extension.transfer.from_chx(self, allow_copy=allow_copy)

    @property
    def view(self) -> Any:
        """The data as another library's array, sharing memory: ``x.view('@torch')``,
        ``x.view['@torch']`` or ``x.view.torch`` (see :func:`agnograd.view`).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.arange(3.0))
        >>> type(x.view.array_api_strict).__module__.split(".")[0]
        'array_api_strict'
        """
        return _extension.transfer.ArrayViews(self)

    def addgrad(self, var: Variable) -> None:
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
        _extension.transfer.addgrad(self, var)

    def copydata(self, var: Variable) -> None:
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
        _extension.transfer.copydata(self, var)


_NUMPY_PROBE = numpy.empty(0)  # an array whose namespace is NumPy's


def _refuse_foreign_graph(data: Any, op: str) -> None:
    """Refuse an array that records a graph of its own library (a torch tensor with
    ``requires_grad=True``): agnograd's backward would never reach that graph."""
    if getattr(data, "requires_grad", False) is True:
        library = type(data).__module__.split(".")[0]
        bridge = (
            "; or, to keep torch's autograd, bridge the two: call agnograd code from torch "
            "with agnograd.interop.torch.function(f), or torch code from agnograd with "
            "agnograd.interop.torch.node(fn)"
            if library == "torch"
            else ""
        )
        raise TypeError(
            f"{op}: the {library} array requires a gradient in its own library's autograd, "
            "whose graph agnograd's backward cannot reach; pass a detached array "
            f"(tensor.detach()) and let agnograd compute the gradient{bridge}"
        )
