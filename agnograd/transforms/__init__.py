"""Functions of functions: gradients, products with Jacobians and Hessians.

``_transforms`` runs a user's function on fresh leaves and checks what it returns;
``_constants`` passes it the raw arrays it does not differentiate as constants;
``_symbolic`` builds the derivatives as a graph for Variables without data (those
``agnograd.jit`` traces with);
``_functional`` (vjp, jvp, vhp, hvp, value_and_grad) and ``_jacobians`` (jacobian,
hessian) build :mod:`agnograd.functional` on it; ``_arguments`` reads the arguments
of the transforms that return functions (``argnums``, nested tuples, lists and
dicts), on which ``_func`` builds :mod:`agnograd.func`; ``_front_door`` is
``agnograd.grad``, of a function or of outputs and inputs. The modules are private:
the public names are in :mod:`agnograd.functional`, :mod:`agnograd.func` and
:mod:`agnograd`.
"""
