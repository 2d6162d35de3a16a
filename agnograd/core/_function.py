"""``FunctionNode``: one differentiable operation in the graph."""

from __future__ import annotations

import contextvars
import copy
import weakref
from collections.abc import Sequence
from typing import Any

from agnograd.backends._backend import Array, _namespaces
from agnograd.core import _debug, _extension, _graph, _link, _versions
from agnograd.core import _type_check as type_check
from agnograd.core._config import FORWARD_MODE, HOOKS, MODE, takes_variables
from agnograd.core._function_checks import (
    _forward_failed,
    _freed_message,
    _input_sequence,
    _on_accelerator,
    _output_tuple,
    as_constant,
    batched_by_rule,
    combined_namespace,
    describe_arrays,
    input_namespace,
    sum_to,
)
from agnograd.core._link import _clock, _counted, _graph_writes, keep_for_backward, linked
from agnograd.core._variable import Variable, _new_variable, _plain_variable
from agnograd.core._variable_node import VariableNode

_weakref = weakref.ref


class FunctionNode:
    """One operation of the graph: a forward on raw arrays and a backward rule.

    Subclasses implement :meth:`forward` once against the array API (``self.xp`` is
    the inputs' namespace) and :meth:`backward` once with array API operations.
    Ordinary backprop runs ``backward`` on raw arrays; with
    ``enable_double_backprop=True`` it runs the same code on Variables, so the
    gradient is itself differentiable.

    A ``backward`` that needs the namespace's functions (``cos``, ``sum``, ...) takes
    them from :func:`agnograd.namespace_of` of an array it receives: the library's own
    namespace for raw arrays, agnograd's differentiable one for Variables, so the same
    code runs at every order on every library (``self.xp`` refuses Variables, and
    torch's tensors have no ``__array_namespace__``); the concepts guide shows one.
    Forward mode calls ``jvp(self, inputs, tangents)`` where a subclass defines it
    (one tangent per input, None for a zero; it returns one per output, like
    ``backward`` on raw arrays or Variables); a node without one gets its tangents
    from its backward, transposed (a second pass, for that node alone). Under
    :func:`agnograd.vmap`, ``forward`` runs on arrays of one example's shape, or a
    subclass's batching rule ``vmap`` on the whole batch.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> class Cube(agnograd.FunctionNode):
    ...     def forward(self, inputs):
    ...         (x,) = inputs
    ...         self.retain_inputs((0,))
    ...         return (x * x * x,)
    ...     def backward(self, target_input_indexes, grad_outputs):
    ...         (x,) = self.get_retained_inputs()
    ...         (gy,) = grad_outputs
    ...         return (3 * x * x * gy,)
    >>> x = agnograd.Variable(np.array([1.0, 2.0]))
    >>> (y,) = Cube().apply((x,))
    >>> y.grad = np.ones(2)
    >>> y.backward()
    >>> x.grad
    array([ 3., 12.])
    """

    # What a node keeps. The class holds the defaults, so that making a node costs no
    # Python-level __init__ or __new__; apply sets the values of the nodes it links.
    # Its inputs and outputs are properties over attributes that the hot paths read
    # (see _link.inputs_of and outputs_of): a graph's collector walks what nodes hold.
    _node_in0: VariableNode | None = None
    _node_in1: VariableNode | None = None
    _node_ins: Any = None
    _node_outs: tuple[weakref.ref[VariableNode], ...] | None = None
    inputs: tuple[VariableNode, ...] | None = property(  # type: ignore[assignment]
        _link.inputs_of, _link.set_inputs, doc="The input nodes, or None."
    )
    outputs: tuple[weakref.ref[VariableNode], ...] | None = property(  # type: ignore[assignment]
        _link.outputs_of, _link.set_outputs, doc="Weak references to the output nodes, or None."
    )
    rank: int = 0
    xp: Any = None
    _saved_inputs: tuple[Any, ...] | None = None
    _saved_outputs: tuple[Any, ...] | None = None
    # The versions of what it keeps, inputs and outputs (None: all were 0), where the
    # library counts writes (PyTorch); elsewhere the write clock then (0: no write yet).
    _saved_versions: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    _saved_at = 0
    _local_hooks: dict[str, Any] | None = None
    _variables_in_backward = 0  # threads whose backward of it takes Variables (see takes_variables)
    _retain_in: tuple[int, ...] = ()
    _retain_out: tuple[int, ...] = ()
    # For each input, the inputs its gradient reads, where the class keeps all it
    # reads (_retain_in): a node then keeps only what the gradients of the inputs that
    # require one read, and says so in its _retain_in (agnograd.core._link's
    # _read_by_gradients). None: every gradient may read all it keeps.
    _gradient_reads: tuple[tuple[int, ...], ...] | None = None

    #: False for functions without a gradient (comparisons, ``argmax``, ...): their
    #: outputs never require one.
    differentiable = True

    # True for a node that takes inputs whose memory was written since they were
    # computed, on purpose (agnograd.functions._inplace's writes through views).
    _takes_written_inputs = False

    #: Set to True in a subclass whose ``backward`` needs Variables (for example
    #: Chainer-style code reading ``gy.array``) even in ordinary backprop. On a
    #: library whose arrays refuse any operand but their own (array-api-strict), the
    #: ``backward`` of a node defined outside agnograd receives Variables anyway, so
    #: that ``gy * F.sigmoid(x)`` works there as it does on the others.
    backward_receives_variables = False

    # Whether the class was defined outside agnograd (set for each subclass).
    _defined_outside = False

    #: Whether the inputs broadcast against each other (the binary elementwise
    #: functions): inputs that do not make a forward fail with Chainer's
    #: :class:`~agnograd.type_check.InvalidType` (a ``ValueError``) naming the shapes.
    broadcasts = False

    # Whether apply runs check_type_forward: set for each subclass that defines one
    # (and for an instance given one), so that the others pay nothing for it.
    _checks_types = False

    # Whether the class overrides backward_accumulate (set for each subclass): the
    # engine then hands it the gradients its inputs have so far.
    _accumulates = False

    # Whether the engine calls backward itself, with arrays: not for a node whose
    # backward receives Variables, a user's node, or one with hooks of its own.
    _plain_backward = True

    # Whether the gradients backward returns have the shapes of the inputs, as those
    # of the elementwise functions of one array do: the engine then compares none.
    _gradients_fit = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._defined_outside = not cls.__module__.startswith("agnograd.")
        cls._checks_types = cls.check_type_forward is not _NO_TYPE_CHECK
        cls._accumulates = cls.backward_accumulate is not FunctionNode.backward_accumulate
        cls._plain_backward = not (cls.backward_receives_variables or cls._defined_outside)
        if cls.vmap is not None and (
            "forward" in cls.__dict__ or not hasattr(cls.forward, "_batched_by_vmap")
        ):
            cls.forward = batched_by_rule(cls.forward)  # type: ignore[method-assign]

    #: The batching rule under :func:`agnograd.vmap` (torch's ``Function.vmap``) a
    #: subclass may define: ``vmap(self, in_axes, inputs) -> (outputs, out_axes)``, on
    #: the whole batch's arrays (the batch on axis 0 where ``in_axes`` is 0, None for
    #: a shared one; ``self.xp`` a namespace for them); ``NotImplemented`` runs ``forward``.
    vmap: Any = None

    @property
    def label(self) -> str:
        """Short name of the function, by default its class name."""
        return type(self).__name__

    def _type_check(self) -> Any:
        check = self.__dict__.get("_instance_type_check")
        return _no_type_check.__get__(self) if check is None else check

    def _set_type_check(self, check: Any) -> None:
        self.__dict__["_instance_type_check"] = check
        self._checks_types = True

    check_type_forward = property(
        _type_check,
        _set_type_check,
        doc="""Check the types of the inputs before :meth:`forward` (Chainer's hook).

        Define ``check_type_forward(self, in_types)`` in a subclass: ``apply`` then
        calls it with one entry per input (``shape``, ``dtype``, ``ndim``, ``size``)
        before ``forward``, and the conditions it states with
        :func:`agnograd.type_check.expect` raise
        :class:`~agnograd.type_check.InvalidType` when they fail. A class without one
        pays nothing for the check. See :mod:`agnograd.type_check`.""",
    )

    def forward(self, inputs: tuple[Array, ...]) -> tuple[Array, ...]:
        """Compute the outputs from raw input arrays; return a tuple of arrays.

        Write it once against the array API (``self.xp``). Chainer's split is also
        understood: a class that defines :meth:`forward_cpu` and :meth:`forward_gpu`
        instead has ``forward_gpu`` called when the first input lives on an
        accelerator (a CUDA, ROCm, Metal, ... device, as its ``__dlpack_device__``
        says: CuPy arrays, torch tensors on ``cuda``, JAX arrays on a GPU) and
        ``forward_cpu`` otherwise (NumPy, array-api-strict, torch on ``cpu``, ...).
        """
        if _on_accelerator(inputs):
            return self.forward_gpu(inputs)
        return self.forward_cpu(inputs)

    def forward_cpu(self, inputs: tuple[Array, ...]) -> tuple[Array, ...]:
        """Chainer's forward for inputs in host memory (see :meth:`forward`)."""
        raise NotImplementedError(
            f"{self.label} must implement forward(inputs) (or Chainer's forward_cpu and "
            "forward_gpu)"
        )

    def forward_gpu(self, inputs: tuple[Array, ...]) -> tuple[Array, ...]:
        """Chainer's forward for inputs on an accelerator (see :meth:`forward`)."""
        raise NotImplementedError(
            f"{self.label} has no forward_gpu for inputs on an accelerator "
            f"({describe_arrays(inputs)}); implement forward(inputs) once with self.xp, "
            "or forward_gpu"
        )

    # The fast path's forward of a node of one output (agnograd.core._fast): that
    # output, computed from raw arrays of namespace ``xp``. Nodes that compute it
    # directly override these; a node of several outputs raises here (unpacking).
    def _forward1(self, xp: Any, x: Array) -> Array:
        (y,) = self.forward((x,))
        return y

    def _forward2(self, xp: Any, x1: Array, x2: Array) -> Array:
        (y,) = self.forward((x1, x2))
        return y

    def backward(
        self, target_input_indexes: tuple[int, ...], grad_outputs: tuple[Array | None, ...]
    ) -> tuple[Array | None, ...]:
        """Return the gradients of the inputs listed in ``target_input_indexes``.

        ``grad_outputs`` has one entry per output (``None`` where an output received
        no gradient). The result has one entry per target index (or one per input);
        ``None`` means a zero gradient. Broadcast inputs need no special care: the
        engine sums each gradient to its input's shape.

        A class that overrides :meth:`backward_accumulate` instead needs no
        ``backward``: this one then calls it with no gradients to add.
        """
        if self._accumulates:
            return self.backward_accumulate(
                target_input_indexes, grad_outputs, (None,) * len(target_input_indexes)
            )
        raise NotImplementedError(f"{self.label} defines no backward: it is not differentiable")

    def backward_accumulate(
        self,
        target_input_indexes: tuple[int, ...],
        grad_outputs: tuple[Array | None, ...],
        grad_inputs: tuple[Array | None, ...],
    ) -> tuple[Array | None, ...]:
        """The gradients of the target inputs, each added to the gradient it has so far.

        ``grad_inputs`` has one entry per target index: the gradient that input has
        accumulated so far in this backward pass (from the other functions that use
        it), or ``None``. An input given at several positions gets it at the first
        only. The result has one entry per target index and **replaces** those
        gradients: it must include them. Gradients added here must have their
        input's shape (the engine can sum a broadcast gradient, not a sum).

        Override it, instead of :meth:`backward`, to fuse computing a gradient with
        adding it (Chainer's hook); the engine then calls it instead of ``backward``.
        This default calls :meth:`backward` and adds.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> class Twice(agnograd.FunctionNode):
        ...     def forward(self, inputs):
        ...         return (inputs[0] * 2,)
        ...     def backward_accumulate(self, indexes, grad_outputs, grad_inputs):
        ...         (gy,), (g,) = grad_outputs, grad_inputs
        ...         return (gy * 2 if g is None else g + gy * 2,)
        >>> x = agnograd.Variable(np.array([1.0, 2.0]))
        >>> (y,) = Twice().apply((x,))
        >>> agnograd.functions.sum(y + x).backward()
        >>> x.grad
        array([3., 3.])
        """
        backward = self.backward
        if getattr(backward, "__func__", None) is FunctionNode.backward:
            raise NotImplementedError(
                f"{self.label} defines neither backward nor backward_accumulate: it is not "
                "differentiable"
            )
        gxs = backward(target_input_indexes, grad_outputs)
        if not isinstance(gxs, list | tuple):
            raise TypeError(
                f"backward of {self.label} returned {type(gxs).__name__}; it must return a "
                "tuple with one gradient (an array, a Variable or None) per target input"
            )
        n_inputs = len(self.inputs or ())
        if len(gxs) != len(target_input_indexes):
            if len(gxs) != n_inputs:
                raise ValueError(
                    f"backward of {self.label} returned {len(gxs)} gradients for "
                    f"{len(target_input_indexes)} target inputs {target_input_indexes}"
                )
            gxs = tuple([gxs[i] for i in target_input_indexes])
        inputs = self.inputs or ()
        summed = []
        for i, gx, g in zip(target_input_indexes, gxs, grad_inputs, strict=True):
            if g is not None and gx is not None:
                gx = sum_to(gx, inputs[i].shape, self, i) + g  # type: ignore[arg-type]
            summed.append(g if gx is None else gx)
        return tuple(summed)

    # -- running ----------------------------------------------------------------

    def apply(self, inputs: Sequence[Variable | Array]) -> tuple[Variable, ...]:
        """Run forward on ``inputs`` (Variables or raw arrays) and link the graph.

        Raw arrays are constants. The graph is recorded when backprop is enabled
        and some input requires a gradient; the node's rank is the largest input
        rank and each output's rank is one more.
        """
        hooks: Any  # this thread's mapping of hooks, then the list of all that apply
        enable_backprop, auto_forward, hooks = MODE.get()
        if inputs.__class__ is not tuple and inputs.__class__ is not list:
            inputs = _input_sequence(self, inputs)
        if hooks:
            # Inside a jvp its innermost level is a hook (agnograd.transforms._forward),
            # so no fast path runs: the level runs the node and pushes its tangents.
            level = hooks.get(FORWARD_MODE)
            if level is not None:
                return level.apply(self, inputs)
        if not auto_forward:
            return _extension.define_then_run.apply_deferred(self, inputs, enable_backprop)
        # The hot path of every operation: one input gives tuples at once, several
        # are gathered in one loop (no comprehensions: each costs a frame).
        nodes: Any
        arrays: Any
        if len(inputs) == 1:
            x = inputs[0]
            if not isinstance(x, Variable):
                x = as_constant(x, self)
            node = x._node
            data = x._data
            nodes = (node,)
            arrays = (data,)
            requires_grad = node.requires_grad
            rank = node.rank
            xp = _namespaces.get(data.__class__) or input_namespace(self, inputs, x)
        else:
            nodes = []
            arrays = []
            requires_grad = False
            rank = 0
            xp = None
            for x in inputs:
                if not isinstance(x, Variable):
                    x = as_constant(x, self)
                node = x._node
                data = x._data
                nodes.append(node)
                arrays.append(data)
                if node.requires_grad:
                    requires_grad = True
                if node.rank > rank:
                    rank = node.rank
                other = _namespaces.get(data.__class__) or input_namespace(self, inputs, x)
                if xp is None:
                    xp = other
                elif other is not xp:
                    xp, shared = combined_namespace(self, xp, other, inputs)
                    if shared is not None:  # vmap's unbatched inputs, now shared
                        return self.apply(shared)
            arrays = tuple(arrays)
        self.xp = xp
        if _graph_writes and requires_grad and enable_backprop:
            # agnograd wrote into some memory in place: no input of the graph may have
            # been changed since it was computed (through a view of its memory).
            _versions.check_inputs(self, nodes, arrays)
        if self._checks_types:
            type_check.check_types(self, arrays)
        if hooks or self._local_hooks:
            hooks = self._all_hooks()
            for hook in hooks:
                hook.forward_preprocess(self, arrays)
        try:
            outputs = self.forward(arrays)
        except Exception as error:
            _forward_failed(error, self, arrays)
            raise
        if (
            outputs.__class__ is not tuple
            or len(outputs) != 1
            or outputs[0].__class__ not in _namespaces
        ):
            outputs = _output_tuple(self, outputs)
        if hooks:  # debug mode is one of them: its check of the outputs runs here
            _debug.check_forward(self, outputs)
            for hook in hooks:
                hook.forward_postprocess(self, arrays)

        if not (requires_grad and enable_backprop and self.differentiable):
            return tuple([_plain_variable(y) for y in outputs])
        if self.inputs is not None:
            raise RuntimeError(
                f"{self.label}.apply: this node is already part of a graph (a node records "
                "one application); create a new instance for each call"
            )
        if len(outputs) == 1:
            nodes = nodes if nodes.__class__ is tuple else tuple(nodes)
            var = linked(self, nodes, arrays, outputs[0], rank, xp)
            if hooks:  # debug mode: what the node kept, fingerprinted
                _debug.keep_fingerprints(self)
            return (var,)
        # Several outputs: what linked does for one, for each (linked stays lean for
        # the common case: one loop there costs every operation 5 %).
        self.rank = rank
        self.inputs = nodes if nodes.__class__ is tuple else tuple(nodes)
        rank += 1
        results = tuple([_new_variable(y, True, self, rank) for y in outputs])
        self.outputs = tuple([_weakref(var._node) for var in results])
        keep_for_backward(self, arrays, outputs)
        if _graph_writes:
            _versions.note_outputs(results)
        if hooks:
            _debug.keep_fingerprints(self)
        return results

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        """Output ``(shape, dtype)`` pairs for define-then-run, from abstract inputs.

        The default runs :meth:`forward` on :class:`~agnograd.backends._abstract.Abstract`
        values that carry only a shape and a dtype; override it for a forward whose
        output shape depends on the data.
        """
        # On a copy: another thread may be running this node's forward or backward
        # with its real namespace (a graph re-inferred for a plan while others walk it).
        probe = copy.copy(self)
        probe.xp = inputs[0].__array_namespace__()
        outputs = probe.forward(inputs)
        # What forward declared it keeps for backward, as a real forward would.
        self._retain_in, self._retain_out = probe._retain_in, probe._retain_out
        return tuple((tuple(y.shape), y.dtype) for y in outputs)

    def retain_inputs(self, indexes: Sequence[int]) -> None:
        """Keep the input arrays at ``indexes`` for backward (call inside forward).

        A class that always keeps the same inputs may declare ``_retain_in`` instead.
        """
        self._retain_in = tuple(indexes)

    def retain_outputs(self, indexes: Sequence[int]) -> None:
        """Keep the output arrays at ``indexes`` for backward (call inside forward)."""
        self._retain_out = tuple(indexes)

    def get_retained_inputs(self) -> tuple[Any, ...]:
        """The inputs kept by :meth:`retain_inputs`, in that order.

        Raw arrays during ordinary backprop; Variables connected to the graph during
        double backprop.
        """
        saved = self._saved_inputs
        if saved is None:
            if not self._retain_in and _declared(self, "_retain_in"):
                return ()  # retain_inputs(()): nothing kept, on purpose
            if symbolic.get():  # the graph's own Variables: what forward() will compute
                nodes = self.inputs or ()
                return tuple([nodes[i].get_variable() for i in self._retain_in])
            raise RuntimeError(_freed_message(self, "inputs"))
        if self._saved_versions is not None or self.xp in _counted or _clock[0]:
            _versions.check_kept(self, "input", saved, 0)
        if not self._variables_in_backward or not takes_variables(self):
            return saved  # (the count first: one attribute where no thread takes Variables)
        inputs = self.inputs
        assert inputs is not None
        return tuple(
            _variable_of(inputs[i], data) for i, data in zip(self._retain_in, saved, strict=True)
        )

    def get_retained_outputs(self) -> tuple[Any, ...]:
        """The outputs kept by :meth:`retain_outputs`, in that order (see inputs)."""
        saved = self._saved_outputs
        if saved is None:
            if not self._retain_out and _declared(self, "_retain_out"):
                return ()  # retain_outputs(()): nothing kept, on purpose
            if symbolic.get():
                kept = self.outputs or ()
                outs = [kept[i]() for i in self._retain_out]
                if all(node is not None for node in outs):
                    return tuple([node.get_variable() for node in outs])  # type: ignore[union-attr]
            raise RuntimeError(_freed_message(self, "outputs"))
        if self._saved_versions is not None or self.xp in _counted or _clock[0]:
            _versions.check_kept(self, "output", saved, 1)
        if not self._variables_in_backward or not takes_variables(self):
            return saved
        outputs = self.outputs
        assert outputs is not None
        result = []
        for i, data in zip(self._retain_out, saved, strict=True):
            node = outputs[i]()
            if node is None:
                # The output was dropped: rebuild it and link it back in, so that the
                # second-order gradient reaching it flows through this node.
                var = Variable._new(data, True)
                var._node.set_creator_node(self)
                refs = list(outputs)
                refs[i] = _weakref(var._node)
                self.outputs = outputs = tuple(refs)
                result.append(var)
            else:
                result.append(_variable_of(node, data))
        return tuple(result)

    @property
    def output_data(self) -> tuple[Any, ...]:
        """The retained output arrays, one entry per output (``None`` for an output not
        retained by :meth:`retain_outputs`), as Chainer gives them."""
        outputs = self.outputs
        if outputs is None:
            raise RuntimeError(
                f"{self.label}.output_data: the node holds no outputs (it has not run in a "
                "graph, or was unchained)"
            )
        data: list[Any] = [None] * len(outputs)
        saved = self._saved_outputs
        if saved is not None:
            for i, array in zip(self._retain_out, saved, strict=True):
                data[i] = array
        return tuple(data)

    def unchain(self) -> None:
        """Detach this node from its outputs and drop its inputs and saved arrays."""
        _graph.edited()
        for ref in self.outputs or ():
            node = ref()
            if node is not None:
                node.unchain()
        self.inputs = None
        self._saved_inputs = self._saved_outputs = None

    # -- hooks ------------------------------------------------------------------

    def add_hook(self, hook: Any, name: str | None = None) -> None:
        """Register a function hook on this node only."""
        _graph.edited()  # plans run the nodes with hooks themselves
        self.local_function_hooks[name or hook.name] = hook

    def delete_hook(self, name: str) -> None:
        """Remove the local hook registered as ``name``."""
        if not self._local_hooks or name not in self._local_hooks:
            raise KeyError(f"{self.label} has no local hook named {name!r}")
        del self._local_hooks[name]

    @property
    def local_function_hooks(self) -> dict[str, Any]:
        """Hooks registered on this node with :meth:`add_hook`."""
        if self._local_hooks is None:
            self._local_hooks = {}
            self._plain_backward = False  # the engine runs its hooks
        return self._local_hooks

    def _all_hooks(self) -> list[Any]:
        hooks = list(MODE.get()[HOOKS].values())
        if self._local_hooks:
            hooks.extend(self._local_hooks.values())
        return hooks

    def __repr__(self) -> str:
        return f"<{self.label} rank={self.rank}>"


def _no_type_check(self: FunctionNode, in_types: Any) -> None:
    """No check: what a FunctionNode without ``check_type_forward`` has."""


# The property FunctionNode.check_type_forward: a subclass that defines the method
# hides it (and checks its inputs' types).
_NO_TYPE_CHECK = FunctionNode.__dict__["check_type_forward"]


# Set while agnograd.grad builds the gradient graph of a define-then-run graph that has
# not run (nnabla's nn.grad): rules then read the graph's own Variables, without data,
# where they would read the arrays forward kept.
symbolic: contextvars.ContextVar[bool] = contextvars.ContextVar("agnograd.symbolic", default=False)


def _variable_of(node: VariableNode, data: Any) -> Variable:
    var = node._variable()
    if var is not None and var._data is data:
        return var
    return Variable._from_node(node, data)


def _declared(func: FunctionNode, name: str) -> bool:
    """Whether ``func`` said what to keep (``retain_inputs(())``, or a class's own
    ``_retain_in``), rather than never saying: that is a forgotten call."""
    return name in func.__dict__ or any(
        name in vars(cls) for cls in type(func).__mro__ if cls is not FunctionNode
    )
