"""The full matrices of :mod:`agnograd.functional` (its documentation is there):
``torch.autograd.functional``'s :func:`jacobian`, by rows or by columns, and
:func:`hessian`, the Jacobian of the gradient."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from agnograd.backends._backend import raw_namespace
from agnograd.core._config import eager_recording
from agnograd.core._variable import Variable
from agnograd.functions._namespace import namespace_of
from agnograd.transforms import _forward
from agnograd.transforms._constants import WRAP, call
from agnograd.transforms._jacobian_blocks import (
    _along_basis,
    _block,
    _complex_dtype,
    _from_parts,
    _is_complex,
    _jacobian_by_columns,
    _jacobian_by_rows,
    _zeros_beside,
)
from agnograd.transforms._symbolic import building
from agnograd.transforms._transforms import (
    _STRATEGIES,
    Arrays,
    _as_tuple,
    _outputs,
    _prepare,
    _single_output,
    _size,
    _unpack,
)


def jacobian(
    func: Callable[..., Any],
    inputs: Arrays,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
) -> Any:
    """The Jacobian of ``func`` at ``inputs``.

    Parameters
    ----------
    func : callable
        A Python function of Variables returning a Variable or a tuple of them.
    inputs : array, Variable or tuple of them
        The point; arrays of any array API library.
    create_graph : bool
        Return Variables whose graph reaches ``inputs``, so that Jacobians nest:
        ``jacobian(lambda x: jacobian(f, x, create_graph=True), x)`` is the Hessian.
    strict : bool
        Raise if an output does not depend on an input. Otherwise that block is
        zeros.
    vectorize : bool
        Run the passes as one batched pass per output (``"reverse-mode"``) or per
        input (``"forward-mode"``) through :func:`agnograd.vmap`, seeded with the
        rows or columns of an identity, as torch's ``vectorize=True``; the same
        result as the loop of ``vectorize=False``, with less Python overhead.
    strategy : {"reverse-mode", "forward-mode"}
        Build the Jacobian by rows (one backward pass per output element) or by
        columns (one forward-mode jvp per input element).

    Returns
    -------
    array or tuple
        For one input and one output, an array of shape
        ``output.shape + input.shape``; a tuple over the inputs or the outputs if
        one of them is a tuple; a tuple (outputs) of tuples (inputs) if both are,
        ``result[i][j]`` being the Jacobian of output ``i`` with respect to input
        ``j``. Variables with ``create_graph=True``.

    Notes
    -----
    Entry ``(k, l)`` of a block is the derivative of element ``k`` of the output
    with respect to element ``l`` of the input. With complex numbers, by either
    strategy:

    - a complex output of a complex input: ``df/dz``, the complex derivative, the
      function being taken to be holomorphic, as JAX's ``jacrev`` and ``jacfwd``
      with ``holomorphic=True`` (and unlike torch, which refuses complex outputs).
      Of a function that is not holomorphic (``conj``, ``z * conj(z)``) the result
      is no derivative: ``df/dz + df/dconj(z)`` in forward mode (the derivative
      along the real axis) and ``df/dz + conj(df/dconj(z))`` in reverse mode,
      exactly what JAX's give; use :func:`jvp` or :func:`vjp`, exact for any
      function, or return ``xp.real(f)`` and ``xp.imag(f)`` as two real outputs;
    - a complex output of a real input: ``df/dx``;
    - a real output of a complex input: the gradient ``backward()`` gives,
      ``df/dRe z + i df/dIm z`` (as torch's ``jacobian``; the conjugate of JAX's).

    Cost, with one forward pass of ``func`` in either strategy:

    - ``"reverse-mode"``: one backward pass per element of each output that
      depends on the inputs (none for an output that does not), two for a complex
      output that reaches a real input; with ``vectorize``, one batched pass (two)
      per output;
    - ``"forward-mode"``: one jvp (forward mode, no backward pass) per element of
      each input, two for a complex input that reaches a real output; with
      ``vectorize``, one batched jvp (two) per input. It pays off
      when the inputs have fewer elements than the outputs. With ``strict`` (which
      must find an input that no output depends on) and under
      :func:`agnograd.jit`, the double-backward trick instead: one pass recorded
      with double backprop, then one pass per input element (one per input with
      ``vectorize``). Unlike torch, it needs
      no ``vectorize=True`` and works with ``strict`` and ``create_graph``; its
      blocks have the outputs' dtype, as torch's (complex where the input is).
      As in torch, the Variables ``func`` gets require a gradient only with
      ``create_graph`` (they record no graph otherwise): ``func`` may run
      agnograd's transforms on them (a Jacobian of a gradient), but to take
      :func:`agnograd.grad` of outputs and inputs with respect to them it needs
      ``create_graph=True``.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.functional import jacobian
    >>> def f(x):
    ...     return x ** 2
    >>> jacobian(f, np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    >>> jacobian(lambda x, y: (x * y, x + y), (np.array(2.0), np.array(3.0)))
    ((array(3.), array(2.)), (array(1.), array(1.)))

    The complex derivative ``2 z`` of ``z ** 2``, by either strategy:

    >>> z = np.array([1.0 + 2.0j])
    >>> jacobian(f, z), jacobian(f, z, strategy="forward-mode")
    (array([[2.+4.j]]), array([[2.+4.j]]))
    """
    if strategy not in _STRATEGIES:
        raise ValueError(
            f"jacobian: strategy must be 'reverse-mode' or 'forward-mode', got {strategy!r}; "
            "prefer 'forward-mode' when func has more output than input elements"
        )
    return _jacobian(func, inputs, create_graph, strict, vectorize, strategy, by_jvp=True)


def _jacobian(
    func: Callable[..., Any],
    inputs: Arrays,
    create_graph: bool,
    strict: bool,
    vectorize: bool,
    strategy: str,
    by_jvp: bool,
) -> Any:
    """:func:`jacobian`; ``by_jvp=False`` builds the columns of ``"forward-mode"`` by
    the double-backward trick (:func:`hessian`'s gradient makes its own leaves, which
    forward mode's tangents would not reach)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "jacobian", "inputs")
    if strategy == "forward-mode" and by_jvp and not strict and not building():
        try:
            return _by_forward_mode(func, inputs, is_inputs_tuple, create_graph, vectorize)
        except NotImplementedError:
            # A node without a jvp that forward mode can run on a reverse graph: the
            # double-backward trick needs only its double backward.
            pass
    with eager_recording():
        xs = _prepare(inputs, is_inputs_tuple, "jacobian", create_graph)
        is_outputs_tuple, outputs = _outputs(call("jacobian", WRAP, func, *xs), "jacobian", strict)
        if strategy == "reverse-mode":
            blocks = _jacobian_by_rows(outputs, xs, create_graph, strict, vectorize)
        else:
            blocks = _jacobian_by_columns(outputs, xs, create_graph, strict, vectorize)
    return _unpack(blocks, (is_outputs_tuple, is_inputs_tuple))


def _by_forward_mode(
    func: Callable[..., Any],
    inputs: tuple[Any, ...],
    is_inputs_tuple: bool,
    create_graph: bool,
    vectorize: bool,
) -> Any:
    """:func:`jacobian` by columns, column ``k`` of input ``j`` the jvp along the
    ``k``-th basis vector ``e`` of that input (zero tangents elsewhere); along ``i e``
    too for a complex input that reaches a real output, for backward's gradient
    ``d/dRe z + i d/dIm z``. ``strict`` needs to know which input an output depends
    on, which a jvp along one direction cannot tell: the double-backward trick does
    that."""
    xs = _prepare(inputs, is_inputs_tuple, "jacobian", create_graph)
    is_outputs_tuple: list[bool] = []

    def outputs_of(*args: Variable) -> tuple[Variable, ...]:
        is_tuple, outputs = _outputs(call("jacobian", WRAP, func, *args), "jacobian", False)
        is_outputs_tuple.append(is_tuple)
        return outputs

    # Raw primals unless the results must keep a graph: forward mode then computes on
    # raw arrays, recording nothing (rules on Variables, and a reverse graph, cost
    # several times as much). A transform that func runs on its arguments (a
    # Jacobian of a Jacobian) carries their tangents to the leaves it makes.
    primals = xs if create_graph else tuple(x.array for x in xs)
    zeros = [raw_namespace(p.array).zeros_like(p.array) for p in xs]
    outputs: tuple[Any, ...] = ()

    def column(e: Any, j: int) -> list[Any]:
        """The outputs' tangents along ``e`` in input ``j``."""
        nonlocal outputs
        beside = [_zeros_beside(e, z) for z in zeros]
        outputs, ts = _forward.jvp(outputs_of, primals, (*beside[:j], e, *beside[j + 1 :]))
        if _is_complex(xs[j]) and not all(_is_complex(y) for y in outputs):
            _, tis = _forward.jvp(outputs_of, primals, (*beside[:j], e * 1j, *beside[j + 1 :]))
            ts = [
                t if _is_complex(y) else _from_parts(t, ti, _complex_dtype(xs[j]))
                for t, ti, y in zip(ts, tis, outputs, strict=True)
            ]
        return [t if create_graph or not isinstance(t, Variable) else t.array for t in ts]

    def output(i: int) -> Variable:
        y = outputs[i]
        return y if isinstance(y, Variable) else Variable(y, requires_grad=False)

    columns = [  # [j][i], stacked on the last axis
        _along_basis(x, functools.partial(column, j=j), output, vectorize, create_graph, -1)
        if _size(x)
        else None
        for j, x in enumerate(xs)
    ]
    if not outputs:  # no input element: the outputs for the blocks' shapes
        outputs = outputs_of(*xs)
    blocks = tuple(
        tuple(
            _block(None if cols is None else cols[i], output(i), x, -1, create_graph)
            for cols, x in zip(columns, xs, strict=True)
        )
        for i in range(len(outputs))
    )
    return _unpack(blocks, (is_outputs_tuple[0], is_inputs_tuple))


def hessian(
    func: Callable[..., Any],
    inputs: Arrays,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
) -> Any:
    """The Hessian of a function ``func`` with one one-element output, at ``inputs``.

    Parameters
    ----------
    func : callable
        A Python function of Variables returning one Variable with one element.
    inputs : array, Variable or tuple of them
        The point; arrays of any array API library.
    create_graph : bool
        Return Variables whose graph reaches ``inputs``.
    strict : bool
        Raise if the output, or its gradient, does not depend on an input.
        Otherwise those blocks are zeros.
    vectorize : bool
        Build the outer Jacobian from one batched pass per input (see
        :func:`jacobian`); the same result as without.
    outer_jacobian_strategy : {"reverse-mode", "forward-mode"}
        How the Jacobian of the gradient is built (see :func:`jacobian`).

    Returns
    -------
    array or tuple of tuples of arrays
        For one input, an array of shape ``input.shape + input.shape``; for a
        tuple, ``result[i][j]`` is the block of inputs ``i`` and ``j``.

    Raises
    ------
    TypeError
        If the output is real and an input complex: the second derivatives of a
        real function of complex ``z`` form the real Hessian in ``Re z`` and
        ``Im z``, no complex matrix. :func:`hvp` and :func:`vhp` apply it to a
        vector.

    Notes
    -----
    The Jacobian of the gradient, as in torch, both in :func:`jacobian`'s
    convention: for a complex output, holomorphic in its complex inputs, the
    matrix of second complex derivatives ``d2f/dz_i dz_j`` (as JAX's ``hessian``
    with ``holomorphic=True``). Cost: one forward pass, one backward pass recorded
    with double backprop (the gradient), then one backward pass per input element
    (one batched pass per input with ``vectorize``), each doubled for a complex
    output of real inputs (see :func:`jacobian`);
    ``"forward-mode"`` adds a second recorded pass and gains nothing, since the
    Hessian is square.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.functional import hessian
    >>> def f(x):
    ...     xp = x.__array_namespace__()
    ...     return xp.sum(x ** 3)
    >>> hessian(f, np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "hessian", "inputs")
    if outer_jacobian_strategy not in _STRATEGIES:
        raise ValueError(
            "hessian: outer_jacobian_strategy must be 'reverse-mode' or 'forward-mode', "
            f"got {outer_jacobian_strategy!r}"
        )

    def scalar(*xs: Variable) -> Variable:
        out = _single_output(call("hessian", WRAP, func, *xs), "hessian", strict)
        if not _is_complex(out):
            for i, x in enumerate(xs):
                if _is_complex(x):
                    where = f"inputs[{i}]" if is_inputs_tuple else "inputs"
                    raise TypeError(
                        f"hessian: func's output is real but {where} is complex; the second "
                        "derivatives of a real function of complex inputs are no complex "
                        "matrix (they form the real Hessian in Re z and Im z): use hvp or "
                        "vhp, which apply that Hessian to v, or pass the real and imaginary "
                        "parts as real inputs"
                    )
        reshaped: Variable = namespace_of(out).reshape(out, ())
        return reshaped

    def gradient(*xs: Variable) -> tuple[Any, ...]:
        jac = jacobian(scalar, xs, create_graph=True)
        for i, g in enumerate(jac):
            if strict and not g.requires_grad:
                raise RuntimeError(
                    f"hessian: the gradient with respect to input {i} does not depend on "
                    "the inputs (func is linear in it); strict=True forbids this (pass "
                    "strict=False to get zeros)"
                )
        return tuple(jac)

    res = _jacobian(
        gradient, inputs, create_graph, strict, vectorize, outer_jacobian_strategy, by_jvp=False
    )
    return _unpack(res, (is_inputs_tuple, is_inputs_tuple))
