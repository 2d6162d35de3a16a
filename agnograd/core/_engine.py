"""Reverse-mode backprop over the graph of FunctionNodes.

Function nodes are popped from a heap by rank, so each one runs after every
consumer of its outputs; gradients live in a dict keyed by VariableNode and are
dropped the moment their node's creator consumes them.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy

from agnograd.backends._backend import (
    Array,
    _namespaces,
    backend_name,
    is_array,
    raw_namespace,
    writable,
)
from agnograd.core import _debug, _extension
from agnograd.core._config import HOOKS, MODE, using_config
from agnograd.core._function import FunctionNode, describe_arrays
from agnograd.core._function import sum_to as _sum_to
from agnograd.core._function import symbolic as function_symbolic
from agnograd.core._variable import Variable, VariableNode, clear_node_data


def backward_outputs(
    outputs: Sequence[Variable],
    grad_outputs: Sequence[Variable | Array | None] | None = None,
    *,
    retain_grad: bool = False,
    enable_double_backprop: bool = False,
    loss_scale: float | None = None,
    clear_buffer: bool = False,
) -> None:
    """Backpropagate from several outputs at once, accumulating into leaf gradients.

    ``grad_outputs`` gives the seed of each output: an array or a Variable of the
    output's shape, or ``None`` to use the ``.grad`` you set on the output, else ones
    of its shape. With one output this is :meth:`Variable.backward`, which leaves the
    output's ``.grad`` as it is. With several, their seeds are consumed, as in
    Chainer's ``chainer.backward``: the outputs' ``.grad`` is ``None`` afterwards, so
    that a second call does not count them again. The other options are those of
    :meth:`Variable.backward`.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(np.array([1.0, 2.0]))
    >>> a, b = x * 2, x * x
    >>> agnograd.backward([a, b], [np.ones(2), np.ones(2)])
    >>> x.grad
    array([4., 6.])
    >>> a.grad, b.grad = np.ones(2), np.ones(2)
    >>> agnograd.backward([a, b])
    >>> x.grad, a.grad, b.grad
    (array([ 8., 12.]), None, None)
    """
    backward(
        outputs,
        grad_outputs,
        retain_grad=retain_grad,
        enable_double_backprop=enable_double_backprop,
        loss_scale=loss_scale,
        clear_buffer=clear_buffer,
        consume=isinstance(outputs, list | tuple) and len(outputs) > 1,
    )


def backward(
    outputs: Sequence[Variable],
    grad_outputs: Sequence[Variable | Array | None] | None = None,
    *,
    retain_grad: bool = False,
    enable_double_backprop: bool = False,
    loss_scale: float | None = None,
    clear_buffer: bool = False,
    consume: bool = False,
) -> None:
    """What :meth:`Variable.backward` runs: backpropagate from ``outputs``, leaving
    their ``.grad`` as it is (a seed made up of ones is stored there, as Chainer's
    ``y.backward()`` does); with ``consume``, the outputs' ``.grad`` is ``None``
    afterwards (seeds taken from it are used once). :func:`backward_outputs` is the
    public ``agnograd.backward``.
    """
    outputs = _as_list(outputs, "backward", "outputs")
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    else:
        grad_outputs = _as_list(grad_outputs, "backward", "grad_outputs")
        _same_length(outputs, grad_outputs, "backward", "outputs", "grad_outputs")
    seeds = [
        _seed(y, gy, i, loss_scale, enable_double_backprop, "backward", not consume)
        for i, (y, gy) in enumerate(zip(outputs, grad_outputs, strict=True))
    ]
    # A leaf given as an output keeps its seed as .grad and receives nothing more.
    seeds = [(node, gy) for node, gy in seeds if node.creator_node is not None]
    if consume:
        for y, gy in zip(outputs, grad_outputs, strict=True):
            if gy is None and y.creator_node is not None:
                y._grad_var = None
    seen = {id(gy._data if isinstance(gy, Variable) else gy) for _, gy in seeds}
    with (
        using_config("enable_backprop", enable_double_backprop),
        using_config("auto_forward", True),
        _quiet(),
    ):
        results = _run(seeds, enable_double_backprop, retain_grad, None, clear_buffer)
    _accumulate_into_leaves(results, enable_double_backprop, seen)


def grad(
    outputs: Sequence[Variable],
    inputs: Sequence[Variable],
    grad_outputs: Sequence[Variable | Array | None] | None = None,
    grad_inputs: Sequence[Variable | Array | None] | None = None,
    set_grad: bool = False,
    retain_grad: bool = False,
    enable_double_backprop: bool = False,
    loss_scale: float | None = None,
) -> list[Variable | None]:
    """Gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``.

    Only the part of the graph between ``outputs`` and ``inputs`` runs. An input that
    the outputs do not reach gets ``None``. ``grad_inputs`` are the inputs' initial
    gradients, as in Chainer: each is added to its input's result and flows on, through
    the input's creator, into the inputs computed before it. With ``set_grad=True``
    the results are also stored in the inputs' ``grad_var``; with ``retain_grad=True``
    every intermediate Variable on the way keeps its gradient, the inputs that have a
    creator included.

    Under ``auto_forward(False)``, of outputs that have not been computed yet, it
    builds the gradient graph instead, as nnabla's ``nn.grad`` does: the results are
    Variables of the define-then-run graph that ``forward()`` computes (from the data
    the inputs hold then), differentiable again; a missing seed is ones.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(np.array(3.0))
    >>> y = x ** 3
    >>> (gx,) = agnograd.grad([y], [x], enable_double_backprop=True)
    >>> gx
    variable(27.)
    >>> agnograd.grad([gx], [x])
    [variable(18.)]
    >>> x.grad is None
    True
    """
    outputs = _as_list(outputs, "grad", "outputs")
    inputs = _as_list(inputs, "grad", "inputs")
    for v in (*outputs, *inputs):
        if not isinstance(v, Variable):
            raise TypeError(f"grad: outputs and inputs must be Variables, got {type(v).__name__}")
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    else:
        grad_outputs = _as_list(grad_outputs, "grad", "grad_outputs")
        _same_length(outputs, grad_outputs, "grad", "outputs", "grad_outputs")
    if grad_inputs is not None:
        grad_inputs = _as_list(grad_inputs, "grad", "grad_inputs")
        _same_length(inputs, grad_inputs, "grad", "inputs", "grad_inputs")
        for i, (x, extra) in enumerate(zip(inputs, grad_inputs, strict=True)):
            if extra is not None:
                _gradient_of(x, extra, f"grad: grad_inputs[{i}]")

    symbolic = not MODE.get()[1] and any(y._data is None for y in outputs)
    if symbolic:  # nnabla's nn.grad: the gradient graph, to be run by forward()
        seeds = [_symbolic_seed(y, gy, loss_scale) for y, gy in zip(outputs, grad_outputs)]  # noqa: B905
    else:
        seeds = [
            _seed(y, gy, i, loss_scale, enable_double_backprop, "grad")
            for i, (y, gy) in enumerate(zip(outputs, grad_outputs, strict=True))
        ]
    double = enable_double_backprop or symbolic
    targets = {x._node for x in inputs}
    # grad_inputs are the inputs' initial gradients, as in Chainer: they flow on
    # into the inputs' creators, down to other inputs.
    target_seeds = []
    for x, extra in zip(inputs, grad_inputs or (), strict=False):
        if extra is not None:
            if isinstance(extra, Variable):
                extra = extra if double else extra._data
            elif double:
                extra = Variable._new(extra, False)
            target_seeds.append((x._node, extra))
    token = function_symbolic.set(symbolic)
    try:
        with (
            using_config("enable_backprop", double),
            using_config("auto_forward", not symbolic),
            _quiet(),
        ):
            results = _run(seeds, double, retain_grad, targets, False, target_seeds)
            gxs: list[Variable | None] = []
            for x in inputs:
                gx = results.get(x._node)
                if gx is not None and not isinstance(gx, Variable):
                    gx = Variable._new(gx, False)
                gxs.append(gx)
    finally:
        function_symbolic.reset(token)
    if set_grad:
        for x, gx in zip(inputs, gxs, strict=True):
            x._grad_var = gx
    elif retain_grad:  # an input that is an intermediate Variable keeps its gradient too
        for x, gx in zip(inputs, gxs, strict=True):
            if gx is not None and x.creator_node is not None:
                _store_grad(x._node, gx)
    return gxs


# Rules divide by zero where a derivative is infinite (sqrt at 0) and give inf or
# nan there, as torch does; NumPy's warnings about it would be errors in a suite run
# with -W error. numpy.errstate is a context variable: other threads are untouched.
def _quiet() -> numpy.errstate:
    return numpy.errstate(divide="ignore", invalid="ignore", over="ignore")


# ---------------------------------------------------------------------------------


def _as_list(values: Any, op: str, arg: str) -> list[Any]:
    if not isinstance(values, list | tuple):
        raise TypeError(f"{op}: {arg} must be a list or tuple, got {type(values).__name__}")
    return list(values)


def _same_length(a: list[Any], b: list[Any], op: str, name_a: str, name_b: str) -> None:
    if len(a) != len(b):
        raise ValueError(
            f"{op}: {name_b} has {len(b)} entries but {name_a} has {len(a)}; give one "
            f"per entry of {name_a} (None for the default)"
        )


def _seed(
    y: Variable,
    gy: Any,
    index: int,
    loss_scale: float | None,
    double: bool,
    op: str,
    store_ones: bool = True,
) -> tuple[VariableNode, Any]:
    """The initial gradient of output ``y``, given as ``grad_outputs[index]``, else
    the ``.grad`` the user set, else ones: for any output in ``backward`` (nnabla's
    default ``grad=1``), for a one-element one in ``grad`` (Chainer's and torch's
    rule). ``backward`` stores the ones it made up in ``y.grad``, as Chainer does
    (unless ``store_ones`` is false: ``agnograd.backward`` consumes its seeds). A
    given one must have the output's shape, as in torch (no silent broadcasting), and
    may have another dtype: the gradients the rules return are cast to their inputs'
    dtypes (a float64 seed of a float32 result keeps its precision down to a float64
    leaf).
    """
    if not isinstance(y, Variable):
        raise TypeError(f"{op}: outputs must be Variables, got {type(y).__name__}")
    data = y._data
    if data is None:
        raise RuntimeError(f"{op}: output {y._describe()} holds no data (uninitialised)")
    if gy is not None:
        _gradient_of(y, gy, f"{op}: grad_outputs[{index}]")
        if isinstance(gy, Variable) and not double:
            gy = gy._data
    else:
        gy = users_grad(y)  # checked when it was set
        if gy is not None and not double:
            gy = gy._data
    if gy is None:
        if op != "backward" and math.prod(data.shape) != 1:
            raise ValueError(
                f"{op}: output {y._describe()} has {math.prod(data.shape)} elements, so "
                "the initial gradient is ambiguous; pass grad_outputs"
            )
        gy = raw_namespace(data).ones_like(data)
        if op == "backward" and store_ones:
            y._grad_var = _written[y._node] = Variable._new(gy, False)
    if loss_scale is not None:
        gy = gy * loss_scale
    if double and not isinstance(gy, Variable):
        gy = Variable._new(gy, False)
    return y._node, gy


def _symbolic_seed(y: Variable, gy: Any, loss_scale: float | None) -> tuple[VariableNode, Any]:
    """The seed of output ``y`` of a graph not computed yet, as a Variable: ``gy`` (an
    array or Variable of the output's shape), else ones of that shape."""
    if not isinstance(y, Variable):
        raise TypeError(f"grad: outputs must be Variables, got {type(y).__name__}")
    shape = tuple(y.shape or ())  # a graph's node has one
    if gy is None:
        xp = y.__array_namespace__()
        gy = xp.ones(shape, dtype=y.dtype, device=y.device)
    elif not isinstance(gy, Variable):
        if not is_array(gy):
            raise TypeError(
                f"grad: grad_outputs must be arrays or Variables (or None), got {type(gy).__name__}"
            )
        gy = Variable._new(gy, False)
    if tuple(gy.shape) != shape:
        raise ValueError(
            f"grad: a seed of shape {tuple(gy.shape)} for output {y._describe()}; give one "
            "of the output's shape"
        )
    if loss_scale is not None:
        gy = gy * loss_scale
    return y._node, gy


def users_grad(y: Variable) -> Variable | None:
    """``y.grad_var`` if the user set it: None where an earlier backward wrote it."""
    gv = y._grad_var
    return None if gv is None or _written.get(y._node) is gv else gv


def _gradient_of(var: Variable, g: Any, what: str) -> None:
    """Raise unless ``g``, given as ``what``, is an array or a Variable that could be
    ``var``'s gradient (of any dtype: the engine casts)."""
    raw = g._data if isinstance(g, Variable) else g
    if not is_array(raw):
        raise TypeError(f"{what} must be an array or a Variable (or None), got {type(g).__name__}")
    var._check_grad(raw, f"{what} for", any_dtype=True)


def _relevant(seeds: Iterable[VariableNode], targets: set[VariableNode]) -> set[FunctionNode]:
    """Function nodes that lie on a path from a seed down to a target."""
    funcs: list[FunctionNode] = []
    seen: set[FunctionNode] = set()
    stack = [n.creator_node for n in seeds if n.creator_node is not None]
    while stack:
        f = stack.pop()
        if f in seen:
            continue
        seen.add(f)
        funcs.append(f)
        for x in f.inputs or ():
            if x.creator_node is not None:
                stack.append(x.creator_node)
    relevant: set[FunctionNode] = set()
    for f in sorted(funcs, key=lambda f: f.rank):
        if any(x in targets or x.creator_node in relevant for x in f.inputs or ()):
            relevant.add(f)
    return relevant


def _run(
    seeds: list[tuple[VariableNode, Any]],
    double: bool,
    retain_grad: bool,
    targets: set[VariableNode] | None,
    clear_buffer: bool,
    target_seeds: Sequence[tuple[VariableNode, Any]] = (),
) -> dict[VariableNode, Any]:
    """The backward loop. Returns the gradients that reached leaves (or targets).

    A function node is queued when the first gradient of one of its outputs arrives
    and runs when it is the highest-ranked node left, so every consumer of its
    outputs has run by then. Each gradient is dropped as soon as it is consumed.
    ``target_seeds``: initial gradients of targets (``grad``'s ``grad_inputs``), which
    flow on through the targets' creators where those lie between the seeds and
    other targets.
    """
    grads: dict[VariableNode, Any] = {}
    heap: list[tuple[int, int, FunctionNode]] = []  # (-rank, order queued, node)
    order = itertools.count()
    relevant = _relevant([n for n, _ in seeds], targets) if targets is not None else None
    collected: dict[VariableNode, Any] = {}  # what reached a target (grad())
    special = double or bool(MODE.get()[HOOKS])  # Variables for backward, or hooks
    restoring = bool(dropped)  # forward dropped saved arrays to recompute them
    keep = {node for node, _ in seeds} if clear_buffer else set()
    checked: tuple[type, Any] = (type(None), None)  # the last gradient class found right
    for node, gy in (*seeds, *target_seeds):
        _add(grads, heap, order, relevant, node, gy)
    while heap:
        func = heapq.heappop(heap)[2]
        in_nodes = func.inputs
        if in_nodes is None:
            raise RuntimeError(f"backward reached {func.label}, which was unchained")
        outputs: Any = func.outputs  # set with the inputs
        y = outputs[0]() if len(outputs) == 1 else None
        if y is not None and targets is None and not retain_grad:  # the common case
            gys: Any = grads.pop(y, None)
            gys = None if gys is None else (gys,)
        else:
            gys = _output_grads(func, grads, targets, collected, retain_grad)
        if gys is None:
            continue  # no gradient reached it, or it ran already (queued by two outputs)
        if relevant is None and len(in_nodes) < 3:  # one or two inputs: a shared tuple
            indexes = _INDEXES[
                in_nodes[0].requires_grad, len(in_nodes) > 1 and in_nodes[1].requires_grad
            ]
        else:
            indexes = _indexes(in_nodes, targets, relevant)
        if not indexes:
            continue
        xp = func.xp
        try:
            if restoring and func in dropped:
                _extension.define_then_run.restore(func)
            if special or func._local_hooks or func.backward_receives_variables:
                gxs = _call_backward(func, in_nodes, indexes, gys, double, False, grads)
            elif func._defined_outside:  # a user's node: refusing arrays, accumulation
                gxs = _call_outside(func, in_nodes, indexes, gys, grads)
            else:
                gxs = func.backward(indexes, gys)
        except Exception as error:
            if function_symbolic.get():
                raise RuntimeError(
                    f"grad: the gradient of {func.label} cannot be built before the graph "
                    f"has run (its rule reads the arrays of the forward pass: {error}); call "
                    "forward() on the outputs first, then agnograd.grad"
                ) from error
            error.add_note(
                f"in agnograd {func.label}.backward with gradients ({describe_arrays(gys)})"
            )
            raise
        del gys
        if clear_buffer:
            _free(func, keep)
        if gxs.__class__ is not tuple:
            gxs = _gradient_tuple(func, gxs)
        if len(gxs) != len(indexes):
            gxs = _of_targets(func, gxs, indexes, len(in_nodes))
        for i, gx in zip(indexes, gxs):  # noqa: B905 - lengths checked above
            if gx is None:
                continue
            if gx.__class__ is Variable:
                raw = gx._data
                if not double:
                    gx = raw
            else:
                raw = gx
                if double:
                    gx = Variable._new(gx, False)
            if raw.__class__ is not checked[0] or xp is not checked[1]:
                _check_gradient(func, i, raw, xp)  # of another library, or no array
                checked = (raw.__class__, xp)
            x = in_nodes[i]
            if x.moved:  # a leaf moved since the graph used it (to_device, to_chx)
                gx = _follow_data(x, gx)
            if gx.shape != x.shape:  # a graph's nodes have a shape: never None here
                gx = _sum_to(gx, x.shape, func, i)  # type: ignore[arg-type]
            if gx.dtype is not x.dtype and gx.dtype != x.dtype:
                gx = _cast(gx, x.dtype)
            prev = grads.get(x)
            if prev is None:
                _add(grads, heap, order, relevant, x, gx)
            else:
                grads[x] = prev + gx
        del gxs
    if targets is not None:
        collected.update((node, g) for node, g in grads.items() if node in targets)
        return collected
    return grads


#: Function nodes whose forward kept arrays for backward that define-then-run
#: dropped since, to recompute them (``Variable.recompute``): before the backward of
#: one of them the engine has ``define_then_run.restore`` compute them again.
dropped: weakref.WeakSet[FunctionNode] = weakref.WeakSet()


def _add(
    grads: dict[VariableNode, Any],
    heap: list[tuple[int, int, FunctionNode]],
    order: Iterator[int],
    relevant: set[FunctionNode] | None,
    x: VariableNode,
    gx: Any,
) -> None:
    """Add ``gx`` to the gradient of ``x``; its creator is queued at the first one."""
    prev = grads.get(x)
    if prev is not None:
        grads[x] = prev + gx
        return
    grads[x] = gx
    creator = x.creator_node
    if creator is not None and (relevant is None or creator in relevant):
        heapq.heappush(heap, (-creator.rank, next(order), creator))


def _output_grads(
    func: FunctionNode,
    grads: dict[VariableNode, Any],
    targets: set[VariableNode] | None,
    collected: dict[VariableNode, Any],
    retain_grad: bool,
) -> tuple[Any, ...] | None:
    """Take the gradients of ``func``'s outputs out of ``grads``; None if it has none."""
    gys = []
    outputs: Any = func.outputs  # set with the inputs
    for ref in outputs:
        y = ref()
        gy = None if y is None else grads.pop(y, None)
        if gy is not None:
            if targets is not None and y in targets:
                collected[y] = gy
            if retain_grad:
                _store_grad(y, gy)
        gys.append(gy)
    if all(g is None for g in gys):
        return None
    return tuple(gys)


def _of_targets(
    func: FunctionNode, gxs: Any, indexes: tuple[int, ...], n_inputs: int
) -> tuple[Any, ...]:
    """The gradients of the target inputs, from a backward that returned one per input."""
    if len(gxs) != n_inputs:
        raise ValueError(
            f"backward of {func.label} returned {len(gxs)} gradients for {len(indexes)} "
            f"target inputs {indexes} of its {n_inputs}: the number of gradients returned "
            "from backward is incorrect; return one per target input (or one per input)"
        )
    return tuple([gxs[i] for i in indexes])


def _indexes(
    in_nodes: tuple[VariableNode, ...],
    targets: set[VariableNode] | None,
    relevant: set[FunctionNode] | None,
) -> tuple[int, ...]:
    """The indexes of the inputs that need a gradient (on the way to ``targets``)."""
    if targets is None or relevant is None:  # both or neither
        return tuple([i for i, x in enumerate(in_nodes) if x.requires_grad])
    return tuple(
        [
            i
            for i, x in enumerate(in_nodes)
            if x.requires_grad and (x in targets or x.creator_node in relevant)
        ]
    )


# The indexes of the inputs that require a gradient, for nodes of one or two inputs
# (a node of one input is looked up as if its second did not require one).
_INDEXES = {(True, True): (0, 1), (True, False): (0,), (False, True): (1,), (False, False): ()}


def _call_backward(
    func: FunctionNode,
    in_nodes: tuple[VariableNode, ...],
    indexes: tuple[int, ...],
    gys: Sequence[Any],
    double: bool = False,
    as_variables: bool = False,
    grads: dict[VariableNode, Any] | None = None,
) -> Any:
    """``func.backward`` with what the common case skips: Variables for a node that
    asks for them (and in double backprop, and where the library's arrays refuse a
    Variable on their right), function hooks around the call, and, for a node that
    overrides ``backward_accumulate``, the gradients of its inputs so far (taken out
    of ``grads``: what it returns replaces them)."""
    as_variables = as_variables or double or func.backward_receives_variables
    if as_variables:
        func._variables_in_backward = True
        if not double:
            gys = [None if g is None else Variable._new(g, False) for g in gys]
    hooks = func._all_hooks() if (MODE.get()[HOOKS] or func._local_hooks) else ()
    for hook in hooks:
        hook.backward_preprocess(func, in_nodes, gys)
    try:
        if grads is not None and func._accumulates:
            wrap = as_variables and not double
            gxs = _backward_accumulate(func, in_nodes, indexes, tuple(gys), grads, wrap)
        else:
            gxs = func.backward(indexes, tuple(gys))
    finally:
        if as_variables:
            func._variables_in_backward = False
    if hooks:  # debug mode is one of them: its check of the gradients runs here
        _debug.check_backward(func, gxs)
    for hook in hooks:
        hook.backward_postprocess(func, in_nodes, gys)
    return gxs


def _call_outside(
    func: FunctionNode,
    in_nodes: tuple[VariableNode, ...],
    indexes: tuple[int, ...],
    gys: tuple[Any, ...],
    grads: dict[VariableNode, Any],
) -> Any:
    """The backward of a node defined outside agnograd, in ordinary backprop: with
    Variables where the library's arrays refuse them on their right (``gy *
    F.f(x)``), with the inputs' gradients so far for ``backward_accumulate``."""
    xp = func.xp
    refuses = _refuses_variables.get(xp) is not False and _refuses(xp, gys)
    if refuses or func._accumulates:
        return _call_backward(func, in_nodes, indexes, gys, False, refuses, grads)
    return func.backward(indexes, gys)


def _backward_accumulate(
    func: FunctionNode,
    in_nodes: tuple[VariableNode, ...],
    indexes: tuple[int, ...],
    gys: tuple[Any, ...],
    grads: dict[VariableNode, Any],
    wrap: bool,
) -> tuple[Any, ...]:
    """``func.backward_accumulate`` given the gradients its target inputs have so far
    (an input given twice gets its gradient at its first position only, as in
    Chainer). Those are taken out of ``grads``: what it returns is the new total,
    which the loop then stores as the input's first gradient."""
    taken: list[Any] = []
    seen: set[VariableNode] = set()
    for i in indexes:
        x = in_nodes[i]
        g = None
        if x not in seen:
            seen.add(x)
            g = grads.pop(x, None)
            if g is not None and wrap:
                g = Variable._new(g, False)
        taken.append(g)
    gxs = func.backward_accumulate(indexes, gys, tuple(taken))
    if gxs.__class__ is not tuple:
        gxs = _gradient_tuple(func, gxs)
    if len(gxs) != len(indexes):
        raise ValueError(
            f"backward_accumulate of {func.label} returned {len(gxs)} gradients for "
            f"{len(indexes)} target inputs {indexes}; it must return one per target input"
        )
    for i, g, gx in zip(indexes, taken, gxs, strict=True):
        if g is None:
            continue
        if gx is None:
            raise ValueError(
                f"backward_accumulate of {func.label} returned None for input {i}, which "
                "had a gradient from other paths; return that gradient (its entry of "
                "grad_inputs) when there is nothing to add to it"
            )
        if tuple(gx.shape) != in_nodes[i].shape:
            raise ValueError(
                f"backward_accumulate of {func.label} returned a gradient of shape "
                f"{tuple(gx.shape)} for input {i} of shape {in_nodes[i].shape}; a sum "
                "with grad_inputs must have the input's shape (sum a broadcast gradient "
                "to it before adding)"
            )
    return gxs


# Namespace -> whether its arrays raise on a Variable to their right (``gy * F.f(x)``)
# instead of leaving the operator to the Variable (array-api-strict does). Their
# nodes' backward then gets Variables, so that such code works as on other libraries.
_refuses_variables: dict[Any, bool] = {}


def _refuses(xp: Any, gys: Sequence[Any]) -> bool:
    """Whether ``xp``'s arrays refuse Variables, tried once on a gradient of ``gys``."""
    known = _refuses_variables.get(xp)
    if known is None:
        array = next(g for g in gys if g is not None)
        try:
            known = (array * Variable._new(array, False)).__class__ is not Variable
        except TypeError:
            known = True
        _refuses_variables[xp] = known
    return known


def _gradient_tuple(func: FunctionNode, gxs: Any) -> tuple[Any, ...]:
    """What ``backward`` returned, as a tuple: a list or tuple is taken, anything
    else refused with the node's name."""
    if not isinstance(gxs, list | tuple):
        raise TypeError(
            f"backward of {func.label} returned {type(gxs).__name__}; it must return a "
            "tuple with one gradient (an array, a Variable or None) per target input"
        )
    return tuple(gxs)


def _check_gradient(func: FunctionNode, index: int, gx: Any, xp: Any) -> None:
    """Raise unless ``gx`` is an array of ``xp``, the library of ``func``'s inputs
    (or None: the data of a gradient graph not computed yet, see ``grad``)."""
    if gx is None or _namespaces.get(gx.__class__) is xp:
        return
    if not is_array(gx):
        raise TypeError(
            f"backward of {func.label} returned {type(gx).__name__} as the gradient of "
            f"input {index}; expected a {backend_name(xp)} array, a Variable or None"
        )
    other = raw_namespace(gx)
    if other is not xp:
        raise TypeError(
            f"backward of {func.label} returned a {backend_name(other)} array as the "
            f"gradient of input {index}, which is a {backend_name(xp)} array; return arrays of the "
            "inputs' library"
        )


def _follow_data(node: VariableNode, gx: Any) -> Any:
    """The gradient of a moved leaf, brought to where the leaf's data is now."""
    var = node._variable()
    if var is None or var._data is None:
        return gx
    return _extension.transfer.follow_data(gx, var._data)


def _free(func: FunctionNode, keep: set[VariableNode]) -> None:
    """After ``func``'s backward: drop its saved arrays and its outputs' buffers."""
    func._saved_inputs = func._saved_outputs = None
    for ref in func.outputs or ():
        node = ref()
        if node is not None and node not in keep and not node.persistent:
            clear_node_data(node)


def _cast(gx: Any, dtype: Any) -> Any:
    """Cast a gradient to its input's dtype; a complex gradient of a real input keeps
    its real part (the input can only move along the real axis), as torch does."""
    xp = gx.__array_namespace__() if isinstance(gx, Variable) else raw_namespace(gx)
    if xp.isdtype(gx.dtype, "complex floating") and not xp.isdtype(dtype, "complex floating"):
        gx = xp.real(gx)
    return xp.astype(gx, dtype)


def _store_grad(node: VariableNode, g: Any) -> None:
    var = node._variable()
    if var is None:
        return
    held = var._grad_var
    if held is not None and (held is g or held._data is g):
        return  # the seed the user set, kept as it is (Chainer keeps the same object)
    var._grad_var = _written[node] = g if isinstance(g, Variable) else Variable._new(g, False)


# The gradients that backward wrote into the ``.grad`` of non-leaf Variables itself
# (the ones it made up as a seed, and what retain_grad kept): there to be read, never
# taken as the seed of a later backward, which would repeat an old seed, or one of a
# library or device the graph's data has left since.
_written: weakref.WeakKeyDictionary[VariableNode, Variable] = weakref.WeakKeyDictionary()


# Held while a leaf's gradient is read, added to and stored, so that backward
# passes in several threads into one leaf lose no update.
_leaf_lock = threading.Lock()


def _accumulate_into_leaves(
    grads: dict[VariableNode, Any], double: bool, handed_out: set[int]
) -> None:
    for node, g in grads.items():
        if node.creator_node is not None:
            continue  # the seed of an output that is not a leaf
        var = node._variable()
        if var is None:
            continue
        raw = g._data if isinstance(g, Variable) else g
        # A rule may have returned an array of another library or device: refuse it
        # here rather than leave the leaf a gradient that does not fit its data.
        var._check_grad(raw, "backward: the gradient computed for", any_dtype=True)
        if id(raw) in handed_out:
            # The same array reached two leaves (e.g. through `a + b`): give each its own.
            raw = raw_namespace(raw).asarray(raw, copy=True)
            g = Variable._new(raw, False) if not isinstance(g, Variable) else g * 1
        handed_out.add(id(raw))
        with _leaf_lock:
            prev = var._grad_var
            if prev is None:
                if not isinstance(g, Variable):
                    g = Variable._new(writable(g), False)
                var._grad_var = g
            elif double:
                var._grad_var = prev + g
            else:
                var._grad_var = Variable._new(prev._data + raw, False)
