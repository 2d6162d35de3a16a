"""``Variable`` (what users hold) and ``VariableNode`` (its twin in the graph)."""

from __future__ import annotations

import copy
import math
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import array_api_compat
import numpy

from agnograd.backends import _backend
from agnograd.backends._backend import Array, dtype_name, raw_namespace
from agnograd.backends._backend import label as _label
from agnograd.backends._device import get_device
from agnograd.core import _debug, _extension, _graph
from agnograd.core._nnabla import NnablaInterface
from agnograd.core._printing import Printing, to_numpy
from agnograd.core._variable_operators import Operators

if TYPE_CHECKING:
    from agnograd.core._function import FunctionNode


class VariableNode:
    """The graph-side twin of a :class:`Variable`.

    It holds the creator, the rank and, only when :meth:`retain_data` was called,
    the data array; the Variable itself is reached through a weak reference so the
    graph never keeps user-facing objects (or their arrays) alive.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(np.ones(3, dtype=np.float32), name="x")
    >>> y = x * 2
    >>> y.node.creator_node.label, y.node.rank, y.node.label
    ('MulConstant', 1, '(3), float32')
    >>> y.node.get_variable() is y
    True
    """

    __slots__ = (
        "__weakref__",
        "_consumers",
        "_data",
        "_variable",
        "creator_node",
        "dtype",
        "moved",
        "name",
        "persistent",
        "rank",
        "requires_grad",
        "shape",
        "version",
    )

    def __init__(
        self, variable: Variable, name: str | None = None, *, requires_grad: bool = True
    ) -> None:
        self._variable = weakref.ref(variable)
        self.creator_node: FunctionNode | None = None
        self._data: Any = None
        self.name = name
        self.requires_grad = bool(requires_grad)  # the engine looks its indexes up by it
        self.rank = 0
        data = variable._data
        self.shape = None if data is None else tuple(data.shape)
        self.dtype = None if data is None else data.dtype
        self.persistent = False
        # Set when the leaf's data moves after a graph used it (to_device, to_chx):
        # the engine then brings its gradients to where the data is.
        self.moved = False
        # The version of the data's memory when the data was computed (see
        # agnograd.core._versions): a later write into that memory makes it stale.
        self.version = 0
        # Weak references to the functions that take this node as an input
        # (note_consumer), for nnabla's Variable.function_references.
        self._consumers: list[weakref.ref[FunctionNode]] | None = None

    @property
    def creator(self) -> Any:
        """The function that created this node: :attr:`creator_node`, or the old-style
        :class:`~agnograd.Function` that node runs (Chainer's ``creator``)."""
        node = self.creator_node
        return getattr(node, "_creator_view", node)

    @creator.setter
    def creator(self, func: FunctionNode | None) -> None:
        self.set_creator_node(func)

    @property
    def data(self) -> Array:
        """The retained array, else the live Variable's array, else ``None``."""
        if self._data is not None:
            return self._data
        var = self._variable()
        return None if var is None else var._data

    @property
    def grad(self) -> Array:
        """Gradient array of the corresponding Variable (``None`` if it is gone)."""
        var = self._variable()
        return None if var is None else var.grad

    @property
    def grad_var(self) -> Variable | None:
        """Gradient Variable of the corresponding Variable (``None`` if it is gone)."""
        var = self._variable()
        return None if var is None else var._grad_var

    @property
    def label(self) -> str:
        """Shape and dtype as short text, for example ``'(2, 5), float32'``."""
        return _label(self.shape, self.dtype)

    @property
    def _rank(self) -> int:
        """Chainer's private name of :attr:`rank`, which Chainer code reads and sets."""
        return self.rank

    @_rank.setter
    def _rank(self, value: int) -> None:
        self.rank = value

    def get_variable(self) -> Variable:
        """Return the Variable of this node, rebuilding one around the node if it is gone.

        A rebuilt Variable shares this node (so it stays connected to the graph) and
        holds the retained data.
        """
        var = self._variable()
        if var is not None:
            return var
        var = Variable._from_node(self, self._data)
        self._variable = weakref.ref(var)
        _graph.edited()  # compiled plans give only live Variables their arrays
        return var

    def get_variable_or_none(self) -> Variable | None:
        """Return the Variable of this node if it is still alive, else ``None``."""
        return self._variable()

    def retain_data(self) -> None:
        """Keep a reference to the data array in the node itself."""
        var = self._variable()
        if var is None:
            raise RuntimeError(
                "VariableNode.retain_data: the Variable of this node is gone, so there is "
                "no data to retain; call retain_data() while the Variable is alive"
            )
        self._data = var._data

    def set_creator(self, creator: FunctionNode | None) -> None:
        """Set the function node that created this node."""
        self.set_creator_node(creator)

    def set_creator_node(self, creator_node: FunctionNode | None) -> None:
        """Set the function node that created this node (the node of an old-style
        :class:`~agnograd.Function` given); its rank follows."""
        creator_node = getattr(creator_node, "_node_view", creator_node)
        _graph.edited()
        self.creator_node = creator_node
        if creator_node is not None:
            self.rank = creator_node.rank + 1

    def unchain(self) -> None:
        """Forget the creator: backprop stops at this node."""
        _graph.edited()
        self.creator_node = None

    def __repr__(self) -> str:
        name = f" {self.name}" if self.name else ""
        return f"<VariableNode{name} {self.label} rank={self.rank}>"


class Variable(Operators, Printing, NnablaInterface):
    """An array of any array API library, with a gradient and a place in the graph.

    Parameters
    ----------
    data : array or None
        An array of any array API library (NumPy, PyTorch, JAX, CuPy,
        array-api-strict, ...), held as is -- never copied -- or ``None`` for an
        uninitialised Variable. A NumPy scalar, NumPy's answer for a 0-d result, is
        held as the 0-d array it stands for, as every 0-d result of an operation is.
    name : str, optional
        Name shown in ``repr``, hooks and debug output.
    grad : array, optional
        Initial gradient; same shape, dtype, backend and device as ``data``. It is
        held as a Variable of its own (``grad_var``) that requires a gradient where
        its dtype allows one, as Chainer's ``Variable(grad)``.
    requires_grad : bool, optional
        Whether backprop computes a gradient for this Variable: by default, when
        the data is of a floating-point or complex dtype (or not given yet). Integer
        and boolean data cannot require one, as in torch and JAX: their gradient
        would be cast to their dtype and silently lost.
    shape, need_grad, dtype, device : optional, keyword-only
        nnabla's form, for define-then-run inputs: ``Variable(shape=(2, 3))``
        allocates zeros of that shape (``dtype`` float32 by default, on ``device``,
        NumPy by default) to be fed later through ``d``; ``need_grad`` defaults to
        ``False`` there, as in nnabla, and overrides ``requires_grad``.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(np.array([1.0, 2.0, 3.0]), name="x")
    >>> y = agnograd.functions.sum(x * x)
    >>> y.backward()
    >>> x.grad
    array([2., 4., 6.])
    >>> x
    variable x([1., 2., 3.])
    """

    __slots__ = ("__weakref__", "_data", "_grad_var", "_node")

    # Make NumPy return NotImplemented for ``ndarray <op> Variable`` so the reflected
    # operator of the Variable runs instead of an object-array loop.
    __array_ufunc__ = None
    __array_priority__ = 200

    _data: Any
    _node: VariableNode
    _grad_var: Variable | None

    def __init__(
        self,
        data: Array | None = None,
        *,
        name: str | None = None,
        grad: Array | None = None,
        requires_grad: bool | None = None,
        shape: Sequence[int] | None = None,
        need_grad: bool | None = None,
        dtype: Any = None,
        device: Any = None,
    ) -> None:
        if shape is not None:
            if data is not None:
                raise TypeError("Variable: give either data or shape, not both")
            data = _zeros(tuple(shape), dtype, device)
            requires_grad = bool(need_grad)
        elif need_grad is not None:
            requires_grad = bool(need_grad)
        if data is not None and not _backend.is_array(data):
            if isinstance(data, Variable):
                raise TypeError(
                    "Variable(data): data is already a Variable; use it directly, or pass "
                    "its .array to wrap the same array in a new Variable"
                )
            raise TypeError(
                f"Variable(data): expected an array of an array API library or None, got "
                f"{type(data).__name__}; convert Python values first, e.g. "
                "Variable(numpy.asarray(value))"
            )
        _refuse_foreign_graph(data, "Variable(data)")
        data = _backend.as_array(data)  # a NumPy scalar is NumPy's 0-d value
        requires_grad = _can_require_grad(data, requires_grad, "Variable")
        self._data = data
        self._grad_var = None
        self._node = VariableNode(self, name, requires_grad=requires_grad)
        if grad is not None:
            self.grad = grad

    @classmethod
    def _new(cls, data: Any, requires_grad: bool) -> Variable:
        """A Variable around ``data`` without validation (for results agnograd made)."""
        return _new_variable(data, requires_grad, None, 0)

    @classmethod
    def _from_node(cls, node: VariableNode, data: Any) -> Variable:
        var = object.__new__(cls)
        var._data = data if data is None else _backend.as_array(data)
        var._grad_var = None
        var._node = node
        return var

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

    @property
    def name(self) -> str | None:
        """Name of the Variable (shared with its node)."""
        return self._node.name

    @name.setter
    def name(self, name: str | None) -> None:
        self._node.name = name

    # -- gradient ---------------------------------------------------------------

    @property
    def grad(self) -> Array:
        """Gradient array, or ``None``; setting checks shape, dtype, backend and device."""
        gv = self._grad_var
        return None if gv is None else gv._data

    @grad.setter
    def grad(self, g: Array | None) -> None:
        if g is None:
            self._grad_var = None
            return
        if isinstance(g, Variable):
            raise TypeError("Variable.grad: got a Variable; assign it to .grad_var instead")
        if g.__class__ in _backend.NUMPY_SCALARS:
            raise TypeError(
                f"Variable.grad: got the NumPy scalar {g!r}; a gradient is an array of the "
                "data's shape: assign numpy.asarray(g)"
            )
        self._check_grad(g)
        # A Variable of its own, as Variable(g) makes it (Chainer): it requires a
        # gradient where its dtype allows one.
        self._grad_var = Variable._new(g, _can_require_grad(g, None, "Variable.grad"))

    @property
    def grad_var(self) -> Variable | None:
        """Gradient as a Variable (it has a creator after double backprop)."""
        return self._grad_var

    @grad_var.setter
    def grad_var(self, g: Variable | None) -> None:
        if g is not None:
            if not isinstance(g, Variable):
                raise TypeError(
                    f"Variable.grad_var: expected a Variable or None, got {type(g).__name__}"
                )
            self._check_grad(g._data)
        self._grad_var = g

    def _check_grad(self, g: Any, what: str | None = None, any_dtype: bool = False) -> None:
        """Raise unless ``g`` could be this Variable's gradient (of another dtype too,
        with ``any_dtype``); ``what`` names ``g`` in the message (by default: setting
        the gradient)."""
        data = self._data
        if data is None:
            return
        xp, gxp = raw_namespace(data), raw_namespace(g)
        if xp is not gxp:
            raise self._grad_error(
                what,
                TypeError,
                f"the gradient is a {_backend.backend_name(gxp)} array but the data is a "
                f"{_backend.backend_name(xp)} array; convert it to the data's library",
            )
        if g.dtype != data.dtype and not any_dtype:
            raise self._grad_error(
                what,
                TypeError,
                f"gradient dtype {dtype_name(g.dtype)} differs from data dtype "
                f"{dtype_name(data.dtype)}; cast it with xp.astype",
            )
        if not _backend.same_shape(g.shape, data.shape):
            raise self._grad_error(
                what,
                ValueError,
                f"gradient shape {tuple(g.shape)} differs from data shape {tuple(data.shape)}",
            )
        gdev, dev = array_api_compat.device(g), array_api_compat.device(data)
        # None: a device not known yet (JAX's tracers report none).
        if gdev != dev and gdev is not None and dev is not None:
            raise self._grad_error(
                what,
                TypeError,
                f"gradient is on device {gdev} but the data is on {dev}; move it with xp.to_device",
            )

    def _grad_error(self, what: str | None, kind: type[Exception], problem: str) -> Exception:
        # Described only on error: the description costs microseconds.
        what = what or "setting the gradient of"
        return kind(f"{what} {self._describe()}: {problem}")

    def cleargrad(self) -> None:
        """Clear the gradient (set it to ``None``).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.ones(2), grad=np.ones(2))
        >>> x.cleargrad(); x.grad is None
        True
        """
        self._grad_var = None

    def zerograd(self) -> None:
        """Fill the gradient with zeros (deprecated: use :meth:`cleargrad`).

        Examples
        --------
        >>> import numpy as np, agnograd, warnings
        >>> x = agnograd.Variable(np.ones(2))
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", DeprecationWarning)
        ...     x.zerograd()
        >>> x.grad
        array([0., 0.])
        """
        warn_zerograd()
        if self._data is None:
            return
        self._grad_var = Variable._new(raw_namespace(self._data).zeros_like(self._data), False)

    # -- graph ------------------------------------------------------------------

    @property
    def node(self) -> VariableNode:
        """The :class:`VariableNode` of this Variable."""
        return self._node

    @property
    def creator_node(self) -> FunctionNode | None:
        """The :class:`FunctionNode` that created this Variable; ``None`` unchains."""
        return self._node.creator_node

    @creator_node.setter
    def creator_node(self, func: FunctionNode | None) -> None:
        self._node.set_creator_node(func)

    @property
    def creator(self) -> Any:
        """The function that created this Variable: :attr:`creator_node`, or the
        old-style :class:`~agnograd.Function` that node runs (Chainer's ``creator``)."""
        return self._node.creator

    @creator.setter
    def creator(self, func: Any) -> None:
        self._node.set_creator_node(func)

    @property
    def rank(self) -> int:
        """Topological rank (0 for leaves, the creator's rank + 1 otherwise)."""
        return self._node.rank

    @property
    def requires_grad(self) -> bool:
        """Whether backprop computes a gradient for this Variable."""
        return self._node.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._node.requires_grad = _can_require_grad(self._data, value, "Variable.requires_grad")
        _graph.edited()

    def set_creator(self, gen_func: FunctionNode) -> None:
        """Record ``gen_func`` as the creator (same as :meth:`set_creator_node`)."""
        self._node.set_creator_node(gen_func)

    def set_creator_node(self, fnode: FunctionNode) -> None:
        """Record ``fnode`` as the function node that created this Variable."""
        self._node.set_creator_node(fnode)

    def retain_data(self) -> None:
        """Let the node keep a reference to the data array."""
        self._node.retain_data()

    def unchain(self) -> None:
        """Forget the creator; backprop stops here. Does not walk the graph.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> y = agnograd.Variable(np.ones(2)) * 3
        >>> y.unchain(); y.creator is None
        True
        """
        self._node.unchain()

    def unchain_backward(self) -> None:
        """Cut every link of the graph behind this Variable (truncated BPTT).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.ones(2))
        >>> h = x * 2
        >>> y = h + 1
        >>> y.unchain_backward()
        >>> y.creator is None and h.creator is None
        True
        """
        start = self._node.creator_node
        stack = [start] if start is not None else []
        seen = set(stack)
        while stack:
            func = stack.pop()
            for x in func.inputs or ():
                creator = x.creator_node
                if creator is not None and creator not in seen:
                    seen.add(creator)
                    stack.append(creator)
            func.unchain()
        self._node.unchain()

    def backward(
        self,
        retain_grad: bool = False,
        enable_double_backprop: bool = False,
        loss_scale: float | None = None,
        *,
        grad: Array | None = None,
        clear_buffer: bool = False,
        function_pre_hook: Callable[[FunctionNode], Any] | None = None,
        function_post_hook: Callable[[FunctionNode], Any] | None = None,
    ) -> None:
        """Backpropagate from this Variable, accumulating gradients into the leaves.

        The seed is ``grad`` if given, else the ``.grad`` you set, else ones of this
        Variable's shape (nnabla's default ``grad=1``; a loss has one element). A
        ``.grad`` that an earlier backward wrote (its ones, or what ``retain_grad``
        kept) is never a seed.
        With ``loss_scale`` the seed is multiplied by it and leaf gradients stay
        scaled (divide them before the update).

        Parameters
        ----------
        retain_grad : bool
            Keep the gradients of intermediate Variables (dropped as soon as they
            are consumed otherwise).
        enable_double_backprop : bool
            Record the backward computation so gradients can be differentiated again.
        loss_scale : float, optional
            Factor applied to the seed gradient.
        grad : array or scalar, optional
            nnabla's seed: used instead of ``.grad`` (which stays untouched); a
            scalar fills an array of this Variable's shape.
        clear_buffer : bool
            Free each function's saved arrays and intermediate data as soon as its
            backward has run (a second backward through the graph then fails).
        function_pre_hook, function_post_hook : callable, optional
            nnabla's hooks: each is called with every :class:`FunctionNode` whose
            backward runs, right before it and right after it.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.array([1.0, 2.0]))
        >>> y = agnograd.functions.sum(x ** 3)
        >>> y.backward(enable_double_backprop=True)
        >>> x.grad
        array([ 3., 12.])
        >>> gx = x.grad_var
        >>> x.cleargrad()
        >>> agnograd.functions.sum(gx).backward()
        >>> x.grad
        array([ 6., 12.])
        """
        from agnograd.core._engine import backward

        if function_pre_hook is not None or function_post_hook is not None:
            # function_hooks is a layer above the core: reached through replay's.
            hooks = _extension.replay.callbacks("backward", function_pre_hook, function_post_hook)
            with hooks:
                self.backward(
                    retain_grad,
                    enable_double_backprop,
                    loss_scale,
                    grad=grad,
                    clear_buffer=clear_buffer,
                )
            return
        if grad is not None and type(grad) in _backend.SCALARS:
            data = self._data
            grad = raw_namespace(data).full(
                data.shape, grad, dtype=data.dtype, device=array_api_compat.device(data)
            )
        if not (
            retain_grad or enable_double_backprop or loss_scale is not None
        ) and _extension.replay.backward(self, grad, clear_buffer):
            return  # the compiled plan of the graph's last forward (agnograd.static._replay)
        _debug.forget_current()
        try:
            backward(
                [self],
                None if grad is None else [grad],
                retain_grad=retain_grad,
                enable_double_backprop=enable_double_backprop,
                loss_scale=loss_scale,
                clear_buffer=clear_buffer,
            )
        except Exception as error:
            _debug.annotate(error)  # debug mode: where the failing function was called
            raise

    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        """agnograd's differentiable namespace, bound to this Variable's backend.

        Array API code that does ``xp = array_namespace(x)`` on a Variable gets this
        namespace, so its results are Variables on the same backend and device.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.array([1.0, 2.0]))
        >>> xp = x.__array_namespace__()
        >>> y = xp.sum(xp.exp(x))
        >>> y.backward(); x.grad
        array([2.71828183, 7.3890561 ])
        """
        data = self._data
        if data is None:
            # Define-then-run: the library of a result is decided when the graph is
            # built, so array API code builds the graph as it would compute eagerly.
            return _extension.namespace(_extension.define_then_run.namespace_of_node(self._node))
        return _extension.namespace(raw_namespace(data))

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

    # -- conversions ------------------------------------------------------------

    def item(self) -> Any:
        """The single element as a Python scalar (synchronises with the device).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> agnograd.Variable(np.array([2.5])).item()
        2.5
        """
        data = self._data
        if math.prod(data.shape) != 1:
            raise ValueError(
                f"Variable.item: only a one-element Variable converts to a Python scalar, "
                f"this one has shape {tuple(data.shape)}"
            )
        xp = raw_namespace(data)
        flat = xp.reshape(data, ())
        if xp.isdtype(data.dtype, "bool"):
            return bool(flat)
        if xp.isdtype(data.dtype, "integral"):
            return int(flat)
        if xp.isdtype(data.dtype, "complex floating"):
            return complex(flat)
        return float(flat)

    def __len__(self) -> int:
        shape = self.shape
        if shape is None:
            raise TypeError(f"len() of {self._describe()}, which has no shape (uninitialised)")
        if not shape:
            raise TypeError("len() of a 0-d Variable is undefined (it has no first axis)")
        return int(shape[0])

    def __iter__(self) -> Iterator[Variable]:
        """The rows ``x[0], x[1], ...``, each in the graph (a 0-d Variable has none).

        Defined so that iteration stops after the first axis even on libraries whose
        indexing never raises ``IndexError`` (JAX clamps out-of-range indices).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> [row.array for row in agnograd.Variable(np.array([[1.0], [2.0]]))]
        [array([1.]), array([2.])]
        """
        if self.shape == ():
            raise TypeError("iteration over a 0-d Variable (it has no first axis to iterate over)")
        return (self[i] for i in range(len(self)))

    def __contains__(self, value: Any) -> bool:
        """Whether some element equals ``value`` (NumPy's ``value in x``)."""
        data = self._data
        if data is None:
            raise RuntimeError(f"`in` of {self._describe()}, which holds no data yet")
        raw_value = value._data if isinstance(value, Variable) else value
        xp = raw_namespace(data)
        return bool(xp.any(data == raw_value))

    def _describe(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        backend = "no data" if self._data is None else _backend.backend_name(self.xp)
        return f"Variable{name} ({self.label}, {backend})"

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> numpy.ndarray:
        """NumPy's conversion: refused while a gradient is expected, since NumPy code
        would compute on plain values and the gradient would silently be lost."""
        if self._node.requires_grad:
            raise TypeError(
                f"numpy.asarray() of {self._describe()}, which requires a gradient: NumPy "
                "would compute without agnograd and the gradient would be lost. Use "
                "array API functions (x.__array_namespace__()), or take x.array explicitly"
            )
        return numpy.asarray(to_numpy(self._data), dtype=dtype)

    # -- pickling and copying ---------------------------------------------------
    # A copy is a leaf: its data, gradient, name and requires_grad, never the graph
    # (Chainer pickles a non-leaf as a leaf; PyTorch refuses to deepcopy one). A copy
    # of a Variable that has a creator is refused, since its backward() would do
    # nothing.

    def __reduce__(self) -> tuple[Any, ...]:
        self._refuse_copy_of_non_leaf("pickling")
        return (
            _rebuild,
            (self._data, self.grad, self.name, self.requires_grad),
        )

    def __copy__(self) -> Variable:
        self._refuse_copy_of_non_leaf("copy.copy() of")
        return _rebuild(self._data, self.grad, self.name, self.requires_grad)

    def __deepcopy__(self, memo: dict[int, Any]) -> Variable:
        self._refuse_copy_of_non_leaf("copy.deepcopy() of")
        data, grad = copy.deepcopy((self._data, self.grad), memo)
        var = memo[id(self)] = _rebuild(data, grad, self.name, self.requires_grad)
        return var

    def _refuse_copy_of_non_leaf(self, op: str) -> None:
        node = self._node
        creator = node.creator_node
        if creator is None or not node.requires_grad:
            return
        raise TypeError(
            f"{op} {self._describe()}, the output of {creator.label}: only a leaf "
            "(a Variable without a creator) can be copied or pickled, since the graph "
            "that made it is not copied and the copy's backward() would do nothing. Copy "
            "its values in a leaf instead (Variable(y.array, requires_grad=False), or "
            "y.array itself), or cut the graph first if it is no longer needed "
            "(y.unchain())"
        )


_object_new = object.__new__
_weakref = weakref.ref
_numpy_scalars = _backend.NUMPY_SCALARS
_numpy_asarray = numpy.asarray
_NUMPY_PROBE = numpy.empty(0)  # an array whose namespace is NumPy's


def warn_zerograd() -> None:
    """Chainer's deprecation of ``zerograd`` (for its caller's caller: the user)."""
    warnings.warn(
        "Variable.zerograd() is deprecated; use Variable.cleargrad(), which avoids "
        "allocating a zero array",
        DeprecationWarning,
        stacklevel=3,
    )


def _new_variable(data: Any, requires_grad: bool, creator: Any, rank: int) -> Variable:
    # The constructor of FunctionNode.apply's hot path: no validation, no __init__.
    shape = data.shape
    if not shape and data.__class__ in _numpy_scalars:
        # NumPy answers a 0-d result (of a reduction, a ufunc, an operator) with a
        # scalar: hold a 0-d array, as Chainer and the array API standard do. Every
        # result and gradient an operation makes passes here.
        data = _numpy_asarray(data)
    var = _object_new(Variable)
    var._data = data
    var._grad_var = None
    node = _object_new(VariableNode)
    node._variable = _weakref(var)
    node.creator_node = creator
    node._data = None
    node.name = None
    node.requires_grad = requires_grad
    node.rank = rank
    node.shape = shape if shape.__class__ is tuple else tuple(shape)
    node.dtype = data.dtype
    node.persistent = False
    node.moved = False
    node.version = 0
    # node._consumers stays unset: eager operations record no consumers.
    var._node = node
    return var


def _empty_variable(
    shape: tuple[int, ...] | None, dtype: Any, requires_grad: bool, creator: Any, rank: int
) -> Variable:
    """A Variable whose data define-then-run computes later.

    The twin of :func:`_new_variable`, kept separate so that the hot path of every
    eager operation pays for no extra call or argument.
    """
    var = _object_new(Variable)
    var._data = None
    var._grad_var = None
    node = _object_new(VariableNode)
    node._variable = _weakref(var)
    node.creator_node = creator
    node._data = None
    node.name = None
    node.requires_grad = requires_grad
    node.rank = rank
    node.shape = shape
    node.dtype = dtype
    node.persistent = False
    node.moved = False
    node.version = 0
    node._consumers = None
    var._node = node
    return var


_backend.register_wrapper(Variable)


def note_consumer(func: FunctionNode, nodes: tuple[VariableNode, ...]) -> None:
    """Record weakly that ``func`` takes ``nodes`` as inputs (``function_references``).

    Define-then-run calls it for every function it links; eager operations do not,
    since it cost 7% of the time of an operation (``bench_overhead.py``), so the
    nodes that :func:`_new_variable` makes leave ``_consumers`` unset.

    Dead references are swept when a list reaches a power of two (from 32 on) and
    dropped when at least half of it is dead, so a leaf that feeds a function at
    every step keeps a list bounded by about four times its live consumers, at an
    amortised constant cost per function.
    """
    ref = _weakref(func)
    for node in nodes:
        refs = getattr(node, "_consumers", None)
        if refs is None:
            node._consumers = [ref]
            continue
        refs.append(ref)
        n = len(refs)
        if n >= 32 and not n & (n - 1):
            live = [r for r in refs if r() is not None]
            if len(live) <= n // 2:
                refs[:] = live


def clear_node_data(node: VariableNode) -> None:
    """Free the array of ``node`` and of its Variable (``clear_buffer``)."""
    node._data = None
    var = node._variable()
    if var is not None:
        var._data = None


def _can_require_grad(data: Any, requested: bool | None, op: str) -> bool:
    """Whether a Variable of ``data`` requires a gradient when ``requested`` (``None``:
    the default, which follows the dtype); asking for one on integer or boolean data
    is an error."""
    if data is None:
        return True if requested is None else bool(requested)
    floating = raw_namespace(data).isdtype(data.dtype, ("real floating", "complex floating"))
    if requested is None:
        return bool(floating)
    if requested and not floating:
        raise TypeError(
            f"{op}: requires_grad=True needs floating-point or complex data, got "
            f"{dtype_name(data.dtype)} (its gradient would be cast to integers and lost); "
            "cast it first, e.g. xp.astype(x, xp.float64), or leave requires_grad unset"
        )
    return bool(requested)


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


def _zeros(shape: tuple[int, ...], dtype: Any, device: Any) -> Any:
    """Zeros for ``Variable(shape=...)``: on ``device``'s library, NumPy by default."""
    if device is not None:
        dev = get_device(device)
        return dev.xp.zeros(shape, dtype=dtype or dev.xp.float32, device=dev.device)
    xp = raw_namespace(numpy.empty(0))
    return xp.zeros(shape, dtype=dtype or xp.float32)


def _rebuild(data: Any, grad: Any, name: str | None, requires_grad: bool) -> Variable:
    return Variable(data, name=name, grad=grad, requires_grad=requires_grad)
