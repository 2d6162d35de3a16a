"""The backward loop over the graph of FunctionNodes.

Function nodes run highest rank first, so each one runs after every consumer of
its outputs, and nodes of one rank in the order they were queued (the order in
which gradients are summed, which compiled plans copy). They wait in a heap, except
the next node of a chain, which runs at once where nothing in the heap comes before
it. Gradients live in a dict keyed by VariableNode and are dropped the moment their
node's creator consumes them.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from agnograd.backends._backend import _namespaces, backend_name, is_array, raw_namespace
from agnograd.core import _debug, _extension
from agnograd.core._config import HOOKS, MODE, taking_variables
from agnograd.core._function import FunctionNode
from agnograd.core._function import symbolic as function_symbolic
from agnograd.core._function_checks import combined_with, combines, describe_arrays
from agnograd.core._function_checks import sum_to as _sum_to
from agnograd.core._graph import relevant_functions
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode, clear_node_data


class GradientNeedsDataError(RuntimeError):
    """``agnograd.grad`` of a graph that has not run met a rule that reads the
    arrays of the forward pass (a decomposition's): its gradient cannot be built
    before the graph has run (``agnograd.jit`` then runs the function eagerly)."""


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
    if clear_buffer:
        count_clear()
    grads: dict[VariableNode, Any] = {}
    # (-rank, order queued, node, the output node that queued it)
    heap: list[tuple[int, int, FunctionNode, VariableNode]] = []
    order = itertools.count()
    relevant = relevant_functions([n for n, _ in seeds], targets) if targets is not None else None
    collected: dict[VariableNode, Any] = {}  # what reached a target (grad())
    # Variables for backward, hooks, or seeds that a node's namespace must combine with.
    special = (
        double
        or bool(MODE.get()[HOOKS])
        or any(
            n.creator_node is not None and combined_with(n.creator_node.xp, (gy,)) is not None
            for n, gy in seeds
        )
    )
    restoring = bool(dropped)  # forward dropped saved arrays to recompute them
    keep = {node for node, _ in seeds} if clear_buffer else set()
    # The class of the last gradient found right, and the namespace it was found for.
    checked_class: Any = type(None)
    checked_xp: Any = None
    for node, gy in (*seeds, *target_seeds):
        _add(grads, heap, order, relevant, node, gy)
    # An output's gradient is just taken: no target is among the outputs (none, or
    # leaves alone, whose gradients stay in grads to the end).
    plain = not retain_grad and (
        targets is None or (relevant is None and all(t.creator_node is None for t in targets))
    )
    # Whether a node that the fast path linked, which keeps no reference to its output
    # (the engine knows it as the node that queued it), has its outputs recorded before
    # it runs: the routes but the common one read them (targets, retain_grad, hooks,
    # double backprop, clear_buffer; and node_backward, where its backward is not plain).
    recording = not plain or special or clear_buffer
    queued = next(order)  # how many nodes were queued: their order within a rank
    pop = heapq.heappop
    push = heapq.heappush
    pushpop = heapq.heappushpop
    # The first creator queued by the node that ran last (a chain's next node), and
    # its order: it runs next without the heap where no node in the heap comes first
    # (of a higher rank, or of its rank and queued before it), as the heap would.
    after: FunctionNode | None = None
    after_out: Any = None  # the output node that queued it
    after_queued = 0
    while True:
        if after is not None:
            func, out = after, after_out
            after = None
            if heap and -heap[0][0] >= func.rank:
                _, _, func, out = pushpop(heap, (-func.rank, after_queued, func, out))
        elif heap:
            _, _, func, out = pop(heap)
        else:
            break
        x0, x1 = func._node_in0, func._node_in1  # func.inputs, without the property's call
        in_nodes: Any = func._node_ins if x0 is None else (x0,) if x1 is None else (x0, x1)
        if in_nodes is None:
            raise RuntimeError(f"backward reached {func.label}, which was unchained")
        outputs: Any = func._node_outs  # (None: its one output is out, see outputs_of)
        plain_backward = func._plain_backward
        if outputs is None and (recording or not plain_backward):
            func._node_outs = outputs = (weakref.ref(out),)  # the routes below read them
        gys: Any
        if outputs is None:  # the common case: a node of the fast path
            gys = grads.pop(out, None)
            if gys is None:
                continue  # no gradient reached it
            gys = (gys,)
        elif plain and len(outputs) == 1:  # (a node gone: no gradient)
            gys = grads.pop(outputs[0](), None)
            if gys is None:
                continue
            gys = (gys,)
        else:
            gys = _output_grads(func, grads, targets, collected, retain_grad)
            if gys is None:
                continue  # none reached it, or it ran already (queued by two outputs)
        n_in = len(in_nodes)
        indexes: tuple[int, ...]
        if relevant is None and n_in == 1:  # one input: a shared tuple
            indexes = _ONE if in_nodes[0].requires_grad else ()
        elif relevant is None and n_in == 2:
            indexes = _INDEXES[in_nodes[0].requires_grad, in_nodes[1].requires_grad]
        else:
            indexes = _indexes(in_nodes, targets, relevant)
        if not indexes:
            continue
        xp = func.xp
        try:
            if restoring and func in dropped:
                _extension.define_then_run.restore(func)
            if plain_backward and not special:
                gxs = func.backward(indexes, gys)
            elif special:
                gxs = _call_backward(func, in_nodes, indexes, gys, double, False, grads)
            else:
                gxs = node_backward(func, in_nodes, indexes, gys, grads)
        except Exception as error:
            if function_symbolic.get():
                raise GradientNeedsDataError(
                    f"grad: the gradient of {func.label} cannot be built before the graph "
                    f"has run (its rule reads the arrays of the forward pass: {error}); call "
                    "forward() on the outputs first, then agnograd.grad"
                ) from error
            error.add_note(
                f"in agnograd {func.label}.backward with gradients ({describe_arrays(gys)})"
            )
            if func._defined_outside and isinstance(error, TypeError | AttributeError):
                error.add_note(_NAMESPACE_HINT)
            raise
        del gys
        if clear_buffer:
            _free(func, keep)
        if gxs.__class__ is not tuple or len(gxs) != len(indexes):
            gxs = per_target(func, gxs, indexes, n_in)
        fits = func._gradients_fit
        k = -1  # the position in indexes (a zip costs a tenth of the loop)
        for gx in gxs:
            k += 1
            if gx is None:
                continue
            i = indexes[k]
            x = in_nodes[i]
            # Whether tidy has anything to do, asked with what the loop knows (a call
            # per gradient costs a tenth of the loop): the class of the last gradient
            # found right (never in double backprop, whose gradients are Variables).
            if (
                gx.__class__ is not checked_class
                or xp is not checked_xp
                or x.moved
                or gx.dtype is not x.dtype
                or (not fits and gx.shape != x.shape)  # a graph's nodes have a shape
            ):
                gx = tidy(func, i, gx, x, xp, double)
                if not (double or x.moved):  # (a moved leaf's may be another library's)
                    checked_class, checked_xp = gx.__class__, xp
            prev = grads.get(x)
            if prev is not None:
                grads[x] = prev + gx
                continue
            # The first gradient of x: its creator is queued (as _add does, written
            # out here, where every gradient passes: the call cost 10 % of the loop).
            grads[x] = gx
            creator = x._creator
            if creator is not None and (relevant is None or creator in relevant):
                queued += 1
                if after is None:
                    after, after_out = creator, x
                    after_queued = queued
                else:
                    push(heap, (-creator.rank, queued, creator, x))
        del gxs
    if targets is not None:
        collected.update((node, g) for node, g in grads.items() if node in targets)
        return collected
    return grads


#: Backward passes so far that freed what the graph kept for them (``clear_buffer``),
#: the engine's and compiled plans': a plan's forward that ran before one of them
#: no longer has what the walk would have (it may have shared a function with it).
clears = 0


def count_clear() -> None:
    """Count one backward pass with ``clear_buffer`` (see :data:`clears`)."""
    global clears
    clears += 1


#: Function nodes whose forward kept arrays for backward that define-then-run
#: dropped since, to recompute them (``Variable.recompute``): before the backward of
#: one of them the engine has ``define_then_run.restore`` compute them again.
dropped: weakref.WeakSet[FunctionNode] = weakref.WeakSet()


def _add(
    grads: dict[VariableNode, Any],
    heap: list[tuple[int, int, FunctionNode, VariableNode]],
    order: Iterator[int],
    relevant: set[FunctionNode] | None,
    x: VariableNode,
    gx: Any,
) -> None:
    """Add ``gx`` to the gradient of ``x``; its creator is queued at the first one
    (the seeds: the loop does the same for the gradients that the rules return)."""
    prev = grads.get(x)
    if prev is not None:
        grads[x] = prev + gx
        return
    grads[x] = gx
    creator = x._creator
    if creator is not None and (relevant is None or creator in relevant):
        heapq.heappush(heap, (-creator.rank, next(order), creator, x))


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


def per_target(
    func: FunctionNode, gxs: Any, indexes: tuple[int, ...], n_inputs: int
) -> tuple[Any, ...]:
    """What ``func``'s backward returned (``gxs``) as a tuple of one gradient per
    target input (``indexes``): a list is taken, one gradient per input is cut down
    to the targets', anything else refused with the node's name. The engine's loop
    and the steps of compiled plans that run a node's own backward read it here."""
    if gxs.__class__ is not tuple:
        gxs = _gradient_tuple(func, gxs)
    if len(gxs) != len(indexes):
        gxs = _of_targets(func, gxs, indexes, n_inputs)
    return gxs


def tidy(func: FunctionNode, i: int, gx: Any, x: Any, xp: Any, double: bool) -> Any:
    """The gradient ``gx`` that ``func``'s backward returned for its input ``i`` (the
    node ``x``, of namespace ``xp``) as the graph stores it: an array of ``xp``
    (checked; a Variable's array, a Variable in ``double`` backprop), where ``x``'s data
    is now (a leaf moved since the graph used it: ``to_device``, ``to_chx``), of its
    shape (summed to it) and dtype (cast to it). The engine's loop and the steps of
    compiled plans both tidy gradients here (a plan gives for ``x`` the shape and dtype
    its forward computed with, and moves a moved leaf's sum once, where it lands).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> from agnograd.core._engine_loop import tidy
    >>> x = agnograd.Variable(np.array([1.0, 2.0], dtype=np.float32))
    >>> func = (x + np.ones((3, 2))).creator_node
    >>> tidy(func, 0, np.ones((3, 2)), x.node, func.xp, False)
    array([3., 3.], dtype=float32)
    """
    if double or _namespaces.get(gx.__class__) is not xp:  # a Variable, or to check
        gx = _stored_form(func, i, gx, xp, double)
    if x.moved:  # (its shape and dtype are its new data's)
        gx = _follow_data(x, gx)
    if not func._gradients_fit and gx.shape != x.shape:
        gx = _sum_to(gx, x.shape, func, i)
    if gx.dtype is not x.dtype and gx.dtype != x.dtype:
        gx = _cast(gx, x.dtype)
    return gx


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


# For a user's backward that failed on the arrays or Variables it was given.
_NAMESPACE_HINT = (
    "a backward computes with agnograd.namespace_of(gy): the library's namespace for "
    "arrays, agnograd's differentiable one for the Variables of double backprop "
    "(self.xp refuses Variables; torch's tensors have no __array_namespace__)"
)


# The indexes of the inputs that require a gradient, for nodes of one or two inputs.
_ONE = (0,)
_INDEXES = {(True, True): (0, 1), (True, False): _ONE, (False, True): (1,), (False, False): ()}


def node_backward(
    func: FunctionNode,
    in_nodes: tuple[VariableNode, ...],
    indexes: tuple[int, ...],
    gys: tuple[Any, ...],
    grads: dict[VariableNode, Any],
) -> Any:
    """The gradients of ``func``'s target inputs (``indexes``), computed as the loop
    computes them in ordinary backprop while no hook is set for every function:
    ``backward`` on arrays for agnograd's nodes, and what the other nodes ask for
    (Variables, their own hooks, ``backward_accumulate``).

    ``grads`` holds the gradients the inputs have so far; for a node that overrides
    ``backward_accumulate``, those of its target inputs are taken out of it, and
    what it returns includes them. Compiled plans call this for every node whose
    backward they do not write out, so that they call what the engine calls.
    """
    if func._plain_backward:
        return func.backward(indexes, gys)
    if func._local_hooks or func.backward_receives_variables:
        return _call_backward(func, in_nodes, indexes, gys, False, False, grads)
    if func._defined_outside:  # a user's node: refusing arrays, accumulation
        return _call_outside(func, in_nodes, indexes, gys, grads)
    return func.backward(indexes, gys)  # its own hooks, added and deleted since


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
    if as_variables and not double:
        gys = [None if g is None else Variable._new(g, False) for g in gys]
    # Gradients of another namespace that combines with the node's (vmap's batched
    # rows of a Jacobian, into a node of unbatched arrays): its rules, which compute
    # with self.xp, run with the two combined for this call.
    xp = func.xp
    combined = combined_with(xp, gys)
    with taking_variables(func) if as_variables else contextlib.nullcontext():
        try:
            hooks = func._all_hooks() if (MODE.get()[HOOKS] or func._local_hooks) else ()
            for hook in hooks:
                hook.backward_preprocess(func, in_nodes, gys)
            if combined is not None:
                func.xp = combined
            if grads is not None and func._accumulates:
                wrap = as_variables and not double
                gxs = _backward_accumulate(func, in_nodes, indexes, tuple(gys), grads, wrap)
            else:
                gxs = func.backward(indexes, tuple(gys))
        finally:
            if combined is not None:
                func.xp = xp
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


def _stored_form(func: FunctionNode, index: int, gx: Any, xp: Any, double: bool) -> Any:
    """The gradient ``gx`` of input ``index`` as the loop stores it: a Variable in
    double backprop, else its array, which must be of ``xp`` (see _check_gradient)."""
    raw = gx._data if gx.__class__ is Variable else gx
    _check_gradient(func, index, raw, xp)
    if not double:
        return raw
    return gx if gx.__class__ is Variable else Variable._new(gx, False)


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
    if other is not xp and not combines(xp, other):
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
