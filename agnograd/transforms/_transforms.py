"""The parts of agnograd.functional's transforms: their inputs checked and made
leaves, the functions' outputs checked, the backward passes run, Jacobians built by
rows or columns in one complex convention, and the results assembled as
torch.autograd.functional nests them."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, cast

from agnograd.backends._backend import Array, backend_name, dtype_name, is_array, raw_namespace
from agnograd.backends._device import device_of
from agnograd.core._config import MODE, eager_recording
from agnograd.core._engine import grad as _grad
from agnograd.core._function import FORWARD_MODE
from agnograd.core._variable import Variable
from agnograd.functions import identity
from agnograd.functions._namespace import namespace_of
from agnograd.transforms._batching import BatchedArray, level_of
from agnograd.transforms._symbolic import is_symbolic, recording, symbolic_leaf
from agnograd.transforms._vmap import vmap

#: One array or Variable, or a tuple of them (torch's "Tensor or tuple of Tensors").
Arrays: TypeAlias = Array | Variable | tuple[Array | Variable, ...]

_STRATEGIES = ("reverse-mode", "forward-mode")


# --- inputs, outputs and results ---------------------------------------------------


def _as_tuple(obj: Any, op: str, arg: str) -> tuple[bool, tuple[Any, ...]]:
    """``(was it a tuple, the tuple)``, checking that every entry is an array or Variable."""
    is_tuple = isinstance(obj, tuple)
    items = obj if is_tuple else (obj,)
    for i, item in enumerate(items):
        if isinstance(item, Variable) or is_array(item):
            continue
        where = f"{arg}[{i}]" if is_tuple else arg
        fix = "pass a tuple, not a list" if isinstance(item, list) else "convert it first"
        raise TypeError(
            f"{op}: {where} must be an array of an array API library or a Variable "
            f"(or a tuple of them), got {type(item).__name__}; {fix}"
        )
    return is_tuple, tuple(items)


def _leaf(x: Any, op: str, where: str, create_graph: bool) -> Variable:
    """A new Variable to differentiate with respect to: a fresh leaf holding ``x``'s
    data, or with ``create_graph`` a differentiable copy of a Variable that requires a
    gradient, so that the results stay connected to it. Always a new object, so
    that ``x`` captured by ``func`` from outside is not mistaken for the argument
    (as torch does, pytorch/pytorch#32576). With ``create_graph``, a fresh leaf in
    place of an argument of a running jvp carries its tangents, so that the results
    stay connected to it in forward mode (forward over reverse: a jvp of a gradient,
    a forward-mode Jacobian of a Jacobian)."""
    if isinstance(x, Variable):
        if x.array is None:  # a Variable of a graph not run (under agnograd.jit)
            return symbolic_leaf(x, op, where, create_graph)
        if create_graph and x.requires_grad:
            return cast(Variable, identity(x))  # one input gives one Variable
    leaf = Variable(_differentiable(x, op, where), requires_grad=True)
    if create_graph and isinstance(x, Variable):
        for level in forward_levels():
            t = level.tangent(x)
            if t is not None:
                level.set(leaf, t)
    return leaf


def forward_levels() -> list[Any]:
    """The levels of the jvps running (``_forward._Level``), innermost first."""
    levels = []
    level = MODE.get()[2].get(FORWARD_MODE)
    while level is not None:
        levels.append(level)
        level = level.outer
    return levels


def _differentiable(x: Any, op: str, where: str) -> Any:
    """The array of ``x`` (an array, or a Variable that has one), checked: one that
    can be differentiated, a floating dtype of no torch graph."""
    if isinstance(x, Variable):
        x = x.array
    if getattr(x, "requires_grad", False) is True:
        raise TypeError(
            f"{op}: {where} requires a gradient in torch's own autograd, whose graph "
            "agnograd cannot reach; pass tensor.detach()"
        )
    if not is_floating(x):
        raise TypeError(
            f"{op}: {where} has dtype {dtype_name(x.dtype)}; only floating-point or "
            "complex inputs can be differentiated; cast it first, e.g. "
            "xp.astype(x, xp.float64)"
        )
    return x


def is_floating(x: Any) -> bool:
    """Whether the raw array ``x`` has a real or complex floating dtype."""
    dtype = x.dtype
    known = _floating_dtype.get(x.__class__)
    # (vmap's batched arrays are one class over several libraries, whose dtypes
    # refuse to be compared with each other's: compared only with their own kind)
    if known is not None and dtype.__class__ is known.__class__ and dtype == known:
        return True
    if not raw_namespace(x).isdtype(dtype, ("real floating", "complex floating")):
        return False
    _floating_dtype[x.__class__] = dtype
    return True


# The floating dtype met last, by class of array (a library's isdtype is slow).
_floating_dtype: dict[type, Any] = {}


def _prepare(
    inputs: tuple[Any, ...], is_tuple: bool, op: str, create_graph: bool
) -> tuple[Variable, ...]:
    return tuple(
        _leaf(x, op, f"inputs[{i}]" if is_tuple else "inputs", create_graph)
        for i, x in enumerate(inputs)
    )


def _outputs(result: Any, op: str, strict: bool) -> tuple[bool, tuple[Variable, ...]]:
    """``func``'s outputs as a tuple of Variables; with ``strict``, each must depend on
    the inputs."""
    is_tuple = isinstance(result, tuple)
    outputs = result if is_tuple else (result,)
    for i, out in enumerate(outputs):
        if isinstance(out, Variable) and not strict:
            continue
        where = f"output {i} of func" if is_tuple else "the output of func"
        if is_array(out):
            raise TypeError(
                f"{op}: {where} is a {type(out).__module__.split('.')[0]} array, not a "
                "Variable: func computed outside agnograd's graph (e.g. numpy.sum on a "
                "Variable); compute with x.__array_namespace__() or agnograd.functions"
            )
        if not isinstance(out, Variable):
            raise TypeError(
                f"{op}: {where} must be a Variable (or func must return a tuple of "
                f"Variables), got {type(out).__name__}"
            )
        if strict and not out.requires_grad:
            raise RuntimeError(
                f"{op}: {where} does not depend on the inputs (it requires no gradient); "
                "strict=True forbids this: compute it from the inputs, or pass strict=False "
                "to get zeros"
            )
    return is_tuple, tuple(outputs)


def _single_output(result: Any, op: str, strict: bool) -> Variable:
    """The one Variable with one element that ``func`` of hessian/hvp/vhp returns."""
    if isinstance(result, tuple):
        raise RuntimeError(
            f"{op}: func returned a tuple of {len(result)}; it must return a single "
            "Variable with one element"
        )
    _, (out,) = _outputs(result, op, strict)
    if _size(out) != 1:
        raise RuntimeError(
            f"{op}: func returned a Variable of shape {tuple(out.shape or ())}; it must "
            "have a single element (reduce it, e.g. with xp.sum)"
        )
    return out


def _validate_v(
    v: Any,
    refs: tuple[Variable, ...],
    refs_tuple: bool,
    op: str,
    what: str,
    create_graph: bool,
    name: str = "v",
) -> tuple[Any, ...]:
    """``v`` (named ``name``) as a tuple matching ``refs`` (func's inputs or outputs,
    named ``what``: Variables, or arrays) entry by entry in library and shape: arrays,
    or Variables that keep their graph with ``create_graph``."""
    _, vs = _as_tuple(v, op, name)
    if len(vs) != len(refs):
        if refs_tuple:
            raise RuntimeError(
                f"{op}: {name} is a tuple of length {len(vs)} but there are {len(refs)} {what}; "
                f"give one entry per entry of the {what}"
            )
        raise RuntimeError(f"{op}: {name} must be a single array, like the {what[:-1]}")
    checked = []
    for i, (vi, ref) in enumerate(zip(vs, refs, strict=True)):
        ref_data = ref.array if isinstance(ref, Variable) else ref
        if _alike(vi, ref_data):
            checked.append(vi)
            continue
        if not isinstance(ref, Variable):
            ref = Variable(ref, requires_grad=False)
        where = f"{name}[{i}]" if refs_tuple else name
        data = vi.array if isinstance(vi, Variable) else vi
        # Variables of a graph not run know their device (and so their library).
        device = vi.device if data is None else device_of(data)
        ref_device = ref.device if ref.array is None else device_of(ref.array)
        if device.backend != ref_device.backend:
            lib = device.backend if data is None else _library(data)
            ref_lib = ref_device.backend if ref.array is None else _library(ref.array)
            raise TypeError(
                f"{op}: {where} is a {lib} array but the {what[:-1]} it pairs with is a "
                f"{ref_lib} array; build {name} with the same library"
            )
        if device != ref_device:
            raise ValueError(
                f"{op}: {where} is on {device} but the {what[:-1]} it pairs with is on "
                f"{ref_device}; move it there first, e.g. agnograd.functions.copy({name}, "
                f"'{ref_device}')"
            )
        shape = tuple(vi.shape if data is None else data.shape)
        if shape != tuple(ref.shape or ()):
            raise RuntimeError(
                f"{op}: {where} has shape {shape} but the {what[:-1]} it pairs "
                f"with has shape {tuple(ref.shape or ())}; give {name} that shape (no broadcasting)"
            )
        keep = isinstance(vi, Variable) and (data is None or (create_graph and vi.requires_grad))
        checked.append(vi if keep else data)
    return tuple(checked)


def _alike(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are arrays of one class, shape and native device: what
    :func:`_validate_v` checks, at once (it looks the library and device up)."""
    if a.__class__ is not b.__class__ or a.__class__ is Variable or a.shape != b.shape:
        return False
    device = getattr(a, "device", None)
    return device is not None and not callable(device) and device == getattr(b, "device", None)


def _default_v(refs: tuple[Variable, ...], op: str, what: str) -> tuple[Any, ...]:
    """Ones for ``v=None``, allowed only for a single one-element input/output."""
    if len(refs) != 1 or _size(refs[0]) != 1:
        raise RuntimeError(
            f"{op}: v can be omitted only when func has a single {what} with a single "
            f"element; pass v of the {what}'s shape"
        )
    return (_ones_like(refs[0]),)


def _ones_like(ref: Variable) -> Any:
    """The seed ones for ``ref``; None, which ``agnograd.grad`` reads as ones, for
    a Variable of a graph not run."""
    data = ref.array
    return None if data is None else raw_namespace(data).ones_like(data)


def _library(data: Any) -> str:
    return backend_name(raw_namespace(data))


def _size(x: Variable) -> int:
    return math.prod(x.shape or ())


def _grads(
    outputs: Sequence[Variable | None],
    inputs: Sequence[Variable],
    seeds: Sequence[Any],
    double: bool,
) -> list[Variable | None]:
    """``agnograd.grad`` over the outputs that depend on something (torch's
    ``_autograd_grad``); ``None`` for every input when none does."""
    pairs = [
        (y, s) for y, s in zip(outputs, seeds, strict=True) if y is not None and y.requires_grad
    ]
    if not pairs:
        return [None] * len(inputs)
    symbolic = is_symbolic(y for y, _ in pairs)
    with recording(symbolic) if double or symbolic else contextlib.nullcontext():
        return _grad(
            [y for y, _ in pairs],
            list(inputs),
            [s for _, s in pairs],
            enable_double_backprop=double,
        )


def _zeros_like(ref: Variable, create_graph: bool) -> Any:
    data = ref.array
    if data is None:  # a Variable of a graph not run: zeros in that graph
        return namespace_of(ref).zeros_like(ref)
    zeros = raw_namespace(data).zeros_like(data)
    return Variable(zeros, requires_grad=False) if create_graph else zeros


def _fill_in_zeros(
    grads: Sequence[Variable | None],
    refs: Sequence[Variable],
    strict: bool,
    create_graph: bool,
    op: str,
    problem: str,
) -> tuple[Any, ...]:
    """Zeros for the gradients that never arrived; with ``strict``, an error saying
    ``problem`` (formatted with the index) instead. The rest as arrays, or as
    Variables with ``create_graph``."""
    result = []
    for i, (g, ref) in enumerate(zip(grads, refs, strict=True)):
        if g is None:
            if strict:
                raise RuntimeError(
                    f"{op}: {problem.format(i=i)}; strict=True forbids this (pass "
                    "strict=False to get zeros)"
                )
            result.append(_zeros_like(ref, create_graph))
            continue
        if strict and create_graph and not g.requires_grad:
            raise RuntimeError(
                f"{op}: the result for entry {i} does not depend on the inputs, so it "
                "cannot be differentiated further; strict=True with create_graph=True "
                "forbids this"
            )
        result.append(g if create_graph else g.array)
    return tuple(result)


def _finish(values: Sequence[Variable], create_graph: bool) -> tuple[Any, ...]:
    """Detach: arrays, unless ``create_graph`` asks for Variables."""
    return tuple(values) if create_graph else tuple(x.array for x in values)


def _unpack(res: Any, to_unpack: bool | tuple[bool, bool]) -> Any:
    """Undo the tupling of single inputs/outputs, as torch's ``_tuple_postprocess``."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _transpose(
    outputs: tuple[Variable, ...], xs: tuple[Variable, ...], strict: bool, op: str
) -> tuple[tuple[Variable, ...], list[Variable | None]]:
    """The first half of the double-backward trick: seeds ``u`` (zeros, so nothing
    overflows: the backward is linear in them) and ``J^T u`` with its graph."""
    us = tuple(_seed_variable(y) for y in outputs)
    gxs = _grads(outputs, xs, us, True)
    if strict:
        for i, g in enumerate(gxs):
            if g is None:
                raise RuntimeError(
                    f"{op}: the outputs do not depend on input {i}; strict=True forbids "
                    "this (pass strict=False to get zeros)"
                )
    return us, gxs


def _seed_variable(y: Variable) -> Variable:
    data = y.array
    if data is None:  # a Variable of a graph not run: its shape, dtype and device
        device = y.device
        data = device.xp.zeros(y.shape, dtype=y.dtype, device=device.device)
        return Variable(data, requires_grad=True)
    return Variable(raw_namespace(data).zeros_like(data), requires_grad=True)


def _hessian_v(
    v: Any, xs: tuple[Variable, ...], is_tuple: bool, op: str, create_graph: bool
) -> tuple[Any, ...]:
    if v is None:
        return _default_v(xs, op, "input")
    return _validate_v(v, xs, is_tuple, op, "inputs", create_graph)


def _gradient(
    out: Variable, xs: tuple[Variable, ...], strict: bool, op: str
) -> list[Variable | None]:
    """The gradient of the one-element ``out``, recorded for a second pass."""
    jac = _grads([out], xs, [_ones_like(out)], True)
    if strict:
        for i, g in enumerate(jac):
            if g is None or not g.requires_grad:
                raise RuntimeError(
                    f"{op}: the gradient with respect to input {i} does not depend on the "
                    "inputs (func is linear in it, or ignores it); strict=True forbids this "
                    "(pass strict=False to get zeros)"
                )
    return jac


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
