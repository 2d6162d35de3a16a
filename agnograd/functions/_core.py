"""Helpers shared by the rule modules: defining nodes compactly, raw views of inputs."""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable
from typing import Any

from agnograd import _versions
from agnograd._function import FunctionNode
from agnograd._namespace import namespace_of
from agnograd._variable import Variable
from agnograd.functions._standard import signature

Rule = Callable[[Any, Any, Any, Any], Any]

_ONLY = inspect.Parameter.POSITIONAL_ONLY
_EITHER = inspect.Parameter.POSITIONAL_OR_KEYWORD
_KW = inspect.Parameter.KEYWORD_ONLY
_VAR = inspect.Parameter.VAR_POSITIONAL


def raw(x: Any) -> Any:
    """The raw array behind a Variable (or ``x`` itself)."""
    return x._data if isinstance(x, Variable) else x


def shape_of(x: Any) -> tuple[int, ...]:
    """Shape of a Variable (known even before define-then-run computes it) or array."""
    # A node's shape is None only for an uninitialised Variable, which no function takes.
    return x._node.shape if isinstance(x, Variable) else tuple(x.shape)  # type: ignore[return-value]


def constant(x: Any) -> Variable:
    """Wrap a raw result as a Variable that requires no gradient."""
    return Variable._new(x, False)


def others_product(x: Any, axes: tuple[int, ...]) -> Any:
    """For each element, the product of the other elements of its reduction.

    The reduced axes are moved last and flattened; the product of the others is the
    exclusive cumulative product from the left times the one from the right, so
    there is no division and zeros need no special case. Used by the gradients of
    ``prod`` and of ``linalg.det`` (the adjugate from singular values).

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.functions._core import others_product
    >>> others_product(np.array([2.0, 0.0, 5.0]), (0,))
    array([ 0., 10.,  0.])
    """
    xp = namespace_of(x)
    shape = tuple(x.shape)
    if not axes:
        return xp.ones_like(x)
    keep = tuple(i for i in range(len(shape)) if i not in axes)
    order = keep + axes
    moved = x if order == tuple(range(len(shape))) else xp.permute_dims(x, order)
    flat = xp.reshape(moved, (*(shape[i] for i in keep), math.prod(shape[a] for a in axes)))
    left = xp.cumulative_prod(flat, axis=-1, include_initial=True)[..., :-1]
    flipped = xp.flip(flat, axis=-1)
    right = xp.cumulative_prod(flipped, axis=-1, include_initial=True)[..., :-1]
    others = xp.reshape(left * xp.flip(right, axis=-1), tuple(shape[i] for i in order))
    if order == tuple(range(len(shape))):
        return others
    inverse = tuple(sorted(range(len(order)), key=order.__getitem__))
    return xp.permute_dims(others, inverse)


class Unary(FunctionNode):
    """An elementwise function of one array whose rule is ``rule(xp, x, y, gy)``.

    The rule reads the input ``x`` and/or the output ``y``; what it does not read is
    passed as ``None`` and never kept alive by the graph. A subclass names the
    standard function ``fn`` (or gives ``compute(xp, x)``), ``rule``, and what to
    keep (``_retain_in``/``_retain_out``).
    """

    fn: str
    rule: Rule
    compute: Callable[[Any, Any], Any] | None = None

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        compute = self.compute
        if compute is None:
            return (getattr(self.xp, self.fn)(inputs[0]),)
        return (compute(self.xp, inputs[0]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        gy = grad_outputs[0]
        x = y = None
        if self._variables_in_backward or _versions.versions or self._saved_versions is not None:
            # Double backprop, arrays written in place or versions recorded (PyTorch):
            # the accessors deal with all of them.
            xp = namespace_of(gy)
            if self._retain_in:
                (x,) = self.get_retained_inputs()
            if self._retain_out:
                (y,) = self.get_retained_outputs()
        else:  # the raw arrays saved by the forward, and its namespace
            xp = self.xp
            if self._retain_in:
                (x,) = self._saved_inputs or self.get_retained_inputs()  # freed: it raises
            if self._retain_out:
                (y,) = self._saved_outputs or self.get_retained_outputs()
        return (self.rule(xp, x, y, gy),)


def unary(
    fn: str,
    saves: str,
    rule: Rule,
    doc: str,
    compute: Callable[[Any, Any], Any] | None = None,
) -> Callable[[Any], Variable]:
    """Define the node class of ``fn`` and return the function that applies it.

    ``compute(xp, x)`` gives the forward for functions outside the standard;
    standard functions are looked up by name in the input's namespace.
    """
    cls_name = "".join(part.capitalize() for part in fn.split("_"))
    attrs = {
        "fn": fn,
        "rule": staticmethod(rule),
        "_retain_in": (0,) if "x" in saves else (),
        "_retain_out": (0,) if "y" in saves else (),
    }
    if compute is not None:
        attrs["compute"] = staticmethod(compute)
    node = type(cls_name, (Unary,), attrs)

    def apply(x: Any, /) -> Variable:
        return node().apply((x,))[0]

    apply.__name__ = apply.__qualname__ = fn
    apply.__doc__ = doc
    apply.node = node  # type: ignore[attr-defined]
    return apply


class NonDifferentiable(FunctionNode):
    """A function without a gradient; its outputs never require one.

    It is still a node, so define-then-run can defer it like any other function.
    ``template`` holds the positional arguments, with ``ARRAY`` where an input goes.
    """

    differentiable = False

    def __init__(
        self, compute: Callable[..., Any], template: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self.compute = compute
        self.template = template
        self.kwargs = kwargs

    @property
    def label(self) -> str:
        return getattr(self.compute, "__name__", "NonDifferentiable")

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        it = iter(inputs)
        args = [next(it) if a is ARRAY else a for a in self.template]
        return (self.compute(self.xp, *args, **self.kwargs),)


ARRAY = object()


def apply_nondifferentiable(
    compute: Callable[..., Any], args: Any, kwargs: dict[str, Any]
) -> Variable:
    """Apply ``compute(xp, *args, **kwargs)`` as a node; Python scalars stay in place."""
    template = tuple(ARRAY if not _is_scalar(a) and a is not None else a for a in args)
    arrays = tuple(a for a in args if not _is_scalar(a) and a is not None)
    return NonDifferentiable(compute, template, native_kwargs(kwargs)).apply(arrays)[0]


def native_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for a backend function: arrays of Variables, and the library's
    own device object for an agnograd :class:`~agnograd.Device`."""
    from agnograd._device import native_device

    return {k: native_device(raw(v)) for k, v in kwargs.items()}


def nondifferentiable(fn: str, doc: str) -> Callable[..., Variable]:
    """The standard function ``fn`` as a node whose result carries no gradient."""

    def compute(xp: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(xp, fn)(*args, **kwargs)

    compute.__name__ = fn
    return forwarding(
        fn, lambda *args, **kwargs: apply_nondifferentiable(compute, args, kwargs), doc
    )


def forwarding(name: str, call: Callable[..., Any], doc: str) -> Callable[..., Any]:
    """``call`` as the standard's function ``name``: it has the standard's signature,
    and a call that does not fit it is a ``TypeError`` before the backend sees it.

    Examples
    --------
    >>> from agnograd.functions._core import forwarding
    >>> argmax = forwarding("argmax", lambda *args, **kwargs: (args, kwargs), "")
    >>> argmax(1, axis=0)
    ((1,), {'axis': 0})
    >>> argmax(1, 0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    TypeError: argmax: too many positional arguments (signature (x, /, *, axis=None, ...))
    """
    sig = signature(name)
    # Worked out once, so that a call is checked with a few comparisons rather than
    # Signature.bind (microseconds); a call that does not fit is bound, for the exact
    # complaint.
    params = list(sig.parameters.values())
    names = tuple(p.name for p in params if p.kind in (_ONLY, _EITHER))
    positional = sys.maxsize if any(p.kind is _VAR for p in params) else len(names)
    keywords = frozenset(p.name for p in params if p.kind in (_EITHER, _KW))
    # (position, name) of each required parameter; keyword-only ones have no position.
    required = [
        (names.index(p.name) if p.name in names else sys.maxsize, p.name)
        for p in params
        if p.default is p.empty and p.kind is not _VAR
    ]

    def fits(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        n = len(args)
        if n > positional or not keywords.issuperset(kwargs):
            return False
        if kwargs and not kwargs.keys().isdisjoint(names[:n]):
            return False  # given twice
        return all(n > position or pname in kwargs for position, pname in required)

    def apply(*args: Any, **kwargs: Any) -> Any:
        if not fits(args, kwargs):
            try:
                sig.bind(*args, **kwargs)
            except TypeError as error:
                raise TypeError(f"{name}: {error} (signature {sig})") from None
        return call(*args, **kwargs)

    apply.__name__ = apply.__qualname__ = name
    apply.__doc__ = doc
    apply.__signature__ = sig  # type: ignore[attr-defined]
    return apply


class Bound:
    """A table entry made per backend: ``factory(raw_namespace)`` gives the function.

    Used by functions with no array argument to tell the backend (``zeros``).
    """

    def __init__(self, factory: Callable[[Any], Any]) -> None:
        self.factory = factory


def _is_scalar(a: Any) -> bool:
    return type(a) in (bool, int, float, complex)
