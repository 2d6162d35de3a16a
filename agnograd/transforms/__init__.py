"""Functions of functions: gradients, products with Jacobians and Hessians.

``_transforms`` runs a user's function on fresh leaves and checks what it returns;
``_constants`` passes it the raw arrays it does not differentiate as constants;
``_symbolic`` builds the derivatives as a graph for Variables without data (those
``agnograd.jit`` traces with);
``_functional`` (vjp, jvp, vhp, hvp, value_and_grad) and ``_jacobians`` (jacobian,
hessian) build :mod:`agnograd.functional` on it. The modules are private: the
public names are in :mod:`agnograd.functional`.
"""
