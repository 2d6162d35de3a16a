"""Testing kit: gradient checks, cross-backend assertions, strategies and a pytest plugin.

- :func:`numerical_grad`, :func:`check_backward`, :func:`check_double_backward`:
  Chainer's gradient checks, on arrays of any array API library and device;
  :func:`check_jvp`, the same check of forward mode's Jacobian-vector products;
  :func:`check_vmap`, a function or node under :func:`agnograd.vmap` against a loop.
- :func:`assert_allclose`, :func:`assert_array_equal`, :func:`to_numpy`: compare
  arrays of different libraries and devices.
- :mod:`agnograd.testing.strategies`: hypothesis strategies for Variables of any
  namespace, dtype, shape and device, and the input domains of agnograd's functions
  (needs ``hypothesis``; imported on first use).
- The pytest plugin (``agnograd.testing._plugin``, registered under ``pytest11``):
  the ``xp`` and ``device`` fixtures over the installed backends, the
  ``--agnograd-backend`` option, and the hypothesis profiles ``ci`` and ``local``.

Examples
--------
>>> import numpy as np, agnograd.functions as F
>>> from agnograd.testing import check_backward, check_double_backward
>>> x = np.array([0.5, 1.5, 3.0])
>>> check_backward(F.log, x, np.ones(3))
>>> check_double_backward(F.log, x, np.ones(3), np.ones(3))
"""

from agnograd.testing._assertions import assert_allclose, assert_array_equal, to_numpy
from agnograd.testing._backends import backend_namespace, installed_backends, usable_devices
from agnograd.testing._double_backward import check_double_backward
from agnograd.testing._gradient_check import check_backward
from agnograd.testing._jvp_check import check_jvp
from agnograd.testing._numerical import NondifferentiableError, numerical_grad
from agnograd.testing._vmap_check import check_vmap

# Report errors under the public name (``agnograd.testing.NondifferentiableError``).
NondifferentiableError.__module__ = __name__

__all__ = [
    "NondifferentiableError",
    "assert_allclose",
    "assert_array_equal",
    "backend_namespace",
    "check_backward",
    "check_double_backward",
    "check_jvp",
    "check_vmap",
    "installed_backends",
    "numerical_grad",
    "to_numpy",
    "usable_devices",
]
