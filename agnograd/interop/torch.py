"""Bridges between agnograd and ``torch.autograd``, both ways.

:func:`function` puts agnograd inside torch: a function of Variables becomes a
callable that torch code calls with tensors, a ``torch.autograd.Function`` whose
backward is agnograd's. :func:`node` puts torch inside agnograd: a torch function
or ``nn.Module`` becomes a node of agnograd's graph whose backward is torch's.

Arrays cross between the two through DLPack, without a copy wherever DLPack can
share the memory (see ``docs/bridges.md``). Double backward works both ways: each
bridge's backward is itself bridged, so gradients of gradients cross too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from agnograd.backends._backend import adapter_for, adapter_named
from agnograd.backends._device import Device, get_device, transfer
from agnograd.core._config import config, get_auto_forward, graph_mode, takes_variables
from agnograd.core._engine import grad
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.core._variable_data import _refuse_foreign_graph
from agnograd.interop._torch_arrays import (
    Rebuild,
    _as_tensor,
    _from_torch,
    _is_input,
    _is_tensor,
    _name,
    _split,
    _tensors,
    _to_torch,
    _variables,
)

__all__ = ["function", "node"]


# ---------------------------------------------------------------------------------
# agnograd inside torch


def function(
    f: Callable[..., Any] | None = None, /, *, backend: str = "torch"
) -> Callable[..., Any]:
    """Make a function of agnograd Variables callable from torch, with tensors.

    The result is a function of the same arguments in which tensors take the place
    of Variables; torch's autograd differentiates it through agnograd's backward.
    Use it as ``function(f)``, ``function(f, backend="numpy")`` or as a decorator.

    Parameters
    ----------
    f : callable
        A function of Variables (found anywhere in its arguments, also inside
        lists, tuples and dicts) returning a Variable or a tuple (or list) of
        Variables. Arguments that are not tensors reach ``f`` as they are.
    backend : str
        The library ``f`` computes with. ``"torch"`` (the default): Variables of
        the tensors themselves (detached). Any other installed backend (``"numpy"``,
        ``"cupy"``, ``"array_api_strict"``, ``"jax"``): Variables of that library's
        arrays on the same memory, viewed through DLPack; ``"numpy"`` means CuPy
        for CUDA tensors. A copy is made only where DLPack cannot share.

    Returns
    -------
    callable
        Called with tensors, it returns a tensor (or a tuple, or list, of tensors)
        with torch's ``grad_fn``; ``torch.autograd.grad``, ``backward``,
        ``create_graph=True``, ``gradcheck`` and ``gradgradcheck`` work through it.

    Raises
    ------
    TypeError
        When ``f`` returns something other than Variables, or the call has no
        tensor argument.
    ValueError
        For an unknown ``backend``, or tensors on several devices.

    Examples
    --------
    >>> import torch, agnograd.functions as F
    >>> from agnograd.interop.torch import function
    >>> @function(backend="numpy")
    ... def energy(x, scale):
    ...     return F.sum(x * x) * scale  # x is a Variable of a NumPy array
    >>> t = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> e = energy(t, 0.5)
    >>> e
    tensor(2.5000, grad_fn=<AgnogradBridgeBackward>)
    >>> e.backward()
    >>> t.grad
    tensor([1., 2.])
    """
    if f is None:
        return functools.partial(function, backend=backend)
    if not callable(f):
        raise TypeError(
            f"function: f must be a callable of agnograd Variables, got {type(f).__name__}"
        )
    if not isinstance(backend, str):
        raise TypeError(
            f"function: backend must be the name of a library such as 'torch' or 'numpy', "
            f"got {type(backend).__name__}"
        )
    try:
        adapter_named(backend.removeprefix("@"))
    except ValueError as error:
        raise ValueError(f"function: backend={backend!r}: {error}") from None
    library = backend.removeprefix("@")
    name = _name(f)

    @functools.wraps(f)
    def bridged(*args: Any, **kwargs: Any) -> Any:
        tensors, rebuild = _split((args, kwargs), _is_tensor)
        if not tensors:
            raise TypeError(
                f"function({name}): called without a tensor argument; pass the tensors to "
                "differentiate as arguments (call f directly for Variables)"
            )
        devices = {t.device for t in tensors}
        if len(devices) > 1:
            raise ValueError(
                f"function({name}): the tensor arguments are on several devices "
                f"({', '.join(sorted(map(str, devices)))}); agnograd runs f on one device: "
                "move them to one with tensor.to(device)"
            )
        recording = torch.is_grad_enabled()
        needs = tuple(recording and t.requires_grad for t in tensors)
        run = _Forward(f, name, rebuild, library, needs)
        outputs = AgnogradBridge.apply(run, *tensors)
        if run.structure is None:
            return outputs[0]
        return run.structure(outputs)

    return bridged


class _Graph:
    """agnograd's graph of one bridged call, between torch's tensors.

    ``leaves`` views the call's tensor arguments, in order; ``outputs`` holds
    the Variables whose arrays the call returned as tensors (``None`` where it
    returned ``None``).
    """

    __slots__ = ("leaves", "library", "name", "needs", "outputs")

    def __init__(
        self,
        name: str,
        library: str,
        leaves: Sequence[Variable],
        needs: Sequence[bool],
        outputs: Sequence[Variable | None],
    ) -> None:
        self.name = name
        self.library = library
        self.leaves = tuple(leaves)
        self.needs = tuple(needs)
        self.outputs = tuple(outputs)


class _Forward:
    """Runs ``f`` on Variables viewing the tensors: the first bridged call."""

    def __init__(
        self,
        f: Callable[..., Any],
        name: str,
        rebuild: Rebuild,
        library: str,
        needs: Sequence[bool],
    ) -> None:
        self.f, self.name, self.rebuild, self.library = f, name, rebuild, library
        self.needs = tuple(needs)
        self.structure: Callable[[Sequence[Any]], Any] | None = None

    def __call__(self, tensors: Sequence[torch.Tensor]) -> tuple[_Graph, list[Any]]:
        leaves = [
            Variable(_from_torch(t.detach(), self.library, self.name), requires_grad=need)
            for t, need in zip(tensors, self.needs, strict=True)
        ]
        args, kwargs = self.rebuild(leaves)
        with graph_mode(any(self.needs), True):
            result = self.f(*args, **kwargs)
        outputs, self.structure = _variables(result, self.name)
        graph = _Graph(self.name, self.library, leaves, self.needs, outputs)
        return graph, _to_torch([y.array for y in outputs], None, tensors)


class _Gradient:
    """Runs agnograd's backward of a graph, recording it: a bridged backward.

    Its tensor arguments are those of the graph's call followed by the gradients
    of the outputs that received one (``present``).
    """

    def __init__(self, graph: _Graph, present: Sequence[bool], needs: Sequence[bool]) -> None:
        self.graph, self.present, self.needs = graph, tuple(present), tuple(needs)

    def __call__(self, tensors: Sequence[torch.Tensor]) -> tuple[_Graph, list[Any]]:
        graph = self.graph
        n = len(graph.leaves)
        seeds = [
            Variable(_from_torch(g.detach(), graph.library, graph.name), requires_grad=need)
            for g, need in zip(tensors[n:], self.needs[n:], strict=True)
        ]
        gxs = _agnograd_backward(graph, _with_gaps(seeds, self.present), True)
        results = _to_torch([None if gx is None else gx.array for gx in gxs], tensors[:n], tensors)
        leaves = (*graph.leaves, *seeds)
        return _Graph(graph.name, graph.library, leaves, self.needs, gxs), results


def _with_gaps(items: Sequence[Any], present: Sequence[bool]) -> list[Any]:
    """``items`` spread over the places where ``present`` is true, ``None`` elsewhere."""
    found = iter(items)
    return [next(found) if p else None for p in present]


def _agnograd_backward(graph: _Graph, seeds: Sequence[Any], double: bool) -> list[Variable | None]:
    """Gradients of the graph's leaves (``None`` where not needed or not reached)."""
    pairs = [
        (y, gy)
        for y, gy in zip(graph.outputs, seeds, strict=True)
        if gy is not None and y is not None and y.requires_grad
    ]
    wanted = [i for i, need in enumerate(graph.needs) if need]
    result: list[Variable | None] = [None] * len(graph.leaves)
    if not pairs or not wanted:
        return result
    ys, gys = zip(*pairs, strict=True)
    gxs = grad(ys, [graph.leaves[i] for i in wanted], gys, enable_double_backprop=double)
    for i, gx in zip(wanted, gxs, strict=True):
        result[i] = gx
    return result


class AgnogradBridge(torch.autograd.Function):
    """The one ``torch.autograd.Function`` behind :func:`function` (not public: its
    name is what torch prints, ``grad_fn=<AgnogradBridgeBackward>``).

    ``forward(ctx, run, *tensors)`` builds an agnograd graph with ``run``;
    ``backward`` runs agnograd's backward over it, and under ``create_graph=True``
    does so through another application of this class (a :class:`_Gradient` run),
    so that torch records the backward as an operation it can differentiate again.
    """

    @staticmethod
    def forward(ctx: Any, run: Any, *tensors: torch.Tensor) -> tuple[Any, ...]:
        graph, results = run(tensors)
        ctx.graph = graph
        ctx.set_materialize_grads(False)
        # Saved so that torch refuses the backward after an in-place change to an
        # input or output: agnograd's graph may keep views of their memory.
        ctx.save_for_backward(*tensors, *(r for r in results if r is not None))
        constant = [
            r
            for r, y in zip(results, graph.outputs, strict=True)
            if r is not None and (y is None or not y.requires_grad)
        ]
        if constant:
            ctx.mark_non_differentiable(*constant)
        return tuple(results)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[Any, ...]:
        graph: _Graph = ctx.graph
        tensors = ctx.saved_tensors[: len(graph.leaves)]
        present = [g is not None for g in grads]
        given = [g for g in grads if g is not None]
        if not given or not any(graph.needs):
            return (None,) * (1 + len(tensors))
        if torch.is_grad_enabled():  # create_graph=True: record the backward
            arguments = (*tensors, *given)
            run = _Gradient(graph, present, [t.requires_grad for t in arguments])
            return (None, *AgnogradBridge.apply(run, *arguments))
        seeds = [
            None if g is None else _from_torch(g.detach(), graph.library, graph.name) for g in grads
        ]
        gxs = _agnograd_backward(graph, seeds, False)
        arrays = [None if gx is None else gx.array for gx in gxs]
        return (None, *_to_torch(arrays, tensors, (*tensors, *given)))


# ---------------------------------------------------------------------------------
# torch inside agnograd


def node(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Make a torch function or ``nn.Module`` a node of agnograd's graph.

    The result takes the arguments of ``fn`` with Variables (or arrays) of any
    library in place of tensors, and returns Variables of that library: NumPy in,
    NumPy out. Its forward views the arrays as tensors and runs ``fn`` with torch's
    autograd recording; its backward is ``torch.autograd.backward`` on that graph.

    Parameters
    ----------
    fn : callable
        A function of tensors (Variables and arrays found anywhere in its
        arguments, also inside lists, tuples and dicts, are passed as tensors;
        other arguments as they are) returning a tensor or a tuple (or list) of
        tensors; an ``nn.Module`` is such a function.

    Returns
    -------
    callable
        Returns a Variable, or a tuple of Variables, on the device of the first
        Variable or array argument.

    Notes
    -----
    Backward goes through torch as ``torch.autograd.backward`` would: the leaf
    tensors of ``fn``'s graph that require a gradient -- the parameters of a
    module, tensors that ``fn`` captured -- accumulate their gradient in ``.grad``
    each time agnograd's backward passes through the node (also through
    :func:`agnograd.grad`, which leaves agnograd's own ``.grad`` alone). Clear
    them as usual (``optimizer.zero_grad()``).

    Double backprop works (``torch.autograd.grad(..., create_graph=True)`` inside);
    the parameters then receive the first-order gradient in ``.grad`` (without a
    graph) and later backward passes add the higher-order terms.

    Inside :func:`agnograd.no_backprop_mode`, ``fn`` runs under ``torch.no_grad()``.
    Define-then-run (auto-forward off) is not supported.

    Examples
    --------
    >>> import numpy as np, torch, agnograd
    >>> from agnograd.interop.torch import node
    >>> _ = torch.manual_seed(0)
    >>> layer = torch.nn.Linear(3, 1, dtype=torch.float64)
    >>> x = agnograd.Variable(np.ones((2, 3)))
    >>> y = node(layer)(x)  # a NumPy Variable
    >>> type(y.array).__name__, y.shape
    ('ndarray', (2, 1))
    >>> agnograd.functions.sum(y * y).backward()
    >>> x.grad.shape, layer.weight.grad.shape
    ((2, 3), torch.Size([1, 3]))
    """
    if not callable(fn):
        raise TypeError(f"node: fn must be a torch function or nn.Module, got {type(fn).__name__}")
    name = _name(fn)

    # Not updated from fn's __dict__: a module's holds its parameters and submodules.
    @functools.wraps(fn, updated=())
    def call(*args: Any, **kwargs: Any) -> Any:
        found, rebuild = _split((args, kwargs), _is_input)
        if not found:
            raise TypeError(
                f"node({name}): called without a Variable or array argument; the node "
                "needs one to know which library and device its outputs belong to"
            )
        if not get_auto_forward():
            raise RuntimeError(
                f"node({name}): torch runs eagerly, so define-then-run (auto-forward off) "
                "is not supported; run it inside agnograd.auto_forward()"
            )
        arrays = [a.array if isinstance(a, Variable) else a for a in found]
        for i, a in enumerate(arrays):
            if a is None:
                raise ValueError(f"node({name}): argument {i} is a Variable without data")
            _refuse_foreign_graph(a, f"node({name}): argument {i}")
        libraries = {adapter_for(a).name for a in arrays}
        if len(libraries) > 1:
            raise TypeError(
                f"node({name}): the arguments mix arrays of {', '.join(sorted(libraries))}; "
                "move them to one library first (agnograd.functions.copy)"
            )
        record = bool(config.enable_backprop)
        homes = [get_device(a) for a in arrays]
        leaves: list[torch.Tensor | None] = []
        for x, a, home in zip(found, arrays, homes, strict=True):
            leaf = _as_tensor(a, home)
            if record and isinstance(x, Variable) and x.requires_grad:
                leaf.requires_grad_()
            leaves.append(leaf)
        new_args, new_kwargs = rebuild(leaves)
        with torch.enable_grad() if record else torch.no_grad():
            result = fn(*new_args, **new_kwargs)
        outputs, structure = _tensors(result, name)
        inputs = list(found)
        own_only = not any(leaf.requires_grad for leaf in leaves if leaf is not None)
        if record and own_only and any(y.requires_grad for y in outputs):
            # Only fn's own tensors (a module's parameters) require a gradient.
            # agnograd links a node only when an input requires one, so this
            # stand-in for them does; it receives no gradient itself.
            inputs.append(_stand_in(homes[0]))
            leaves.append(None)
            homes.append(homes[0])
        func = _TorchNode(name, leaves, homes, outputs, [homes[0]] * len(outputs))
        ys = func.apply(inputs)
        return ys[0] if structure is None else structure(ys)

    call.__name__ = call.__qualname__ = name  # a module has no __name__ of its own
    return call


def _stand_in(home: Device) -> Variable:
    xp = home.xp
    zero = xp.zeros((), dtype=xp.float32, device=home.native)
    return Variable(zero, name="torch parameters", requires_grad=True)


class _TorchNode(FunctionNode):
    """A node of agnograd's graph over a torch graph that already ran.

    ``leaves`` are the torch leaves of the node's inputs (``None`` for an input
    without one), ``homes`` the inputs' devices; ``outputs`` are torch's results,
    which forward hands to agnograd on ``out_homes``.
    """

    def __init__(
        self,
        name: str,
        leaves: Sequence[torch.Tensor | None],
        homes: Sequence[Device],
        outputs: Sequence[torch.Tensor],
        out_homes: Sequence[Device],
    ) -> None:
        self._name = name
        self._leaves = tuple(leaves)
        self._homes = tuple(homes)
        self._outputs = tuple(outputs)
        self._out_homes = tuple(out_homes)

    @property
    def label(self) -> str:
        return f"torch:{self._name}"

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        self.retain_inputs(range(len(inputs)))  # Variables for double backprop
        pairs = zip(self._outputs, self._out_homes, strict=True)
        return tuple(transfer(y.detach(), home) for y, home in pairs)

    def backward(
        self, target_input_indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        given = [
            k
            for k, (y, g) in enumerate(zip(self._outputs, grad_outputs, strict=True))
            if g is not None and y.requires_grad
        ]
        if not given:
            return (None,) * len(target_input_indexes)
        if takes_variables(self):
            return self._recorded_backward(target_input_indexes, given, grad_outputs)
        ys = [self._outputs[k] for k in given]
        seeds = [
            _as_tensor(grad_outputs[k], None, y.device) for k, y in zip(given, ys, strict=True)
        ]
        mine = [leaf for leaf in self._leaves if leaf is not None and leaf.requires_grad]
        for leaf in mine:
            leaf.grad = None
        # As torch's own backward: every leaf of the graph that requires a gradient
        # accumulates it (fn's parameters); the node's inputs are read back below.
        torch.autograd.backward(ys, seeds, retain_graph=True)
        gxs = [None if leaf is None else leaf.grad for leaf in self._leaves]
        for leaf in mine:
            leaf.grad = None
        return tuple(
            None if (gx := gxs[i]) is None else transfer(gx, self._homes[i])
            for i in target_input_indexes
        )

    def _recorded_backward(
        self, indexes: tuple[int, ...], given: list[int], grad_outputs: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        """Double backprop: the gradients as outputs of another torch node, whose
        graph torch records with ``create_graph=True``."""
        xs = self.get_retained_inputs()
        gys = [grad_outputs[k] for k in given]
        ys = [self._outputs[k] for k in given]
        seeds = [
            _as_tensor(g.array, None, y.device).requires_grad_(g.requires_grad)
            for g, y in zip(gys, ys, strict=True)
        ]
        leaves = self._leaves
        wanted = [i for i in indexes if (leaf := leaves[i]) is not None and leaf.requires_grad]
        mine = {id(leaf) for leaf in (*leaves, *seeds) if leaf is not None}
        others = [p for p in _torch_leaves(ys) if id(p) not in mine]
        sources = [leaf for i in wanted if (leaf := leaves[i]) is not None]
        with torch.enable_grad():
            gs = torch.autograd.grad(
                ys,
                [*sources, *others],
                seeds,
                create_graph=True,
                allow_unused=True,
            )
        with torch.no_grad():  # fn's own leaves get the first-order gradient, as in torch
            for p, g in zip(others, gs[len(wanted) :], strict=True):
                if g is not None:
                    if p.grad is None:
                        p.grad = g.detach().clone()
                    else:
                        p.grad += g.detach()
        found = [(i, g) for i, g in zip(wanted, gs[: len(wanted)], strict=True) if g is not None]
        if not found:
            return (None,) * len(indexes)
        func = _TorchNode(
            self._name + "'",
            (*leaves, *seeds),
            (*self._homes, *(self._out_homes[k] for k in given)),
            [g for _, g in found],
            [self._homes[i] for i, _ in found],
        )
        results = dict(zip((i for i, _ in found), func.apply((*xs, *gys)), strict=True))
        return tuple(results.get(i) for i in indexes)


def _torch_leaves(outputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The leaf tensors requiring a gradient that torch's graph of ``outputs`` reaches."""
    found: dict[int, torch.Tensor] = {}
    for y in outputs:
        if y.grad_fn is None and y.requires_grad:
            found[id(y)] = y
    stack: list[Any] = [y.grad_fn for y in outputs if y.grad_fn is not None]
    seen: set[Any] = set()
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        leaf = getattr(fn, "variable", None)  # an AccumulateGrad node
        if isinstance(leaf, torch.Tensor):
            found[id(leaf)] = leaf
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return list(found.values())
