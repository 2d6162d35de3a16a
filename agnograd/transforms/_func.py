"""The code behind :mod:`agnograd.func` (its documentation is there): ``torch.func``'s
and JAX's transforms, which take a function and return one. They are built from the
parts of :mod:`agnograd.functional`: the arguments made leaves in their nesting
(``_arguments``), the backward passes and Jacobian rows of ``_transforms``, and the
forward mode of ``_forward``."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from agnograd.backends._backend import raw_namespace
from agnograd.core._config import eager_recording
from agnograd.core._variable import Variable
from agnograd.transforms._arguments import (
    argnums_tuple,
    differentiate,
    forward_levels,
    leaves_like,
    output_leaves,
    own,
    split_aux,
)
from agnograd.transforms._constants import PASS_AS_ARGUMENT, WRAP, call, restore
from agnograd.transforms._forward import _constant, _jvp
from agnograd.transforms._functional import value_and_grad_of
from agnograd.transforms._jacobian_blocks import (
    _along_basis,
    _block,
    _is_complex,
    _jacobian_by_rows,
    _zeros_beside,
)
from agnograd.transforms._symbolic import recording
from agnograd.transforms._transforms import (
    _fill_in_zeros,
    _finish,
    _grads,
    _size,
    _validate_v,
    _zeros_like,
)
from agnograd.transforms._trees import _tree_arrays, _tree_leaves, _tree_unflatten


def grad(
    func: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """A function returning the gradient of ``func``, as ``torch.func.grad`` and ``jax.grad``.

    Parameters
    ----------
    func : callable
        A Python function returning a Variable of shape ``()`` with a real floating
        dtype (or, with ``has_aux``, a pair ``(value, aux)``).
    argnums : int or tuple of ints
        Which positional arguments to differentiate with respect to (negative counts
        from the end). Each may be an array, a Variable, or a tuple, list or dict
        nesting them. The raw arrays of the other arguments, positional or keyword,
        reach ``func`` as Variables that require no gradient, so that it sees one
        namespace; they must be arrays of the differentiated arguments' library.
    has_aux : bool
        ``func`` returns ``(value, aux)``; ``aux`` is returned beside the gradient,
        its Variables as arrays.

    Returns
    -------
    callable
        Taking ``func``'s arguments and returning the gradient, or ``(grad, aux)``
        with ``has_aux``. The gradient nests as the argument does (a tuple over
        ``argnums`` when it is a tuple), with zeros where the value does not depend
        on an array. Arrays of the arguments' library; Variables connected to the
        arguments when one of them is a Variable that requires a gradient (as inside
        another transform), so that transforms nest.

    Notes
    -----
    Cost: one forward and one backward pass per call, the backward recorded with
    double backprop when nested. The gradient of a complex argument ``z`` is the
    one ``backward()`` gives, ``df/dRe z + i df/dIm z`` (torch's convention; JAX's
    is its conjugate).

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.func import grad
    >>> def loss(w, x):
    ...     xp = w.__array_namespace__()
    ...     return xp.sum((x @ w) ** 2)
    >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> grad(loss)(np.array([1.0, -1.0]), x)
    array([ -8., -12.])

    Gradients of gradients, and dicts of parameters:

    >>> def cube(x):
    ...     return (x ** 3)[0]
    >>> grad(lambda x: grad(cube)(x)[0])(np.array([2.0]))
    array([12.])
    >>> grad(lambda p: p["a"] @ p["b"])({"a": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])})
    {'a': array([3., 4.]), 'b': array([1., 2.])}
    """
    value_and_grad_fun = value_and_grad_of("grad", func, argnums, has_aux, "func")

    @functools.wraps(func)
    def grad_fun(*args: Any, **kwargs: Any) -> Any:
        value, gradient = value_and_grad_fun(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient

    return grad_fun


def grad_and_value(
    func: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., tuple[Any, Any]]:
    """A function returning the gradient of ``func`` and its value, as torch.func's.

    Parameters
    ----------
    func : callable
        As for :func:`grad`.
    argnums : int or tuple of ints
        As for :func:`grad`.
    has_aux : bool
        ``func`` returns ``(value, aux)``.

    Returns
    -------
    callable
        Taking ``func``'s arguments and returning ``(grad, value)``, or
        ``(grad, (value, aux))`` with ``has_aux``: torch's order, the reverse of
        :func:`value_and_grad`'s. The gradient is :func:`grad`'s.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.func import grad_and_value
    >>> def f(x):
    ...     xp = x.__array_namespace__()
    ...     return xp.sum(x ** 2), x * 2.0
    >>> grad_and_value(f, has_aux=True)(np.array([1.0, 3.0]))
    (array([2., 6.]), (array(10.), array([2., 6.])))
    """
    value_and_grad_fun = value_and_grad_of("grad_and_value", func, argnums, has_aux, "func")

    @functools.wraps(func)
    def grad_and_value_fun(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        value, gradient = value_and_grad_fun(*args, **kwargs)
        return gradient, value

    return grad_and_value_fun


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``func``'s output at ``primals`` and the function that pulls cotangents back,
    as ``torch.func.vjp`` and ``jax.vjp``.

    Parameters
    ----------
    func : callable
        A Python function of the primals returning a Variable, or a tuple, list or
        dict nesting Variables (or, with ``has_aux``, a pair ``(output, aux)``).
    *primals : arrays, Variables, or tuples, lists or dicts of them
        The point; every array in them is differentiated.
    has_aux : bool
        ``func`` returns ``(output, aux)``; ``aux`` is returned third.

    Returns
    -------
    output
        ``func(*primals)``, arrays in its nesting.
    vjp_fn : callable
        Taking cotangents nested as ``output`` is (one array of each output's shape
        and library) and returning a tuple with one entry per primal, nested as that
        primal: ``vᵀJ``, what ``backward()`` gives the primals when seeded with the
        cotangents, zeros for arrays the output does not depend on. It may be called
        any number of times.
    aux
        With ``has_aux``, ``func``'s ``aux``, its Variables as arrays.

    Notes
    -----
    Cost: one forward pass, then one backward pass per call of ``vjp_fn``. When a
    primal is a Variable that requires a gradient (inside another transform), the
    output and the products are Variables connected to it; when a cotangent is, the
    products are connected to it, so ``vjp_fn`` can be differentiated with respect
    to its cotangents too. For complex numbers the product is what
    :func:`agnograd.functional.vjp` gives (``conj(J)ᵀ v`` for a holomorphic
    function, as torch; JAX's is ``Jᵀ v``).

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.func import vjp
    >>> def f(x, y):
    ...     return {"prod": x * y, "sum": x + y}
    >>> out, vjp_fn = vjp(f, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    >>> out
    {'prod': array([3., 8.]), 'sum': array([4., 6.])}
    >>> vjp_fn({"prod": np.array([1.0, 1.0]), "sum": np.array([0.0, 10.0])})
    (array([ 3., 14.]), array([ 1., 12.]))
    """
    op = "vjp"
    if not primals:
        raise TypeError("vjp: no primals given; pass the point as vjp(func, x, ...)")
    positions = tuple(range(len(primals)))
    d = differentiate(op, primals, {}, positions, positions, label="primals[{}]")
    with recording(d.symbolic):
        result = call(op, WRAP, func, *d.args)
    out_tree, aux = split_aux(result, has_aux, op)
    outputs = output_leaves(out_tree, op)
    output = _tree_unflatten(out_tree, iter(d.given(_finish(outputs, d.nested))))

    def vjp_fn(cotangents: Any) -> tuple[Any, ...]:
        """``vᵀJ`` for the cotangents ``v``, one entry per primal (see ``vjp``)."""
        places = leaves_like(cotangents, out_tree, op, "cotangents")
        # Cotangents with tangents of a running jvp (a jvp of vjp_fn) are passed on as
        # Variables, which the backward's operations carry the tangents of.
        levels = forward_levels()
        carried = [any(level.tangent(c) is not None for level in levels) for _, c in places]
        double = (
            d.nested
            or any(carried)
            or any(isinstance(c, Variable) and c.requires_grad for _, c in places)
        )
        seeds = [
            c if by_jvp else _validate_v(c, (y,), False, op, "outputs", double, name=where)[0]
            for (where, c), y, by_jvp in zip(places, outputs, carried, strict=True)
        ]
        gxs = _grads(outputs, d.xs, seeds, double)
        products = own(list(_fill_in_zeros(gxs, d.xs, False, double, op, "")), double, d.symbolic)
        if d.carriers or (any(carried) and not d.nested):
            # Under the jvps running now, given back as their arguments are.
            products = d.given(products, levels)
        return tuple(d.nest(products))

    if has_aux:
        aux = restore(aux, d.wrapped)
        return output, vjp_fn, d.given(aux) if d.nested else _tree_arrays(aux)
    return output, vjp_fn


def jacrev(
    func: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """A function returning the Jacobian of ``func`` by reverse mode, as
    ``torch.func.jacrev`` and ``jax.jacrev``.

    Parameters
    ----------
    func : callable
        A Python function returning a Variable, or a tuple, list or dict nesting
        Variables (or, with ``has_aux``, a pair ``(output, aux)``).
    argnums : int or tuple of ints
        Which positional arguments to differentiate with respect to, as for
        :func:`grad`; the raw arrays of the others reach ``func`` as constants.
    has_aux : bool
        ``func`` returns ``(output, aux)``; the result is ``(jacobian, aux)``.

    Returns
    -------
    callable
        Taking ``func``'s arguments and returning the Jacobian: the output's nesting,
        each output replaced by the argument's nesting (a tuple over ``argnums`` when
        it is a tuple), each array replaced by the block of shape
        ``output.shape + array.shape``, as torch and JAX nest it.

    Notes
    -----
    Cost: one forward pass, then one backward pass per output (two for a complex
    output that reaches a real argument), run by :func:`vmap` on the rows of an
    identity: all of the output's rows at once, as ``torch.func.jacrev`` does
    (under :func:`agnograd.jit`, one pass per element). The blocks follow
    :func:`agnograd.functional.jacobian`'s complex convention (``df/dz`` for a
    holomorphic function, as JAX's ``holomorphic=True``).

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.func import jacrev
    >>> def f(x, y):
    ...     return x * y, x.__array_namespace__().sum(x)
    >>> jacrev(f, argnums=(0, 1))(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    ((array([[3., 0.],
           [0., 4.]]), array([[1., 0.],
           [0., 2.]])), (array([1., 1.]), array([0., 0.])))
    """
    return _jacrev("jacrev", func, argnums, has_aux)


def _jacrev(
    op: str, func: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool
) -> Callable[..., Any]:
    numbers = argnums_tuple(argnums, op)

    @functools.wraps(func)
    def jacrev_fun(*args: Any, **kwargs: Any) -> Any:
        d = differentiate(op, args, kwargs, argnums, numbers)
        with eager_recording() if not d.symbolic else recording(True):
            result = call(op, PASS_AS_ARGUMENT, func, *d.args, **d.kwargs)
            out_tree, aux = split_aux(result, has_aux, op)
            outputs = output_leaves(out_tree, op)
            blocks = _jacobian_by_rows(tuple(outputs), tuple(d.xs), d.nested, False, True)
        jacobian = _tree_unflatten(out_tree, iter(d.nest(d.given(list(row))) for row in blocks))
        if not has_aux:
            return jacobian
        aux = restore(aux, d.wrapped)
        return jacobian, d.given(aux) if d.nested else _tree_arrays(aux)

    return jacrev_fun


def hessian(
    func: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """A function returning the Hessian of ``func``, as ``torch.func.hessian`` and
    ``jax.hessian``.

    Parameters
    ----------
    func : callable
        A Python function returning a Variable of one element (or, with
        ``has_aux``, a pair ``(output, aux)``); tuples, lists and dicts of them
        give a Hessian for each.
    argnums : int or tuple of ints
        Which positional arguments to differentiate with respect to, as for
        :func:`grad`.
    has_aux : bool
        ``func`` returns ``(output, aux)``; the result is ``(hessian, aux)``.

    Returns
    -------
    callable
        Taking ``func``'s arguments and returning the Jacobian of the Jacobian: for
        one array argument, a block of shape ``output.shape + x.shape + x.shape``;
        for a nested argument (or a tuple of ``argnums``), ``result[i][j]`` is the
        block of its arrays ``i`` and ``j``, as torch and JAX nest it.

    Raises
    ------
    TypeError
        If the output is real and a differentiated array complex: its second
        derivatives form the real Hessian in ``Re z`` and ``Im z``, no complex
        matrix (as :func:`agnograd.functional.hessian`).

    Notes
    -----
    Computed by :func:`jacfwd` of :func:`jacrev` (forward over reverse, as torch and
    JAX): per differentiated array, one batched forward pass with the tangents of
    all its elements, through the gradient's one backward pass.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.func import hessian
    >>> def f(x):
    ...     xp = x.__array_namespace__()
    ...     return xp.sum(x ** 3)
    >>> hessian(f)(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    numbers = argnums_tuple(argnums, "hessian")

    @functools.wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        result = func(*args, **kwargs)
        value, _ = split_aux(result, has_aux, "hessian")
        if isinstance(value, Variable) and not _is_complex(value):
            for a in numbers:
                if not -len(args) <= a < len(args):
                    continue  # differentiate() says so
                leaves = _tree_leaves(args[a], f"argument {a % len(args)}", "hessian")
                if any(_is_complex(x) for x in leaves):
                    raise TypeError(
                        f"hessian: func's output is real but argument {a % len(args)} holds "
                        "complex arrays; the second derivatives of a real function of "
                        "complex inputs are no complex matrix (they form the real Hessian "
                        "in Re z and Im z): use agnograd.functional.hvp or vhp, or pass "
                        "the real and imaginary parts as real arguments"
                    )
        return result

    # Forward over reverse, as torch and JAX: the outer Jacobian by one forward pass
    # per gradient element rather than one backward pass.
    gradient = _jacrev("hessian", checked, argnums, has_aux)
    return _jacfwd("hessian", gradient, argnums, has_aux)


def jacfwd(
    func: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """A function returning the Jacobian of ``func`` by forward mode, as
    ``torch.func.jacfwd`` and ``jax.jacfwd``.

    Parameters
    ----------
    func : callable
        A Python function returning a Variable, or a tuple, list or dict nesting
        Variables (or, with ``has_aux``, a pair ``(output, aux)``).
    argnums : int or tuple of ints
        Which positional arguments to differentiate with respect to, as for
        :func:`grad`; the raw arrays of the others reach ``func`` as constants.
    has_aux : bool
        ``func`` returns ``(output, aux)``; the result is ``(jacobian, aux)``.

    Returns
    -------
    callable
        Taking ``func``'s arguments and returning the Jacobian, nested as
        :func:`jacrev`'s: the output's nesting, each output replaced by the
        argument's nesting (a tuple over ``argnums`` when it is a tuple), each array
        replaced by the block of shape ``output.shape + array.shape``.

    Notes
    -----
    Cost: one forward pass with tangents (:func:`jvp`) per differentiated array,
    run by :func:`vmap` on the columns of an identity: every column of its blocks at
    once, as ``torch.func.jacfwd`` does (under :func:`agnograd.jit`, one pass per
    element). Cheaper than :func:`jacrev` where the output has more elements than
    the arguments. ``func``
    may take gradients itself (``jacfwd(jacrev(f))``, as :func:`hessian`). Column
    ``k`` of a complex argument's block is the derivative along the real basis
    vector, ``df/dz`` for a holomorphic function: :func:`jacrev`'s convention.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.func import jacfwd
    >>> def f(x, y):
    ...     return x * y, x.__array_namespace__().sum(x)
    >>> jacfwd(f, argnums=(0, 1))(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    ((array([[3., 0.],
           [0., 4.]]), array([[1., 0.],
           [0., 2.]])), (array([1., 1.]), array([0., 0.])))
    """
    return _jacfwd("jacfwd", func, argnums, has_aux)


def _jacfwd(
    op: str,
    func: Callable[..., Any],
    argnums: int | Sequence[int],
    has_aux: bool,
) -> Callable[..., Any]:
    """``jacfwd`` for the transform ``op``, which its errors name."""
    numbers = argnums_tuple(argnums, op)

    @functools.wraps(func)
    def jacfwd_fun(*args: Any, **kwargs: Any) -> Any:
        d = differentiate(op, args, kwargs, argnums, numbers)

        def at(*xs: Any) -> Any:
            """``func`` with the leaves ``xs`` in the differentiated arguments."""
            it = iter(xs)
            new = list(d.args)
            for p in d.positions:
                new[p] = _tree_unflatten(d.original[p], it)
            return call(op, PASS_AS_ARGUMENT, func, *new, **d.kwargs)

        # Raw arrays unless nested: the tangents then run with the raw namespace, and
        # a transform inside func picks them up from its arguments (jacfwd of jacrev).
        primals = tuple(d.xs) if d.nested else tuple(x.array for x in d.xs)
        zeros = [_zeros_like(x, False) for x in d.xs]  # of jit's graph, under jit
        first: Any = None  # the last jvp's (output, tangents[, aux])

        def column(t: Any, j: int) -> list[Any]:
            """The tangents of the outputs along ``t`` in argument ``j``."""
            nonlocal first
            tangents = [_zeros_beside(t, z) for z in zeros]
            tangents[j] = t
            first = _jvp(op, at, primals, tuple(tangents), has_aux)
            out_tangents = _tree_leaves(first[1], "the output of func", op)
            return [t if d.nested else _tree_arrays(t) for t in out_tangents]

        def output(i: int) -> Variable:
            """Output ``i`` of ``func``, of the last jvp (the same in each)."""
            y = _tree_leaves(first[0], "the output of func", op)[i]
            return y if isinstance(y, Variable) else _constant(y)

        columns: list[list[Any] | None] = []  # [leaf][output]: stacked on the last axis
        with recording(d.symbolic):
            for j, x in enumerate(d.xs):
                part = functools.partial(column, j=j)
                size = _size(x)
                columns.append(_along_basis(x, part, output, True, d.nested, -1) if size else None)
            if first is None:  # no element to differentiate: the output's nesting only
                first = _jvp(op, at, primals, tuple(zeros), has_aux)
        out_tree = first[0]
        blocks = (
            [
                _block(None if cols is None else cols[i], output(i), x, -1, d.nested)
                for cols, x in zip(columns, d.xs, strict=True)
            ]
            for i in range(len(_tree_leaves(out_tree, "the output of func", op)))
        )
        jacobian = _tree_unflatten(out_tree, iter(d.nest(d.given(row)) for row in blocks))
        if not has_aux:
            return jacobian
        aux = restore(first[2], d.wrapped)
        return jacobian, d.given(aux) if d.nested else _tree_arrays(aux)

    return jacfwd_fun


def linearize(func: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """``func``'s output at ``primals`` and the function that pushes tangents forward
    there, as ``torch.func.linearize`` and ``jax.linearize``.

    Parameters
    ----------
    func : callable
        A Python function of the primals returning a Variable, or a tuple, list or
        dict nesting Variables.
    *primals : arrays, Variables, or tuples, lists or dicts of them
        The point.

    Returns
    -------
    output
        ``func(*primals)``, as :func:`jvp` gives it.
    jvp_fn : callable
        Taking one tangent per primal, nested as that primal, and returning ``J v``
        nested as ``output``: :func:`jvp`'s second result at the fixed primals. It
        may be called any number of times.

    Notes
    -----
    Cost: ``jvp_fn`` runs :func:`jvp` at the saved primals, one forward pass with
    tangents per call; nothing of the first pass is reused (JAX's ``linearize``
    keeps the linearized graph instead, torch's compiles one). The output comes from
    one forward pass with zero tangents.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.func import linearize
    >>> def f(x):
    ...     return x.__array_namespace__().sin(x)
    >>> out, jvp_fn = linearize(f, np.array([0.0, 1.0]))
    >>> jvp_fn(np.array([1.0, 2.0]))  # cos(x) v
    array([1.        , 1.08060461])
    """
    op = "linearize"
    if not primals:
        raise TypeError(f"{op}: no primals given; pass the point as linearize(func, x, ...)")
    leaves = _tree_leaves(primals, "primals", op)
    zeros = _tree_unflatten(
        primals,
        iter(
            _zeros_like(x, False) if isinstance(x, Variable) else raw_namespace(x).zeros_like(x)
            for x in leaves
        ),
    )
    output, _ = _jvp(op, func, primals, zeros, False)

    def jvp_fn(*tangents: Any) -> Any:
        """``J v`` for the tangents ``v`` at the saved primals (see ``linearize``)."""
        if len(tangents) != len(primals):
            raise TypeError(
                f"{op}: jvp_fn takes one tangent per primal ({len(primals)}), got {len(tangents)}"
            )
        return _jvp(op, func, primals, tangents, False)[1]

    return output, jvp_fn
