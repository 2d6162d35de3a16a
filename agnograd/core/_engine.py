"""The entry points of backprop: ``backward`` and ``grad``, the seeds they start
from, and the sum of what reaches the leaves' ``.grad``. The loop they run is
agnograd.core._engine_loop.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy

from agnograd.backends._backend import Array, is_array, raw_namespace, writable
from agnograd.core._config import MODE, graph_mode
from agnograd.core._engine_loop import _run, _store_grad, _written
from agnograd.core._function import symbolic as function_symbolic
from agnograd.core._function_checks import combines
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode


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
    with graph_mode(enable_double_backprop, True), _quiet():
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
        with graph_mode(double, not symbolic), _quiet():
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
        _gradient_of(y, gy, f"{op}: grad_outputs[{index}]", batched=op == "grad")
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


def _gradient_of(var: Variable, g: Any, what: str, batched: bool = False) -> None:
    """Raise unless ``g``, given as ``what``, is an array or a Variable that could be
    ``var``'s gradient (of any dtype: the engine casts); with ``batched``, also a
    batched array of vmap's where ``var``'s data is not batched (``grad``, which
    returns the gradients it computes, then computes one per example: the rows of
    a Jacobian; ``backward`` would store them in leaves that have no batch)."""
    raw = g._data if isinstance(g, Variable) else g
    if not is_array(raw):
        raise TypeError(f"{what} must be an array or a Variable (or None), got {type(g).__name__}")
    data = var._data
    if batched and data is not None and combines(raw_namespace(data), raw_namespace(raw)):
        return
    var._check_grad(raw, f"{what} for", any_dtype=True)


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
