"""Chainer's old-style ``Function``: forward and backward on raw arrays, one object per call.

A :class:`Function` is run through a :class:`FunctionAdapter`, a
:class:`~agnograd.FunctionNode` that holds it, as in Chainer: the adapter is the
node of the graph (``y.creator_node``), the Function keeps the user's code and
state. New code should subclass :class:`~agnograd.FunctionNode`, whose ``backward``
is differentiable again.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from agnograd.backends._backend import Array
from agnograd.core._config import takes_variables
from agnograd.core._function import FunctionNode
from agnograd.core._function_checks import _on_accelerator
from agnograd.core._variable import Variable


class Function:
    """An old-style (Chainer v1) function: ``forward`` and ``backward`` on raw arrays.

    Subclasses implement ``forward(inputs)`` (or ``forward_cpu`` and ``forward_gpu``)
    and ``backward(inputs, grad_outputs)`` (or ``backward_cpu`` and ``backward_gpu``),
    all on tuples of raw arrays; ``backward`` returns one gradient per input (``None``
    for none). Every input is kept for ``backward`` unless ``forward`` calls
    :meth:`retain_inputs`; outputs are kept only when it calls :meth:`retain_outputs`
    (read them as :attr:`output_data`). Calling the Function on Variables or arrays
    returns a Variable (a tuple of them for several outputs). A Function object is
    called once; make a new one for each call.

    Its gradients are computed on raw arrays, so they cannot be differentiated
    again: backpropagating through them (``enable_double_backprop=True`` and a
    second ``grad``) raises, naming the Function. Write a
    :class:`~agnograd.FunctionNode` for second-order gradients.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> class Square(agnograd.Function):
    ...     def forward(self, inputs):
    ...         (x,) = inputs
    ...         return (x * x,)
    ...     def backward(self, inputs, grad_outputs):
    ...         (x,), (gy,) = inputs, grad_outputs
    ...         return (2 * x * gy,)
    >>> x = agnograd.Variable(np.array([1.0, 3.0]))
    >>> y = Square()(x)
    >>> y.grad = np.ones(2)
    >>> y.backward()
    >>> x.grad
    array([2., 6.])
    >>> type(y.creator_node).__name__, y.creator_node.function.label
    ('FunctionAdapter', 'Square')
    """

    # The adapter, held strongly until the call, after which the graph holds it
    # (and it holds this Function): the Function keeps a weak reference only.
    _owned_node: FunctionAdapter | None = None
    _node_ref: weakref.ref[FunctionAdapter] | None = None

    def __call__(self, *inputs: Variable | Array) -> Any:
        node = self.node
        node._function = self  # the graph now owns this Function through its node
        self._node_ref = weakref.ref(node)
        self._owned_node = None
        outputs = node.apply(inputs)
        if node.inputs is not None:
            # As in Chainer, the nodes of the retained inputs and outputs hold their
            # data (VariableNode.data) after the Variables are gone.
            for i in node._retain_in:
                var = node.inputs[i].get_variable_or_none()
                if var is not None:
                    var.retain_data()
            for i in node._retain_out:
                outputs[i].retain_data()
        return outputs[0] if len(outputs) == 1 else outputs

    @property
    def node(self) -> FunctionAdapter:
        """The :class:`FunctionAdapter` that runs this Function in the graph."""
        node = self._owned_node
        if node is None and self._node_ref is not None:
            node = self._node_ref()
        if node is None:
            node = self._owned_node = FunctionAdapter(self)
        return node

    # What a Variable records as its creator when given this Function (Chainer's).
    _node_view = node

    @property
    def label(self) -> str:
        """Short name of the function, by default its class name."""
        return type(self).__name__

    @property
    def inputs(self) -> Any:
        """The input nodes of the call (``None`` before it)."""
        return self.node.inputs

    @property
    def outputs(self) -> Any:
        """Weak references to the output nodes of the call (``None`` before it)."""
        return self.node.outputs

    @property
    def rank(self) -> int:
        """The topological rank of the call (see :attr:`FunctionNode.rank`)."""
        return self.node.rank

    @property
    def output_data(self) -> tuple[Any, ...]:
        """The retained output arrays, one entry per output (``None`` where not kept)."""
        return self.node.output_data

    @property
    def local_function_hooks(self) -> dict[str, Any]:
        """Hooks registered on this function only."""
        return self.node.local_function_hooks

    def check_type_forward(self, in_types: Any) -> None:
        """Check the input types before forward (see :mod:`agnograd.type_check`)."""

    def forward(self, inputs: tuple[Array, ...]) -> tuple[Array, ...]:
        """The outputs, from raw input arrays. By default :meth:`forward_gpu` for
        inputs on an accelerator, :meth:`forward_cpu` otherwise."""
        if _on_accelerator(inputs):
            return self.forward_gpu(inputs)
        return self.forward_cpu(inputs)

    def forward_cpu(self, inputs: tuple[Array, ...]) -> tuple[Array, ...]:
        """The outputs, for inputs in host memory."""
        raise NotImplementedError(
            f"{self.label} must implement forward(inputs) (or forward_cpu and forward_gpu)"
        )

    def forward_gpu(self, inputs: tuple[Array, ...]) -> tuple[Array, ...]:
        """The outputs, for inputs on an accelerator."""
        raise NotImplementedError(
            f"{self.label} has no forward_gpu for inputs on an accelerator; implement "
            "forward(inputs), or forward_gpu"
        )

    def backward(
        self, inputs: tuple[Array | None, ...], grad_outputs: tuple[Array | None, ...]
    ) -> tuple[Array | None, ...]:
        """One gradient per input, from the retained inputs (``None`` where not kept)
        and the outputs' gradients (``None`` where none reached an output). By default
        :meth:`backward_gpu` on an accelerator, :meth:`backward_cpu` otherwise."""
        if _on_accelerator(inputs + grad_outputs):
            return self.backward_gpu(inputs, grad_outputs)
        return self.backward_cpu(inputs, grad_outputs)

    def backward_cpu(
        self, inputs: tuple[Array | None, ...], grad_outputs: tuple[Array | None, ...]
    ) -> tuple[Array | None, ...]:
        """Gradients in host memory; by default none (``None`` for every input)."""
        return (None,) * len(inputs)

    def backward_gpu(
        self, inputs: tuple[Array | None, ...], grad_outputs: tuple[Array | None, ...]
    ) -> tuple[Array | None, ...]:
        """Gradients on an accelerator; by default none (``None`` for every input)."""
        return (None,) * len(inputs)

    def retain_inputs(self, indexes: Sequence[int]) -> None:
        """Keep only the inputs at ``indexes`` for backward (call inside forward)."""
        self.node.retain_inputs(indexes)

    def retain_outputs(self, indexes: Sequence[int], retain_after_backward: bool = False) -> None:
        """Keep the outputs at ``indexes`` for backward (call inside forward); read them
        as :attr:`output_data`. ``retain_after_backward`` is accepted for Chainer's sake."""
        self.node.retain_outputs(indexes)

    def unchain(self) -> None:
        """Detach the call from the graph (see :meth:`FunctionNode.unchain`)."""
        self.node.unchain()

    def add_hook(self, hook: Any, name: str | None = None) -> None:
        """Register a function hook on this function only."""
        self.node.add_hook(hook, name)

    def delete_hook(self, name: str) -> None:
        """Remove the local hook registered as ``name``."""
        self.node.delete_hook(name)


class FunctionAdapter(FunctionNode):
    """The :class:`~agnograd.FunctionNode` that runs an old-style :class:`Function`."""

    _function: Function | None = None  # held from the call on

    def __init__(self, function: Function) -> None:
        self._function_ref = weakref.ref(function)

    @property
    def function(self) -> Function:
        """The old-style :class:`Function` this node runs."""
        function = self._function or self._function_ref()
        if function is None:
            raise RuntimeError("FunctionAdapter: its Function is gone (it was never called)")
        return function

    # What Variable.creator shows of this node: the Function, as Chainer's does.
    _creator_view = function

    @property
    def label(self) -> str:
        return self.function.label

    def check_type_forward(self, in_types: Any) -> None:
        self.function.check_type_forward(in_types)

    def forward(self, inputs: tuple[Array, ...]) -> tuple[Array, ...]:
        # Old-style functions keep every input unless they say otherwise.
        self.retain_inputs(range(len(inputs)))
        return self.function.forward(inputs)

    def backward(
        self, target_input_indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        n_inputs = len(self.inputs or ())
        in_data: list[Any] = [None] * n_inputs
        for i, x in zip(self._retain_in, self.get_retained_inputs(), strict=True):
            in_data[i] = _raw(x)
        out_grads = tuple([_raw(g) for g in grad_outputs])
        gxs = self.function.backward(tuple(in_data), out_grads)
        if not isinstance(gxs, list | tuple) or len(gxs) != n_inputs:
            got = len(gxs) if isinstance(gxs, list | tuple) else type(gxs).__name__
            raise ValueError(
                f"backward of {self.label} returned {got} gradients for {n_inputs} inputs; "
                "an old-style Function returns one per input (None for an input without one)"
            )
        wanted = [gxs[i] for i in target_input_indexes]
        if takes_variables(self):
            return _not_differentiable(self, wanted, grad_outputs)
        return tuple(wanted)


def _raw(x: Any) -> Any:
    return x._data if isinstance(x, Variable) else x


def _not_differentiable(
    node: FunctionAdapter, gxs: list[Any], grad_outputs: tuple[Any, ...]
) -> tuple[Any, ...]:
    """The gradients of an old-style Function in double backprop: outputs of a node
    that depends on what they were computed from (the retained inputs and the output
    gradients) and refuses to be differentiated, so that a second-order gradient
    through them raises instead of silently leaving out their dependence."""
    sources = [v for v in (*node.get_retained_inputs(), *grad_outputs) if isinstance(v, Variable)]
    present = [gx for gx in gxs if gx is not None]
    if not present or not any(v.requires_grad for v in sources):
        return tuple(gxs)
    results = iter(_OldStyleGradients(node.label, present).apply(sources))
    return tuple([None if gx is None else next(results) for gx in gxs])


class _OldStyleGradients(FunctionNode):
    """The gradients an old-style Function computed on raw arrays, in a graph that may
    be differentiated again: they are its outputs, and its backward raises."""

    def __init__(self, function_label: str, gradients: list[Any]) -> None:
        self._function_label = function_label
        self._gradients = tuple(gradients)

    @property
    def label(self) -> str:
        return f"{self._function_label}.backward"

    def forward(self, inputs: tuple[Array, ...]) -> tuple[Array, ...]:
        return self._gradients

    def backward(self, target_input_indexes: tuple[int, ...], grad_outputs: Any) -> Any:
        raise RuntimeError(
            f"the gradients of the old-style Function {self._function_label} cannot be "
            "differentiated again (its backward works on raw arrays); write it as an "
            "agnograd.FunctionNode whose backward uses agnograd.functions for "
            "second-order gradients"
        )
