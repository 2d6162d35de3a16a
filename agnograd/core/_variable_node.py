"""``VariableNode``, the graph-side twin of a ``Variable``: creator, rank, shape and
dtype, and a weak reference back to the Variable."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from agnograd.backends._backend import Array
from agnograd.backends._backend import label as _label
from agnograd.core import _graph

if TYPE_CHECKING:
    from agnograd.core._function import FunctionNode
    from agnograd.core._variable import Variable


class VariableNode(weakref.ref["Variable"]):
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

    # A node is itself the weak reference to the Variable it was made for (one object
    # fewer for every operation to make, and for the garbage collector to walk).
    # ``_link`` replaces that reference where an in-place operation gives the node
    # another Variable: read the Variable through :attr:`_variable` (or get_variable).
    # ``_tangent``, unset but inside a jvp, holds forward mode's tangents of the
    # Variable (agnograd.transforms._forward). ``_creator`` is :attr:`creator_node`,
    # which the hot paths read without the property's call.
    __slots__ = (
        "__weakref__",
        "_consumers",
        "_creator",
        "_data",
        "_link",
        "_tangent",
        "dtype",
        "moved",
        "name",
        "persistent",
        "rank",
        "requires_grad",
        "shape",
        "version",
    )

    _tangent: tuple[Any, Any, Any] | None  # (level, tangent, the next entry or None)

    # Nodes are equal only to themselves and hashed by identity (a weak reference
    # compares and hashes its referent).
    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__

    def __new__(
        cls, variable: Variable, name: str | None = None, *, requires_grad: bool = True
    ) -> VariableNode:
        return weakref.ref.__new__(cls, variable)

    def __init__(
        self, variable: Variable, name: str | None = None, *, requires_grad: bool = True
    ) -> None:
        self._link: Any = None
        self._creator: FunctionNode | None = None
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
        # The clock of the graph's writes when the data was computed (see
        # agnograd.core._versions.graph_clock): a later write into its memory makes it stale.
        self.version = 0
        # Weak references to the functions that take this node as an input
        # (note_consumer), for nnabla's Variable.function_references.
        self._consumers: list[weakref.ref[FunctionNode]] | None = None
        # (Set, though a jvp reads it with a default: a missing slot costs the
        # reader an exception. Nodes of eager results leave it unset, as _consumers.)
        self._tangent = None

    def __reduce_ex__(self, protocol: Any) -> Any:
        # copy.copy and copy.deepcopy make a node of the same Variable, as they did for
        # a node that held a weak reference (which both take as it is); a weak
        # reference cannot be pickled, and neither can a node.
        self.creator_node  # noqa: B018 - records this node as its creator's output: not the copy
        state = {name: getattr(self, name) for name in self.__slots__ if hasattr(self, name)}
        del state["__weakref__"]
        state.pop("_tangent", None)  # a copy is not the primal that a jvp differentiates
        var = self._variable()
        return _node_of, (weakref.ref(_GONE if var is None else var),), (None, state)

    @property
    def _variable(self) -> Any:
        """The weak reference to the Variable: the node itself, or the one it was
        given (``node._variable = weakref.ref(other)``) when its Variable changed."""
        link = self._link
        return self if link is None else link

    @_variable.setter
    def _variable(self, ref: Any) -> None:
        self._link = ref

    @property
    def creator_node(self) -> FunctionNode | None:
        """The :class:`FunctionNode` that computed this node's Variable (``None`` for a
        leaf). Set it with :meth:`set_creator_node`, which also sets the rank.

        A node that agnograd's fast path linked keeps no reference to its output (one
        object fewer per operation for Python's collector to walk): this is where it
        learns it, as its ``outputs`` (see ``FunctionNode.outputs``).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.ones(2))
        >>> y = agnograd.functions.sin(x)
        >>> f = y.node.creator_node
        >>> f.label, f.outputs[0]() is y.node, x.node.creator_node is None
        ('Sin', True, True)
        """
        func = self._creator
        if func is not None and func._node_outs is None and func.inputs is not None:
            func._node_outs = (weakref.ref(self),)
        return func

    @creator_node.setter
    def creator_node(self, func: FunctionNode | None) -> None:
        self._creator = func

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
        # Variable's module imports this one, so Variable is imported where it is needed.
        from agnograd.core._variable import Variable

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


class _Gone:
    """The Variable of a copied node whose Variable is gone (it dies at once)."""


_GONE = _Gone()


def _node_of(ref: weakref.ref[Any]) -> VariableNode:
    """A node whose weak reference is to ``ref``'s Variable (dead if it is gone)."""
    target = ref()
    if target is _GONE or target is None:
        target = _Gone()  # dies when this function returns: a dead reference
    return weakref.ref.__new__(VariableNode, target)


def note_consumer(func: FunctionNode, nodes: tuple[VariableNode, ...]) -> None:
    """Record weakly that ``func`` takes ``nodes`` as inputs (``function_references``).

    Define-then-run calls it for every function it links; eager operations do not,
    since it cost 7% of the time of an operation (``bench_overhead.py``), so the
    nodes that ``_new_variable`` makes leave ``_consumers`` unset.

    Dead references are swept when a list reaches a power of two (from 32 on) and
    dropped when at least half of it is dead, so a leaf that feeds a function at
    every step keeps a list bounded by about four times its live consumers, at an
    amortised constant cost per function.
    """
    ref = weakref.ref(func)
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


#: One tuple per shape for the nodes that agnograd makes (see :func:`shared_shape`).
shapes: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def shared_shape(shape: Any) -> tuple[Any, ...]:
    """``tuple(shape)``, the same tuple for every node of that shape, which
    :data:`shapes` keeps (4,096 at most: it starts again when full). A full collection
    reads every object that a tracked object points to, and a graph's nodes then point
    to a few tuples, not one each.

    Examples
    --------
    >>> from agnograd.core._variable_node import shared_shape
    >>> shared_shape([2, 3]) is shared_shape((2, 3))
    True
    """
    shape = tuple(shape)
    found = shapes.get(shape)
    if found is not None:
        return found
    # (A NumPy integer equals the int of its value: only shapes of ints are shared, so
    # that no node takes the types of another's dimensions.)
    if all(n.__class__ is int for n in shape):
        if len(shapes) >= 4096:
            shapes.clear()
        shapes[shape] = shape
    return shape


def clear_node_data(node: VariableNode) -> None:
    """Free the array of ``node`` and of its Variable (``clear_buffer``)."""
    node._data = None
    var = node._variable()
    if var is not None:
        var._data = None
