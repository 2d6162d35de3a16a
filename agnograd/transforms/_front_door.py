"""``agnograd.grad``: JAX's and torch.func's ``grad`` of a function, and Chainer's
``grad`` of outputs and inputs, told apart by the first argument."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

from agnograd.backends._backend import Array
from agnograd.core._engine import grad as graph_grad
from agnograd.core._variable import Variable
from agnograd.transforms._func import grad as func_grad


@overload
def grad(
    func: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]: ...


@overload
def grad(
    outputs: Sequence[Variable],
    inputs: Sequence[Variable],
    grad_outputs: Sequence[Variable | Array | None] | None = None,
    grad_inputs: Sequence[Variable | Array | None] | None = None,
    set_grad: bool = False,
    retain_grad: bool = False,
    enable_double_backprop: bool = False,
    loss_scale: float | None = None,
) -> list[Variable | None]: ...


def grad(*args: Any, **kwargs: Any) -> Any:
    """The gradient of a function (JAX's and torch.func's), or of outputs with respect
    to inputs (Chainer's).

    ``grad(func, argnums=0, has_aux=False)``, with a function, returns the function
    that computes its gradient: :func:`agnograd.func.grad`, documented there.

    ``grad(outputs, inputs, grad_outputs=None, grad_inputs=None, set_grad=False,
    retain_grad=False, enable_double_backprop=False, loss_scale=None)``, with lists of
    Variables, computes the gradients of ``outputs`` with respect to ``inputs`` in the
    graph already built, without touching ``.grad``, as Chainer's ``grad``:

    Only the part of the graph between ``outputs`` and ``inputs`` runs. An input that
    the outputs do not reach gets ``None``. ``grad_outputs`` seed the outputs (ones
    by default). ``grad_inputs`` are the inputs' initial gradients, as in Chainer:
    each is added to its input's result and flows on, through the input's creator,
    into the inputs computed before it. With ``set_grad=True`` the results are also
    stored in the inputs' ``grad_var``; with ``retain_grad=True`` every intermediate
    Variable on the way keeps its gradient, the inputs that have a creator included.
    ``enable_double_backprop=True`` records the backward pass, so that the results
    can be differentiated again; ``loss_scale`` multiplies the seeds.

    Under ``auto_forward(False)``, of outputs that have not been computed yet, it
    builds the gradient graph instead, as nnabla's ``nn.grad`` does: the results are
    Variables of the define-then-run graph that ``forward()`` computes (from the data
    the inputs hold then), differentiable again; a missing seed is ones.

    Returns
    -------
    callable or list
        With a function, the gradient function; with outputs and inputs, one
        gradient (a Variable, or None) per input.

    Examples
    --------
    A function, as in JAX:

    >>> import numpy as np, agnograd
    >>> def loss(w, x):
    ...     xp = w.__array_namespace__()
    ...     return xp.sum((x @ w) ** 2)
    >>> agnograd.grad(loss)(np.array([1.0, -1.0]), np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([ -8., -12.])

    Outputs and inputs of a graph, as in Chainer:

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
    first = args[0] if args else kwargs.get("func", kwargs.get("outputs"))
    if callable(first) and not isinstance(first, Variable | list | tuple):
        return func_grad(*args, **kwargs)
    return graph_grad(*args, **kwargs)
