"""Checkpointing: run a block without keeping its graph, recompute it in backward.

:func:`checkpoint` (``agnograd.checkpoint``, PyTorch's
``torch.utils.checkpoint.checkpoint``) and :func:`forget`
(``agnograd.functions.forget``, Chainer's ``F.forget``) run a function once with the
graph recorded, keep only its inputs and outputs, and link the outputs to the graph
through one checkpoint node. That node's backward runs the function again,
with the graph recorded, and backpropagates through the recomputation.

Variables the function reads without receiving them as arguments -- layer weights
captured by a closure -- are found in the first run (the outputs reach their nodes
through functions applied inside the block, and they are not its arguments) and
become inputs of the node too, so they receive their gradient as PyTorch's non-reentrant checkpoint
gives it. In double backprop the backward of the node is itself a checkpoint of the
vector-Jacobian product, so second-order gradients are right and cost no more
memory than the first-order ones.

The recomputation must read what the first run read: an array written in place,
a Variable given a new array or a closure's name rebound between forward and
backward makes backward raise (:mod:`agnograd.functions._checkpoint_reads` records the reads
and checks them).
"""

from __future__ import annotations

import numbers
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from agnograd.backends._backend import is_array
from agnograd.core import _versions
from agnograd.core._config import config, force_backprop_mode, get_auto_forward
from agnograd.core._engine import grad
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode
from agnograd.functions._checkpoint_reads import Reads, Recorder, check_closures, rebound_error

__all__ = ["Checkpoint", "checkpoint", "forget"]


def checkpoint(f: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Call ``f(*args, **kwargs)`` keeping only its inputs; recompute it in backward.

    The graph that ``f`` builds is dropped as soon as ``f`` returns: only the arrays
    of the inputs (and the outputs, which the caller holds) stay. Backward runs
    ``f`` again on the same inputs, with the graph recorded, and backpropagates
    through that recomputation. Memory for a block's intermediate results is
    traded for one more forward of the block: checkpointing every ``sqrt(N)``
    layers of an ``N``-layer network keeps about ``2 sqrt(N)`` activations instead
    of ``N``.

    Parameters
    ----------
    f : callable
        The block. It returns a Variable, or a tuple or list of Variables. It must
        compute the same thing when called again (no randomness, no state changed
        between the forward and the backward pass); a recomputation that returns
        other shapes or reads other Variables raises ``RuntimeError``.
    *args, **kwargs
        Passed to ``f``. Variables and arrays are the block's inputs: ``f``
        receives, in their place, new Variables around the same arrays (or the same
        arrays), so that the block's graph starts there. Anything else (numbers,
        strings, ``None``, lists of parameters, ...) is passed through as is.

    Returns
    -------
    Variable or tuple or list of Variables
        What ``f`` returned, with the same arrays, linked to ``args`` and to the
        parameters ``f`` reads through one checkpoint node. An output of
        ``f`` that requires no gradient is returned without a link.

    Notes
    -----
    *Parameters closed over.* Variables that ``f`` reads without receiving them
    (the weights of a layer captured by a closure, a list of parameters passed as a
    non-array argument) are found in the first run and receive their gradients,
    as with PyTorch's non-reentrant checkpoint. A Variable computed outside ``f``
    from another Variable that ``f`` also reads cannot be told apart from a use
    of that other Variable in the recomputation: that case raises ``ValueError``
    asking to pass it as an argument.

    *Double backprop.* With ``enable_double_backprop=True`` the backward of the
    node is a checkpoint of its vector-Jacobian product, recorded, so gradients of
    gradients are right.

    *Nothing read may change before backward.* An array or Variable that ``f``
    reads (an argument, a parameter, or a constant such as a mask reached through a
    closure) and that is written in place (``c[...] = 0``, through any view of its
    memory) or given a new array between the forward and the backward pass makes
    backward raise ``RuntimeError`` naming ``f`` and what changed, as the version
    check of a node that saved the array does without checkpoint. So does a name
    that ``f`` reads through a closure rebound to another array or Variable
    (``c = c + 1``, or ``c += 1``, which binds a new Variable): without checkpoint
    the graph would keep the old values; pass such a value as an argument instead.

    *Randomness* inside ``f`` is out of scope: the recomputation draws again.
    Under :func:`~agnograd.no_backprop_mode` ``f`` runs once, as is.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> w = agnograd.Variable(np.array([0.5, -1.0]))
    >>> def block(x):
    ...     return F.tanh(x * w) * 2
    >>> x = agnograd.Variable(np.array([1.0, 2.0]))
    >>> y = agnograd.checkpoint(block, x)
    >>> y.creator
    <Checkpoint(block) rank=0>
    >>> F.sum(y).backward()
    >>> x.grad, w.grad
    (array([ 0.78644773, -0.14130165]), array([1.57289547, 0.2826033 ]))
    """
    return _checkpoint(f, args, kwargs, "checkpoint")


def forget(func: Callable[..., Any], /, *xs: Any) -> Any:
    """Chainer's name for :func:`agnograd.checkpoint`: call ``func(*xs)`` and forget its graph.

    Chainer's ``F.forget`` requires every parameter to be an argument; here
    parameters that ``func`` closes over receive their gradient too.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> x = agnograd.Variable(np.array([1.0, 2.0]))
    >>> y = F.forget(lambda a: F.exp(a) * a, x)
    >>> F.sum(y).backward()
    >>> x.grad
    array([ 5.43656366, 22.1671683 ])
    """
    return _checkpoint(func, xs, {}, "forget")


class Checkpoint(FunctionNode):
    """The node of one :func:`checkpoint` call: recomputes its block in backward.

    Its inputs are the block's array arguments followed by the Variables the block
    closes over; it keeps the arrays of all of them (no other array) and its
    outputs are the block's differentiable outputs.
    """

    def __init__(
        self, call: _Call, linked: tuple[bool, ...], outputs: tuple[Any, ...], op: str
    ) -> None:
        self._call = call
        # Which outputs of the block are the node's (those that required a gradient).
        self._linked = linked
        self._results: tuple[Any, ...] | None = outputs
        self._op = op
        # (shape, dtype) of the outputs, to check that a recomputation matches.
        self._meta = tuple((tuple(y.shape), y.dtype) for y in outputs)
        # What the first run read besides the node's inputs, set once it is linked:
        # the memory of arrays with its version then, Variables without a gradient
        # with their array then, and where arrays still alive were first read (see
        # Reads).
        self._reads: Reads | None = None

    @property
    def label(self) -> str:
        return f"Checkpoint({self._call.name})"

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # The outputs were computed by the first run of the block (which found the
        # closed-over inputs); the node only hands them out.
        self.retain_inputs(range(len(inputs)))
        outputs, self._results = self._results, None
        if outputs is None:
            raise RuntimeError(f"{self.label}: forward runs once, through {self._op}()")
        return outputs

    def backward(
        self, target_input_indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        saved = self.get_retained_inputs()
        n = len(self._call.slots)
        inputs = self.inputs
        assert inputs is not None  # set when the node was linked
        check_closures(self.label, self._call.name, inputs[n:], saved[n:])
        if self._reads is not None:
            self._reads.check(self.label, self._call.name, self._op)
        if not config.enable_backprop:  # ordinary backprop: one recomputation
            args = [
                Variable(a, requires_grad=i in target_input_indexes) if variable else a
                for i, (a, variable) in enumerate(zip(saved[:n], self._call.variables, strict=True))
            ]
            gxs = self._vjp(target_input_indexes, args, grad_outputs, double=False)
            return tuple(None if g is None else g.array for g in gxs)
        # Double backprop: the gradient is a function of the inputs and of the output
        # gradients, recorded as a checkpoint of the vector-Jacobian product itself.
        given = tuple(i for i, g in enumerate(grad_outputs) if g is not None)
        kinds = zip(saved[:n], self._call.variables, strict=True)
        args = [a if variable else a.array for a, variable in kinds]
        gys = [grad_outputs[i] for i in given]
        vjp = _VJP(self, target_input_indexes, given)
        results = _checkpoint(vjp, (*args, *gys), {}, self._op)
        return (results,) if isinstance(results, Variable) else tuple(results)

    def _vjp(
        self,
        indexes: tuple[int, ...],
        args: list[Any],
        grad_outputs: Sequence[Any],
        double: bool,
    ) -> list[Variable | None]:
        """Run the block again on ``args`` (with the graph) and backpropagate
        ``grad_outputs`` to the inputs at ``indexes``."""
        n = len(args)
        for i in indexes:  # the targets need a gradient of their own
            if i < n and not args[i].requires_grad:
                args[i] = Variable(args[i].array, requires_grad=True)
        fresh = {a.node for a in args if isinstance(a, Variable)}
        recorder = Recorder(Checkpoint, expect=self._reads)
        with force_backprop_mode(), recorder:
            result = self._call.run(args)
        if recorder.other is not None:
            raise rebound_error(self.label, self._call.name, self._op, *recorder.other)
        everything = _outputs_of(result, self._op, self._call.name)
        found = _closed_over(everything, fresh, recorder.functions)
        del recorder
        inputs = self.inputs
        assert inputs is not None  # set when the node was linked
        outputs = self._check_recomputation(everything, found, set(inputs[n:]))
        targets = [args[i] if i < n else inputs[i].get_variable() for i in indexes]
        # An output that requires no gradient now depends on no target: it adds nothing.
        live = [
            (y, gy)
            for y, gy in zip(outputs, grad_outputs, strict=True)
            if gy is not None and y.requires_grad
        ]
        return grad(
            [y for y, _ in live],
            targets,
            [gy for _, gy in live],
            enable_double_backprop=double,
        )

    def _check_recomputation(
        self, outputs: list[Variable], found: list[VariableNode], known: set[VariableNode]
    ) -> list[Variable]:
        """The node's outputs among the recomputed ones; raise if the recomputation
        differs from the first run."""
        if len(outputs) == len(self._linked):
            outputs = [y for y, linked in zip(outputs, self._linked, strict=True) if linked]
        meta = tuple((tuple(y.array.shape), y.dtype) for y in outputs)
        if meta != self._meta:
            raise RuntimeError(
                f"{self.label}: recomputing {self._call.name} in backward gave outputs "
                f"{_shapes(meta)}, the forward pass {_shapes(self._meta)}; the block must "
                "compute the same thing both times (no randomness, no state changed "
                "between forward and backward)"
            )
        for node in found:
            if node not in known:
                raise RuntimeError(
                    f"{self.label}: recomputing {self._call.name} in backward read a "
                    f"Variable ({node.label}) that the forward pass did not read, so its "
                    "gradient would be lost; the block must read the same Variables both "
                    "times (create constants inside it with requires_grad=False)"
                )
        return outputs


class _VJP:
    """The vector-Jacobian product of a checkpoint node as a block of its
    own: ``(args..., output gradients...) -> input gradients`` (double backprop)."""

    def __init__(self, node: Checkpoint, indexes: tuple[int, ...], given: tuple[int, ...]):
        self.node = node
        self.indexes = indexes
        self.given = given
        self.name = f"gradient of {node._call.name}"

    def __call__(self, *values: Any) -> tuple[Variable, ...]:
        node = self.node
        n = len(node._call.slots)
        gys: list[Any] = [None] * len(node._meta)
        for i, gy in zip(self.given, values[n:], strict=True):
            gys[i] = gy
        args = list(values[:n])
        gxs = node._vjp(self.indexes, args, gys, double=True)
        # A target the outputs do not reach gets zeros: the block's outputs must be
        # Variables, and the zeros' own gradient is zero, as it should be.
        results = []
        for i, g in zip(self.indexes, gxs, strict=True):
            if g is None:
                like = node.inputs[i].get_variable() if i >= n else args[i]  # type: ignore[index]
                data = like.array if isinstance(like, Variable) else like
                g = Variable(like.xp.zeros_like(data), requires_grad=False)
            results.append(g)
        return tuple(results)


class _Call:
    """``f`` with its arguments, the array arguments taken out (``slots``): it is
    called again with other values in their place."""

    def __init__(self, f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.f = f
        self.name = getattr(f, "name", None) or getattr(f, "__name__", None) or type(f).__name__
        slots: list[int | str] = []
        variables: list[bool] = []
        arrays: list[Any] = []
        keyed: list[tuple[int | str, Any]] = [*enumerate(args), *kwargs.items()]
        for key, value in keyed:
            if isinstance(value, Variable) or (
                is_array(value) and not isinstance(value, numbers.Number)
            ):
                slots.append(key)
                variables.append(isinstance(value, Variable))
                arrays.append(value)
        self.slots = tuple(slots)
        self.variables = tuple(variables)
        # The arguments without the arrays: they are not kept after the call.
        self.args = tuple(None if i in slots else a for i, a in enumerate(args))
        self.kwargs = {k: None if k in slots else v for k, v in kwargs.items()}
        self.inputs = arrays  # emptied once the node is linked

    def run(self, values: Sequence[Any]) -> Any:
        """``f`` with ``values`` in the slots of the array arguments."""
        args = list(self.args)
        kwargs = dict(self.kwargs)
        for key, value in zip(self.slots, values, strict=True):
            if isinstance(key, int):
                args[key] = value
            else:
                kwargs[key] = value
        return self.f(*args, **kwargs)


def _checkpoint(
    f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], op: str
) -> Any:
    if not callable(f):
        raise TypeError(
            f"{op}(f, *args): f must be callable (the block to recompute), got "
            f"{type(f).__name__}; write {op}(block, x) rather than {op}(block(x))"
        )
    if not get_auto_forward():
        raise RuntimeError(
            f"{op}: not available with auto_forward off (define-then-run), which keeps "
            "every array of the graph anyway; call it with auto_forward on"
        )
    if not config.enable_backprop:
        return f(*args, **kwargs)
    call = _Call(f, args, kwargs)
    given = call.inputs
    fresh = [_fresh(x) for x in given]
    recorder = Recorder(Checkpoint, reads=True)
    with recorder:
        result = call.run(fresh)
    outputs = _outputs_of(result, op, call.name)
    constants: list[VariableNode] = []
    found = _closed_over(
        outputs, {x.node for x in fresh if isinstance(x, Variable)}, recorder.functions, constants
    )
    _refuse_related(found, op, call.name)
    closures = [node.get_variable() for node in found]
    differentiable = [y for y in outputs if y.requires_grad]
    needs_grad = any(isinstance(x, Variable) and x.requires_grad for x in given) or closures
    if not differentiable or not needs_grad:
        return result  # nothing to backprop through: the block's results as they are
    linked = tuple(y.requires_grad for y in outputs)
    node = Checkpoint(call, linked, tuple(y.array for y in differentiable), op)
    call.inputs = []
    made = iter(node.apply((*given, *closures)))
    kept = (*(node._saved_inputs or ()), *(y.array for y in differentiable))
    skip = {id(_versions.memory_of(a)) for a in kept}
    # The recomputation makes the other outputs anew too (a mask, say), unless the block
    # returned an array it read (rare): not a place to compare.
    anew = {id(_versions.memory_of(y.array)) for y in outputs if not y.requires_grad}
    watched = [weakref.ref(v) for c in constants if (v := c.get_variable_or_none()) is not None]
    del given, fresh, closures, differentiable, kept, constants
    results = [
        next(made) if y.requires_grad else Variable(y.array, requires_grad=False) for y in outputs
    ]
    single, as_list = isinstance(result, Variable), isinstance(result, list)
    del outputs, result  # drops the block's graph
    # The places are compared for the user's blocks only: the gradient blocks of double
    # backprop run the engine, whose functions depend on which inputs need a gradient,
    # and recompute the user's block, which compares its own.
    places = not isinstance(f, _VJP)
    node._reads = Reads.after(recorder, watched, skip, anew if places else None)
    if single:
        return results[0]
    return results if as_list else tuple(results)


def _fresh(x: Any) -> Any:
    """What the block receives for the input ``x``: a new leaf around the same array
    (its graph starts there), or the raw array itself."""
    if isinstance(x, Variable):
        return Variable(x.array, requires_grad=x.requires_grad)
    return x


def _outputs_of(result: Any, op: str, name: str) -> list[Variable]:
    if isinstance(result, Variable):
        outputs = [result]
    elif isinstance(result, tuple | list) and result:
        outputs = list(result)
    else:
        outputs = []
    for i, y in enumerate(outputs):
        if not isinstance(y, Variable):
            raise TypeError(
                f"{op}: {name} returned {type(y).__name__} as output {i}; it must return "
                "Variables (wrap an array with agnograd.as_variable)"
            )
    if not outputs:
        raise TypeError(
            f"{op}: {name} returned {type(result).__name__}; it must return a Variable or "
            "a non-empty tuple or list of Variables"
        )
    return outputs


def _closed_over(
    outputs: Sequence[Variable],
    fresh: set[VariableNode],
    inside: weakref.WeakSet[FunctionNode],
    constants: list[VariableNode] | None = None,
) -> list[VariableNode]:
    """The nodes requiring a gradient that the outputs reach through functions applied
    ``inside`` the block, other than the block's own inputs (``fresh``): Variables the
    block read without receiving them, in the order first met. The nodes reached that
    require no gradient are added to ``constants``, if given."""
    found: list[VariableNode] = []
    seen: set[VariableNode] = set()
    visited: set[FunctionNode] = set()
    stack = [y.node for y in reversed(outputs)]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node in fresh:
            continue
        if not node.requires_grad:
            if constants is not None:
                constants.append(node)
            continue
        creator = node.creator_node
        if creator is not None and creator in inside:
            if creator not in visited:
                visited.add(creator)
                stack.extend(reversed(creator.inputs or ()))
            continue
        if creator is None and node.get_variable_or_none() is None:
            continue  # a leaf made inside the block and dropped: no one reads its gradient
        found.append(node)
    return found


def _refuse_related(found: list[VariableNode], op: str, name: str) -> None:
    """Raise if one closed-over Variable was computed from another: the recomputation
    would backpropagate into the first and then again from it (counted twice)."""
    if len(found) < 2 or all(node.creator_node is None for node in found):
        return
    targets = set(found)
    stack = [
        x for node in found if node.creator_node is not None for x in node.creator_node.inputs or ()
    ]
    seen: set[VariableNode] = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node in targets:
            raise ValueError(
                f"{op}: {name} reads a Variable computed outside it from another Variable "
                f"({node.label}) that it also reads; pass the computed one to {op} as an "
                f"argument ({op}({name}, x, h)) so that its gradient is counted once"
            )
        if node.creator_node is not None:
            stack.extend(node.creator_node.inputs or ())


def _shapes(meta: Sequence[tuple[tuple[int, ...], Any]]) -> str:
    return "[" + ", ".join(f"{shape} {dtype}" for shape, dtype in meta) + "]"
