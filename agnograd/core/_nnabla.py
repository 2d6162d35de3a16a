"""nnabla's ``Variable`` interface: ``d``, ``g``, ``need_grad``, ``parent``,
``persistent``, ``apply``, ``function_references``, ``forward``, ``reset_shape``,
``rewire_on``, ``unlinked``, ``visit``, ...; a mixin of :class:`agnograd.Variable`.

Running a graph that was defined with auto-forward off is define-then-run's
(``agnograd.static._define_then_run``), reached through the core's extension point.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Self

import array_api_compat
import numpy

from agnograd.backends import _backend
from agnograd.backends._backend import SCALARS, raw_namespace
from agnograd.core import _extension, _graph
from agnograd.core._graph import functions_of

if TYPE_CHECKING:
    from agnograd.core._function import FunctionNode
    from agnograd.core._variable import Variable
    from agnograd.core._variable_node import VariableNode


class NnablaInterface:
    """nnabla's ``Variable`` interface, mixed into :class:`agnograd.Variable`."""

    __slots__ = ()

    _data: Any
    _node: VariableNode
    if TYPE_CHECKING:  # Variable's properties, which the methods below use
        array: Any
        grad: Any

        @property
        def requires_grad(self) -> bool: ...
        @requires_grad.setter
        def requires_grad(self, value: bool) -> None: ...
        @property
        def xp(self) -> Any: ...
        @property
        def device(self) -> Any: ...

    @classmethod
    def from_numpy_array(cls, data: Any, grad: Any = None, need_grad: bool | None = None) -> Self:
        """A new Variable holding a copy of ``data`` (and of ``grad``), nnabla's API.

        ``data`` is an array of any array API library (its library is kept, as in
        :meth:`from_array`) or anything ``numpy.asarray`` takes: a nested list, a
        ``range``, a scalar. ``grad`` is an array, or an array-like converted to the
        data's library, dtype and device.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> a = np.ones(2)
        >>> v = agnograd.Variable.from_numpy_array(a)
        >>> v.d is a, v.need_grad
        (False, False)
        >>> agnograd.Variable.from_numpy_array([[1.0, 2.0]], grad=[[0, 1]], need_grad=True).g
        array([[0., 1.]])
        >>> agnograd.Variable.from_numpy_array(range(3)).d
        array([0, 1, 2])
        """
        return cls.from_array(data, grad, need_grad)

    @classmethod
    def from_array(cls, data: Any, grad: Any = None, need_grad: bool | None = None) -> Self:
        """Like :meth:`from_numpy_array`, for an array of any array API library.

        Examples
        --------
        >>> import array_api_strict as xp, agnograd
        >>> agnograd.Variable.from_array(xp.ones(2), need_grad=True).need_grad
        True
        """
        if _backend.is_wrapper(data):
            raise TypeError(
                "Variable.from_array(data) (from_numpy_array): data is already a "
                "Variable; pass its array (Variable.from_array(x.array)) to copy its "
                "values into a new Variable"
            )
        if not _backend.is_array(data):
            data = numpy.asarray(data)  # an array-like, as nnabla's numpy.asarray
        xp = raw_namespace(data)
        data = xp.asarray(data, copy=True)
        if grad is not None and _backend.is_array(grad):
            grad = xp.asarray(grad, copy=True)
        elif grad is not None:
            device = array_api_compat.device(data)
            grad = _converted(xp, grad, data.dtype, device, "from_array(grad)")
        return cls(data, grad=grad, requires_grad=bool(need_grad))  # type: ignore[call-arg]

    def apply(self, **attrs: Any) -> Self:
        """Set attributes and return this Variable (nnabla's helper).

        Any settable property of a Variable may be given (``need_grad``,
        ``persistent``, ``name``, ``d``, ``g`` and the others); all names are checked
        before anything is set.

        Raises
        ------
        AttributeError
            For a name that is not a settable property of a Variable.

        Examples
        --------
        >>> import agnograd
        >>> x = agnograd.Variable(shape=(2,)).apply(need_grad=True, name="x", d=1.0)
        >>> x.need_grad, x.name, x.d
        (True, 'x', array([1., 1.], dtype=float32))
        """
        cls = type(self)
        for name in attrs:
            if not _settable(cls, name):
                settable = ", ".join(n for n in sorted(dir(cls)) if _settable(cls, n))
                raise AttributeError(
                    f"Variable.apply: {name!r} is not a settable attribute of a Variable; "
                    f"apply sets properties ({settable}): check the spelling, and call "
                    "methods directly"
                )
        for name, value in attrs.items():
            setattr(self, name, value)
        return self

    @property
    def function_references(self) -> list[FunctionNode]:
        """The live functions that take this Variable as an input, oldest first (nnabla).

        Functions are recorded weakly when a graph is built with auto-forward off
        (define-then-run): a function whose outputs are all gone drops out of the
        list. Eager operations are not recorded (the bookkeeping would cost every
        operation about 7%), so a Variable used only eagerly lists none.

        Examples
        --------
        >>> import agnograd, agnograd.functions as F
        >>> x = agnograd.Variable(shape=(2,))
        >>> with agnograd.auto_forward(False):
        ...     y = F.exp(x)
        ...     z = x * x
        >>> [f.label for f in x.function_references]
        ['Exp', 'Mul']
        >>> del y
        >>> [f.label for f in x.function_references]
        ['Mul']
        """
        node = self._node
        found: list[FunctionNode] = []
        for ref in getattr(node, "_consumers", None) or ():
            func = ref()
            # A function unchained since, or listed twice (``x * x``), is left out.
            if (
                func is not None
                and any(n is node for n in func.inputs or ())
                and not any(f is func for f in found)
            ):
                found.append(func)
        return found

    # -- nnabla's names for data and gradient

    @property
    def d(self) -> Any:
        """The data array; assign an array of the Variable's shape (or a scalar) to feed it.

        An array is taken as it is (assigning rebinds the Variable to it). A scalar
        fills the current array's shape; an array-like (a nested list, a ``range``)
        is converted by the current array's library, to its dtype and device (by
        NumPy for a Variable without data).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(shape=(2,))
        >>> x.d = 3
        >>> x.d
        array([3., 3.], dtype=float32)
        >>> x.d = range(2)
        >>> x.d
        array([0., 1.], dtype=float32)
        """
        return self._data

    @d.setter
    def d(self, value: Any) -> None:
        self.array = self._fitted(value, "d")

    @property
    def g(self) -> Any:
        """The gradient array (zeros if none yet); assign an array, an array-like or a
        scalar, as for :attr:`d`.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.ones(2))
        >>> x.g = 0
        >>> x.g
        array([0., 0.])
        """
        if self.grad is None and self._data is not None:
            self.grad = raw_namespace(self._data).zeros_like(self._data)
        return self.grad

    @g.setter
    def g(self, value: Any) -> None:
        self.grad = self._fitted(value, "g")

    def _fitted(self, value: Any, what: str) -> Any:
        node = self._node
        if type(value) in SCALARS:
            if self._data is not None:
                xp = raw_namespace(self._data)
                return xp.full(
                    node.shape, value, dtype=node.dtype, device=array_api_compat.device(self._data)
                )
            raise RuntimeError(f"Variable.{what}: no array to fill with {value!r} yet")
        if value is not None and not _backend.is_array(value) and not _backend.is_wrapper(value):
            value = self._from_array_like(value, what)
        if node.shape is not None and self._data is None and tuple(value.shape) != node.shape:
            raise ValueError(
                f"Variable.{what}: the array has shape {tuple(value.shape)} but the Variable "
                f"was declared with shape {node.shape}; use reset_shape() to change it"
            )
        return value

    def _from_array_like(self, value: Any, what: str) -> Any:
        """``value`` (a nested list, a ``range``, ...) as an array of the Variable's
        library, dtype and device; NumPy's choice for a Variable without any."""
        data, node = self._data, self._node
        if data is not None:
            return _converted(
                raw_namespace(data), value, data.dtype, array_api_compat.device(data), what
            )
        if node.dtype is not None:  # a result of define-then-run not computed (or freed)
            device = self.device
            return _converted(self.xp, value, node.dtype, device and device.device, what)
        return _converted(numpy, value, None, None, what)

    @property
    def need_grad(self) -> bool:
        """nnabla's name for :attr:`requires_grad`."""
        return self._node.requires_grad

    @need_grad.setter
    def need_grad(self, value: bool) -> None:
        self.requires_grad = value

    @property
    def parent(self) -> FunctionNode | None:
        """The function that creates this Variable (nnabla's name for ``creator_node``)."""
        return self._node.creator_node

    @parent.setter
    def parent(self, func: FunctionNode | None) -> None:
        self._node.set_creator_node(func)

    @property
    def persistent(self) -> bool:
        """Whether ``clear_buffer`` options keep this Variable's data."""
        return self._node.persistent

    @persistent.setter
    def persistent(self, value: bool) -> None:
        self._node.persistent = bool(value)
        _graph.edited()

    # -- running the graph

    def forward(
        self,
        clear_buffer: bool = False,
        clear_no_need_grad: bool = False,
        function_pre_hook: Callable[[FunctionNode], Any] | None = None,
        function_post_hook: Callable[[FunctionNode], Any] | None = None,
    ) -> None:
        """Recompute this Variable from the current data of the graph's inputs.

        The first runs walk the graph (:func:`agnograd.forward_all`); once it has run
        ``agnograd.config.compile_after`` times unchanged, a compiled plan of it runs
        instead, with the same results and the same arrays kept (see "Compiled
        re-runs" in the define-then-run guide). nnabla's ``function_pre_hook`` and
        ``function_post_hook`` are called with each :class:`~agnograd.FunctionNode`
        right before and right after its forward (the graph is then walked).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.array([1.0]))
        >>> y = x * 2
        >>> x.d = np.array([5.0]); y.forward(); y.d
        array([10.])
        >>> y.forward(function_post_hook=lambda f: print(f.label, y.d))
        MulConstant [10.]
        """
        _extension.replay.forward(
            self, clear_buffer, clear_no_need_grad, function_pre_hook, function_post_hook
        )

    @property
    def recompute(self) -> bool:
        """Whether forward frees this Variable's data and backward recomputes it (nnabla).

        ``forward()`` frees the data of a result marked so once no later function of
        the forward reads it, together with what functions kept of it for backward;
        backward runs the forwards that computed it again, just before a function's
        backward reads it. The gradients are those of a run without it, bit for bit.
        Leaves, ``persistent`` Variables and the Variables forward is asked for keep
        their data. Results made inside :func:`agnograd.recompute` are marked.

        Examples
        --------
        >>> import numpy as np, agnograd, agnograd.functions as F
        >>> x = agnograd.Variable(np.array([0.0, 1.0]), need_grad=True)
        >>> with agnograd.auto_forward(False):
        ...     h = F.exp(x)
        ...     y = F.sum(F.sin(h))
        >>> h.recompute = True
        >>> y.forward()
        >>> h.d is None
        True
        >>> y.backward()
        >>> x.g.round(4)
        array([ 0.5403, -2.4783])
        """
        return bool(_extension.define_then_run.is_recompute(self._node))

    @recompute.setter
    def recompute(self, value: bool) -> None:
        _extension.define_then_run.set_recompute(self._node, value)

    def reset_shape(self, shape: Sequence[int], force: bool = False) -> None:
        """Change the declared shape in place (nnabla); data of another size needs ``force``.

        Examples
        --------
        >>> import agnograd
        >>> x = agnograd.Variable(shape=(2, 3))
        >>> x.reset_shape((3, 2)); x.shape
        (3, 2)
        >>> x.reset_shape((4,), force=True); x.d.shape
        (4,)
        """
        shape = tuple(shape)
        node, data = self._node, self._data
        if data is not None:
            xp = raw_namespace(data)
            if math.prod(shape) == math.prod(data.shape):
                self.array = xp.reshape(data, shape)
            elif force:
                self.array = xp.zeros(shape, dtype=data.dtype, device=array_api_compat.device(data))
            else:
                raise ValueError(
                    f"reset_shape: {tuple(data.shape)} has {math.prod(data.shape)} elements, "
                    f"{shape} has {math.prod(shape)}; pass force=True to reallocate"
                )
        node.shape = shape

    def rewire_on(self, var: Variable) -> None:
        """Put this Variable's successor graph on top of ``var``'s creator (nnabla).

        This Variable takes ``var``'s data and creator, and ``var`` loses its creator,
        so ``var -> A`` and ``B -> var`` become ``B -> self -> A``.

        Examples
        --------
        >>> import numpy as np, agnograd, agnograd.functions as F
        >>> xa = agnograd.Variable(shape=(2,), need_grad=True)
        >>> with agnograd.auto_forward(False):
        ...     ya = F.sum(xa * 3)
        ...     xb = agnograd.Variable(shape=(2,), need_grad=True)
        ...     yb = F.exp(xb)
        >>> xa.rewire_on(yb)
        >>> xb.d = np.zeros(2, np.float32); ya.forward(); float(ya.d)
        6.0
        """
        _graph.edited()
        node, vnode = self._node, var._node
        func = vnode.creator_node
        if func is not None:
            # Lower every rank upstream of `var` so that `func` ranks below this node;
            # lowering a whole ancestor set never breaks the order of any other edge.
            shift = func.rank - (node.rank - 1)
            if shift > 0:
                for f in functions_of([vnode]):
                    f.rank -= shift
                    for ref in f.outputs or ():
                        out = ref()
                        if out is not None:
                            out.rank -= shift
            func.outputs = tuple(
                weakref.ref(node) if ref() is vnode else ref for ref in func.outputs or ()
            )
            node.creator_node = func
            node.rank = func.rank + 1
            vnode.creator_node = None
        node.shape, node.dtype = vnode.shape, vnode.dtype
        self._data = var._data
        if node._data is not None or vnode._data is not None:
            node._data = vnode.data

    def unlinked(self, need_grad: bool | None = None) -> Variable:
        """A Variable without creator that shares this one's data buffer (nnabla).

        ``forward()`` of this Variable's graph updates the unlinked one as well.

        Unlike nnabla's, the unlinked Variable is not equal to this one as a key of a
        ``dict`` or ``set``: ``==`` compares elements (the array API), and Python's
        containers call it after a hash matches, so a shared hash would make
        ``z in {y}`` raise for an array of several elements (``bool`` of an array)
        and depend on the values for one element (``nan != nan``). Use ``y`` as the key.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> y = agnograd.Variable(np.ones(2)) * 2
        >>> z = y.unlinked()
        >>> z.parent is None, z.d is y.d
        (True, True)
        """
        return _extension.define_then_run.unlinked(self, need_grad)

    get_unlinked_variable = unlinked

    def visit(self, f: Callable[[FunctionNode], Any]) -> None:
        """Call ``f`` on every function behind this Variable, in forward order.

        Examples
        --------
        >>> import numpy as np, agnograd, agnograd.functions as F
        >>> y = F.sum(F.exp(agnograd.Variable(np.ones(2))))
        >>> names = []
        >>> y.visit(lambda func: names.append(func.label)); names
        ['Exp', 'Sum']
        """
        for func in functions_of([self._node]):
            f(func)

    def visit_check(self, f: Callable[[FunctionNode], Any]) -> bool:
        """Like :meth:`visit`, but stop and return ``True`` once ``f`` returns true.

        Examples
        --------
        >>> import numpy as np, agnograd, agnograd.functions as F
        >>> y = F.sum(F.exp(agnograd.Variable(np.ones(2))))
        >>> y.visit_check(lambda func: func.label == "Exp")
        True
        """
        return any(f(func) for func in functions_of([self._node]))

    def size_from_axis(self, axis: int = -1) -> int:
        """Number of elements from ``axis`` on; ``-1`` (the default) means all of them.

        Examples
        --------
        >>> import agnograd
        >>> a = agnograd.Variable(shape=(10, 9))
        >>> a.size_from_axis(), a.size_from_axis(1), a.size_from_axis(2)
        (90, 9, 1)
        """
        shape = self._node.shape or ()
        return math.prod(shape if axis == -1 else shape[axis:])

    @property
    def info(self) -> SimpleNamespace:
        """A summary object: name, shape, dtype, need_grad, persistent, parent, rank.

        Examples
        --------
        >>> import agnograd
        >>> agnograd.Variable(shape=(2,), need_grad=True).info.need_grad
        True
        """
        node = self._node
        parent = node.creator_node
        return SimpleNamespace(
            name=node.name,
            shape=node.shape,
            dtype=node.dtype,
            need_grad=node.requires_grad,
            persistent=node.persistent,
            parent=None if parent is None else parent.label,
            rank=node.rank,
        )


def _settable(cls: type, name: str) -> bool:
    """Whether ``name`` is a property of ``cls`` with a setter (what ``apply`` sets)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            attr = vars(klass)[name]
            return isinstance(attr, property) and attr.fset is not None
    return False


def _converted(xp: Any, value: Any, dtype: Any, device: Any, what: str) -> Any:
    """``xp.asarray(value, dtype=dtype, device=device)``, with an error naming ``what``."""
    try:
        if xp is numpy:
            return numpy.asarray(value, dtype=dtype)
        return xp.asarray(value, dtype=dtype, device=device)
    except (TypeError, ValueError, RuntimeError, OverflowError) as error:
        raise TypeError(
            f"Variable.{what}: cannot convert {type(value).__name__} to an array of "
            f"{_backend.backend_name(xp)} ({error}); assign an array, a nested list of "
            "numbers or a scalar"
        ) from error
