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

The recomputation must see what the first run saw. Without checkpoint a node that
saved an array raises in backward if that array was written in place since
(:mod:`agnograd._versions`); here the block's nodes are gone, so the checkpoint
node does that check for them: the first run records the memory of every array
that any operation of the block reads (a :class:`_Recorder` hook, so operations
outside a checkpoint pay nothing) and, once the block's own intermediate arrays
are freed, the versions of the memory still alive, which backward compares before
recomputing. Variables without a gradient that the block reads keep their array
too, so that one given another array (``c.array = c.array + 1``, a write on JAX)
raises. And the recomputation must read, at each place, the very array the first
run read there: a name that the block reads through a closure and that was rebound
between forward and backward (``c = c + 1``, or ``c += 1``, which binds a new
Variable) makes backward raise too (the recorder of the recomputation compares, see
:class:`_Reads`), where it would otherwise read the new object.
"""

from __future__ import annotations

import numbers
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from agnograd import _versions
from agnograd._backend import is_array, label
from agnograd._config import config, force_backprop_mode, get_auto_forward
from agnograd._engine import grad
from agnograd._function import FunctionNode
from agnograd._variable import Variable, VariableNode
from agnograd.function_hooks import FunctionHook

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
        # _Reads).
        self._reads: _Reads | None = None

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
        self._check_closures(saved)
        if self._reads is not None:
            self._reads.check(self)
        n = len(self._call.slots)
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
        recorder = _Recorder(expect=self._reads)
        with force_backprop_mode(), recorder:
            result = self._call.run(args)
        if recorder.other is not None:
            raise _rebound(self, *recorder.other)
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

    def _check_closures(self, saved: tuple[Any, ...]) -> None:
        """Raise if a closed-over Variable was given another array since forward: the
        recomputation would read the new one."""
        inputs = self.inputs
        assert inputs is not None
        n = len(self._call.slots)
        for node, kept in zip(inputs[n:], saved[n:], strict=True):
            var = node.get_variable_or_none()
            kept = kept.array if isinstance(kept, Variable) else kept
            if var is not None and var.array is not kept:
                raise RuntimeError(
                    f"{self.label}: the Variable {var.label} that {self._call.name} reads "
                    "was given a new array between forward and backward, so the "
                    "recomputation would differ from the forward pass; update parameters "
                    "after backward"
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


class _Recorder(FunctionHook):
    """Collects the function nodes applied while it is entered; with ``reads`` (the
    first run of a block) also the memory of every array they read and where it was
    first read; with ``expect`` (a recomputation) compares what is read at those
    places with what the first run read there (:class:`_Reads`), keeping the first
    difference in ``other``."""

    def __init__(self, reads: bool = False, expect: _Reads | None = None) -> None:
        self.name = f"agnograd.checkpoint.{id(self):x}"  # nested checkpoints: one each
        self.functions: weakref.WeakSet[FunctionNode] = weakref.WeakSet()
        # id(memory) -> (weak reference to it, shape and dtype of the array read, what
        # read it first, and where: the index of that read among all, of that function
        # among all, and its class). Weak: the block's intermediate arrays must not
        # outlive it.
        self.reads: dict[int, _Read] | None = {} if reads else None
        # The functions applied so far (nested checkpoint nodes left out) and the arrays
        # they read.
        self._count = 0
        self._read = 0
        # A recomputation: the places to compare, by read, the index and read of the
        # next one; ``other``: the first place that read another array, the function
        # that read it there, and that array.
        self._places = () if expect is None else expect.places
        self._at = 0
        self._next = self._places[0][0] if self._places else _NEVER
        self.other: tuple[_Place, str, Any] | None = None

    def forward_preprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        # Every operation of a checkpointed block comes here, twice: kept short.
        kind = function.__class__
        if kind is Checkpoint:
            # A nested checkpoint's node is applied only where its inputs require a
            # gradient, which the recomputation may change; the functions of its block,
            # applied either way, read the same arrays.
            return
        reads = self.reads
        count = self._count
        start = self._read
        if reads is None:  # a recomputation
            if self._next != _NEVER:  # places left to compare
                self._count = count + 1
                end = self._read = start + len(in_data)
                if self._next < end:
                    self._compare(function, in_data, count, start, end)
            return
        self._count = count + 1
        self._read = start + len(in_data)
        i = start
        for array in in_data:
            memory = _versions.memory_of(array)
            seen = reads.get(id(memory))
            # (an id of a freed intermediate array can come back)
            if seen is None or seen[0]() is not memory:
                try:
                    ref = weakref.ref(memory)
                except TypeError:  # not weak-referenceable: cannot be tracked safely
                    i += 1
                    continue
                shape = tuple(array.shape)
                reads[id(memory)] = (ref, shape, array.dtype, function.label, i, count, kind)
            i += 1

    def _compare(
        self, function: FunctionNode, in_data: tuple[Any, ...], count: int, start: int, end: int
    ) -> None:
        """Compare the reads ``start`` to ``end`` of the recomputation, those of its
        ``count``-th function, with the first run's at the places among them."""
        places = self._places
        while self._next < end:
            place = places[self._at]
            first = place[1]
            if first[5] != count or first[6] is not function.__class__:
                # Not the function that read there in the first run: the recomputation
                # applies others (it does not compute the same thing), compare no more.
                self._next = _NEVER
                return
            array = in_data[place[0] - start]
            if first[0]() is not _versions.memory_of(array):
                self.other = (place, function.label, array)
                self._next = _NEVER  # one is enough
                return
            self._at += 1
            self._next = places[self._at][0] if self._at < len(places) else _NEVER

    def forward_postprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        self.functions.add(function)


_Read = tuple["weakref.ref[Any]", tuple[int, ...], Any, str, int, int, type]
# Where the first run first read an array that outlived it: the index of the read,
# what was read, and the Variable holding it then (a weak reference) with its name.
_Place = tuple[int, _Read, "weakref.ref[Variable] | None", "str | None"]
_NEVER = 1 << 62  # no place left to compare


class _Reads:
    """What the first run of a block read besides the checkpoint node's inputs, taken
    once the block's intermediate arrays are freed: the memory still alive with its
    version then, the Variables without a gradient with their array then, and where
    the arrays still alive were first read (the places).

    Backward checks the first two before recomputing, as a node that saved an array
    checks its version (:func:`agnograd._versions.check`): the block's nodes, which
    would have, are gone. The recomputation must read the same array at each place
    (else a name that the block reads was rebound to another one): its
    :class:`_Recorder` compares, as long as the same functions come in the same order.
    """

    __slots__ = ("constants", "memory", "places")

    def __init__(
        self,
        memory: list[tuple[_Read, int, weakref.ref[Variable] | None]],
        constants: list[tuple[weakref.ref[Variable], weakref.ref[Any]]],
        places: list[_Place],
    ) -> None:
        self.memory = memory
        self.constants = constants
        self.places = places

    @classmethod
    def after(
        cls,
        recorder: _Recorder,
        watched: list[weakref.ref[Variable]],
        skip: set[int],
        anew: set[int] | None,
    ) -> _Reads | None:
        """The reads to check from those the first run (``recorder``) recorded;
        ``skip`` holds the memory that the node's own checks cover (its inputs) or
        that the recomputation makes anew (its outputs), as do the functions of the
        block still alive (kept by an intermediate result stored outside it). With
        ``anew`` (more memory the recomputation makes anew), the places too."""
        reads = recorder.reads
        assert reads is not None
        names: dict[int, tuple[weakref.ref[Variable], str | None]] = {}
        constants = []
        for ref in watched:
            var = ref()
            if var is None or var._data is None:
                continue  # made inside the block, and gone with it
            try:
                constants.append((ref, weakref.ref(var._data)))
            except TypeError:
                continue
            names.setdefault(id(_versions.memory_of(var._data)), (ref, var.name))
        made = set(skip)
        for function in recorder.functions:  # usually none: the block's graph is gone
            for out in function.outputs or ():
                data = None if (node := out()) is None else node.data
                if data is not None:
                    made.add(id(_versions.memory_of(data)))
        memory = []
        places: list[_Place] = []
        for key, read in reads.items():
            owner = read[0]()
            if owner is None or key in made:
                continue  # freed (an intermediate array), or checked elsewhere
            var_ref, var_name = names.get(key, (None, None))
            memory.append((read, _versions.of((owner,))[0], var_ref))
            if anew is not None and key not in anew:
                places.append((read[4], read, var_ref, var_name))
        if not (memory or constants):
            return None
        places.sort()  # by the index of the read (one each): the order of the recomputation
        return cls(memory, constants, places)

    def check(self, node: Checkpoint) -> None:
        """Raise if something the block read changed since its first run."""
        name = node._call.name
        for ref, kept in self.constants:
            var = ref()
            if var is not None and var._data is not kept():
                raise RuntimeError(
                    f"{node.label}: the {var._describe()} that {name} reads was given a new "
                    "array between forward and backward (an assignment to .array or .d, or "
                    "a write into an immutable array such as JAX's), so recomputing "
                    f"{name} in backward would read other values than the forward pass and "
                    "its gradient would be wrong; change it after backward, or pass it to "
                    f"{node._op}() as an argument"
                )
        for (ref, shape, dtype, reader, *_), version, var_ref in self.memory:
            memory = ref()
            if memory is None:
                continue  # freed: nothing can have written into it
            now = _versions.of((memory,))[0]
            if now != version:
                var = None if var_ref is None else var_ref()
                what = (
                    f"array ({label(shape, dtype)}, first read by {reader})"
                    if var is None
                    else var._describe()
                )
                raise RuntimeError(
                    f"{node.label}: the {what} that {name} reads was written in place "
                    f"between forward and backward (version {version} then, {now} now; a "
                    "write into any view of the same memory counts), so recomputing "
                    f"{name} in backward would read other values than the forward pass and "
                    "its gradient would be wrong; make the write after backward, or into "
                    "another array"
                )


def _rebound(node: Checkpoint, place: _Place, reader: str, array: Any) -> RuntimeError:
    """The error for a recomputation that read ``array`` where the first run read
    another array that outlived it (``place``): a name was rebound."""
    _, (_, shape, dtype, *_), var_ref, var_name = place
    var = None if var_ref is None else var_ref()
    if var is not None:
        then = f"the {var._describe()}"
    elif var_name:
        then = f"the array of the Variable {var_name!r} ({label(shape, dtype)})"
    else:
        then = f"an array ({label(shape, dtype)})"
    name, op = node._call.name, node._op
    now = label(tuple(array.shape), array.dtype)
    return RuntimeError(
        f"{node.label}: recomputing {name} in backward, {reader} read another array "
        f"({now}) where the forward pass read {then}: a name that {name} reads through a "
        "closure now refers to another array or Variable (it was rebound between forward "
        "and backward, as `c = c + 1` or `c += 1` do), so the recomputation would read "
        "other values than the forward pass and its gradient would be wrong; pass it to "
        f"{op}() as an argument, or rebind it after backward"
    )


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
    recorder = _Recorder(reads=True)
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
    node._reads = _Reads.after(recorder, watched, skip, anew if places else None)
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
