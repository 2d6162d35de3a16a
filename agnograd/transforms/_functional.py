"""The code behind :mod:`agnograd.functional` (its documentation is there): the
products with Jacobians and Hessians (``torch.autograd.functional``'s :func:`vjp`,
:func:`jvp`, :func:`vhp`, :func:`hvp`) and JAX's :func:`value_and_grad`; the full
matrices are in ``_jacobians``."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from agnograd.backends._backend import dtype_name
from agnograd.core._variable import Variable
from agnograd.transforms import _forward
from agnograd.transforms._arguments import argnums_tuple, differentiate, own, split_aux
from agnograd.transforms._constants import PASS_AS_ARGUMENT, WRAP, call, restore
from agnograd.transforms._forward import _constant
from agnograd.transforms._jacobian_blocks import (
    _derivative,
    _is_complex,
    _transposed_product,
)
from agnograd.transforms._symbolic import building, recording, recording_for
from agnograd.transforms._transforms import (
    Arrays,
    _as_tuple,
    _default_v,
    _differentiable,
    _fill_in_zeros,
    _finish,
    _grads,
    _hessian_v,
    _ones_like,
    _outputs,
    _prepare,
    _seed_variable,
    _single_output,
    _transpose,
    _unpack,
    _validate_v,
    _zeros_like,
)
from agnograd.transforms._trees import _tree_arrays

# --- torch.autograd.functional ------------------------------------------------------


def vjp(
    func: Callable[..., Any],
    inputs: Arrays,
    v: Arrays | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """Vector-Jacobian product ``v^T J`` of ``func`` at ``inputs``, and its outputs.

    Parameters
    ----------
    func : callable
        A Python function of Variables returning a Variable or a tuple of them.
    inputs : array, Variable or tuple of them
        The point; arrays of any array API library.
    v : array, Variable or tuple of them, optional
        One entry per output, of its shape. May be omitted only when ``func``
        returns a single one-element output (then it is one).
    create_graph : bool
        Return Variables whose graph reaches ``inputs`` (those that are Variables
        requiring a gradient) and ``v``, for higher-order derivatives.
    strict : bool
        Raise if an output does not depend on the inputs, or an input is not used.
        Otherwise the product for an unused input is zeros.

    Returns
    -------
    outputs : array or tuple of arrays
        ``func(*inputs)``.
    vjp : array or tuple of arrays
        ``v^T J``, shaped like ``inputs``. Variables with ``create_graph=True``.

    Notes
    -----
    Cost: one forward and one backward pass.

    The product is what ``backward()`` leaves in the inputs' ``.grad`` when seeded
    with ``v``, as in torch: the gradient of the real number
    ``L = Re(sum(conj(v) * func(inputs)))``, ``dL/dRe z + i dL/dIm z`` for a complex
    input ``z``. For real arrays that is ``v^T J``; for a holomorphic ``func``, with
    ``J = df/dz`` as :func:`jacobian` gives it, ``conj(J)^T v`` (so the rows of the
    Jacobian are ``conj(vjp(func, z, e_k))``); for any ``func`` of complex ``z``,
    ``conj(df/dz)^T v + (df/dconj(z))^T conj(v)``; for a real input, the real part
    of what a complex one would get. A real output ignores the imaginary part of
    ``v``.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.functional import vjp
    >>> def f(x):
    ...     xp = x.__array_namespace__()
    ...     return xp.sum(x * x, axis=1)
    >>> vjp(f, np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 10.0]))
    (array([ 5., 25.]), array([[ 2.,  4.],
           [60., 80.]]))

    For the holomorphic ``z ** 2``, ``conj(2 z) v``:

    >>> vjp(lambda z: z**2, np.array([1j]), np.array([1.0 + 0j]))[1]
    array([0.-2.j])
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "vjp", "inputs")
    create_graph, recorded = recording_for(inputs, create_graph)  # under jit: in its graph
    with recorded:
        xs = _prepare(inputs, is_inputs_tuple, "vjp", create_graph)
        is_outputs_tuple, outputs = _outputs(call("vjp", WRAP, func, *xs), "vjp", strict)
    if v is None:
        vs = _default_v(outputs, "vjp", "output")
    else:
        vs = _validate_v(v, outputs, is_outputs_tuple, "vjp", "outputs", create_graph)
    gxs = _grads(outputs, xs, vs, create_graph)
    result = _fill_in_zeros(
        gxs, xs, strict, create_graph, "vjp", "the outputs do not depend on input {i}"
    )
    return (
        _unpack(_finish(outputs, create_graph), is_outputs_tuple),
        _unpack(result, is_inputs_tuple),
    )


def jvp(
    func: Callable[..., Any],
    inputs: Arrays,
    v: Arrays | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """Jacobian-vector product ``J v`` of ``func`` at ``inputs``, and its outputs.

    Parameters
    ----------
    func : callable
        A Python function of Variables returning a Variable or a tuple of them.
    inputs : array, Variable or tuple of them
        The point; arrays of any array API library.
    v : array, Variable or tuple of them, optional
        One entry per input, of its shape. May be omitted only for a single
        one-element input (then it is one).
    create_graph : bool
        Return Variables whose graph reaches ``inputs`` and ``v``.
    strict : bool
        Raise if an output does not depend on the inputs. Otherwise the product
        for such an output is zeros.

    Returns
    -------
    outputs : array or tuple of arrays
        ``func(*inputs)``.
    jvp : array or tuple of arrays
        ``J v``, shaped like the outputs: the derivative of ``func`` along ``v``,
        ``d/dt func(inputs + t v)`` at ``t = 0`` (``t`` real).

    Notes
    -----
    For complex inputs the product is ``df/dz v + df/dconj(z) conj(v)``, exact for
    any ``func``: ``J v`` for a holomorphic one (``J = df/dz``, as :func:`jacobian`
    gives it), and ``Re(sum(conj(grad) * v))`` for a real output, ``grad`` being the
    gradient that :func:`jacobian` and ``backward()`` give.

    Cost: one forward pass in forward mode (the tangents travel with the values;
    no backward runs). With ``strict``, which must find an input that no output
    depends on (one pass along ``v`` cannot tell), and under :func:`agnograd.jit`,
    the double-backward trick, as torch: ``g(u) = J^T u`` recorded with its graph,
    then differentiated with respect to ``u`` along ``v`` (one forward and two
    backward passes; every operation must then be twice differentiable).

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.functional import jvp
    >>> def f(x):
    ...     xp = x.__array_namespace__()
    ...     return xp.sum(x * x, axis=1)
    >>> jvp(f, np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    (array([ 5., 25.]), array([2., 8.]))
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "jvp", "inputs")
    if strict or building():
        return _jvp_by_double_backward(func, inputs, is_inputs_tuple, v, create_graph, strict)
    if create_graph or any(isinstance(x, Variable) and x.array is None for x in inputs):
        xs = _prepare(inputs, is_inputs_tuple, "jvp", create_graph)
        primals: tuple[Any, ...] = xs if create_graph else tuple(x.array for x in xs)
    else:
        # Raw primals (and tangents) where the results keep no graph: forward mode
        # then computes on raw arrays, recording nothing. The leaves of _prepare
        # would only be read for their arrays: their checks alone.
        primals = tuple(
            _differentiable(x, "jvp", f"inputs[{i}]" if is_inputs_tuple else "inputs")
            for i, x in enumerate(inputs)
        )
        xs = primals
    if v is None:
        refs = tuple(x if isinstance(x, Variable) else _constant(x) for x in xs)
        vs = _default_v(refs, "jvp", "input")
    else:
        vs = _validate_v(v, xs, is_inputs_tuple, "jvp", "inputs", create_graph)
    is_outputs_tuple = False

    def outputs_of(*args: Variable) -> Any:
        nonlocal is_outputs_tuple
        result = call("jvp", WRAP, func, *args)
        is_outputs_tuple, outputs = _outputs(result, "jvp", False)
        return outputs if is_outputs_tuple else outputs[0]  # func's nesting, as a tuple

    try:
        return _forward.jvp(outputs_of, primals, vs)
    except NotImplementedError:
        if not create_graph:
            raise
        # A node without a jvp that forward mode can run on a reverse graph (which
        # create_graph asks for): the double-backward trick needs its double backward.
        return _jvp_by_double_backward(func, inputs, is_inputs_tuple, v, create_graph, strict)


def _jvp_by_double_backward(
    func: Callable[..., Any],
    inputs: tuple[Any, ...],
    is_inputs_tuple: bool,
    v: Arrays | None,
    create_graph: bool,
    strict: bool,
) -> tuple[Any, Any]:
    """:func:`jvp` by the double-backward trick, for what forward mode cannot do:
    find, with ``strict``, an input no output depends on (a single pass along ``v``
    cannot tell), and record into a graph not run (under :func:`agnograd.jit`)."""
    create_graph, recorded = recording_for(inputs, create_graph)  # under jit: in its graph
    with recorded:
        xs = _prepare(inputs, is_inputs_tuple, "jvp", create_graph)
        if v is None:
            vs = _default_v(xs, "jvp", "input")
        else:
            vs = _validate_v(v, xs, is_inputs_tuple, "jvp", "inputs", create_graph)
        is_outputs_tuple, outputs = _outputs(call("jvp", WRAP, func, *xs), "jvp", strict)
        us, gxs = _transpose(outputs, xs, strict, "jvp")
    gys = _grads(gxs, us, vs, create_graph)
    result = _fill_in_zeros(
        gys, outputs, strict, create_graph, "jvp", "output {i} does not depend on the inputs"
    )
    return (
        _unpack(_finish(outputs, create_graph), is_outputs_tuple),
        _unpack(result, is_outputs_tuple),
    )


def vhp(
    func: Callable[..., Any],
    inputs: Arrays,
    v: Arrays | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """Vector-Hessian product ``v^T H`` of a function with one one-element output.

    Parameters
    ----------
    func : callable
        A Python function of Variables returning one Variable with one element.
    inputs : array, Variable or tuple of them
        The point; arrays of any array API library.
    v : array, Variable or tuple of them, optional
        One entry per input, of its shape; may be omitted for one one-element input.
    create_graph : bool
        Return Variables whose graph reaches ``inputs`` and ``v``.
    strict : bool
        Raise if the output or its gradient does not depend on an input.

    Returns
    -------
    output : array
        ``func(*inputs)``.
    vhp : array or tuple of arrays
        ``v^T H``, shaped like ``inputs``.

    Notes
    -----
    Cost: one forward pass and two backward passes, the first recorded with
    double backprop (each doubled for a complex output of real inputs). For a twice
    continuously differentiable ``func`` the Hessian is symmetric and this equals
    :func:`hvp`, which costs one pass more.

    ``H`` is :func:`hessian`'s. For a real output of complex inputs, which
    :func:`hessian` refuses, the product is the transposed Jacobian of the gradient
    ``backward()`` gives, applied to ``v`` as :func:`vjp` applies ``J``: the real
    Hessian in ``Re z`` and ``Im z`` applied to ``(Re v, Im v)``, given back as
    ``Re + i Im``, which equals :func:`hvp`.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.functional import vhp
    >>> def f(x):
    ...     xp = x.__array_namespace__()
    ...     return xp.sum(x ** 3)
    >>> vhp(f, np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    (array(9.), array([ 6., 12.]))
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "vhp", "inputs")
    create_graph, recorded = recording_for(inputs, create_graph)  # under jit: in its graph
    with recorded:
        xs = _prepare(inputs, is_inputs_tuple, "vhp", create_graph)
        vs = _hessian_v(v, xs, is_inputs_tuple, "vhp", create_graph)
        out = _single_output(call("vhp", WRAP, func, *xs), "vhp", strict)
        jac = _derivative(out, xs, strict, "vhp")
    if _is_complex(out):
        gxs = _transposed_product(jac, xs, vs, create_graph)
    else:
        gxs = _grads(jac, xs, vs, create_graph)
    like = [x if g is None else g for g, x in zip(jac, xs, strict=True)]
    result = _fill_in_zeros(
        gxs, like, strict, create_graph, "vhp", "the gradient does not depend on input {i}"
    )
    return _finish((out,), create_graph)[0], _unpack(result, is_inputs_tuple)


def hvp(
    func: Callable[..., Any],
    inputs: Arrays,
    v: Arrays | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """Hessian-vector product ``H v`` of a function with one one-element output.

    Parameters
    ----------
    func : callable
        A Python function of Variables returning one Variable with one element.
    inputs : array, Variable or tuple of them
        The point; arrays of any array API library.
    v : array, Variable or tuple of them, optional
        One entry per input, of its shape; may be omitted for one one-element input.
    create_graph : bool
        Return Variables whose graph reaches ``inputs`` and ``v``.
    strict : bool
        Raise if the output or its gradient does not depend on an input.

    Returns
    -------
    output : array
        ``func(*inputs)``.
    hvp : array or tuple of arrays
        ``H v``, shaped like ``inputs``: the derivative of the gradient along ``v``.

    Notes
    -----
    Cost: for a real output of real inputs, reverse over forward, the gradient of
    the derivative along ``v``: one forward pass with tangents, recorded, and one
    backward pass. Otherwise forward over reverse, the jvp of the gradient: one
    forward pass and one recorded backward pass (the gradient), the tangents
    travelling with both; two for a complex output of real inputs. With ``strict`` and under
    :func:`agnograd.jit`, the double-backward trick on the gradient, as torch (three
    backward passes). :func:`vhp` equals it when ``func`` is twice continuously
    differentiable.

    ``H`` is :func:`hessian`'s (:func:`jvp` of the gradient in :func:`jacobian`'s
    convention). For a real output of complex inputs, which :func:`hessian`
    refuses, the product is the derivative along ``v`` of the gradient
    ``backward()`` gives: the real Hessian in ``Re z`` and ``Im z`` applied to
    ``(Re v, Im v)``, given back as ``Re + i Im``.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.functional import hvp
    >>> def f(x):
    ...     return x[0] ** 2 * x[1]
    >>> hvp(f, np.array([1.0, 2.0]), np.array([1.0, 0.0]))
    (array(2.), array([4., 2.]))
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "hvp", "inputs")
    if strict or building():
        return _hvp_by_double_backward(func, inputs, is_inputs_tuple, v, create_graph, strict)
    xs = _prepare(inputs, is_inputs_tuple, "hvp", create_graph)
    vs = _hessian_v(v, xs, is_inputs_tuple, "hvp", create_graph)
    try:
        return _hvp_by_forward_mode(func, xs, vs, is_inputs_tuple, create_graph)
    except NotImplementedError:
        # A node without a jvp that forward mode can run on a reverse graph: the
        # double-backward trick needs only its double backward.
        return _hvp_by_double_backward(func, inputs, is_inputs_tuple, v, create_graph, strict)


def _hvp_by_forward_mode(
    func: Callable[..., Any],
    xs: tuple[Variable, ...],
    vs: tuple[Any, ...],
    is_inputs_tuple: bool,
    create_graph: bool,
) -> tuple[Any, Any]:
    """:func:`hvp` with forward mode: reverse over forward where it can, else forward
    over reverse."""
    if not any(_is_complex(x) for x in xs):
        # Reverse over forward: for a real f of real inputs, H v is the gradient of
        # the derivative along v (H is symmetric): one forward pass with tangents, the
        # graph of both recorded, and one backward, where forward over reverse pushes
        # tangents through a recorded backward as well.
        def scalar(*args: Variable) -> Variable:
            return _single_output(call("hvp", WRAP, func, *args), "hvp", False)

        out, along = _forward.jvp(scalar, xs, vs)
        if not _is_complex(out):
            grads = _grads([along], xs, [_ones_like(along)], create_graph)
            result = _fill_in_zeros(grads, xs, False, create_graph, "hvp", "")
            return _finish((out,), create_graph)[0], _unpack(result, is_inputs_tuple)
    value: list[Variable] = []

    def gradient(*args: Variable) -> tuple[Variable, ...]:
        out = _single_output(call("hvp", WRAP, func, *args), "hvp", False)
        value.append(out)
        jac = _derivative(out, args, False, "hvp")
        return tuple(
            _zeros_like(x, True) if g is None else g for g, x in zip(jac, args, strict=True)
        )

    # Forward over reverse: the derivative of the gradient along v, in one pass.
    _, hs = _forward.jvp(gradient, xs, vs)
    return _finish(value, create_graph)[0], _unpack(_finish(hs, create_graph), is_inputs_tuple)


def _hvp_by_double_backward(
    func: Callable[..., Any],
    inputs: tuple[Any, ...],
    is_inputs_tuple: bool,
    v: Arrays | None,
    create_graph: bool,
    strict: bool,
) -> tuple[Any, Any]:
    """:func:`hvp` by the double-backward trick on the gradient, for what forward
    mode cannot do (as :func:`_jvp_by_double_backward`): with ``strict``, find a
    gradient that is constant in an input."""
    create_graph, recorded = recording_for(inputs, create_graph)  # under jit: in its graph
    with recorded:
        xs = _prepare(inputs, is_inputs_tuple, "hvp", create_graph)
        vs = _hessian_v(v, xs, is_inputs_tuple, "hvp", create_graph)
        out = _single_output(call("hvp", WRAP, func, *xs), "hvp", strict)
        jac = _derivative(out, xs, strict, "hvp")
        # seeds of the gradient's dtype: complex for a complex output of real inputs
        us = tuple(_seed_variable(x if g is None else g) for g, x in zip(jac, xs, strict=True))
        double_back = _grads(jac, xs, us, True)
        if strict:
            for i, d in enumerate(double_back):
                if d is None:
                    raise RuntimeError(
                        f"hvp: the gradient does not depend on input {i}; strict=True "
                        "forbids this (pass strict=False to get zeros)"
                    )
    gus = _grads(double_back, us, vs, create_graph)
    result = _fill_in_zeros(
        gus, us, strict, create_graph, "hvp", "the gradient with respect to input {i} is constant"
    )
    return _finish((out,), create_graph)[0], _unpack(result, is_inputs_tuple)


# --- JAX ----------------------------------------------------------------------------


def value_and_grad(
    fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., tuple[Any, Any]]:
    """A function returning ``fun``'s value and its gradient, as JAX's ``value_and_grad``.

    Parameters
    ----------
    fun : callable
        A Python function of Variables returning a Variable of shape ``()`` with a
        real floating dtype (or, with ``has_aux``, a pair ``(value, aux)``).
    argnums : int or sequence of ints
        Which positional arguments to differentiate with respect to (negative
        counts from the end). Each may be an array, a Variable, or a tuple, list or
        dict nesting them (a pytree). The other arguments, positional or keyword,
        are passed as they are, except their raw arrays (also in tuples, lists and
        dicts): those are passed as Variables that require no gradient, so that
        ``fun`` sees one namespace, and must be arrays of the differentiated
        arguments' library, on their device.
    has_aux : bool
        ``fun`` returns ``(value, aux)``; ``aux`` is returned as is, its Variables
        as arrays.

    Returns
    -------
    callable
        Taking ``fun``'s arguments and returning ``(value, grad)``, or
        ``((value, aux), grad)`` with ``has_aux``. ``grad`` has the structure of
        the argument (a tuple over ``argnums`` when it is a sequence), with zeros
        where the value does not depend on an array. When a differentiated
        argument holds a Variable that requires a gradient, the results are
        Variables connected to it, so ``value_and_grad`` nests (a gradient of a
        gradient); otherwise they are arrays.

    Notes
    -----
    Cost: one forward and one backward pass per call (recorded with double backprop
    when nested).

    The gradient of a complex argument ``z`` is the one ``backward()`` gives,
    ``df/dRe z + i df/dIm z`` (PyTorch's convention): the conjugate of JAX's.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.functional import value_and_grad
    >>> def loss(w, x):
    ...     xp = w.__array_namespace__()
    ...     return xp.sum((x @ w) ** 2)
    >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> value_and_grad(loss)(np.array([1.0, -1.0]), x)
    (array(2.), array([ -8., -12.]))

    Data passed beside the parameters reaches ``fun`` as constant Variables, so
    array API code that asks one namespace of all its arguments runs unchanged:

    >>> import array_api_compat
    >>> def mse(w, x, y):
    ...     xp = array_api_compat.array_namespace(w, x, y)
    ...     return xp.mean((x @ w - y) ** 2)
    >>> value_and_grad(mse)(np.array([1.0, -1.0]), x, np.array([0.0, 1.0]))
    (array(2.5), array([ -7., -10.]))

    The differentiated argument may be a dict (or tuple, or list) of arrays:

    >>> def dot(p):
    ...     return p["w"] @ p["b"]
    >>> value_and_grad(dot)({"w": np.array([2.0, 3.0]), "b": np.array([5.0, 7.0])})
    (array(31.), {'w': array([5., 7.]), 'b': array([2., 3.])})
    """
    return value_and_grad_of("value_and_grad", fun, argnums, has_aux)


def value_and_grad_of(
    op: str,
    fun: Callable[..., Any],
    argnums: int | Sequence[int],
    has_aux: bool,
    fun_name: str = "fun",
) -> Callable[..., tuple[Any, Any]]:
    """:func:`value_and_grad`, its errors naming ``op`` and the function as
    ``fun_name`` (agnograd.func's ``grad`` and ``grad_and_value`` return its results
    in their order)."""
    numbers = argnums_tuple(argnums, op)

    @functools.wraps(fun)
    def value_and_grad_fun(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        d = differentiate(op, args, kwargs, argnums, numbers)
        nested, symbolic = d.nested, d.symbolic
        with recording(symbolic):
            result = call(op, PASS_AS_ARGUMENT, fun, *d.args, **d.kwargs)
        value, aux = split_aux(result, has_aux, op, fun_name)
        _check_value(value, op, fun_name)
        gxs = _grads([value], d.xs, [_ones_like(value)], nested)
        grads = own(list(_fill_in_zeros(gxs, d.xs, False, nested, op, "")), nested, symbolic)
        out_value = value if nested else value.array
        if has_aux:
            aux = restore(aux, d.wrapped)
            out_value = (out_value, aux if nested else _tree_arrays(aux))
        return d.given(out_value), d.nest(d.given(grads))

    return value_and_grad_fun


def _check_value(value: Any, op: str = "value_and_grad", fun: str = "fun") -> None:
    if not isinstance(value, Variable):
        raise TypeError(
            f"{op}: {fun} must return a Variable (computed from its arguments "
            f"with x.__array_namespace__() or agnograd.functions), got {type(value).__name__}"
        )
    if tuple(value.shape or ()) != ():
        raise TypeError(
            f"{op}: the gradient is defined only for a function with a scalar "
            f"output, but {fun}'s output has shape {tuple(value.shape or ())}; reduce it, "
            "e.g. with xp.sum, or use agnograd.func.vjp or jacrev for a non-scalar output"
        )
    if not value.xp.isdtype(value.dtype, "real floating"):
        raise TypeError(
            f"{op}: {fun}'s output must have a real floating dtype, got "
            f"{dtype_name(value.dtype)}; use agnograd.func.vjp for complex outputs"
        )
