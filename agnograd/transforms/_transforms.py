"""The parts of agnograd.functional's transforms: their inputs checked and made
leaves, the functions' outputs checked, the backward passes run and the results
assembled as torch.autograd.functional nests them (the Jacobians' own parts:
agnograd.transforms._jacobian_blocks)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any, TypeAlias, cast

from agnograd.backends._backend import Array, backend_name, dtype_name, is_array, raw_namespace
from agnograd.backends._device import device_of
from agnograd.core._config import MODE
from agnograd.core._engine import grad as _grad
from agnograd.core._function import FORWARD_MODE
from agnograd.core._variable import Variable
from agnograd.functions import identity
from agnograd.functions._namespace import namespace_of
from agnograd.transforms._symbolic import is_symbolic, recording, symbolic_leaf

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
