"""A compiled plan on JAX, lowered to XLA programs with ``jax.jit``.

:class:`~agnograd.static._compiled.CompiledGraph` runs its generated forward and backward
one array operation at a time; on JAX each operation is a dispatch of its own. The
plan's code is straight-line code over a list of slots with no branch on values, so
JAX can trace it as it stands: :func:`lower` wraps it in pure functions (slots of
their own; the leaves' arrays and the seeds in, the published arrays and the leaves'
gradients out) and compiles them: forward and backward together for ``run()``, and
apart for ``forward()`` then ``backward()``, the arrays that the backward reads
handed from one to the other. The gradients are the plan's, from agnograd's rules
and the nodes' own ``backward``, not JAX's.

A trace runs the nodes' own ``forward``, which keep what they retain on themselves
(``_saved_inputs``, ...), and the plan's lines that give nodes their arrays: each
trace puts every node's attributes back as it found them, so that no tracer outlives
it; the split backward sets the retained ones from the arrays the forward handed
over. A plan that JAX cannot trace (a node reading values in Python) runs the same
functions without ``jax.jit``.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from agnograd.core._engine import _seed, users_grad
from agnograd.core._function import FunctionNode
from agnograd.static._buffers import _unlinked, set_node_data
from agnograd.static._compiled_steps import accumulate_into_leaves, run_backward

if TYPE_CHECKING:
    from agnograd.static._compiled import CompiledGraph


def lower(plan: CompiledGraph) -> Lowered | None:
    """The plan's forward and backward compiled by ``jax.jit``, or None.

    Parameters
    ----------
    plan : CompiledGraph
        A plan as just built: a rebuilt plan (new shapes, dtypes or links) needs a
        new lowering, since this one keeps the code and slots of this build.

    Returns
    -------
    Lowered or None
        None when the plan computes nothing, when its inputs are not JAX arrays, or
        when they are not all on one device (``jax.jit`` would refuse or move them,
        where the plan computes each operation where its inputs are).

    Examples
    --------
    >>> import jax.numpy as jnp, agnograd, agnograd.functions as F
    >>> from agnograd.static._compiled import compile
    >>> from agnograd.static._compiled_jax import lower
    >>> x = agnograd.Variable(jnp.zeros(2), requires_grad=True)
    >>> with agnograd.auto_forward(False):
    ...     y = F.sum(F.exp(x) * 2.0)
    >>> lowered = lower(compile(y))
    >>> lowered.run(); float(y.d), x.g.tolist()
    (4.0, [2.0, 2.0])
    >>> x.d = jnp.ones(2); x.cleargrad(); lowered.run(); x.g.tolist()
    [5.436563491821289, 5.436563491821289]
    """
    jax = sys.modules.get("jax")  # not imported yet: no array is a JAX array
    if jax is None or not plan._funcs:
        return None
    datas = [n.data for n in plan._leaves]
    if not all(isinstance(d, jax.Array) and not isinstance(d, jax.core.Tracer) for d in datas):
        return None  # another library's arrays, or a plan run inside a JAX trace
    # Inputs on several devices (or one sharded over several): the plan runs each
    # operation where its inputs are, which one program cannot; it runs as it is.
    if len({frozenset(d.devices()) for d in datas}) > 1 or len(datas[0].devices()) > 1:
        return None
    return Lowered(plan, jax)


class Lowered:
    """A plan's forward and backward as XLA programs (made by :func:`lower`).

    ``run()``, ``forward()`` and ``backward()`` have the effects of the plan's own:
    the published nodes receive their arrays and the leaves' gradients accumulate;
    after ``forward()`` the nodes that run their own ``forward`` keep what it
    retains, as after the plan's (after ``run()``, what they kept before). Call them
    where the plan would run its own code, after its checks (its inputs' signature,
    function hooks, in-place writes).
    """

    def __init__(self, plan: CompiledGraph, jax: Any) -> None:
        self._jax = jax
        outputs = [y._node for y in plan.outputs]
        # Weak references: a plan may belong to its output's node.
        self._output_refs = [weakref.ref(node) for node in outputs]
        published = {id(n): (slot, n) for slot, n in plan._published}
        for slot, node in zip(plan._output_slots, outputs, strict=True):
            if slot is not None:  # the outputs, which the plan publishes itself
                published.setdefault(id(node), (slot, node))
        self._published = [(slot, weakref.ref(n)) for slot, n in published.values()]
        # This build's code and slots.
        self._forward_code = plan._forward_code
        self._backward_code = plan._backward_code
        self._leaves = plan._leaves
        self._leaf_slots = plan._leaf_slots
        self._grad_leaves = plan._grad_leaves
        self._output_slots = plan._output_slots
        self._size = len(plan._buffer)
        self._runs_rules = plan._runs_rules
        self._funcs = plan._funcs
        # What the forward hands the backward besides the published arrays, learned
        # when it is traced: the other slots it leaves filled, and the attributes
        # that the nodes' own forward set.
        self._kept: list[int] = []
        self._state: list[tuple[FunctionNode, str, Any, list[Any], list[int]]] = []
        self._pending: tuple[Any, Any, Any] | None = None  # a forward's, for one backward
        self._jitted = {
            "run": jax.jit(self._run),
            "forward": jax.jit(self._forward),
            "backward": jax.jit(self._backward),
        }
        #: Why the plan runs without ``jax.jit`` (its trace failed), or None.
        self.eager_because: str | None = None

    # -- the pure functions that jax.jit traces ------------------------------------

    def _forward_into(self, leaves: tuple[Any, ...]) -> tuple[list[Any], tuple[Any, ...]]:
        """The slots after the plan's forward, and the published arrays."""
        buf: list[Any] = [None] * self._size
        for slot, d in zip(self._leaf_slots, leaves, strict=True):
            buf[slot] = d
        self._forward_code(buf)
        return buf, tuple([buf[slot] for slot, _ in self._published])

    def _backward_from(self, buf: list[Any], seeds: tuple[Any, ...]) -> tuple[Any, ...]:
        """The leaves' gradients from the slots a forward left and the seeds."""
        g: list[Any] = [None] * self._size
        for slot, gy in zip(self._output_slots, seeds, strict=True):
            if slot is not None:
                if gy is None:  # an output without .grad: the engine's ones
                    gy = buf[slot].__array_namespace__().ones_like(buf[slot])
                prev = g[slot]
                g[slot] = gy if prev is None else prev + gy
        run_backward(self._backward_code, self._runs_rules, buf, g)
        return tuple([g[slot] for slot, _ in self._grad_leaves])

    def _run(self, leaves: tuple[Any, ...], seeds: tuple[Any, ...]) -> Any:
        with _restored(self._funcs):
            buf, published = self._forward_into(leaves)
            return published, self._backward_from(buf, seeds)

    def _forward(self, leaves: tuple[Any, ...]) -> Any:
        tree = self._jax.tree_util
        with _restored(self._funcs) as before:
            buf, published = self._forward_into(leaves)
            published_slots = {slot for slot, _ in self._published}
            self._kept = [
                k for k, value in enumerate(buf) if value is not None and k not in published_slots
            ]
            self._state, arrays = [], []
            for func in self._funcs:
                for name, value in vars(func).items():
                    if before[func].get(name, self) is value:
                        continue
                    items, treedef = tree.tree_flatten(value)
                    where = [i for i, a in enumerate(items) if isinstance(a, self._jax.Array)]
                    arrays += [items[i] for i in where]
                    items = [None if i in where else a for i, a in enumerate(items)]
                    self._state.append((func, name, treedef, items, where))
        return published, tuple([buf[k] for k in self._kept]), tuple(arrays)

    def _backward(self, published: Any, kept: Any, arrays: Any, seeds: tuple[Any, ...]) -> Any:
        buf: list[Any] = [None] * self._size
        for (slot, _), value in zip(self._published, published, strict=True):
            buf[slot] = value
        for k, value in zip(self._kept, kept, strict=True):
            buf[k] = value
        with _restored(self._funcs):
            self._put_state(arrays)
            return self._backward_from(buf, seeds)

    def _put_state(self, arrays: tuple[Any, ...]) -> None:
        """Set on the nodes the attributes that their own forward set, with ``arrays``
        for the arrays among them."""
        rest = iter(arrays)
        for func, name, treedef, items, where in self._state:
            items = list(items)
            for i in where:
                items[i] = next(rest)
            setattr(func, name, treedef.unflatten(items))

    def _call(self, name: str, pure: Callable[..., Any], *args: Any) -> Any:
        """``jax.jit``'s program of ``pure``; ``pure`` itself after a failed trace."""
        if self.eager_because is None:
            try:
                return self._jitted[name](*args)
            except Exception as error:  # the plain run raises again what is real
                self.eager_because = f"{type(error).__name__}: {error}"
        return pure(*args)

    # -- running ------------------------------------------------------------------

    def run(self) -> None:
        """Forward and backward in one XLA program, as ``plan.run()``."""
        leaves = tuple([n.data for n in self._leaves])
        outputs = [ref().get_variable() for ref in self._output_refs]  # type: ignore[union-attr]
        # None for the ones the program makes: for an output whose .grad the user did
        # not set (a seed of another kind than the last run's would make jax.jit
        # compile the program again).
        grad_vars = [users_grad(y) for y in outputs]
        seeds = tuple([None if gv is None else gv._data for gv in grad_vars])
        published, grads = self._call("run", self._run, leaves, seeds)
        self._publish(published)
        for i, y in enumerate(outputs):
            if grad_vars[i] is None:  # the engine's checks, and its ones kept in y.grad
                _seed(y, None, i, None, False, "backward")
        self._accumulate(grads, seeds)

    def forward(self) -> None:
        """The outputs from the data the inputs hold now, as ``plan.forward()``."""
        leaves = tuple([n.data for n in self._leaves])
        published, kept, arrays = self._call("forward", self._forward, leaves)
        self._publish(published)
        self._put_state(arrays)  # what the nodes keep, as after the plan's forward
        self._pending = (published, kept, arrays)

    def backward(self, grad_outputs: Any = None) -> None:
        """The leaves' gradients, from the arrays of the last ``forward()`` and the
        seeds ``grad_outputs`` (None: the outputs' ``.grad``, or ones)."""
        if self._pending is None:
            raise RuntimeError(
                "CompiledGraph.backward: run forward() first, once before each backward(): "
                "the plan frees the arrays a backward reads as it uses them"
            )
        outputs = [ref().get_variable() for ref in self._output_refs]  # type: ignore[union-attr]
        given = [None] * len(outputs) if grad_outputs is None else grad_outputs
        seeds = tuple(
            [
                _seed(y, gy, i, None, False, "backward")[1]
                for i, (y, gy) in enumerate(zip(outputs, given, strict=True))
            ]
        )
        published, kept, arrays = self._pending  # a refused seed leaves them
        self._pending = None
        grads = self._call("backward", self._backward, published, kept, arrays, seeds)
        self._accumulate(grads, seeds)

    def _publish(self, published: tuple[Any, ...]) -> None:
        for (_, ref), data in zip(self._published, published, strict=True):
            node = ref()
            if node is not None:
                set_node_data(node, data)

    def _accumulate(self, grads: tuple[Any, ...], seeds: tuple[Any, ...]) -> None:
        """The plan's accumulation into the leaves' gradients."""
        leaves = [node for _, node in self._grad_leaves]
        seen = {id(gy) for gy in seeds if gy is not None}
        accumulate_into_leaves(list(zip(leaves, grads, strict=True)), seen)


@contextlib.contextmanager
def _restored(funcs: list[FunctionNode]) -> Iterator[dict[FunctionNode, dict[str, Any]]]:
    """Puts back, after a trace, each function's attributes (yielded) and the arrays,
    shapes and dtypes of the nodes it computes, their Variables and unlinked copies."""
    before = {func: dict(vars(func)) for func in funcs}
    fields: list[tuple[Any, str]] = []
    for func in funcs:
        for ref in func.outputs or ():
            node = ref()
            if node is None:
                continue
            nodes = [node, *[v._node for v in _unlinked.get(node, ())]]
            for n in nodes:
                fields += [(n, "_data"), (n, "shape"), (n, "dtype")]
            for var in [node._variable(), *_unlinked.get(node, ())]:
                if var is not None:
                    fields.append((var, "_data"))
    values = [getattr(obj, name) for obj, name in fields]
    try:
        yield before
    finally:
        for func, attributes in before.items():
            current = vars(func)
            current.clear()
            current.update(attributes)
        for (obj, name), value in zip(fields, values, strict=True):
            setattr(obj, name, value)


def outputs_program(plan: CompiledGraph) -> Any:
    """``jax.jit`` of the plan's forward as a function of the leaves' arrays to the
    outputs' (``agnograd.jit``'s program: nothing published or kept), where the plan
    runs on JAX arrays of one device; None otherwise."""
    jax = sys.modules.get("jax")
    if jax is None or plan._lowered is None or None in plan._output_slots:
        return None
    funcs, size = plan._funcs, len(plan._buffer)
    slots, code = plan._leaf_slots, plan._forward_code
    outs: list[int] = [s for s in plan._output_slots if s is not None]

    def forward(leaves: tuple[Any, ...]) -> tuple[Any, ...]:
        with _restored(funcs):  # no tracer stays on a node
            buf: list[Any] = [None] * size
            for slot, a in zip(slots, leaves, strict=True):
                buf[slot] = a
            code(buf)
            return tuple([buf[s] for s in outs])

    return jax.jit(forward)
