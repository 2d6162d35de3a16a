"""Compiled re-runs of a define-then-run graph: a flat plan of forward and backward steps.

``y.forward(); y.backward()`` walks the graph on every run: it sorts the functions,
reads each node's inputs from its node, checks every gradient's shape and dtype and
keeps every intermediate array in its node. A static graph can do all of that once.
:func:`compile` turns the graph behind ``y`` into a :class:`CompiledGraph`: two
Python functions generated for it, forward and backward, of straight-line code over
numbered slots of a flat list of arrays, with the namespace functions, scalars,
gradient targets, broadcast reductions and dtype casts bound when it was compiled
(``plan.source`` shows them).

The steps run the same array operations in the same order as the graph's own
``forward`` and backward (the backward order is the engine's, computed once by
running its queue on the graph without arrays), so the results are equal bit for
bit (on JAX, where the plan runs as XLA programs, to rounding: see
:mod:`agnograd.static._compiled_jax`). Common elementwise nodes (the namespace's unary
functions, ``+``, ``-``, ``*`` and their forms with a Python scalar) get lines of
their own that call the array operations directly, their rules traced into them;
every other node runs its ``forward`` and ``backward``, as the engine would
(:mod:`agnograd.static._compiled_steps` writes the lines). ``y.forward()`` makes such
plans by itself for a graph it runs often (:mod:`agnograd.static._replay`).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from agnograd.backends._abstract import DataDependentError
from agnograd.backends._backend import raw_namespace
from agnograd.core import _graph, _versions
from agnograd.core._config import HOOKS, MODE
from agnograd.core._engine import _seed
from agnograd.core._engine import backward as engine_backward
from agnograd.core._engine_loop import _cast, count_clear
from agnograd.core._function import FunctionNode
from agnograd.core._graph import functions_of
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode, clear_node_data
from agnograd.functions._inplace import WRITING_NODES
from agnograd.static import _define_then_run
from agnograd.static._buffers import _unlinked, set_node_data
from agnograd.static._compiled_graph import _backward_order, _infer_shapes, _needed_inputs
from agnograd.static._compiled_jax import lower
from agnograd.static._compiled_steps import (
    _backward_code,
    _code,
    _forward_code,
    _publish_code,
    accumulate_into_leaves,
    clock_steps,
    run_backward,
    savers,
    version_steps,
)
from agnograd.static._define_then_run import count_forward, forward_all
from agnograd.static._recompute import _marked


def compile(outputs: Variable | Sequence[Variable]) -> CompiledGraph:  # noqa: A001
    """Compile the define-then-run graph ending at ``outputs`` into a re-runnable plan.

    Parameters
    ----------
    outputs : Variable or sequence of Variable
        The graph's outputs, built under ``auto_forward(False)``.

    Returns
    -------
    CompiledGraph
        ``forward()``, ``backward()`` and ``run()`` (both) re-run the graph with the
        data its inputs hold now, as ``y.forward()`` and ``y.backward()`` would.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> from agnograd.static._compiled import compile
    >>> x = agnograd.Variable(shape=(2,), need_grad=True)
    >>> with agnograd.auto_forward(False):
    ...     y = F.sum(F.exp(x) * 2.0)
    >>> plan = compile(y)
    >>> x.d = np.zeros(2); plan.run(); float(y.d), x.g
    (4.0, array([2., 2.]))
    >>> x.d = np.ones(2); x.cleargrad(); plan.run(); x.g
    array([5.43656366, 5.43656366])
    """
    if isinstance(outputs, Variable):
        outputs = [outputs]
    outputs = list(outputs)
    for i, y in enumerate(outputs):
        if not isinstance(y, Variable):
            raise TypeError(f"compile: outputs[{i}] must be a Variable, got {type(y).__name__}")
    return CompiledGraph(outputs)


# What the graph keeps after a plan's forward, by who made the plan. ``ALIVE``: the
# plan of agnograd.compile; its outputs, persistent nodes and the intermediate
# Variables alive when it was made receive their arrays, the rest live in the plan.
# The others are the plans ``y.forward(...)`` makes (agnograd.static._replay), which leave
# the graph as forward_all does with the same options: ``KEEP`` (no option) gives
# every node its array and every function what it retains, ``NO_NEED_GRAD`` frees
# the intermediate arrays but keeps what backward reads, ``CLEAR`` (clear_buffer)
# keeps the outputs and persistent nodes alone.
ALIVE, KEEP, NO_NEED_GRAD, CLEAR = "alive", "keep", "clear_no_need_grad", "clear_buffer"


class CompiledGraph:
    """The plan of a define-then-run graph: forward and backward as flat step lists.

    Made by :func:`compile`. Each run first compares the inputs' array types, shapes
    and dtypes with those the plan was made for, and, after any edit of a graph
    (``rewire_on``, ``unchain``, ``unlinked``, a changed ``need_grad`` or
    ``persistent``), the graph's links; when they differ, the output shapes are
    inferred again and the plan is rebuilt. While function hooks are set (on every
    function, or on one of the graph's), an array was written in place
    (``x[key] = value``) or a Variable of the graph is marked ``recompute``, a run
    falls back to ``forward_all`` and the engine, which deal with them.

    Differences from ``y.forward(); y.backward()``, to know when mixing them (they
    concern the plans of :func:`compile`: the plans ``y.forward()`` makes by itself
    leave the graph as it would):

    - Only the outputs, and the intermediate Variables alive when the plan was made,
      receive their data; other intermediate arrays live in the plan and are freed
      after their last use.
    - The arrays that the plan's own elementwise steps keep for backward live in the
      plan, not in their nodes: run the plan's ``backward`` after its ``forward``
      (``y.backward()`` after ``plan.forward()`` raises for those nodes).
    - ``backward`` takes a seed and ``clear_buffer``, not ``retain_grad``, double
      backprop or ``loss_scale``.
    """

    _edits: int  # the count of graph edits the plan was last checked against
    _shape_of_graph: tuple[Any, ...]  # _structure() when it was made
    _bare: list[VariableNode]  # nodes without a Variable, which get_variable may revive
    _signature: tuple[Any, ...] | None  # the inputs' it was made for; None: infer again

    def __init__(self, outputs: list[Variable], keep: str = ALIVE, inferred: bool = False) -> None:
        """``inferred``: the nodes' shapes and dtypes are those the inputs' arrays give
        now (agnograd.jit's trace inferred them from these very arrays), so the plan
        does not infer them again, which would cost a fifth of its compiling."""
        self._keep = keep
        # The plans of agnograd.compile hold their outputs; a plan of y.forward() is
        # held by its output's node (agnograd.static._replay), which it must not hold back.
        self._held = outputs if keep == ALIVE else None
        self._output_refs = [weakref.ref(y._node) for y in outputs]
        self._fallback = False
        self._forwarded = False  # a forward whose arrays a backward has not used yet
        self._forwards = -1  # the count of graph forwards at the plan's last forward
        self._thread = 0  # the thread that ran that forward
        self._lock = threading.Lock()
        # The shapes the inputs' arrays give now (x.d may have changed them); where one
        # depends on the data, those of the last forward stand.
        if not inferred:
            with contextlib.suppress(DataDependentError):
                self._infer()
        self._build()

    @property
    def outputs(self) -> list[Variable]:
        """The graph's outputs."""
        nodes = [ref() for ref in self._output_refs]
        return [node.get_variable() for node in nodes if node is not None]

    # -- running ------------------------------------------------------------------

    def current(self) -> bool:
        """Whether the plan still fits the graph and the arrays its inputs hold now."""
        signature = self.signature()
        return signature is not None and signature == self._signature and self._fits_graph()

    def signature(self) -> tuple[Any, ...] | None:
        """What the plan's inputs hold now, as it keys plans: each one's creator,
        array type, shape and dtype; None while one has no data."""
        leaves = self._leaves
        try:
            return _signature(leaves, [n.data for n in leaves])
        except AttributeError:  # an input without data: _build says which
            return None

    def _fits_graph(self) -> bool:
        """Whether the graph is still the one the plan was made for."""
        if _graph.edits != self._edits:  # some graph was edited: was it this one?
            if self._structure() != self._shape_of_graph or any(
                n._variable() is not None for n in self._bare
            ):
                return False
            self._edits = _graph.edits
        return True

    def forward(self) -> None:
        """Recompute the outputs from the data the graph's inputs hold now."""
        if not self.current():
            self._rebuild()
        self._forward()

    def _forward(self) -> None:
        with self._exclusive("forward"):
            self._forwarded = False
            try:
                self._forward_unguarded()
            except BaseException:
                self._discard()
                raise
            self._thread = threading.get_ident()

    def runs_own_steps(self) -> bool:
        """Whether a run now executes the plan's own steps: not for a graph that
        writes in place, has hooks or recomputes, nor while hooks are set, which its
        steps do not call (a run then falls back to ``forward_all`` and the engine).
        Writes into its inputs between runs (a parameter update) are no reason: its
        steps record and check what its nodes keep, as the nodes would."""
        return not (self._writes or self._hooked or self._recompute or MODE.get()[HOOKS])

    def _forward_unguarded(self) -> None:
        self._fallback = not self.runs_own_steps()
        if self._fallback:  # the plan proved neither: run the reference implementation
            keep = self._keep
            forward_all(self.outputs, keep == CLEAR, keep == NO_NEED_GRAD)
            return
        if self._forwards != _define_then_run.forwards:
            # What another forward since this plan's last (a walk, another plan of
            # this graph or of one sharing nodes with it) left that this mode frees.
            self._clear(backward=False)
        count_forward()
        self._forwards = _define_then_run.forwards
        if self._lowered is not None:  # one XLA program (JAX)
            self._lowered.forward()
            self._forwarded = True
            return
        buf = self._buffer
        for slot, node in zip(self._leaf_slots, self._leaves, strict=True):
            buf[slot] = node.data
        self._forward_code(buf)
        for slot, ref in self._output_publish:
            out = ref()
            if out is not None:
                set_node_data(out, buf[slot])
        self._forwarded = True

    def backward(
        self, grad_outputs: Sequence[Any] | None = None, *, clear_buffer: bool = False
    ) -> None:
        """Backpropagate from the outputs into the leaves' gradients, as ``y.backward()``.

        ``grad_outputs`` are the outputs' seeds (``None``: their ``.grad``, or ones
        for a one-element output); ``clear_buffer`` frees what the graph keeps for
        backward once it has run, as the engine's option of that name does.
        """
        # Hooks set since forward, or a forward that keeps nothing for backward.
        hooked = self._keep != ALIVE and bool(MODE.get()[HOOKS])
        if self._fallback or hooked or self._keep == CLEAR:
            engine_backward(self.outputs, grad_outputs, clear_buffer=clear_buffer)
            return
        with self._exclusive("backward"):
            if not self._forwarded:
                raise RuntimeError(
                    "CompiledGraph.backward: run forward() first, once before each "
                    "backward(): the plan frees the arrays a backward reads as it uses them"
                )
            if self._thread != threading.get_ident():
                raise RuntimeError(
                    "CompiledGraph.backward: the plan's forward ran in another thread; a "
                    "plan runs in one thread at a time (compile one plan per thread)"
                )
            # A seed refused leaves the plan as it was: backward may be called again.
            seeds = self._seeds(grad_outputs)
            if seeds is None:  # a seed of another dtype: the engine, from the graph
                self._forwarded = False
                engine_backward(self.outputs, grad_outputs, clear_buffer=clear_buffer)
                return
            self._forwarded = False
            try:
                self._backward(grad_outputs, seeds, clear_buffer)
            except BaseException:
                self._discard()  # no partial sum stays for the next step
                raise

    def _seeds(self, grad_outputs: Sequence[Any] | None) -> list[tuple[int, Any]] | None:
        """Each output's slot and seed, checked by the engine's rules. A seed of another
        dtype than its output's changes the dtypes that the plan's casts were settled
        for: None then, where the graph keeps what the engine needs (the plans of
        ``y.forward()``); cast to the output's dtype in a plan of ``compile``."""
        outputs = self.outputs
        if grad_outputs is None:
            grad_outputs = [None] * len(outputs)
        seeds = []
        for i, (y, given) in enumerate(zip(outputs, grad_outputs, strict=True)):
            _, gy = _seed(y, given, i, None, False, "backward")
            slot = self._output_slots[i]
            if slot is None:
                continue
            if gy.dtype != y._data.dtype:
                if self._keep != ALIVE:
                    return None
                gy = _cast(gy, y._data.dtype)
            seeds.append((slot, gy))
        return seeds

    def _backward(
        self, grad_outputs: Sequence[Any] | None, seeds: list[tuple[int, Any]], clear_buffer: bool
    ) -> None:
        if self._lowered is not None:
            self._lowered.backward(grad_outputs)
            if clear_buffer:
                self._clear(backward=True)
            return
        seen = {id(gy) for _, gy in seeds}
        buf, g = self._buffer, self._grads
        for slot, gy in seeds:
            prev = g[slot]
            g[slot] = gy if prev is None else prev + gy
        run_backward(self._backward_code, self._runs_rules, buf, g)
        if clear_buffer:
            self._clear(backward=True)
        grads = [(node, g[slot]) for slot, node in self._grad_leaves]
        for slot, _ in self._grad_leaves:
            g[slot] = None
        accumulate_into_leaves(grads, seen)

    def run(self) -> None:
        """``forward()`` then ``backward()``."""
        if self._lowered is not None:  # JAX: forward and backward in one XLA program
            if not self.current():
                self._rebuild()
            # (JAX arrays are never written in place: writes into other memory alive
            # elsewhere change nothing the program reads.)
            lowered = self._lowered
            if lowered is not None and not (self._writes or self._recompute or MODE.get()[HOOKS]):
                with self._exclusive("run"):
                    count_forward()
                    self._forwarded = False
                    lowered.run()
                return
        self.forward()
        self.backward()

    @contextlib.contextmanager
    def _exclusive(self, what: str) -> Iterator[None]:
        """Run ``what`` of the plan, refusing a second thread in it at the same time:
        the plan's slots hold one run's arrays."""
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(
                f"CompiledGraph.{what}: another thread is running this plan; a plan runs in "
                "one thread at a time (compile one plan per thread, or walk the graph with "
                "agnograd.forward_all and backward)"
            )
        try:
            yield
        finally:
            self._lock.release()

    def _discard(self) -> None:
        """Forget a run that raised, as if it had never started: no array or partial
        gradient of it stays in the plan's slots."""
        self._forwarded = False
        n = len(self._buffer)
        self._buffer[:] = [None] * n
        self._grads[:] = [None] * n

    # -- compiling ----------------------------------------------------------------

    def _structure(self) -> tuple[Any, ...]:
        """What the plan depends on besides its inputs' arrays: each function's inputs
        and local hooks, each node's creator, ``requires_grad``, ``persistent``,
        unlinked copies and ``recompute``, and the outputs' creators."""
        # Unlinked copies and recompute marks are rare, and weak collections slow to
        # ask: sets of them.
        unlinked = set(_unlinked) if _unlinked else ()
        marked = set(_marked) if _marked else ()
        return (
            [(f.inputs, bool(f._local_hooks)) for f in self._funcs],
            [
                (n.creator_node, n.requires_grad, n.persistent, n in unlinked, n in marked)
                for nodes in (self._leaves, self._nodes)
                for n in nodes
            ],
            [getattr(r(), "creator_node", None) for r in self._output_refs],
        )

    def _clear(self, backward: bool) -> None:
        """Free what the graph keeps that this plan's mode does not: intermediate
        arrays of nodes not published, what the functions that keep nothing in this
        mode retain and, after a backward with ``clear_buffer``, what the engine's
        option frees: for each function whose backward ran, what it retains and the
        arrays of the nodes it computed (not the outputs' or persistent ones)."""
        for node in self._unpublished:
            clear_node_data(node)
        if not backward:
            for f in self._unsaving:
                f._saved_inputs = f._saved_outputs = None
            return
        count_clear()
        slots = self._published_slots
        for f in self._cleared:
            f._saved_inputs = f._saved_outputs = None
            for ref in f.outputs or ():
                out = ref()
                if out is not None and out in slots and not out.persistent:
                    clear_node_data(out)
                    self._buffer[slots[out]] = None

    def _rebuild(self) -> None:
        """Infer every output's shape and dtype again from the inputs' data, then
        rebuild the plan (the inputs' shapes, dtypes or the graph changed)."""
        # Until _build succeeds the nodes' shapes may be those of inputs that failed
        # (a type check, a data-dependent shape): the next run infers them again.
        self._signature = None
        try:
            self._infer()
        except DataDependentError as error:
            raise TypeError(
                f"compiled forward: {error.args[0]}; compile the graph again after y.forward()"
            ) from None
        self._build()

    def _infer(self) -> None:
        """Every node's shape and dtype, inferred from the inputs' arrays as they are
        now; DataDependentError (naming the function) where one depends on the data."""
        _infer_shapes(functions_of([y._node for y in self.outputs]))

    def _build(self) -> None:
        outs = [node for node in (ref() for ref in self._output_refs) if node is not None]
        if len(outs) != len(self._output_refs):
            raise RuntimeError("compiled graph: its outputs are gone")
        funcs = functions_of(outs)
        self._funcs = funcs
        # Writes in the graph count versions as they run, which the plan does not;
        # hooks of a function run around its forward and backward, which the plan's
        # steps do not call.
        self._writes = any(isinstance(f, WRITING_NODES) for f in funcs)
        self._hooked = any(f._local_hooks for f in funcs)
        self._edits = _graph.edits
        slot_of: dict[VariableNode, int] = {}
        leaves: list[VariableNode] = []
        for f in funcs:
            for node in f.inputs or ():
                if node.creator_node is None and node not in slot_of:
                    slot_of[node] = len(slot_of)
                    leaves.append(node)
            for ref in f.outputs or ():
                out = ref()
                if out is not None:
                    slot_of[out] = len(slot_of)
        for node in outs:
            if node not in slot_of:  # an output that is a leaf: fed, never computed
                slot_of[node] = len(slot_of)
                leaves.append(node)
        # Each output's slot; None for an output that is a leaf (it takes no gradient).
        self._output_slots = [slot_of[n] if n.creator_node is not None else None for n in outs]
        self._leaves = leaves
        self._leaf_slots = [slot_of[n] for n in leaves]
        datas = [n.data for n in leaves]
        missing = [n.label for n, d in zip(leaves, datas, strict=True) if d is None]
        if missing:
            raise RuntimeError(
                f"compiled graph: its inputs {', '.join(missing)} have no data; feed them "
                "first (x.d = array): the plan is made for their shapes and dtypes"
            )
        self._signature = _signature(leaves, datas)
        self._buffer: list[Any] = [None] * len(slot_of)
        self._grads: list[Any] = [None] * len(slot_of)
        if funcs:
            sample = datas[0]
            _versions.record(raw_namespace(sample), (), (), sample)  # learn if it counts
        # Each function's namespace is the one it was applied with (a transfer's
        # output is of another library than its input); _rebuild sets them anew for
        # inputs of another library.

        # Which inputs need a gradient, and the order of the engine's backward; none
        # after clear_buffer, which keeps nothing for a backward (the engine runs it).
        keep = self._keep
        indexes: dict[FunctionNode, tuple[int, ...]] = {}
        order: list[FunctionNode] = []
        grad_leaves: list[VariableNode] = []
        self._cleared = order
        if keep != CLEAR:
            indexes = _needed_inputs(funcs)
            order, grad_leaves = _backward_order(outs, indexes)
            # The functions whose backward the engine runs, whose arrays its
            # clear_buffer frees: also those that lead only to leaves that need no
            # gradient now (a leaf gone, or set need_grad=False after the graph was
            # built), which the plan's backward leaves out.
            wanted = {
                f: tuple([i for i, x in enumerate(f.inputs or ()) if x.requires_grad])
                for f in funcs
            }
            self._cleared = order if wanted == indexes else _backward_order(outs, wanted)[0]
        self._order = order

        # The outputs receive their arrays from forward(), through weak references;
        # the other nodes computed are published by the generated code, or cleared.
        output_set = set(outs)
        self._output_publish = [(slot_of[n], weakref.ref(n)) for n in outs if n.creator_node]
        self._nodes = [n for n in slot_of if n.creator_node is not None and n not in output_set]
        # The walk frees a node's array after its last reader: one that no function of
        # the graph reads (an output of a function of two, unused) keeps its array.
        read = {node for f in funcs for node in f.inputs or ()}
        published = [
            (slot_of[n], n)
            for n in self._nodes
            if keep == KEEP
            or n.persistent
            or n in _unlinked
            or (keep == ALIVE and n._variable() is not None)
            or (keep != ALIVE and n not in read)
        ]
        self._published = published
        self._published_slots = {n: k for k, n in published}
        # Nodes marked recompute are freed in forward and recomputed in backward by
        # the walk and the engine, which the plan's runs are left to.
        self._recompute = bool(_marked) and any(n in _marked for n in self._nodes)
        published_nodes = {n for _, n in published}
        self._unpublished = [n for n in self._nodes if n not in published_nodes]
        self._shape_of_graph = self._structure()
        self._grad_leaves = [(slot_of[n], n) for n in grad_leaves]

        env: dict[str, Any] = {}

        def bind(obj: Any) -> str:
            name = f"c{len(env)}"
            env[name] = obj
            return name

        forward: list[tuple[list[str], list[int]]] = []
        backward: list[tuple[list[str], list[int]]] = []
        reads: dict[int, list[int]] = {}  # slot -> steps reading it (forward i, backward n+i)
        own = {}
        self._unsaving = []
        for f in funcs:
            saves = keep in (ALIVE, KEEP) or (
                keep == NO_NEED_GRAD and any(x.requires_grad for x in f.inputs or ())
            )
            lines, own[f] = _forward_code(f, slot_of, bind, saves, keep != ALIVE)
            if not saves or (keep == ALIVE and own[f]):  # the node keeps nothing
                self._unsaving.append(f)
            for node in f.inputs or ():
                reads.setdefault(slot_of[node], []).append(len(forward))
            forward.append((lines, []))
        n = len(forward)
        # The plan of agnograd.compile frees what a node kept once its backward ran
        # (the plans of y.forward() leave it, as the walk does, for later backwards).
        frees = keep == ALIVE
        state = {slot_of[node]: "set" for node in outs if node.creator_node is not None}
        for f in order:
            lines, uses = _backward_code(f, indexes[f], slot_of, own[f], bind, state, frees)
            for slot in uses:
                reads.setdefault(slot, []).append(n + len(backward))
            backward.append((lines, []))
        published_slots = {s for s, _ in published} | {s for s, _ in self._output_publish}
        for slot, steps in reads.items():
            if slot not in published_slots:  # free each array after its last use
                last = max(steps)
                (forward[last] if last < n else backward[last - n])[1].append(slot)
        # Nodes without a Variable get their array alone, and leaves without one no
        # gradient: a Variable made for one later (get_variable) counts as an edit of
        # the graph, which current() sees.
        self._bare = [n for _, n in published if n._variable() is None] + [
            n for n in leaves if n.requires_grad and n._variable() is None
        ]
        # The plan's own steps record and check the versions of what their nodes keep,
        # as those nodes would: a library's count of writes where it keeps one
        # (PyTorch), else agnograd's write clock.
        run_back = set(order)
        for libraries, version_steps_of in (
            (_versions.counted, version_steps),
            (_versions.uncounted, clock_steps),
        ):
            kept = savers(funcs, own, slot_of, libraries)
            if kept:
                record, check = version_steps_of(kept, run_back, keep != ALIVE)
                forward.append(([f"{bind(record)}(buf)"], []))
                backward.insert(0, ([f"{bind(check)}(buf, g)"], []))
        forward.append((_publish_code(published, bind), []))
        self._runs_rules = not all(own[f] for f in order)
        self._forward_code, forward_source = _code("forward", "buf", forward, env)
        self._backward_code, backward_source = _code("backward", "buf, g", backward, env)
        #: The generated code, for reading (``print(plan.source)``).
        self.source = forward_source + "\n" + backward_source
        self._clear(backward=False)  # no stale arrays: the plan holds them now
        self._lowered = lower(self)  # on JAX: the code above as XLA programs


def _signature(leaves: list[VariableNode], datas: list[Any]) -> tuple[Any, ...]:
    """What a plan is made for: each input's creator (None; ``rewire_on`` gives it
    one), array type, shape and dtype."""
    return tuple(
        [(n.creator_node, d.__class__, d.shape, d.dtype) for n, d in zip(leaves, datas)]  # noqa: B905
    )
