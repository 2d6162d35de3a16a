"""Jacobians built from backward (rows) or forward (columns) passes, one batched
pass under vmap where it can, in one complex convention, and their blocks assembled
as torch and JAX nest them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agnograd.backends._backend import raw_namespace
from agnograd.backends._device import device_of
from agnograd.core._config import eager_recording
from agnograd.core._variable import Variable
from agnograd.functions._namespace import namespace_of
from agnograd.transforms._batching import BatchedArray, level_of
from agnograd.transforms._transforms import _gradient, _grads, _size, _transpose, _zeros_like
from agnograd.transforms._vmap import vmap

# --- Jacobians, and complex numbers ------------------------------------------------
# The engine's backward is PyTorch's: seeded with u, it gives the gradient of the real
# number Re(sum(conj(u) * f)) as d/dRe z + i d/dIm z, which is conj(J)^T u for a
# holomorphic f, and keeps only the real part for a real input. The Jacobian holds J
# itself (JAX's holomorphic=True), so the rows of complex outputs are converted here;
# the double-backward trick gives the derivative along v, J v, as it is.


def _is_complex(x: Any) -> bool:
    xp = x.xp if isinstance(x, Variable) else raw_namespace(x)  # a Variable may have no data
    return bool(xp.isdtype(x.dtype, "complex floating"))


def _complex_dtype(x: Variable) -> Any:
    """The complex dtype of ``x``'s precision (its own dtype if complex)."""
    xp = x.xp  # also of a Variable without data (under agnograd.jit)
    return xp.result_type(x.dtype, xp.complex64)


def _conj(a: Any) -> Any:
    return namespace_of(a).conj(a)


def _times_i(a: Any, dtype: Any) -> Any:
    return namespace_of(a).astype(a, dtype) * 1j


def _from_parts(re: Any, im: Any, dtype: Any) -> Any:
    """``re + i im`` in ``dtype``: two passes into a real input, seeded with ``u`` and
    ``i u``, give the real and imaginary parts of ``J^T u``."""
    xp = namespace_of(re)
    return xp.astype(re, dtype) + xp.astype(im, dtype) * 1j


def _to_jacobian_convention(
    gxs: Sequence[Variable | None], gis: Sequence[Variable | None], xs: Sequence[Variable]
) -> list[Variable | None]:
    """``J^T u`` from the backward passes of a complex output seeded with ``conj(u)``
    (``gxs``) and ``i conj(u)`` (``gis``, read only for real inputs, ``None`` if no
    real input was reached): the conjugate for a complex input, ``re + i im`` for a
    real one."""
    return [
        None if g is None else _conj(g) if _is_complex(x) else _from_parts(g, gi, _complex_dtype(x))
        for g, gi, x in zip(gxs, gis, xs, strict=True)
    ]


def _needs_imaginary_pass(grads: Sequence[Any], refs: Sequence[Variable]) -> bool:
    """Whether a pass reached a real ``ref``, whose imaginary part then takes a second."""
    return any(g is not None and not _is_complex(r) for g, r in zip(grads, refs, strict=True))


def _one_hot(ref: Variable, k: int, idx: Any) -> Any:
    """The ``k``-th standard basis vector in ``ref``'s shape, dtype and library."""
    xp = raw_namespace(idx)
    return xp.reshape(xp.astype(idx == k, ref.dtype), tuple(ref.shape or ()))


def _arange(ref: Variable) -> Any:
    """``0, 1, ...`` over ``ref``'s elements, on its device: raw, also for a Variable
    without data (under agnograd.jit), whose shape and device are known."""
    device = ref.device if ref.array is None else device_of(ref.array)
    return device.xp.arange(_size(ref), device=device.device)


def _along_basis(
    ref: Variable,
    part: Callable[[Any], list[Any]],
    ref_of: Callable[[int], Variable],
    vectorize: bool,
    create_graph: bool,
    axis: int,
) -> list[Any]:
    """``part(e)`` for each basis vector ``e`` of ``ref`` (a list, ``None`` where no
    pass reached an entry), each entry's parts stacked on ``axis`` (0 for rows, -1
    for columns; ``ref_of(j)`` the shape of entry ``j``'s parts) or ``None``. With
    ``vectorize``, one call of ``part`` under :func:`~agnograd.vmap` with every basis
    vector at once, as torch's ``vectorize=True`` and ``torch.func`` do; else (and
    for one element, which needs no batch, or a graph not run, whose values are not
    there to batch) one call per vector."""
    n = _size(ref)

    def loop() -> list[Any]:
        idx = _arange(ref)
        parts = [part(_one_hot(ref, k, idx)) for k in range(n)]
        return [
            _stacked([p[j] for p in parts], ref_of(j), create_graph, axis)
            for j in range(len(parts[0]))
        ]

    if not (vectorize and n > 1 and ref.array is not None):
        return loop()
    repeated: set[int] = set()

    def batched(e: Any) -> list[Any]:
        results = part(e)
        for j, r in enumerate(results):
            if r is not None and level_of(r._data if isinstance(r, Variable) else r) != e.level:
                repeated.add(j)  # the same for every vector, which vmap repeats as a view
        return results

    try:
        stacked = vmap(batched, out_axes=axis)(_identity(ref))
    except TypeError:
        # A pass that cannot run batched: a rule with an array of a library whose
        # operators refuse a batched operand instead of deferring to it
        # (array-api-strict's `y * g`), a node's own backward that reads a value (a
        # ConcretizationTypeError). The loop gives what it can, or the error.
        return loop()
    for j in repeated:
        r = stacked[j]
        if not isinstance(r, Variable):  # the caller's own array, not a read-only view
            stacked[j] = raw_namespace(r).asarray(r, copy=True)
    return [
        r
        if r is None or not create_graph or isinstance(r, Variable)
        # what vmap gave back as an array requires no gradient
        else Variable(r, requires_grad=False)
        for r in stacked
    ]


def _jacobian_by_rows(
    outputs: tuple[Variable, ...],
    xs: tuple[Variable, ...],
    create_graph: bool,
    strict: bool,
    vectorize: bool,
) -> tuple[tuple[Any, ...], ...]:
    """Row ``k`` of block ``(i, j)`` from a backward pass seeded with the ``k``-th basis
    vector ``e`` of output ``i``, converted for a complex output (and a second pass
    seeded with ``i e`` for its real inputs). With ``vectorize``, all the rows of
    output ``i`` from one backward pass (:func:`_along_basis`)."""
    blocks = []
    for i, out in enumerate(outputs):

        def row(e: Any, i: int = i, out: Variable = out) -> list[Any]:
            """Row ``e`` of each block ``(i, j)``."""
            gxs = _grads([out], xs, [e], create_graph)
            if _is_complex(out):
                gis: list[Variable | None] = [None] * len(xs)
                if _needs_imaginary_pass(gxs, xs):
                    gis = _grads([out], xs, [e * 1j], create_graph)
                gxs = _to_jacobian_convention(gxs, gis, xs)
            return [_checked(g, i, j, strict, create_graph) for j, g in enumerate(gxs)]

        rows: list[Any] = [None] * len(xs)
        if out.requires_grad and _size(out):
            rows = _along_basis(out, row, xs.__getitem__, vectorize, create_graph, 0)
        blocks.append(
            tuple(_block(r, out, x, 0, create_graph) for r, x in zip(rows, xs, strict=True))
        )
    return tuple(blocks)


def _jacobian_by_columns(
    outputs: tuple[Variable, ...],
    xs: tuple[Variable, ...],
    create_graph: bool,
    strict: bool,
    vectorize: bool,
) -> tuple[tuple[Any, ...], ...]:
    """Column ``k`` of block ``(i, j)`` by the double-backward trick along the ``k``-th
    basis vector ``e`` of input ``j``: the derivative along ``e``. A real output of a
    complex input takes a second pass along ``i e``, for backward's gradient
    ``d/dRe z + i d/dIm z``. With ``vectorize``, all the columns of input ``j`` from
    one backward pass (:func:`_along_basis`)."""
    us, gxs = _transpose(outputs, xs, False, "jacobian")
    columns: list[list[Any]] = [[None] * len(outputs) for _ in xs]  # [j][i]
    for j, (x, g) in enumerate(zip(xs, gxs, strict=True)):
        if g is None and strict and _size(x):
            raise _independent(None, j)
        if g is None or not _size(x):
            continue

        def column(e: Any, j: int = j, x: Variable = x, g: Variable = g) -> list[Any]:
            """Column ``e`` of each block ``(i, j)``."""
            gus = _grads([g], us, [e], create_graph)
            if _is_complex(x) and _needs_imaginary_pass(gus, outputs):
                gis = _grads([g], us, [e * 1j], create_graph)
                gus = [
                    gu if gu is None or _is_complex(y) else _from_parts(gu, gi, _complex_dtype(y))
                    for gu, gi, y in zip(gus, gis, outputs, strict=True)
                ]
            return [_checked(gu, i, j, strict, create_graph) for i, gu in enumerate(gus)]

        columns[j] = _along_basis(x, column, outputs.__getitem__, vectorize, create_graph, -1)
    return tuple(
        tuple(_block(columns[j][i], out, x, -1, create_graph) for j, x in enumerate(xs))
        for i, out in enumerate(outputs)
    )


def _checked(g: Variable | None, i: int, j: int, strict: bool, create_graph: bool) -> Any:
    """One row or column of block ``(i, j)``: ``None`` where no pass reached it."""
    if g is None:
        if strict:
            raise _independent(i, j)
        return None
    if strict and create_graph and not g.requires_grad:
        raise RuntimeError(
            f"jacobian: the Jacobian of output {i} with respect to input {j} does not "
            "depend on the inputs (func is linear there), so it cannot be differentiated "
            "further; strict=True with create_graph=True forbids this"
        )
    return g if create_graph else g.array


def _independent(i: int | None, j: int) -> RuntimeError:
    """``strict``'s error: output ``i`` (None: no output) does not depend on input ``j``."""
    what = f"no output of func depends on input {j}"
    if i is not None:
        what = f"output {i} of func does not depend on input {j}"
    return RuntimeError(
        f"jacobian: {what}; strict=True forbids this (pass strict=False to get zeros)"
    )


def _assemble(parts: list[Any], out: Variable, x: Variable, axis: int, create_graph: bool) -> Any:
    """One Jacobian block of shape ``out.shape + x.shape`` from its rows (``axis=0``,
    each shaped like ``x``) or columns (``axis=-1``, each shaped like ``out``); a
    ``None`` part is zero."""
    ref = x if axis == 0 else out
    return _block(_stacked(parts, ref, create_graph, axis), out, x, axis, create_graph)


def _stacked(parts: list[Any], ref: Variable, create_graph: bool, axis: int = 0) -> Any:
    """``parts`` (each shaped like ``ref``, ``None`` for zeros) stacked on ``axis``;
    ``None`` if every one is."""
    if all(p is None for p in parts):
        return None
    parts = [_zeros_like(ref, create_graph) if p is None else p for p in parts]
    xp = namespace_of(parts[0])  # differentiable for Variables
    if len(parts) == 1:  # whose backward is a reshape, not stack's indexing
        return xp.expand_dims(parts[0], axis=axis)
    return xp.stack(parts, axis=axis)


def _block(stacked: Any, out: Variable, x: Variable, axis: int, create_graph: bool) -> Any:
    """One Jacobian block of shape ``out.shape + x.shape`` from its rows (``axis=0``)
    or columns (``axis=-1``) stacked on ``axis``. Where no pass reached the block
    (``stacked`` is None), zeros, of the dtype the rows (the input's) or columns (the
    output's) have, complex where the other one is."""
    shape = tuple(out.shape or ()) + tuple(x.shape or ())
    if stacked is None:
        ref, other = (x, out) if axis == 0 else (out, x)
        dtype = _complex_dtype(ref) if _is_complex(other) else ref.dtype
        device = ref.device if ref.array is None else device_of(ref.array)
        zeros = device.xp.zeros(shape, dtype=dtype, device=device.device)
        return Variable(zeros, requires_grad=False) if create_graph else zeros
    return namespace_of(stacked).reshape(stacked, shape)


def _zeros_beside(e: Any, zeros: Any) -> Any:
    """``zeros``, the tangent of an input beside one whose tangent is ``e``: batched as
    ``e`` is under :func:`_along_basis`'s ``vmap``, since array-api-strict's arrays
    refuse to meet a batched array in an operator (a zero tangent plus a batched
    one); the loop costs as much, a zero tangent per column."""
    if e.__class__ is not BatchedArray:
        return zeros
    xp = raw_namespace(zeros)
    data = xp.broadcast_to(xp.expand_dims(zeros, axis=0), (e.batch_size, *zeros.shape))
    return BatchedArray(data, e.level)


def _identity(ref: Variable) -> Any:
    """The standard basis vectors in ``ref``'s shape, dtype and library, stacked on a
    new axis 0: the seeds of every row (or tangents of every column) at once."""
    n, data = _size(ref), ref.array
    xp = raw_namespace(data)
    eye = xp.eye(n, dtype=ref.dtype, device=device_of(data).device)
    return xp.reshape(eye, (n, *tuple(ref.shape or ())))


def _derivative(
    out: Variable, xs: tuple[Variable, ...], strict: bool, op: str
) -> list[Variable | None]:
    """The row of jacobian for the one-element ``out`` (its gradient), recorded for a
    second pass: backward's for a real ``out``, converted for a complex one."""
    grads = _gradient(out, xs, strict, op)
    if not _is_complex(out):
        return grads
    gis: list[Variable | None] = [None] * len(xs)
    if _needs_imaginary_pass(grads, xs):
        one = raw_namespace(out.array).ones_like(out.array)
        gis = _grads([out], xs, [one * 1j], True)
    return _to_jacobian_convention(grads, gis, xs)


def _transposed_product(
    grads: list[Variable | None], xs: tuple[Variable, ...], vs: tuple[Any, ...], create_graph: bool
) -> list[Any]:
    """``H^T v`` for the Jacobian ``H`` of the complex ``grads`` of :func:`_derivative`,
    from backward passes seeded with ``conj(v)`` (and ``i conj(v)`` for real inputs)."""
    with eager_recording():
        cvs = [_conj(v) if _is_complex(v) else v for v in vs]
        gxs = _grads(grads, xs, cvs, create_graph)
        gis: list[Variable | None] = [None] * len(xs)
        if _needs_imaginary_pass(gxs, xs):
            seeds = [_times_i(c, _complex_dtype(x)) for c, x in zip(cvs, xs, strict=True)]
            gis = _grads(grads, xs, seeds, create_graph)
        return _to_jacobian_convention(gxs, gis, xs)


# --- value_and_grad ----------------------------------------------------------------
