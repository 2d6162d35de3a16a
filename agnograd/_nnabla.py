"""nnabla's ``Variable`` interface: ``d``, ``g``, ``need_grad``, ``parent``,
``persistent``, ``forward``, ``reset_shape``, ``rewire_on``, ``unlinked``,
``visit``, ...; a mixin of :class:`agnograd.Variable`.

Running a graph that was defined with auto-forward off is define-then-run's
(``agnograd._define_then_run``), reached through the core's extension point.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Self

import array_api_compat

from agnograd import _extension, _graph
from agnograd._backend import SCALARS, raw_namespace
from agnograd._graph import functions_of

if TYPE_CHECKING:
    from agnograd._function import FunctionNode
    from agnograd._variable import Variable, VariableNode


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

    @classmethod
    def from_numpy_array(cls, data: Any, grad: Any = None, need_grad: bool | None = None) -> Self:
        """A new Variable holding a copy of ``data`` (and of ``grad``), nnabla's API.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> a = np.ones(2)
        >>> v = agnograd.Variable.from_numpy_array(a)
        >>> v.d is a, v.need_grad
        (False, False)
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
        xp = raw_namespace(data)
        copied_grad = None if grad is None else xp.asarray(grad, copy=True)
        return cls(  # type: ignore[call-arg]
            xp.asarray(data, copy=True), grad=copied_grad, requires_grad=bool(need_grad)
        )

    # -- nnabla's names for data and gradient

    @property
    def d(self) -> Any:
        """The data array; assign an array of the Variable's shape (or a scalar) to feed it.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(shape=(2,))
        >>> x.d = 3
        >>> x.d
        array([3., 3.], dtype=float32)
        """
        return self._data

    @d.setter
    def d(self, value: Any) -> None:
        self.array = self._fitted(value, "d")

    @property
    def g(self) -> Any:
        """The gradient array (zeros if none yet); assign an array or a scalar.

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
        if node.shape is not None and self._data is None and tuple(value.shape) != node.shape:
            raise ValueError(
                f"Variable.{what}: the array has shape {tuple(value.shape)} but the Variable "
                f"was declared with shape {node.shape}; use reset_shape() to change it"
            )
        return value

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

    def forward(self, clear_buffer: bool = False, clear_no_need_grad: bool = False) -> None:
        """Recompute this Variable from the current data of the graph's inputs.

        The first runs walk the graph (:func:`agnograd.forward_all`); once it has run
        ``agnograd.config.compile_after`` times unchanged, a compiled plan of it runs
        instead, with the same results and the same arrays kept (see "Compiled
        re-runs" in the define-then-run guide).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.array([1.0]))
        >>> y = x * 2
        >>> x.d = np.array([5.0]); y.forward(); y.d
        array([10.])
        """
        _extension.replay.forward(self, clear_buffer, clear_no_need_grad)

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
