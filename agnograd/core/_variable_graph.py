"""A ``Variable``'s place in the graph: its node, creator and rank, whether it
requires a gradient, cutting the graph behind it and backpropagating from it; a
mixin of :class:`agnograd.Variable`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import array_api_compat

from agnograd.backends import _backend
from agnograd.backends._backend import Array, dtype_name, raw_namespace
from agnograd.core import _debug, _extension, _graph

if TYPE_CHECKING:
    from agnograd.core._function import FunctionNode
    from agnograd.core._variable_node import VariableNode


class Graph:
    """The graph side of a Variable (through its node) and ``backward``, mixed into
    :class:`agnograd.Variable`."""

    __slots__ = ()

    if TYPE_CHECKING:  # what the methods below read of the Variable
        _data: Any
        _n: VariableNode | None
        _node: VariableNode

    @property
    def node(self) -> VariableNode:
        """The :class:`VariableNode` of this Variable."""
        return self._node

    @property
    def creator_node(self) -> FunctionNode | None:
        """The :class:`FunctionNode` that created this Variable; ``None`` unchains."""
        node = self._n  # (None: no graph, and no node made yet)
        return None if node is None else node.creator_node

    @creator_node.setter
    def creator_node(self, func: FunctionNode | None) -> None:
        self._node.set_creator_node(func)

    @property
    def creator(self) -> Any:
        """The function that created this Variable: :attr:`creator_node`, or the
        old-style :class:`~agnograd.Function` that node runs (Chainer's ``creator``)."""
        return self._node.creator

    @creator.setter
    def creator(self, func: Any) -> None:
        self._node.set_creator_node(func)

    @property
    def rank(self) -> int:
        """Topological rank (0 for leaves, the creator's rank + 1 otherwise)."""
        node = self._n
        return 0 if node is None else node.rank

    @property
    def requires_grad(self) -> bool:
        """Whether backprop computes a gradient for this Variable."""
        node = self._n
        return False if node is None else node.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._node.requires_grad = _can_require_grad(self._data, value, "Variable.requires_grad")
        _graph.edited()

    def set_creator(self, gen_func: FunctionNode) -> None:
        """Record ``gen_func`` as the creator (same as :meth:`set_creator_node`)."""
        self._node.set_creator_node(gen_func)

    def set_creator_node(self, fnode: FunctionNode) -> None:
        """Record ``fnode`` as the function node that created this Variable."""
        self._node.set_creator_node(fnode)

    def retain_data(self) -> None:
        """Let the node keep a reference to the data array."""
        self._node.retain_data()

    def unchain(self) -> None:
        """Forget the creator; backprop stops here. Does not walk the graph.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> y = agnograd.Variable(np.ones(2)) * 3
        >>> y.unchain(); y.creator is None
        True
        """
        self._node.unchain()

    def unchain_backward(self) -> None:
        """Cut every link of the graph behind this Variable (truncated BPTT).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.ones(2))
        >>> h = x * 2
        >>> y = h + 1
        >>> y.unchain_backward()
        >>> y.creator is None and h.creator is None
        True
        """
        start = self._node.creator_node
        stack = [start] if start is not None else []
        seen = set(stack)
        while stack:
            func = stack.pop()
            for x in func.inputs or ():
                creator = x.creator_node
                if creator is not None and creator not in seen:
                    seen.add(creator)
                    stack.append(creator)
            func.unchain()
        self._node.unchain()

    def backward(
        self,
        retain_grad: bool = False,
        enable_double_backprop: bool = False,
        loss_scale: float | None = None,
        *,
        grad: Array | None = None,
        clear_buffer: bool = False,
        function_pre_hook: Callable[[FunctionNode], Any] | None = None,
        function_post_hook: Callable[[FunctionNode], Any] | None = None,
    ) -> None:
        """Backpropagate from this Variable, accumulating gradients into the leaves.

        The seed is ``grad`` if given, else the ``.grad`` you set, else ones of this
        Variable's shape (nnabla's default ``grad=1``; a loss has one element). A
        ``.grad`` that an earlier backward wrote (its ones, or what ``retain_grad``
        kept) is never a seed.
        With ``loss_scale`` the seed is multiplied by it and leaf gradients stay
        scaled (divide them before the update).

        Parameters
        ----------
        retain_grad : bool
            Keep the gradients of intermediate Variables (dropped as soon as they
            are consumed otherwise).
        enable_double_backprop : bool
            Record the backward computation so gradients can be differentiated again.
        loss_scale : float, optional
            Factor applied to the seed gradient.
        grad : array or scalar, optional
            nnabla's seed: used instead of ``.grad`` (which stays untouched); a
            scalar fills an array of this Variable's shape.
        clear_buffer : bool
            Free each function's saved arrays and intermediate data as soon as its
            backward has run (a second backward through the graph then fails).
        function_pre_hook, function_post_hook : callable, optional
            nnabla's hooks: each is called with every :class:`FunctionNode` whose
            backward runs, right before it and right after it.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> x = agnograd.Variable(np.array([1.0, 2.0]))
        >>> y = agnograd.functions.sum(x ** 3)
        >>> y.backward(enable_double_backprop=True)
        >>> x.grad
        array([ 3., 12.])
        >>> gx = x.grad_var
        >>> x.cleargrad()
        >>> agnograd.functions.sum(gx).backward()
        >>> x.grad
        array([ 6., 12.])
        """
        from agnograd.core._engine import backward

        if function_pre_hook is not None or function_post_hook is not None:
            # function_hooks is a layer above the core: reached through replay's.
            hooks = _extension.replay.callbacks("backward", function_pre_hook, function_post_hook)
            with hooks:
                self.backward(
                    retain_grad,
                    enable_double_backprop,
                    loss_scale,
                    grad=grad,
                    clear_buffer=clear_buffer,
                )
            return
        if grad is not None and type(grad) in _backend.SCALARS:
            data = self._data
            grad = raw_namespace(data).full(
                data.shape, grad, dtype=data.dtype, device=array_api_compat.device(data)
            )
        if not (
            retain_grad or enable_double_backprop or loss_scale is not None
        ) and _extension.replay.backward(self, grad, clear_buffer):
            return  # the compiled plan of the graph's last forward (agnograd.static._replay)
        _debug.forget_current()
        try:
            backward(
                [self],  # type: ignore[list-item]  # a Variable, which Graph is mixed into
                None if grad is None else [grad],
                retain_grad=retain_grad,
                enable_double_backprop=enable_double_backprop,
                loss_scale=loss_scale,
                clear_buffer=clear_buffer,
            )
        except Exception as error:
            _debug.annotate(error)  # debug mode: where the failing function was called
            raise


def _can_require_grad(data: Any, requested: bool | None, op: str) -> bool:
    """Whether a Variable of ``data`` requires a gradient when ``requested`` (``None``:
    the default, which follows the dtype); asking for one on integer or boolean data
    is an error."""
    if data is None:
        return True if requested is None else bool(requested)
    floating = raw_namespace(data).isdtype(data.dtype, ("real floating", "complex floating"))
    if requested is None:
        return bool(floating)
    if requested and not floating:
        raise TypeError(
            f"{op}: requires_grad=True needs floating-point or complex data, got "
            f"{dtype_name(data.dtype)} (its gradient would be cast to integers and lost); "
            "cast it first, e.g. xp.astype(x, xp.float64), or leave requires_grad unset"
        )
    return bool(requested)
