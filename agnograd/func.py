"""Function transforms named and shaped like ``torch.func`` and JAX's.

Each takes a Python function and returns a new function (or, :func:`vjp`, a
function with the output): :func:`grad`, :func:`grad_and_value` (torch's order),
:func:`value_and_grad` (JAX's order), :func:`vjp` and :func:`jacrev` (reverse
mode), :func:`jvp`, :func:`linearize` and :func:`jacfwd` (forward mode), and
:func:`hessian` (forward over reverse). Their arguments are arrays of any array
API library, Variables, or tuples, lists and dicts nesting them (JAX's pytrees),
and the results are arrays of the arguments' library in the same nesting. They
compose with each other and with :func:`agnograd.jit`, in any order: an argument
that is a Variable requiring a gradient (as inside another transform) gives results
connected to it.

docs/functional.md compares them with :mod:`agnograd.functional`
(``torch.autograd.functional``'s names) and with :func:`agnograd.grad` of
outputs and inputs (Chainer's), and each with its namesake in ``torch.func`` and
JAX.
"""

from agnograd.transforms._batching_rules import batching_rule
from agnograd.transforms._forward import jvp
from agnograd.transforms._func import (
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    linearize,
    vjp,
)
from agnograd.transforms._functional import value_and_grad
from agnograd.transforms._vmap import vmap

__all__ = [
    "batching_rule",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "value_and_grad",
    "vjp",
    "vmap",
]
