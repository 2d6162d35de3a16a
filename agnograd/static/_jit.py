"""``agnograd.jit``: a function traced once per signature into a compiled plan.

:func:`jit` wraps a function of arrays. The first call with a new signature (the
arguments' structure, each array's library, shape, dtype and device, the values of
the static arguments and of ``agnograd.config``) traces the function into a
define-then-run graph (:mod:`agnograd.static._jit_trace`) and compiles its plan, a
:class:`~agnograd.static._compiled.CompiledGraph` that computes the outputs alone;
later calls with that signature feed the new arrays to the plan and run it. On JAX
arrays the plan's forward runs as one ``jax.jit`` program.

A jitted function keeps the plans of its last ``cache_size`` signatures. One whose
signature keeps changing stops compiling after ``max_traces`` traces: it warns once
and runs the signatures it has no plan for eagerly, until ``clear_cache()``. A trace
that links more than ``max_functions`` functions stops there, and its signature runs
eagerly, as ``y.forward()`` walks a graph too large to compile
(:data:`~agnograd.static._replay.LARGEST` functions, the default of both): tracing
and compiling cost time and memory in proportion to the graph, more than a plan
saves on a graph that large.
"""

from __future__ import annotations

import collections
import functools
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from agnograd.backends._backend import _per_instance, owned
from agnograd.core import _graph
from agnograd.core._engine_loop import GradientNeedsDataError
from agnograd.core._trees import flatten_into, leaf_paths, unflatten_from
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode, clear_node_data
from agnograd.core._versions import memory_of
from agnograd.static._compiled import CLEAR, CompiledGraph
from agnograd.static._compiled_jax import outputs_program
from agnograd.static._jit_trace import (
    TooLarge,
    Trace,
    config_key,
    eager,
    exact_key,
    read_leaves,
    results,
    trace,
)
from agnograd.static._replay import LARGEST


class JitWarning(UserWarning):
    """A jitted function runs some calls eagerly: it met more signatures than it
    compiles, its graph is larger than it compiles (``max_functions``), or a
    gradient it computes cannot be built ahead of the data.

    Examples
    --------
    >>> import warnings, numpy as np, agnograd
    >>> double = agnograd.jit(lambda x: x * 2.0, max_traces=1)
    >>> _ = double(np.ones(1))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     double(np.ones(2))  # a second signature: eager, with a warning
    array([2., 2.])
    >>> caught[0].category.__name__
    'JitWarning'
    """


class CacheInfo(NamedTuple):
    """The state of a jitted function's cache (``jitted.cache_info()``).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> square = agnograd.jit(lambda x: x * x)
    >>> _ = square(np.ones(2)), square(np.ones(2)), square(np.ones(3))
    >>> square.cache_info()
    CacheInfo(hits=1, misses=2, eager=0, currsize=2, maxsize=8)
    """

    hits: int  #: calls that ran a plan
    misses: int  #: calls that traced the function (its traces)
    eager: int  #: calls run eagerly (see :class:`JitWarning`)
    currsize: int  #: signatures with a plan kept
    maxsize: int  #: the most kept (``cache_size``)


def jit(
    fun: Callable[..., Any],
    static_argnums: int | Sequence[int] = (),
    *,
    cache_size: int = 8,
    max_traces: int = 32,
    max_functions: int | None = LARGEST,
) -> Jitted:
    """Trace ``fun`` once per signature into a compiled plan, and re-run the plan.

    Parameters
    ----------
    fun : callable
        A function of arrays (or Variables), written with their namespace
        (``x.__array_namespace__()``), :mod:`agnograd.functions` or operators,
        returning Variables, or tuples, lists or dicts of them. It may call
        ``agnograd.grad`` or the transforms of :mod:`agnograd.functional`
        (``jit(value_and_grad(f))``).
    static_argnums : int or sequence of ints
        The positional arguments that are not arrays: their values (hashable) are
        part of the signature, so each new value traces ``fun`` again.
    cache_size : int
        The most signatures whose plans are kept (the least recently used goes).
    max_traces : int
        After this many traces, the function warns once (:class:`JitWarning`) and
        runs the signatures it has no plan for eagerly; ``clear_cache()`` resets it.
    max_functions : int or None
        The most functions a trace links (an identity per array argument, the
        function's operations and those of the gradients it asks for). A signature
        whose graph is larger runs eagerly, with a :class:`JitWarning`: its trace
        stops there, so that finding out costs no more than tracing
        ``max_functions`` functions. Tracing and compiling take about 15 times an
        eager call's time and 7 times its memory, in proportion to the graph;
        ``None`` compiles a graph of any size.

    Returns
    -------
    Jitted
        Callable as ``fun``, returning arrays of the arguments' library where
        ``fun`` returns Variables, in the structure ``fun`` returns.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> from agnograd.functional import value_and_grad
    >>> def loss(w, x):
    ...     xp = w.__array_namespace__()
    ...     return xp.sum(xp.tanh(x @ w) ** 2)
    >>> step = agnograd.jit(value_and_grad(loss))
    >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> value, grad = step(np.array([0.1, -0.2]), x)  # traced and compiled
    >>> value, grad = step(np.array([0.3, 0.1]), x)  # the plan, with new data
    >>> round(float(value), 4), grad.round(4)
    (0.9561, array([2.0579, 3.2284]))
    >>> step.cache_info()
    CacheInfo(hits=1, misses=1, eager=0, currsize=1, maxsize=8)

    A graph larger than ``max_functions`` runs eagerly, with the same results:

    >>> import warnings
    >>> small = agnograd.jit(value_and_grad(loss), max_functions=5)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     value, grad = small(np.array([0.3, 0.1]), x)
    >>> round(float(value), 4), grad.round(4), small.cache_info().eager
    (0.9561, array([2.0579, 3.2284]), 1)
    >>> print(caught[0].message)  # doctest: +ELLIPSIS
    jit(loss): the graph traced for these arguments has more than 5 functions, ...
    """
    if not callable(fun):
        raise TypeError(f"jit: fun must be callable, got {type(fun).__name__}")
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if not (
        isinstance(static_argnums, Sequence)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in static_argnums)
    ):
        raise TypeError(
            f"jit: static_argnums must be an int or a sequence of ints, got {static_argnums!r}"
        )
    for what, value, least in (("cache_size", cache_size, 1), ("max_traces", max_traces, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"jit: {what} must be an int of at least {least}, got {value!r}")
    if max_functions is not None and (
        not isinstance(max_functions, int) or isinstance(max_functions, bool) or max_functions < 0
    ):
        raise ValueError(
            f"jit: max_functions must be None or an int of at least 0, got {max_functions!r}"
        )
    return Jitted(fun, tuple(static_argnums), cache_size, max_traces, max_functions)


class Jitted:
    """A function compiled by :func:`jit`: call it as the function itself.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> double = agnograd.jit(lambda x: x * 2.0)
    >>> double(np.ones(2)), double(np.ones(3))  # two signatures, two plans
    (array([2., 2.]), array([2., 2., 2.]))
    >>> double.cache_info().currsize
    2
    >>> double.clear_cache(); double.cache_info().currsize
    0
    """

    def __init__(
        self,
        fun: Callable[..., Any],
        static_argnums: tuple[int, ...],
        size: int,
        traces: int,
        functions: int | None = LARGEST,
    ) -> None:
        self._fun = fun
        self._static_argnums = static_argnums
        self._size = size
        self._max_traces = traces
        self._max_functions = functions
        self._name = getattr(fun, "__name__", None) or type(fun).__name__
        self._lock = threading.RLock()  # one call at a time runs a plan (its slots)
        self._static: dict[int, frozenset[int]] = {}  # positions, by count of arguments
        self.clear_cache()
        functools.update_wrapper(self, fun)

    def __repr__(self) -> str:
        return f"<agnograd.jit of {self._name}>"

    def clear_cache(self) -> None:
        """Drop every plan and reset the counts, so that new signatures compile again."""
        with self._lock:
            self._cache: collections.OrderedDict[Any, _Entry] = collections.OrderedDict()
            self._hits = self._traces = self._eager = 0
            self._warned = False

    def cache_info(self) -> CacheInfo:
        """Calls so far and plans kept, as :class:`CacheInfo`."""
        return CacheInfo(self._hits, self._traces, self._eager, len(self._cache), self._size)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = self._name
        static = self._static.get(len(args))
        if static is None:
            static = self._static_positions(len(args))
        leaves: list[Any] = []
        parts: list[Any] = []
        for i, a in enumerate(args):
            if i in static:
                try:
                    hash(a)
                except TypeError:
                    raise TypeError(
                        f"jit({name}): static argument {i} is a {type(a).__name__}, which is "
                        "not hashable; static arguments key the traces by value: pass a "
                        "hashable one (a tuple for a list)"
                    ) from None
                parts.append(exact_key(a))
            else:
                parts.append(flatten_into(a, leaves))
        names = sorted(kwargs) if kwargs else ()
        for k in names:
            parts.append((k, flatten_into(kwargs[k], leaves)))

        def where(i: int) -> str:
            paths = [
                path
                for j, part in enumerate(parts)
                if j not in static
                for path in (
                    leaf_paths(part, f"argument {j}")
                    if j < len(args)
                    else leaf_paths(part[1], f"argument {part[0]!r}")
                )
            ]
            return paths[i]

        read = read_leaves(leaves, name, where)
        if read is None:  # Variables without data: inside another trace
            return self._fun(*args, **kwargs)
        arrays, places, grads, signature = read

        def rebuild(values: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
            if len(values) == len(leaves):  # no plain values among the leaves
                it = iter(values)
            else:
                merged = list(leaves)
                for place, value in zip(places, values, strict=True):
                    merged[place] = value
                it = iter(merged)
            new = [a if i in static else unflatten_from(parts[i], it) for i, a in enumerate(args)]
            n = len(args)
            return tuple(new), {k: unflatten_from(parts[n + j][1], it) for j, k in enumerate(names)}

        if any(a.__class__ in _per_instance for a in arrays):
            # Under vmap: a batched array's level and batch size are no part of the
            # signature (nor could a plan made in one vmap call know the levels of
            # another), so the function runs eagerly, batched.
            self._eager += 1
            return eager(self._fun, rebuild, arrays, grads)
        key = (tuple(parts), signature, grads, config_key())
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None:
                out = entry.run(arrays, grads, rebuild)
                if out is not _STALE:
                    self._cache.move_to_end(key)
                    if entry.eager_because is None:
                        self._hits += 1
                    else:
                        self._eager += 1
                    return out
            return self._miss(key, arrays, grads, rebuild)

    def _static_positions(self, n: int) -> frozenset[int]:
        for i in self._static_argnums:
            if not -n <= i < n:
                raise TypeError(
                    f"jit({self._name}): static_argnums={self._static_argnums!r} names "
                    f"argument {i}, but {self._name} was called with {n} positional arguments"
                )
        positions = frozenset(i % n for i in self._static_argnums)
        self._static[n] = positions
        return positions

    def _miss(
        self,
        key: Any,
        arrays: list[Any],
        grads: tuple[bool, ...],
        rebuild: Callable[[list[Any]], tuple[tuple[Any, ...], dict[str, Any]]],
    ) -> Any:
        """Trace and compile for a new signature, run it, and keep it (only if the
        run succeeded: a call that raises leaves the cache as it was)."""
        name = self._name
        if self._traces >= self._max_traces:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"jit({name}): {self._traces} traces, the most max_traces allows; the "
                    "signatures without a plan run eagerly from now on (clear_cache() "
                    "compiles again). Signatures change with array shapes, dtypes and "
                    "libraries, static arguments and Python numbers among the arguments",
                    JitWarning,
                    stacklevel=3,
                )
            out = eager(self._fun, rebuild, arrays, grads)
            self._eager += 1
            return out
        bound = self._max_functions
        because = fix = ""
        try:
            traced = trace(self._fun, name, rebuild, arrays, grads, bound)
        except GradientNeedsDataError as error:
            # A rule that reads the forward's arrays (a decomposition's).
            because = str(error).split(" (")[0]
        except TooLarge:
            because = (
                f"the graph traced for these arguments has more than {bound} functions, "
                "too large for a plan to pay back the time and memory that tracing and "
                "compiling it take"
            )
            fix = (
                f" (max_functions={bound}; jit({name}, max_functions=n) sets another "
                "bound, None compiles any size)"
            )
        if because:
            # This signature runs eagerly, and says so; eagerly from here, where the
            # partial trace is gone, so that its memory and eager's do not add up.
            entry = _Entry(self._fun, None, because)
            out = entry.run(arrays, grads, rebuild)
            self._eager += 1
            warnings.warn(
                f"jit({name}): {because}; calls with these arguments' signature run "
                f"{name} eagerly{fix}",
                JitWarning,
                stacklevel=3,
            )
        else:
            entry = _Entry(self._fun, traced, None)
            out = entry.run(arrays, grads, rebuild)
            if out is _STALE:  # pragma: no cover - a plan fits the graph it was made for
                raise RuntimeError(f"jit({name}): the plan made for these arguments refused them")
        self._traces += 1
        self._cache.pop(key, None)  # a plan its closed-over Variables outgrew
        self._cache[key] = entry
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return out


#: What a plan answers when its graph's other inputs (closed-over Variables) changed
#: their shape, dtype or library since it was made, or a Variable that the trace read
#: was frozen or unfrozen (``requires_grad``): the function is traced again.
_STALE = object()


class _Entry:
    """One signature's plan and how to read its results."""

    __slots__ = (
        "eager_because",
        "edits",
        "fun",
        "held",
        "inputs",
        "outputs",
        "plan",
        "program",
        "tree",
        "watched",
    )

    def __init__(
        self, fun: Callable[..., Any], traced: Trace | None, eager_because: str | None
    ) -> None:
        self.fun = fun
        #: Why this signature runs eagerly, or None.
        self.eager_because = eager_because
        self.plan: CompiledGraph | None = None
        self.program: Any = None
        self.inputs: list[VariableNode | None] = []
        self.outputs: list[Variable] = []
        self.tree: Any = None
        #: ids of the memory of the arrays the plan holds (made while tracing): an
        #: output that is a view of one is copied, or every call would share it.
        self.held: frozenset[int] = frozenset()
        #: The nodes from outside the trace that it read, and whether each required
        #: a gradient; checked when a graph was edited since (``_graph.edits``).
        self.watched: list[tuple[VariableNode, bool]] = []
        self.edits = -1
        if traced is None:
            return
        self.watched = traced.watched
        self.inputs, self.outputs, self.tree = traced.inputs, traced.outputs, traced.tree
        if self.outputs:
            # The outputs alone: no backward, nothing kept for one.
            # The trace inferred every shape from these arguments' arrays.
            self.plan = CompiledGraph(self.outputs, keep=CLEAR, inferred=True)
            self.program = outputs_program(self.plan)
            fed = set(self.inputs)
            # A leaf whose Variable is gone was made by the trace (a closed-over
            # Variable lives on): its array is the plan's, for good; so is a
            # Variable's that fun returned (one it made, or closed over).
            held = [n._data for n in self.plan._leaves if n not in fed and n._variable() is None]
            held += [v._data for v in traced.returned]
            self.held = frozenset([id(memory_of(a)) for a in held if a is not None])
        for node in self.inputs:  # each call feeds its own arrays
            if node is not None:
                node._data = None
        self.edits = _graph.edits

    def run(
        self,
        arrays: list[Any],
        grads: tuple[bool, ...],
        rebuild: Callable[[list[Any]], tuple[tuple[Any, ...], dict[str, Any]]],
    ) -> Any:
        """What the function returns for ``arrays`` (``rebuild`` makes its arguments
        of them, ``grads`` says which require a gradient); ``_STALE`` if the plan no
        longer fits the graph."""
        if self.eager_because is not None:
            return eager(self.fun, rebuild, arrays, grads)
        if _graph.edits != self.edits:  # requires_grad set somewhere: here?
            if any(n.requires_grad is not grad for n, grad in self.watched):
                return _STALE  # a closed-over Variable frozen or unfrozen: trace again
            self.edits = _graph.edits
        plan = self.plan
        if plan is None:  # nothing computed: arguments and constants
            return results(self.tree, [], arrays)
        inputs = self.inputs
        for node, a in zip(inputs, arrays):  # noqa: B905 - one node per array
            if node is not None:
                node._data = a
        try:
            if not plan.current():
                return _STALE
            values = None
            if self.program is not None and plan.runs_own_steps():
                values = self._run_program(plan)
            if values is None:
                plan._forward()
                outputs = self.outputs
                values = [y._data for y in outputs]
                for y in outputs:
                    clear_node_data(y._node)
        finally:
            for node in inputs:
                if node is not None:
                    node._data = None
        return results(self.tree, owned(values, self.held), arrays)

    def _run_program(self, plan: CompiledGraph) -> list[Any] | None:
        """The plan's forward as one XLA program; None after a failed trace (the plan
        then runs as it is)."""
        try:
            return list(self.program(tuple([n._data for n in plan._leaves])))
        except Exception:  # JAX could not trace it: the plan runs, raising what is real
            self.program = None
            return None
