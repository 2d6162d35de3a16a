"""Writes into Variables: ``x[key] = value``.

A write rebinds the Variable to the output of a node, so the graph stays right:
``x[key] = v`` gives the overwritten positions a zero gradient and ``v`` the
upstream gradient at ``key``. The write goes into the existing array where the
backend allows it (NumPy, PyTorch, CuPy, array-api-strict) and the version of its
memory is bumped (see :mod:`agnograd.core._versions`), so a node that saved the old
values, or a view of them, raises at backward time instead of computing a wrong
gradient. Immutable arrays (JAX) get a fresh array.

A write into a view changes the arrays of the Variables it views, and their graphs
follow, as PyTorch's ``CopySlices`` "rebases" a view's base: after
``h[0:2][0] = v`` the Variable ``h`` is rebound to a node that says "``h`` is its old
value with ``h[0:2]`` replaced by the view's new value" (a :class:`SetItem` whose
write is done already). This walks up a chain of indexing views (``h[0:2][1:]``,
through views whose Variable is gone, and through views of a constant, which
:func:`note_view` records outside the graph) as long as the arrays share the
written memory. A Variable whose memory was reached through a view made another
way (``reshape``, ``permute_dims``, ...) cannot be rebased, since which of its
elements changed is unknown: it is rebound to a node whose backward raises, so it
is never silently wrong. Other Variables of the same memory computed before the
write (``a = h[0:2]``, then ``h[0] = 1`` or ``h[1:3][0] = 1``) keep a graph that
no longer describes their values: their next use in a graph raises
(:func:`agnograd.core._versions.check_inputs`; torch instead rebuilds a view's graph at
each use, a cost on every operation). Writes inside ``no_backprop_mode()`` change
values that no graph follows, as in ``torch.no_grad``. Left out: a constant written
through a view made by anything but indexing keeps no graph.

A leaf that requires a gradient is never written, neither directly nor through a
view of its memory (``x[0:2][0] = v``), while a graph is recorded. Define-then-run
writes into a copy: its forwards run later, in an order that need not be the
order of the program, so a write must not change what another node reads; there
a write through a view does not reach its base (as on JAX).

Augmented assignment does not write: ``h += a`` (``Variable.__iadd__``, see
:func:`inplace`) binds the name ``h`` to the new Variable ``h + a`` and every other
name for the old one keeps its value and graph, as in Chainer and nnabla. (The
array API standard lets ``+=`` either write or rebind, so array API code cannot
rely on the write: JAX's arrays rebind.) What the standard does ask, that an
in-place operator keep its left operand's dtype and shape, holds: ``int_h += 1.5``
raises ``TypeError`` as in NumPy and PyTorch, so ``array_api_extra.at(h, i).add(1.5)``
cannot truncate silently. Writing into data stays explicit: ``x[key] = value``,
``x.d[...] = ...``, ``copydata``.
"""

from __future__ import annotations

import weakref
from typing import Any

import array_api_compat

from agnograd.backends._backend import SCALARS, known_shape, label, raw_namespace
from agnograd.core import _versions
from agnograd.core._config import AUTO_FORWARD, BACKPROP, MODE
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode
from agnograd.functions._namespace import namespace_of


class _Gone:
    pass


# A reference that is already dead, put in place of any Variable's reference.
_dead: weakref.ref[Any] = weakref.ref(_Gone())


class _Rebound(weakref.ref[Variable]):
    """The reference of a node whose Variable a write in place rebound.

    Dead to the graph (the Variable holds another node now), but it still names the
    Variable, whose array is this node's array, written: a view made of the node
    finds its base through it (see :func:`_current`).
    """

    __slots__ = ()

    def __call__(self) -> None:
        return None

    def rebound(self) -> Variable | None:
        return super().__call__()


def _written_mask(shape: tuple[int, ...], key: Any, like: Any) -> Any:
    """Boolean array of ``shape``: True where ``x[key] = ...`` writes."""
    from agnograd.functions._indexing import scatter_into_zeros

    xp = raw_namespace(like)
    items = key if isinstance(key, tuple) else (key,)
    template = lifted(xp, xp.zeros(shape, dtype=xp.int8, device=_device(like)), items)
    region = xp.ones(tuple(template[key].shape), dtype=xp.int8, device=_device(like))
    region = lifted(xp, region, items)  # each example's, where the key is batched
    return scatter_into_zeros(shape, key, region) != 0


def _device(a: Any) -> Any:
    return array_api_compat.device(a)


def is_combining(x: Any) -> bool:
    """Whether ``x`` is an array whose namespace takes other libraries' arrays beside
    its own (``vmap``'s batched arrays, through the namespace's ``_combine``): an
    index or value of that kind must be an input of its node, so that the node's
    namespace is the combination."""
    return not isinstance(x, Variable) and hasattr(
        getattr(x, "__array_namespace__", None) and raw_namespace(x), "_combine"
    )


def lifted(xp: Any, x: Any, others: Any, *, copy: bool = False) -> Any:
    """``x`` as the node's namespace ``xp`` needs it beside ``others`` (the index or
    the value of an indexing node): under ``vmap``, a raw ``x`` repeated over the
    batch of a batched index or value (the namespace's ``_lift``), since Python's
    ``x[key]`` and ``x[key] = value`` are ``x``'s to answer; else ``x`` itself."""
    lift = getattr(xp, "_lift", None)
    return x if lift is None else lift(x, others, copy=copy)


class SetItem(FunctionNode):
    """``x[key] = value`` as a node: input 0 is ``x``, input 1 (if any) ``value``.

    With ``done`` the write was made already, through a view of ``x``'s memory (see
    :func:`_rebase`): forward returns ``x``'s array as it is, and backward is that of
    the write.
    """

    def __init__(
        self, key: Any, scalar: Any, copy: bool = False, done: bool = False, key_inputs: int = 0
    ) -> None:
        self.key = key
        self.scalar = scalar  # a Python scalar value, else None
        self.copy = copy  # write into a copy: the array is kept for a backward
        self.done = done
        self._takes_written_inputs = done  # x's memory holds the write already
        # Define-then-run: the last `key_inputs` inputs are the arrays of the key, which
        # the graph computes; the template holds a _KeyInput in their places, and each
        # forward fills a key of its own from it (the data change from run to run).
        self.key_inputs = key_inputs
        self._key_template = key

    @property
    def label(self) -> str:
        return "SetItemThroughView" if self.done else "SetItem"

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        return ((inputs[0].shape, inputs[0].dtype),)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        key_arrays = ()
        if self.key_inputs:
            key_arrays = inputs[-self.key_inputs :]
            self.key = _fill_key(self._key_template, key_arrays)
            inputs = inputs[: -self.key_inputs]
        x = inputs[0]
        if self.done:
            return (x,)
        value = self.scalar if len(inputs) == 1 else inputs[1]
        # Under vmap, a batched value or index makes x batched (in an array of its
        # own: the examples share x's memory)
        written = lifted(self.xp, x, (value, *key_arrays), copy=True)
        if written is not x:
            x = written
        elif self.copy:
            x = self.xp.asarray(x, copy=True)
        try:
            x[self.key] = value
        except (TypeError, ValueError, NotImplementedError):
            # Immutable arrays: build the result with standard functions.
            xp = self.xp
            mask = _written_mask(tuple(x.shape), self.key, x)
            if type(value) in SCALARS:
                filled = xp.full(tuple(x.shape), value, dtype=x.dtype, device=_device(x))
            else:
                from agnograd.functions._indexing import scatter_into_zeros

                region = tuple(xp.zeros(tuple(x.shape), dtype=xp.int8)[self.key].shape)
                filled = scatter_into_zeros(
                    tuple(x.shape), self.key, xp.astype(xp.broadcast_to(value, region), x.dtype)
                )
            return (xp.where(mask, filled, x),)
        _versions.bump(x)
        return (x,)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any]:
        # Linear in x and the value together: the value's tangent written into x's (a
        # zero where either has none, or the value is a Python scalar), into a copy.
        values = len(inputs) - self.key_inputs
        if all(t is None for t in tangents[:values]):
            return (None,)
        pairs = zip(inputs[:values], tangents[:values], strict=True)
        ts = [xp.zeros_like(x) if t is None else t for x, t in pairs]
        scalar = 0 if values == 1 else None
        write = SetItem(self._key_template, scalar, True, False, self.key_inputs)
        args = (*ts, *inputs[values:])
        if isinstance(ts[0], Variable):  # watched: on the reverse graph too
            return (write.apply(args)[0],)
        write.xp = xp
        return (write.forward(args)[0],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        # The inputs are set (backward runs on a linked node) and have a shape.
        shape: tuple[int, ...] = self.inputs[0].shape  # type: ignore[index, assignment]
        result: list[Any] = []
        values = len(self.inputs) - self.key_inputs  # type: ignore[arg-type]
        for i in indexes:
            if i >= values:
                result.append(None)  # an array of the key
            elif i == 0:
                mask = _written_mask(shape, self.key, gy._data if isinstance(gy, Variable) else gy)
                result.append(xp.where(mask, xp.zeros_like(gy), gy))
            else:
                result.append(gy[self.key])  # summed to the value's shape by the engine
        return tuple(result)


class _WrittenThroughView(FunctionNode):
    """A Variable whose array a write changed through a view that is not an index of
    it (``reshape``, ...): which elements changed is unknown, so backward raises.

    Input 0 is the Variable's value before the write, input 1 the written view (so
    that the node is recorded whenever the write is); forward keeps the array.
    """

    _takes_written_inputs = True

    def __init__(self, message: str) -> None:
        self.message = message

    @property
    def label(self) -> str:
        return "WrittenThroughView"

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        raise RuntimeError(self.message)


#: The nodes that write into memory (and count versions as they run): a compiled
#: plan leaves the graphs that hold one to forward_all and the engine.
WRITING_NODES = (SetItem, _WrittenThroughView)


# The node of a view made of a constant, outside the graph -> (the constant's node,
# the key): see note_view.
_views: weakref.WeakKeyDictionary[VariableNode, tuple[VariableNode, Any]] = (
    weakref.WeakKeyDictionary()
)


def note_view(x: Any, key: Any, y: Variable) -> None:
    """Record that ``y = x[key]`` was made outside the graph (``x`` requires no gradient).

    A later write through ``y`` of a value that requires a gradient rebases ``x``
    (see the module), as the graph's ``GetItem`` node lets it do for other views.
    ``get_item`` calls it only for results without a creator and basic keys (other
    keys copy).
    """
    # Where no graph is recorded a write needs none either.
    if isinstance(x, Variable) and y._data is not None and MODE.get()[BACKPROP]:
        _views[y._node] = (x._node, key)


def _rebind(var: Variable, out: Variable) -> None:
    """Make ``var`` the Variable of ``out``'s node (its old node stays in the graph)."""
    if out._node.creator_node is None:
        if out._data is not var._data:  # (a write in place counted itself)
            var.array = out._data  # no graph: only the data changes
        # and, inside a jvp, the tangents: the write's (agnograd.transforms._forward)
        tangent = getattr(out._node, "_tangent", None)
        if tangent is not None:
            var._node._tangent = tangent
        elif getattr(var._node, "_tangent", None) is not None:
            del var._node._tangent
        return
    # Written in place, the old node's array is still var's: views of it may need var.
    var._node._variable = _Rebound(var) if out._data is var._data else _dead
    var._data = out._data
    var._node = out._node
    out._node._variable = weakref.ref(var)


def _records(var: Variable, *others: Any) -> bool:
    """Whether an operation of ``var`` and ``others`` is recorded in the graph."""
    return MODE.get()[BACKPROP] and (
        var._node.requires_grad or any(isinstance(o, Variable) and o.requires_grad for o in others)
    )


def _check_leaf(var: Variable, op: str, *others: Any) -> None:
    node = var._node
    if node.creator_node is None and node.requires_grad and _records(var, *others):
        raise RuntimeError(
            f"{op}: {var._describe()} is a leaf that requires a gradient; writing into it "
            "would lose that gradient. Write into a copy (y = x * 1), or do it inside "
            "agnograd.no_backprop_mode() (e.g. a parameter update)"
        )


def _current(node: VariableNode, memory: Any) -> Variable | None:
    """The live Variable whose array is ``node``'s, if that array is in ``memory``."""
    ref = node._variable
    var = ref.rebound() if ref.__class__ is _Rebound else ref()
    if var is None or var._data is None or _versions.memory_of(var._data) is not memory:
        return None
    return var


# A chain of indexing views, from the written Variable up: (key, node, Variable)
# for ``child = node's value[key]``, with the live Variable holding that value now.
_Chain = list[tuple[Any, VariableNode, Variable | None]]


class _Views:
    """What a write into ``var`` changes besides ``var`` (see :func:`_views_of`)."""

    __slots__ = ("chain", "others")

    def __init__(self, chain: _Chain, others: list[tuple[Variable, str]]) -> None:
        self.chain = chain
        self.others = others


def _views_of(var: Variable, value: Any) -> _Views | None:
    """Before ``var[key] = value``: the Variables whose arrays share ``var``'s memory.

    Refuses a write into the memory of a leaf that requires a gradient. Returns the
    chain of indexing views that made ``var`` (to rebase after the write) and the
    other live Variables sharing its memory, or ``None`` when there are none or the
    write is not recorded.
    """
    data = var._data
    if data is None or not _records(var, value):
        return None
    memory = _versions.memory_of(data)
    if memory is data:
        return None  # the array owns its memory (arrays that wrap another's always walk)
    from agnograd.functions._indexing import GetItem, is_basic

    # The memory reaches ``var`` through nodes that all share it: walk up the graph,
    # past nodes whose array is gone, and stop at arrays of other memory.
    # Each node is walked with the first function on its path from ``var`` that is
    # not indexing (None while there is none: the node is then on the chain below).
    others: dict[int, tuple[Variable, str]] = {}
    seen = {var._node}
    stack: list[tuple[VariableNode, str | None]] = [(var._node, None)]
    while stack:
        node, how = stack.pop()
        func = node.creator_node
        if func is None:
            continue
        inputs = func.inputs or ()
        if isinstance(func, SetItem | _WrittenThroughView):
            inputs = inputs[:1]  # the value's elements were copied, not viewed
        elif how is None and not (isinstance(func, GetItem) and is_basic(func.key)):
            how = func.label
        for node in inputs:
            if node in seen:
                continue
            seen.add(node)
            node_data = node.data
            if node_data is not None and _versions.memory_of(node_data) is not memory:
                continue
            if node.creator_node is None and node.requires_grad and node_data is not None:
                leaf = node._variable()
                what = "a leaf" if leaf is None else leaf._describe() + ", a leaf"
                raise RuntimeError(
                    f"x[key] = value: the array of {var._describe()} is a view of the memory "
                    f"of {what} that requires a gradient, so the write would change that "
                    "leaf behind the graph and its gradient would be wrong. Write into a "
                    "copy (y = x * 1, then y[...] = value), or do it inside "
                    "agnograd.no_backprop_mode() (e.g. a parameter update)"
                )
            base = _current(node, memory)
            if how is not None and base is not None and base is not var:
                others.setdefault(id(base), (base, how))
            stack.append((node, how))

    # The chain of indexing views: GetItem nodes in the graph, note_view's records
    # outside it, and writes in place between them (the same array).
    chain: _Chain = []
    node = var._node
    while True:
        func = node.creator_node
        if func is None:
            link = _views.get(node)
            if link is None:
                break
            parent, key = link
        elif isinstance(func, SetItem | _WrittenThroughView) and not getattr(func, "copy", False):
            node = func.inputs[0]  # type: ignore[index]
            continue
        elif isinstance(func, GetItem) and is_basic(func.key):
            parent, key = func.inputs[0], func.key  # type: ignore[index]
        else:
            break
        base = _current(parent, memory)
        chain.append((key, parent, None if base is var else base))
        node = parent
    while chain and chain[-1][2] is None:
        chain.pop()  # nothing to rebase above the last live Variable
    for _, _, base in chain:
        others.pop(id(base), None)
    if not chain and not others:
        return None
    return _Views(chain, list(others.values()))


def _rebase(var: Variable, views: _Views) -> None:
    """After a write into ``var``'s array: rebind the Variables it views (see the module)."""
    chain = views.chain
    # The arrays of levels whose Variable is gone: views of the nearest live one above.
    arrays: list[Any] = [None] * len(chain)
    for i in reversed(range(len(chain))):
        base = chain[i][2]
        arrays[i] = base._data if base is not None else arrays[i + 1][chain[i + 1][0]]
    child = var
    for (key, node, base), data in zip(chain, arrays, strict=True):
        # base's new value: its old value with base[key] replaced by child's new value.
        source = base if base is not None else Variable._from_node(node, data)
        out = SetItem(key, None, done=True).apply((source, child))[0]
        if base is not None:
            _rebind(base, out)
            out = base
        child = out
    for other, how in views.others:
        message = (
            f"backward of WrittenThroughView: the array of {other._describe()} was changed "
            f"by a write into {var._describe()}, a view of its memory made by {how}, not "
            "by indexing it, so which of its elements changed is unknown and its gradient "
            "would be wrong. Write through an index of it (x[...] = value, or "
            "x[0:2][0] = value), or into a copy of the view (v = v * 1)"
        )
        _rebind(other, _WrittenThroughView(message).apply((other, var))[0])


class _KeyInput:
    """Where an array of a key goes that define-then-run has not computed yet."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _graph_key(key: Any) -> tuple[Any, list[Variable]]:
    """``key`` with each Variable without data replaced by a :class:`_KeyInput`, and
    those Variables (they become inputs of the SetItem node); vmap's batched indices
    too, so that the node's namespace is the batch's."""
    arrays: list[Variable] = []

    def swap(k: Any) -> Any:
        if is_combining(k._data if isinstance(k, Variable) else k) or (
            isinstance(k, Variable) and k._data is None
        ):
            arrays.append(k)
            return _KeyInput(len(arrays) - 1)
        return k

    if isinstance(key, tuple):
        return tuple(swap(k) for k in key), arrays
    return swap(key), arrays


def _fill_key(key: Any, arrays: tuple[Any, ...]) -> Any:
    def fill(k: Any) -> Any:
        return arrays[k.index] if isinstance(k, _KeyInput) else k

    return tuple(fill(k) for k in key) if isinstance(key, tuple) else fill(key)


def setitem(self: Variable, key: Any, value: Any) -> None:
    """``x[key] = value``: the Variable now holds the written array (see the module)."""
    from agnograd.functions._indexing import normalize_key

    _check_leaf(self, "__setitem__", value)
    views = _views_of(self, value)
    data = self._data
    # Define-then-run: the arrays of the key that the graph computes become inputs of
    # the node; the library, device and shape of a result without data are known.
    key, key_arrays = _graph_key(key)
    if data is not None:
        key = normalize_key(key, raw_namespace(data), _device(data), len(data.shape))
    elif self._node.creator_node is not None:
        ndim = len(self._node.shape or ())
        key = normalize_key(key, self.xp, getattr(self.device, "native", None), ndim)
    if not MODE.get()[AUTO_FORWARD]:
        copy = True  # define-then-run (see the module)
    else:
        # The array may be one its creator keeps for backward (the output of max, exp,
        # ...): overwriting it would break that backward, so write into a copy then.
        creator = self._node.creator_node
        saved = creator._saved_outputs if creator is not None else None
        copy = saved is not None and any(a is data for a in saved)
    n = len(key_arrays)
    if type(value) in SCALARS:
        out = SetItem(key, value, copy, key_inputs=n).apply((self, *key_arrays))[0]
    else:
        out = SetItem(key, None, copy, key_inputs=n).apply((self, value, *key_arrays))[0]
    _rebind(self, out)
    if views is not None and out._data is data and out._node.creator_node is not None:
        _rebase(self, views)  # written in place, into memory that others view


def _same_shape(before: Any, after: Any) -> bool:
    """Whether two shapes are the same, as far as both are known (Dask's ``nan``)."""
    if before is None or after is None:
        return True
    if len(before) != len(after):
        return False
    return all(a == b or not known_shape((a, b)) for a, b in zip(before, after, strict=True))


def _operand_text(other: Any) -> str:
    if isinstance(other, Variable):
        return other._describe()
    if type(other) in SCALARS:
        return f"the {type(other).__name__} {other!r}"
    dtype, shape = getattr(other, "dtype", None), getattr(other, "shape", None)
    return f"an array ({label(None if shape is None else tuple(shape), dtype)})"


def inplace(op: Any, symbol: str, name: str) -> Any:
    """The function ``name`` of ``x <symbol>= y`` (``Variable.__iadd__``): ``op(x, y)``,
    a new Variable that the name ``x`` is bound to (see the module), with ``x``'s
    dtype and shape, or a ``TypeError`` where ``op`` changes either (the array API
    standard's rule for in-place operators, as array-api-strict applies it: NumPy
    and PyTorch refuse ``int_x += 1.5`` too, but cast ``float32_x += float64_y``).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(np.ones(2))
    >>> y = x
    >>> y += 1.0
    >>> y is x, x.array, y.array
    (False, array([1., 1.]), array([2., 2.]))
    >>> n = agnograd.Variable(np.arange(2))
    >>> n += 1.5  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: x += y (__iadd__): Variable ((2), int64, numpy) + the float 1.5 gives ...
    """

    def method(self: Variable, other: Any) -> Any:
        out = op(self, other)
        if out is NotImplemented:
            return out
        before, after = self.dtype, out.dtype
        # (`is None`: NumPy's dtypes equal None, its default float64)
        kept = before is None or after is None or after == before
        if not (kept and _same_shape(self.shape, out.shape)):
            raise TypeError(
                f"x {symbol}= y ({name}): {self._describe()} {symbol} {_operand_text(other)} "
                f"gives ({out.label}), but an in-place operator keeps the shape and dtype of "
                f"its left operand, ({self.label}): the array API standard's rule for "
                "in-place operators (array-api-strict's; NumPy and PyTorch refuse a change "
                "of kind, int_x += 1.5, too). Write "
                f"x = x {symbol} y for a new Variable of the promoted dtype or broadcast "
                "shape, or convert y first (xp.astype(y, x.dtype))"
            )
        return out

    method.__name__ = method.__qualname__ = name
    return method
