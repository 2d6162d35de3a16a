"""Function transforms: ``torch.autograd.functional``'s, and JAX's ``value_and_grad``.

:func:`vjp`, :func:`jvp`, :func:`jacobian`, :func:`hessian`, :func:`hvp` and
:func:`vhp` take the arguments of their namesakes in ``torch.autograd.functional``
and return what they return, so code ports by changing the import; the inputs are
arrays of any array API library (or Variables), and ``func`` is any Python function
of Variables. :func:`value_and_grad` is JAX's, returning a function; the raw arrays
among the arguments it does not differentiate reach the function as Variables that
require no gradient, so that array API code sees one namespace.

Everything runs on agnograd's reverse mode. Forward-mode products (:func:`jvp`,
:func:`hvp`, ``strategy="forward-mode"``) use the double-backward trick: the
backward pass is linear in its seed ``u``, so differentiating ``J^T u`` with respect
to ``u`` gives ``J v``. Each function's docstring states its cost in backward passes.

Complex numbers follow one convention (docs/functional.md, "Complex numbers"). The
Jacobian of a complex output with respect to a complex input is its complex
derivative ``df/dz``, the function being taken to be holomorphic (as JAX's
``holomorphic=True``), by either strategy; that of a complex output with respect to
a real input is ``df/dx``; that of a real output with respect to a complex input is
the gradient ``backward()`` gives, ``df/dRe z + i df/dIm z`` (PyTorch's convention,
the conjugate of JAX's). :func:`jvp` gives the derivative along ``v`` (``J v`` for a
holomorphic function), :func:`vjp` what ``backward()`` gives when seeded with ``v``
(``conj(J)^T v`` for a holomorphic function), and :func:`hessian`, :func:`hvp` and
:func:`vhp` are built on the Jacobian of that gradient.
"""

from agnograd.transforms._functional import hvp, jvp, value_and_grad, vhp, vjp
from agnograd.transforms._jacobians import hessian, jacobian

__all__ = [
    "hessian",
    "hvp",
    "jacobian",
    "jvp",
    "value_and_grad",
    "vhp",
    "vjp",
]
