"""``Variable``, what users hold: its constructors, gradient, conversions and copies;
its data and devices, place in the graph, operators, printing and nnabla's interface
come from the mixins in its bases."""

from __future__ import annotations

import copy
import math
import warnings
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import array_api_compat
import numpy

from agnograd.backends import _backend
from agnograd.backends._backend import Array, dtype_name, raw_namespace
from agnograd.backends._device import get_device
from agnograd.core import _extension
from agnograd.core import _type_check as type_check
from agnograd.core._nnabla import NnablaInterface
from agnograd.core._printing import Printing, to_numpy
from agnograd.core._variable_data import Data, _refuse_foreign_graph
from agnograd.core._variable_graph import Graph, _can_require_grad
from agnograd.core._variable_node import VariableNode, shared_shape
from agnograd.core._variable_node import shapes as _shapes
from agnograd.core._variable_operators import Operators


class Variable(Data, Graph, Operators, Printing, NnablaInterface):
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

    # ``_n``: the graph node (see :attr:`_node`), or None for a Variable of no graph
    # whose node is not made yet; ``_t``: such a Variable's forward-mode tangents
    # (agnograd.transforms._forward), which its node takes over once made.
    __slots__ = ("__weakref__", "_data", "_grad_var", "_n", "_t")

    # Make NumPy return NotImplemented for ``ndarray <op> Variable`` so the reflected
    # operator of the Variable runs instead of an object-array loop.
    __array_ufunc__ = None
    __array_priority__ = 200

    _data: Any
    _n: VariableNode | None
    _t: Any
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
        if name is None and not requires_grad:
            self._n = self._t = None  # (see _node)
        else:
            self._n = VariableNode(self, name, requires_grad=requires_grad)
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
        var._n = node
        return var

    @property
    def _node(self) -> VariableNode:
        """The graph node (:attr:`node`), made here for a Variable of no graph (no
        creator, no gradient: results under ``no_backprop_mode``, of constants, of a
        jvp) when first asked for; it takes over the Variable's tangents (``_t``)."""
        node = self._n
        if node is None:
            node = self._n = VariableNode(self, requires_grad=False)
            if self._t is not None:
                node._tangent = self._t
                self._t = None
        return node

    @_node.setter
    def _node(self, node: VariableNode) -> None:
        self._n = node

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
        if g.__class__ is not data.__class__:  # of one class, of one library
            xp, gxp = raw_namespace(data), raw_namespace(g)
            if xp is not gxp:
                raise self._grad_error(
                    what,
                    TypeError,
                    f"the gradient is a {_backend.backend_name(gxp)} array but the data is "
                    f"a {_backend.backend_name(xp)} array; convert it to the data's library",
                )
        if g.dtype != data.dtype and not any_dtype:
            raise self._grad_error(
                what,
                TypeError,
                f"gradient dtype {dtype_name(g.dtype)} differs from data dtype "
                f"{dtype_name(data.dtype)}; cast it with xp.astype",
            )
        shape = data.shape
        if g.shape != shape and not _backend.same_shape(g.shape, shape):
            raise self._grad_error(
                what,
                ValueError,
                f"gradient shape {tuple(g.shape)} differs from data shape {tuple(shape)}",
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

    # -- conversions ------------------------------------------------------------

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

    def item(self) -> Any:
        """The single element as a Python scalar (synchronises with the device).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> agnograd.Variable(np.array([2.5])).item()
        2.5
        """
        data = self._values("Variable.item()")
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
        indexing never raises ``IndexError`` (JAX clamps out-of-range indices). With
        auto-forward off, the graph holds one node per row, as many as there are rows
        now: a run on another length raises :class:`~agnograd.type_check.InvalidType`
        (build the graph again, or use :func:`agnograd.jit`, which traces per shape).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> [row.array for row in agnograd.Variable(np.array([[1.0], [2.0]]))]
        [array([1.]), array([2.])]
        """
        if self.shape == ():
            raise TypeError("iteration over a 0-d Variable (it has no first axis to iterate over)")
        length = len(self)
        return (_row(self, i, length) for i in range(length))

    def __contains__(self, value: Any) -> bool:
        """Whether some element equals ``value`` (NumPy's ``value in x``)."""
        data = self._data
        if data is None:
            raise RuntimeError(f"`in` of {self._describe()}, which holds no data yet")
        raw_value = value._data if isinstance(value, Variable) else value
        xp = raw_namespace(data)
        return bool(xp.any(data == raw_value))

    def _missing(self) -> str:
        """What to say of this Variable where an operation needs its data and it holds
        none: which Variable, and what gives it data."""
        name = f" {self.name!r}" if self.name else ""
        if self._node.creator_node is not None:
            return f"the Variable{name} is not computed yet: call forward() first"
        return (
            f"the Variable{name} is uninitialised: give it data (x.array = array), or "
            "create it with Variable(shape=..., device=...)"
        )

    def _describe(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        backend = "no data" if self._data is None else _backend.backend_name(self.xp)
        return f"Variable{name} ({self.label}, {backend})"

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> numpy.ndarray:
        """NumPy's conversion: refused while a gradient is expected, since NumPy code
        would compute on plain values and the gradient would silently be lost."""
        data = self._values("numpy.asarray()")
        if self._node.requires_grad:
            raise TypeError(
                f"numpy.asarray() of {self._describe()}, which requires a gradient: NumPy "
                "would compute without agnograd and the gradient would be lost. Use "
                "array API functions (x.__array_namespace__()), or take x.array explicitly"
            )
        try:
            values = to_numpy(data)
        except Exception as error:
            name = dtype_name(data.dtype)
            if hasattr(numpy, name):
                raise
            raise TypeError(
                f"numpy.asarray() of {self._describe()}: NumPy has no {name} dtype; cast it "
                "to one NumPy has first (x.astype(float32) holds bfloat16 and float16 "
                "values exactly)"
            ) from error
        return numpy.asarray(values, dtype=dtype)

    def _values(self, what: str) -> Array:
        """The data, for ``what`` (``"float()"``) to read its values: a Variable
        without data (built with auto-forward off, not run yet) raises."""
        data = self._data
        if data is None:
            raise RuntimeError(
                f"{what} of a Variable without data: with auto-forward off, call forward() first"
            )
        return data

    # -- pickling and copying ---------------------------------------------------
    # A copy is a leaf: its data, gradient, name, requires_grad and persistent
    # (nnabla's flag that keeps its data through clear_buffer), never the graph
    # (Chainer pickles a non-leaf as a leaf; PyTorch refuses to deepcopy one). A copy
    # of a Variable that has a creator is refused, since its backward() would do
    # nothing.

    def __reduce__(self) -> tuple[Any, ...]:
        self._refuse_copy_of_non_leaf("pickling")
        node = self._node
        return (
            _rebuild,
            (self._data, self.grad, node.name, node.requires_grad, node.persistent),
        )

    def __copy__(self) -> Variable:
        self._refuse_copy_of_non_leaf("copy.copy() of")
        node = self._node
        return _rebuild(self._data, self.grad, node.name, node.requires_grad, node.persistent)

    def __deepcopy__(self, memo: dict[int, Any]) -> Variable:
        self._refuse_copy_of_non_leaf("copy.deepcopy() of")
        data, grad = copy.deepcopy((self._data, self.grad), memo)
        node = self._node
        var = memo[id(self)] = _rebuild(data, grad, node.name, node.requires_grad, node.persistent)
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
_ref_new = weakref.ref.__new__  # a VariableNode is a weak reference to its Variable
_numpy_scalars = _backend.NUMPY_SCALARS
_numpy_asarray = numpy.asarray


def warn_zerograd() -> None:
    """Chainer's deprecation of ``zerograd`` (for its caller's caller: the user)."""
    warnings.warn(
        "Variable.zerograd() is deprecated; use Variable.cleargrad(), which avoids "
        "allocating a zero array",
        DeprecationWarning,
        stacklevel=3,
    )


def _row(x: Variable, i: int, length: int) -> Variable:
    """``x[i]``, the row ``i`` of ``length`` that iterating over ``x`` gives. Built with
    auto-forward off, the node checks at every run that ``x`` still has ``length``
    rows: the graph cannot follow another count (it has a node per row)."""
    row = x[i]
    creator = row._node.creator_node if row._data is None else None
    if creator is not None:
        creator.check_type_forward = RowCount(length, x.shape, x.name)
    return row


class RowCount:
    """The check of a row made by iterating over a Variable of a define-then-run
    graph: its input still has the ``length`` rows it had then (``shape``)."""

    __slots__ = ("length", "name", "shape")

    def __init__(self, length: int, shape: Any, name: str | None) -> None:
        self.length, self.shape, self.name = length, shape, name

    def __call__(self, in_types: Any) -> None:
        now = tuple(type_check.eval(in_types[0]).shape)
        if now[:1] == (self.length,):
            return
        what = f"Variable {self.name!r}" if self.name else "a Variable"
        raise type_check.InvalidType(
            f"x.shape[0] == {self.length}",
            f"{now[0] if now else None} != {self.length}",
            f"iteration over {what} (for row in x, list(x)) while the graph was built made "
            f"one node per row: {self.length} rows, of x of shape {self.shape}; this run "
            f"gives x of shape {now}, and a graph cannot change its number of rows. Build "
            "the graph again for the new shape, run it eagerly, or use agnograd.jit "
            "(which traces once per shape)",
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
    node = _ref_new(VariableNode, var)
    node._link = None
    node._creator = creator
    node._data = None
    node.name = None
    node.requires_grad = requires_grad
    node.rank = rank
    node.shape = _shapes.get(shape) or shared_shape(shape)  # (a plain tuple, never torch.Size)
    node.dtype = data.dtype
    node.persistent = False
    node.moved = False
    node.version = 0
    # node._consumers stays unset: eager operations record no consumers.
    var._n = node
    return var


def _plain_variable(data: Any) -> Variable:
    """A Variable of no graph around ``data`` (a result agnograd computed): no
    creator, no gradient required, its node made when first asked for (see
    ``Variable._node``). agnograd.core._fast's functions write the same in their
    bodies (_PLAIN)."""
    if data.__class__ in _numpy_scalars:
        data = _numpy_asarray(data)  # (see _new_variable)
    var = _object_new(Variable)
    var._data = data
    var._grad_var = None
    var._n = var._t = None
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
    node = _ref_new(VariableNode, var)
    node._link = None
    node._creator = creator
    node._data = None
    node.name = None
    node.requires_grad = requires_grad
    node.rank = rank
    node.shape = None if shape is None else shared_shape(shape)  # (a list, from infer)
    node.dtype = dtype
    node.persistent = False
    node.moved = False
    node.version = 0
    node._consumers = None
    var._n = node
    return var


_backend.register_wrapper(Variable)


def _zeros(shape: tuple[int, ...], dtype: Any, device: Any) -> Any:
    """Zeros for ``Variable(shape=...)``: on ``device``'s library, NumPy by default."""
    if device is not None:
        dev = get_device(device)
        return dev.xp.zeros(shape, dtype=dtype or dev.xp.float32, device=dev.device)
    xp = raw_namespace(numpy.empty(0))
    return xp.zeros(shape, dtype=dtype or xp.float32)


def _rebuild(
    data: Any, grad: Any, name: str | None, requires_grad: bool, persistent: bool = False
) -> Variable:
    # persistent has a default: pickles made before it was kept still load.
    var = Variable(data, name=name, grad=grad, requires_grad=requires_grad)
    if persistent:
        var._node.persistent = persistent
    return var
