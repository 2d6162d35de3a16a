"""What :func:`agnograd.jit` does once per signature: read the arguments, trace the
function into a define-then-run graph, refuse what depends on the data, and make
the plan that later calls run (see :mod:`agnograd.static._jit`).

The arguments are flattened (:mod:`agnograd.core._trees`) into their leaves and a
structure of nested tuples, lists and dicts. Each leaf keys the trace by its
signature (:func:`read_leaves`): an array's is its type, shape, dtype and device
(and torch's ``requires_grad``), and whether it came as a Variable that requires a
gradient; a Python number's, string's or ``None``'s is its value.

Tracing gives ``fun`` a Variable without data for each array: an identity of a leaf
holding the array, built with auto-forward off, so that every operation links the
graph and infers shapes, and converting a traced value to a Python number (``bool``,
``float``, ``x.item()``, ``numpy.asarray``) raises; :func:`refusal` turns what it
raises into :class:`ConcretizationTypeError`, naming the line of the user's code.
After the trace each of those Variables loses its creator and becomes the graph's
input; the plan computes only the outputs (``CompiledGraph`` with ``keep=CLEAR``:
no backward, nothing retained for one), so gradients that ``fun`` asks for
(``agnograd.grad``, the transforms of :mod:`agnograd.functional`) are part of the
graph that the plan runs forward.
"""

from __future__ import annotations

import contextlib
import linecache
import numbers
import os
import struct
import traceback
import types
from collections.abc import Callable, Iterator
from typing import Any

from agnograd.backends._abstract import DataDependentError
from agnograd.backends._backend import adapter_for, is_array, raw_namespace
from agnograd.core import _config
from agnograd.core._config import MODE, eager_recording, graph_mode, using_config
from agnograd.core._function import FunctionNode
from agnograd.core._graph import functions_of
from agnograd.core._trees import flatten, tree_map, unflatten_from
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode
from agnograd.functions import identity
from agnograd.static._define_then_run import linking

# Leaves that key a trace by value (exact_key), as static arguments do.
_PLAIN = (bool, int, float, complex, str, bytes, type(None))
#: Marks a number keyed by its bytes (see :func:`exact_key`).
_BITS = "bits"
# agnograd's own directory: its frames are not the user's code.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + os.sep


class ConcretizationTypeError(TypeError):
    """What :func:`agnograd.jit` raises when the traced function needs a value.

    While ``jit`` traces a function, its arrays are Variables that have a shape and
    a dtype but no values: Python control flow on them (``if x > 0``), conversions
    to Python numbers (``float(x)``, ``x.item()``) or to NumPy
    (``numpy.asarray(x)``), and operations whose result shape depends on the values
    (``x[mask]``) cannot be traced. The message names the function, the line of
    code and the ways out (``static_argnums``, or calling the function without
    ``jit``). As JAX's error of that name, a subclass of :class:`TypeError`.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> @agnograd.jit
    ... def relu_sum(x):
    ...     return x.__array_namespace__().sum(x) if float(x[0]) > 0 else x[0]
    >>> relu_sum(np.ones(3))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    agnograd.static._jit_trace.ConcretizationTypeError: jit(relu_sum): float() needs ...
    """


def read_leaves(
    leaves: list[Any], name: str, where: Callable[[int], str]
) -> tuple[list[Any], list[int], tuple[bool, ...], tuple[Any, ...]] | None:
    """What a call's ``leaves`` (its arguments flattened) key a plan by, and feed it:
    the arrays (a Variable's data), their places among ``leaves``, whether each
    requires a gradient (a Variable that does; an array never), and each leaf's
    signature (an array's :func:`spec`, a plain Python value's :func:`exact_key`).
    None where a Variable has no data but a creator: a call inside another trace.
    Anything else is a ``TypeError`` naming the leaf (``where(i)``: ``argument
    0[1]['w']``)."""
    arrays: list[Any] = []
    places: list[int] = []
    grads: list[bool] = []
    signature: list[Any] = []
    for i, x in enumerate(leaves):
        cls = x.__class__
        if cls in _PLAIN:
            signature.append(exact_key(x))
            continue
        if isinstance(x, Variable):
            a = x._data
            if a is None:
                if x.creator_node is not None:
                    return None
                raise TypeError(
                    f"jit({name}): {where(i)} is a Variable without data (uninitialised); "
                    "give it data first (x.d = array)"
                )
            grads.append(x.requires_grad)
        elif is_array(x):
            if getattr(x, "requires_grad", False) is True:
                raise TypeError(
                    f"jit({name}): {where(i)} requires a gradient in torch's own autograd, "
                    "whose graph agnograd cannot reach; pass tensor.detach()"
                )
            a = x
            grads.append(False)
        else:
            raise TypeError(
                f"jit({name}): {where(i)} is a {cls.__name__}; jit's arguments are arrays, "
                "Variables, Python numbers, strings and None, nested in tuples, lists and "
                "dicts; pass it through static_argnums (it is then part of the signature, "
                "and must be hashable), or close over it"
            )
        arrays.append(a)
        places.append(i)
        signature.append(spec(a))
    return arrays, places, tuple(grads), tuple(signature)


def exact_key(value: Any) -> Any:
    """``value`` as it keys a trace: keys equal only for values that compute alike.

    ``==`` finds ``0.0`` equal to ``-0.0`` (``1 / x`` tells them apart), ``1`` to
    ``1.0`` and ``True`` (which promote differently), and NaN equal to nothing, not
    even itself. So a key holds the value's type, and a floating number that is a
    zero or NaN (a complex one with such a part) is held by its bytes, each under
    :data:`_BITS`; tuples (namedtuples) and frozensets by their items' keys.

    Examples
    --------
    >>> from agnograd.static._jit_trace import exact_key
    >>> exact_key(0.0) == exact_key(-0.0), exact_key(1) == exact_key(1.0)
    (False, False)
    >>> exact_key(float("nan")) == exact_key(float("nan")), exact_key((2.5, "a"))
    (True, (<class 'tuple'>, (<class 'float'>, 2.5), (<class 'str'>, 'a')))
    """
    cls = value.__class__
    if cls is float or cls is complex:
        return _number_key(value, cls)
    if cls in _PLAIN:
        return (cls, value)
    if isinstance(value, tuple):
        return (cls, *[exact_key(v) for v in value])
    if isinstance(value, frozenset):
        return (cls, frozenset([exact_key(v) for v in value]))
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Integral):
        return _number_key(value, cls)  # a NumPy scalar passed as a static argument
    return (cls, value)


def _number_key(value: Any, cls: type) -> Any:
    if isinstance(value, numbers.Real):
        if value and value == value:
            return (cls, value)
        return (cls, _BITS, struct.pack("<d", value))
    if value.real and value.imag and value == value:
        return (cls, value)
    return (cls, _BITS, struct.pack("<dd", value.real, value.imag))


def spec(a: Any) -> tuple[Any, ...]:
    """What a plan is made for, of one array: type, shape, dtype, device (a JAX
    array's sharding, which names its devices and is quicker to read), and whether
    torch's autograd records it."""
    device = getattr(a, "sharding", None)
    if device is None:
        device = getattr(a, "device", None)
    return (a.__class__, tuple(a.shape), a.dtype, device, getattr(a, "requires_grad", False))


def config_key() -> tuple[Any, ...]:
    """This thread's configuration as it keys traces: ``enable_backprop`` and every
    entry of ``agnograd.config`` (``using_config("train", False)`` retraces); values
    that are not plain Python ones by identity. Function hooks are left out: the plan
    runs them itself."""
    values: list[Any] = [MODE.get()[0]]
    unset = _config._UNSET
    for name, entry in _config._entries.items():
        value = entry.get(unset)
        if value is not unset:  # an entry set in another thread only, or deleted
            plain = value.__class__ in _PLAIN
            values.append((name, exact_key(value) if plain else (value.__class__, id(value))))
    return tuple(values)


class Trace:
    """One trace of ``fun``: the graph's outputs and inputs, and the structure of
    what ``fun`` returned."""

    def __init__(
        self,
        outputs: list[Variable],
        inputs: list[VariableNode | None],
        tree: Any,
        returned: list[Variable],
    ):
        #: The Variables the plan computes; their graph's inputs include ``inputs``.
        self.outputs = outputs
        #: Per array argument, the node it feeds (the graph's input where used).
        self.inputs = inputs
        #: What ``fun`` returned, with ``("output", i)``, ``("input", k)`` or
        #: ``("variable", v)`` where a Variable stood.
        self.tree = tree
        #: The Variables of the ``("variable", v)`` entries, which hold data.
        self.returned = returned
        #: Each node from outside the trace that the trace read (a closed-over
        #: Variable's, and those of the eager graph behind it), with whether it
        #: required a gradient then: the gradients ``fun`` asked for depend on it.
        self.watched: list[tuple[VariableNode, bool]] = []


class TooLarge(BaseException):
    """Raised inside a trace when it links more functions than its bound: a
    ``BaseException``, so that no ``except Exception`` of the traced function (or of
    a transform it calls) takes it for the function's own error."""


class _Linked(list[FunctionNode]):
    """The functions a trace links (see ``linking``), at most ``bound`` of them: the
    trace stops at the one after, so that a graph too large to compile costs no
    more to find out than tracing ``bound`` functions."""

    __slots__ = ("bound",)

    def __init__(self, bound: int | None) -> None:
        super().__init__()
        self.bound = bound

    def append(self, func: FunctionNode) -> None:
        if self.bound is not None and len(self) >= self.bound:
            raise TooLarge(self.bound)
        super().append(func)


def trace(
    fun: Callable[..., Any],
    name: str,
    rebuild: Callable[[list[Any]], tuple[tuple[Any, ...], dict[str, Any]]],
    arrays: list[Any],
    grads: tuple[bool, ...],
    bound: int | None = None,
) -> Trace:
    """Trace ``fun`` on Variables without data standing for ``arrays`` (requiring a
    gradient where ``grads`` says, as the Variables passed do); ``rebuild`` makes
    ``fun``'s arguments from a list of them. Raises :class:`ConcretizationTypeError`
    where ``fun`` needs their values, and :class:`TooLarge` once it has linked more
    than ``bound`` functions (None: no bound)."""
    linked = _Linked(bound)
    with (
        graph_mode(True, False),
        using_config("function_hooks", {}),
        _linking(linked),
    ):
        traced: list[Variable] = []
        for a, grad in zip(arrays, grads, strict=True):
            # An identity of a leaf that requires no gradient: the rank of a leaf, so
            # that the gradients fun asks for add up in the order they do eagerly.
            t: Variable = identity(Variable(a, requires_grad=False))  # type: ignore[assignment]
            if grad:
                t.requires_grad = True
            traced.append(t)
        args, kwargs = rebuild(traced)
        try:
            result = fun(*args, **kwargs)
        except Exception as error:
            refused = refusal(error, name)
            if refused is not None:
                raise refused.with_traceback(error.__traceback__) from None
            error.add_note(
                f"(raised while agnograd.jit traced {name}: its arrays were Variables "
                "without data, of the arguments' shapes and dtypes)"
            )
            raise
    index = {id(t): k for k, t in enumerate(traced)}
    outputs: list[Variable] = []
    returned: list[Variable] = []
    tree = _outputs(result, index, outputs, returned)
    nodes: list[VariableNode | None] = []
    for t, a in zip(traced, arrays, strict=True):
        t.unchain()  # the graph's input from now on, fed by each call
        node = t._node
        node._data = a
        nodes.append(node)
    made = {ref() for f in linked for ref in f.outputs or ()}
    read = dict.fromkeys(n for f in linked for n in f.inputs or () if n not in made)
    _cut_at_eager_values(linked, read)
    traced_fun = Trace(outputs, nodes, tree, returned)
    behind = [n for n in read if n.creator_node is not None]
    read.update(dict.fromkeys(n for f in functions_of(behind) for n in f.inputs or ()))
    traced_fun.watched = [(n, n.requires_grad) for n in read]
    return traced_fun


@contextlib.contextmanager
def _linking(linked: list[FunctionNode]) -> Iterator[None]:
    """Add every function linked inside the block to ``linked``."""
    token = linking.set(linked)
    try:
        yield
    finally:
        linking.reset(token)


def _cut_at_eager_values(linked: list[FunctionNode], read: dict[VariableNode, None]) -> None:
    """Make the Variables computed eagerly before the trace (closed over: ``h = w * 3``
    read as ``x * h``) inputs of the traced functions, which read their arrays at
    each call as eager does. Otherwise the plan would recompute them from their
    creators, and free their arrays as it frees what it computes."""
    cut: dict[VariableNode, VariableNode] = {}
    for node in read:
        var = node._variable()
        if node.creator_node is not None and var is not None and var._data is not None:
            cut[node] = VariableNode(var, requires_grad=False)
    if not cut:
        return
    for f in linked:
        inputs = f.inputs or ()
        if any(n in cut for n in inputs):
            f.inputs = tuple([cut.get(n, n) for n in inputs])


def _outputs(
    result: Any,
    inputs: dict[int, int],
    outputs: list[Variable],
    returned: list[Variable],
) -> Any:
    """The structure of what ``fun`` returned, with where each leaf's value comes
    from: an output of the plan, an argument, a Variable that holds data (closed
    over, or a constant made while tracing; added to ``returned``), or a value."""
    leaves, structure = flatten(result)
    seen: dict[int, int] = {}
    sources: list[tuple[str, Any]] = []
    for leaf in leaves:
        if not isinstance(leaf, Variable):
            sources.append(("value", leaf))
        elif (k := inputs.get(id(leaf))) is not None:
            sources.append(("input", k))
        elif leaf._data is not None:
            returned.append(leaf)
            sources.append(("variable", leaf))
        else:
            i = seen.get(id(leaf))
            if i is None:
                i = seen[id(leaf)] = len(outputs)
                outputs.append(leaf)
            sources.append(("output", i))
    return structure, sources


def results(tree: Any, outputs: list[Any], arrays: list[Any]) -> Any:
    """What ``fun`` returned, rebuilt from the structure of :func:`_outputs`: the
    plan's ``outputs``, the arguments' ``arrays`` where ``fun`` returned one, and a
    copy of each other array (a constant made while tracing, a closed-over Variable's
    data), which the plan would otherwise hand to every call."""
    structure, sources = tree
    values = []
    for kind, value in sources:
        if kind == "output":
            values.append(outputs[value])
        elif kind == "input":
            values.append(arrays[value])
        else:
            values.append(copy_of(value._data if kind == "variable" else value))
    return unflatten_from(structure, iter(values))


def copy_of(value: Any) -> Any:
    """A copy of the array ``value`` where its library writes arrays in place;
    ``value`` itself for an immutable array (JAX, Dask) or anything else."""
    adapter = adapter_for(value)
    if adapter is None or adapter.memory is None:  # immutable, or not an array
        return value
    return raw_namespace(value).asarray(value, copy=True)


def eager(
    fun: Callable[..., Any],
    rebuild: Callable[[list[Any]], tuple[tuple[Any, ...], dict[str, Any]]],
    arrays: list[Any],
    grads: tuple[bool, ...],
) -> Any:
    """``fun`` run eagerly on fresh Variables of ``arrays`` (requiring a gradient where
    ``grads`` says), as the trace gives them, its Variables returned as arrays."""
    with eager_recording():
        variables = [Variable(a, requires_grad=g) for a, g in zip(arrays, grads, strict=True)]
        args, kwargs = rebuild(variables)
        return _arrays(fun(*args, **kwargs))


def _arrays(result: Any) -> Any:
    return tree_map(lambda r: r._data if isinstance(r, Variable) else r, result)


# -- refusals ---------------------------------------------------------------------

# The methods of a Variable that read its values: a traced Variable has none.
_CONVERSIONS = {
    "__bool__": "bool()",
    "__float__": "float()",
    "__int__": "int()",
    "__index__": "use as an index",
    "__complex__": "complex()",
    "item": "Variable.item()",
    "__array__": "numpy.asarray()",
    "__dlpack__": "DLPack export",
    "__contains__": "`in`",
}


# What reads an array's values, called on what x.array gives a traced Variable.
_ARRAY_CONVERSIONS = {"tolist", "item", "__array__", "__dlpack__", "numpy", "__float__"}


def refusal(error: BaseException, name: str) -> ConcretizationTypeError | None:
    """jit's error for ``error`` raised while tracing ``name``, where it came from a
    value the trace does not have; None for any other error."""
    static = (
        "while jit traces, arrays have a shape and a dtype but no values: make the "
        f"argument static (jit({name}, static_argnums=...)), choose with xp.where "
        f"instead of `if`, or call {name} without jit"
    )
    for frame, _ in traceback.walk_tb(error.__traceback__):
        conversion = _CONVERSIONS.get(frame.f_code.co_name)
        owner = frame.f_locals.get("self")
        if conversion is not None and isinstance(owner, Variable) and owner._data is None:
            what = f"{conversion} needs the value of a traced array"
            return ConcretizationTypeError(f"jit({name}): {what}, at {user_line(error)}; {static}")
    if (
        isinstance(error, AttributeError) and error.obj is None and error.name in _ARRAY_CONVERSIONS
    ):  # x.array.tolist(): a traced Variable's array is None
        return ConcretizationTypeError(
            f"jit({name}): .{error.name}() of None, at {user_line(error)}: x.array and x.d "
            f"of a traced Variable are None; {static}"
        )
    if _caused_by(error, DataDependentError):
        return ConcretizationTypeError(
            f"jit({name}): the shape of a result depends on the values of a traced array, "
            f"at {user_line(error)}; jit needs every shape when it traces: compute without "
            f"a boolean mask (xp.where), or call {name} without jit"
        )
    return None


def _caused_by(error: BaseException | None, kind: type[BaseException]) -> bool:
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, kind):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


def user_line(error: BaseException) -> str:
    """``file:line (`code`)`` of the innermost frame of ``error``'s traceback that is
    neither agnograd's nor the standard library's."""
    found: types.FrameType | None = None
    line = 0
    for frame, lineno in traceback.walk_tb(error.__traceback__):
        filename = os.path.abspath(frame.f_code.co_filename)
        if filename.startswith(_PACKAGE) or (
            filename.startswith(_STDLIB) and "-packages" + os.sep not in filename
        ):
            continue
        found, line = frame, lineno
    if found is None:
        return "a line of agnograd"
    code = linecache.getline(found.f_code.co_filename, line).strip()
    where = f"{found.f_code.co_filename}:{line}"
    return f"{where} (`{code}`)" if code else where
