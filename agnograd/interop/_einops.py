"""einops' main API on Variables: ``einops.rearrange(x, "a b -> b a")`` and its kin.

einops picks a backend by the type of its tensor, among the subclasses of
``einops._backends.AbstractBackend`` whose ``framework_name`` is an imported module.
agnograd's backend computes with the Variable's differentiable namespace, so the
results are Variables of the input's library, connected to its graph.

The backend class can only be defined once einops is imported, and agnograd never
imports einops. :func:`install`, run when :mod:`agnograd.interop` is imported,
defines it at once if einops is loaded, and otherwise puts a finder on
``sys.meta_path`` that defines it right after ``einops._backends`` has run, before
einops can meet a Variable, whichever of the two is imported first. Should a
finder put ahead of it later load ``einops._backends`` itself, the backend is
defined at the next import that reaches this finder (einops makes several).
"""

from __future__ import annotations

import importlib.abc
import math
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from agnograd.backends._device import get_device, transfer
from agnograd.core._variable import Variable
from agnograd.functions._namespace import namespace

_BACKENDS = "einops._backends"  # the module that defines AbstractBackend
# einops finds subclasses through weak references: these keep them alive.
_defined: list[type] = []


class VariableBackend:
    """einops' backend for Variables, mixed with einops' ``AbstractBackend``.

    Examples
    --------
    >>> import numpy as np, einops, agnograd
    >>> x = agnograd.Variable(np.arange(6.0).reshape(2, 3))
    >>> y = einops.rearrange(x, "a b -> b a")
    >>> y.shape, type(y).__name__
    ((3, 2), 'Variable')
    >>> einops.reduce(x, "a b -> a", "sum").backward()
    >>> x.grad
    array([[1., 1., 1.],
           [1., 1., 1.]])
    """

    framework_name = "agnograd"  # einops loads the backend while this module is imported

    def is_appropriate_type(self, tensor: Any) -> bool:
        return isinstance(tensor, Variable)

    def from_numpy(self, x: Any) -> Variable:
        return Variable(x)

    def to_numpy(self, x: Any) -> Any:
        # A raw array too: einops' tests read x.grad, which is one, through the backend.
        import numpy as np

        data = x.array if isinstance(x, Variable) else x
        return np.asarray(transfer(data, get_device("@numpy")))

    def arange(self, start: int, stop: int) -> Variable:
        import numpy as np

        return Variable(np.arange(start, stop))

    def shape(self, x: Variable) -> tuple[int, ...]:
        if x.shape is None:
            raise ValueError("einops: the Variable has no shape (it holds no data)")
        return tuple(x.shape)

    def reshape(self, x: Variable, shape: Sequence[int]) -> Variable:
        return namespace(x).reshape(x, tuple(shape))

    def transpose(self, x: Variable, axes: Sequence[int]) -> Variable:
        return namespace(x).permute_dims(x, tuple(axes))

    def reduce(self, x: Variable, operation: str, axes: Sequence[int]) -> Variable:
        # einops' reductions are the standard's: min, max, sum, mean, prod, any, all
        return getattr(namespace(x), operation)(x, axis=tuple(axes))

    def stack_on_zeroth_dimension(self, tensors: Sequence[Any]) -> Variable:
        return namespace(*tensors).stack(list(tensors), axis=0)

    def add_axis(self, x: Variable, new_position: int) -> Variable:
        return namespace(x).expand_dims(x, axis=new_position)

    def tile(self, x: Variable, repeats: Sequence[int]) -> Variable:
        return namespace(x).tile(x, tuple(repeats))

    def concat(self, tensors: Sequence[Any], axis: int) -> Variable:
        return namespace(*tensors).concat(list(tensors), axis=axis)

    def is_float_type(self, x: Variable) -> bool:
        xp = namespace(x)
        return bool(xp.isdtype(x.dtype, ("real floating", "complex floating")))

    def einsum(self, pattern: str, *x: Any) -> Variable:
        return einsum(pattern, *x)


# --- einsum, from the standard's matmul ----------------------------------------------


def einsum(pattern: str, *operands: Any) -> Variable:
    """``numpy.einsum(pattern, *operands)`` for the patterns einops passes (one
    letter per axis, ``...``, an explicit ``->``), from the differentiable
    namespace: pairs of operands contract by ``matmul``, so the gradient (and its
    own) come from the rules of ``reshape``, ``permute_dims``, ``matmul``,
    ``sum`` and ``take`` (for a letter repeated in one operand: a diagonal).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> from agnograd.interop._einops import einsum
    >>> a = agnograd.Variable(np.arange(6.0).reshape(2, 3))
    >>> einsum("ij,kj->ik", a, a)
    variable([[ 5., 14.],
              [14., 50.]])
    >>> einsum("ii->", np.eye(2) * 3.0 + a[:, :2])
    variable(10.)
    """
    xp = namespace(*operands)
    lhs, arrow, rhs = pattern.partition("->")
    specs = lhs.split(",")
    if not arrow or len(specs) != len(operands):
        raise ValueError(
            f"einsum: the pattern {pattern!r} must name the axes of each of the "
            f"{len(operands)} operands, separated by commas, then '->' and the output's"
        )
    ranks = [len(x.shape) for x in operands]
    n_ellipsis = max(
        (r - len(s.replace("...", "")) for s, r in zip(specs, ranks, strict=True) if "..." in s),
        default=0,
    )
    labels = [_labels(s, r, n_ellipsis, pattern) for s, r in zip(specs, ranks, strict=True)]
    out = _labels(rhs, None, n_ellipsis, pattern)
    sizes = _sizes(labels, operands, pattern)
    if any(a.startswith(".") and a not in out for ls in labels for a in ls):
        raise ValueError(
            f"einsum: {pattern!r} gives its operands more axes than letters, but no '...' "
            "in the output to keep them"
        )
    terms = []
    for x, ls in zip(operands, labels, strict=True):
        shape = tuple(sizes[a] for a in ls)
        if tuple(x.shape) != shape:
            x = xp.broadcast_to(x, shape)
        terms.append(_diagonals(xp, x, ls))
    acc, acc_labels = terms[0]
    for i, (x, ls) in enumerate(terms[1:], start=1):
        later = {a for _, lbs in terms[i + 1 :] for a in lbs} | set(out)
        acc, acc_labels = _contract(xp, acc, acc_labels, x, ls, later)
    acc, acc_labels = _sum_out(xp, acc, acc_labels, lambda a: a not in out)
    if missing := [a for a in out if a not in acc_labels]:
        raise ValueError(f"einsum: {pattern!r} has output axes {missing} that no operand has")
    order = tuple(acc_labels.index(a) for a in out)
    if order != tuple(range(len(order))):
        acc = xp.permute_dims(acc, order)
    return acc


def _labels(spec: str, rank: int | None, n_ellipsis: int, pattern: str) -> list[str]:
    """One label per axis: the letters, and ``.0``, ``.1``, ... for the axes of
    ``...``, right-aligned as in broadcasting; ``rank=None`` for the output."""
    spec = spec.strip()
    if "..." not in spec:
        names = list(spec)
    else:
        before, _, after = spec.partition("...")
        n = n_ellipsis if rank is None else rank - len(before) - len(after)
        names = [*before, *(f".{k}" for k in range(n_ellipsis - n, n_ellipsis)), *after]
    if rank is not None and len(names) != rank:
        raise ValueError(
            f"einsum: {pattern!r} names {len(names)} axes for an operand with {rank} axes"
        )
    return names


def _sizes(labels: list[list[str]], operands: Sequence[Any], pattern: str) -> dict[str, int]:
    """Each label's length; a length 1 broadcasts."""
    sizes: dict[str, int] = {}
    for ls, x in zip(labels, operands, strict=True):
        for a, n in zip(ls, x.shape, strict=True):
            if sizes.get(a, 1) == 1:
                sizes[a] = n
            elif n not in (1, sizes[a]):
                name = "..." if a.startswith(".") else a
                raise ValueError(
                    f"einsum: axis {name!r} of {pattern!r} has lengths {sizes[a]} and {n}"
                )
    return sizes


def _diagonals(xp: Any, x: Any, labels: list[str]) -> tuple[Any, list[str]]:
    """``x`` with one axis per label: the diagonal where a label repeats."""
    while len(set(labels)) < len(labels):
        p = next(i for i, a in enumerate(labels) if labels.count(a) > 1)
        q = labels.index(labels[p], p + 1)
        rest = [i for i in range(len(labels)) if i not in (p, q)]
        n = x.shape[p]
        x = xp.permute_dims(x, (*rest, p, q))
        x = xp.reshape(x, (*x.shape[:-2], n * n))
        x = xp.take(x, xp.arange(0, n * n, n + 1, device=x.device), axis=-1)
        labels = [*(labels[i] for i in rest), labels[p]]
    return x, labels


def _sum_out(
    xp: Any, x: Any, labels: list[str], drop: Callable[[str], bool]
) -> tuple[Any, list[str]]:
    axes = tuple(i for i, a in enumerate(labels) if drop(a))
    if not axes:
        return x, labels
    return xp.sum(x, axis=axes), [a for a in labels if not drop(a)]


def _contract(
    xp: Any, a: Any, la: list[str], b: Any, lb: list[str], later: set[str]
) -> tuple[Any, list[str]]:
    """``a`` times ``b``, summed over the labels that no later operand nor the output
    has, by one batched ``matmul`` (shared labels kept for later are its batch)."""
    a, la = _sum_out(xp, a, la, lambda s: s not in lb and s not in later)
    b, lb = _sum_out(xp, b, lb, lambda s: s not in la and s not in later)
    size = dict(zip(la, a.shape, strict=True)) | dict(zip(lb, b.shape, strict=True))
    batch = [s for s in la if s in lb and s in later]
    summed = [s for s in la if s in lb and s not in later]
    a_only = [s for s in la if s not in lb]
    b_only = [s for s in lb if s not in la]
    batch_shape = tuple(size[s] for s in batch)
    m, k, n = (math.prod(size[s] for s in part) for part in (a_only, summed, b_only))
    a = xp.reshape(_permuted(xp, a, la, batch + a_only + summed), (*batch_shape, m, k))
    b = xp.reshape(_permuted(xp, b, lb, batch + summed + b_only), (*batch_shape, k, n))
    shape = (*batch_shape, *(size[s] for s in a_only), *(size[s] for s in b_only))
    return xp.reshape(xp.matmul(a, b), shape), batch + a_only + b_only


def _permuted(xp: Any, x: Any, labels: list[str], order: list[str]) -> Any:
    axes = tuple(labels.index(s) for s in order)
    return x if axes == tuple(range(len(axes))) else xp.permute_dims(x, axes)


# --- defining the backend when einops is imported ----------------------------------


def define(backends: ModuleType) -> type:
    """The backend class for ``einops._backends`` (the module ``backends``), defined
    once per version of that module."""
    base = backends.AbstractBackend
    for cls in _defined:
        if issubclass(cls, base):
            return cls
    cls = type("AgnogradBackend", (VariableBackend, base), {"__module__": __name__})
    _defined.append(cls)
    return cls


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: hands ``einops._backends`` to the finder that does, with
    its loader wrapped so that the backend is defined as soon as the module has run."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != _BACKENDS:
            # A finder ahead of this one may have loaded einops._backends itself:
            # einops imports more of its modules right after, which may land here.
            if _BACKENDS in sys.modules:
                install()
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


class _Loader(importlib.abc.Loader):
    """einops' own loader, which then defines the backend (on a reload too)."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        define(module)
        _remove_finders()

    def __getattr__(self, name: str) -> Any:
        # get_source, get_resource_reader, is_package, ...: the wrapped loader's
        return getattr(self._loader, name)


def install() -> None:
    """Define the backend now if einops is loaded, or as soon as it is."""
    backends = sys.modules.get(_BACKENDS)
    if backends is not None and hasattr(backends, "AbstractBackend"):
        define(backends)
        _remove_finders()
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _remove_finders() -> None:
    """Done: imports no longer pass through the finder."""
    for finder in [f for f in sys.meta_path if isinstance(f, _Finder)]:
        sys.meta_path.remove(finder)
