"""Helpers shared by the rule modules: the nodes of elementwise functions, the
conjugation of complex rules, forwarding to the backend, raw views of inputs."""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable
from typing import Any

import array_api_compat

from agnograd.backends._backend import SCALARS, raw_namespace
from agnograd.core import _versions
from agnograd.core._config import takes_variables
from agnograd.core._fast import apply1, apply2, specialise1
from agnograd.core._function import FunctionNode
from agnograd.core._function import symbolic as _symbolic
from agnograd.core._link import kept_inputs, render
from agnograd.core._variable import Variable
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rule_source import written_in
from agnograd.functions._standard import parse_signature, signature

#: The rule of a unary function: ``rule(xp, x, y, gy) -> gx``.
Rule = Callable[[Any, Any, Any, Any], Any]
#: The rule of one operand of a binary function: ``rule(xp, x1, x2, y, gy) -> gx``.
BinaryRule = Callable[[Any, Any, Any, Any, Any], Any]
#: What a node's ``infer`` gives for each output: its shape and dtype.
Spec = tuple[tuple[int, ...], Any]

#: Marks where an input goes among the arguments a node keeps (the others are
#: Python scalars, or None).
ARRAY = object()

_ONLY = inspect.Parameter.POSITIONAL_ONLY
_EITHER = inspect.Parameter.POSITIONAL_OR_KEYWORD
_KW = inspect.Parameter.KEYWORD_ONLY
_VAR = inspect.Parameter.VAR_POSITIONAL


def raw(x: Any) -> Any:
    """The raw array behind a Variable (or ``x`` itself)."""
    return x._data if isinstance(x, Variable) else x


def held(x: Any) -> Any:
    """What a rule reads of the retained Variable ``x`` as a constant (a mask, the
    positions of an extremum, indices): its raw array, or -- while ``agnograd.grad``
    builds the gradient graph of a define-then-run graph not run yet -- ``x`` itself,
    which that graph reads when it runs (the array ``x`` holds now, if any, may be
    replaced before then). A raw array is returned as it is.
    """
    if isinstance(x, Variable) and not _symbolic.get():
        return x._data
    return x


def raw_xp_device(x: Any) -> tuple[Any, Any]:
    """The raw namespace and the library's own device of ``x``'s array, to build
    constants beside it; for a Variable of a define-then-run graph not computed yet,
    those its data will have."""
    if isinstance(x, Variable):
        data = x._data
        if data is None:
            device = x.device
            return x.xp, getattr(device, "native", device)
        x = data
    return raw_namespace(x), array_api_compat.device(x)


def shape_of(x: Any) -> tuple[int, ...]:
    """Shape of a Variable (known even before define-then-run computes it) or array."""
    if not isinstance(x, Variable):
        return tuple(x.shape)
    shape = x._node.shape
    if shape is None:  # an uninitialised Variable (a Parameter), which no function takes
        raise RuntimeError(f"an input of the operation has no shape; {x._missing()}")
    return shape


def input_shape(func: FunctionNode, i: int = 0) -> tuple[int, ...]:
    """Shape of the input ``i`` of ``func`` (known once the graph is linked), from its
    node: what a rule derives shapes and axes from, never from what ``forward`` saw
    (a gradient graph may be built before any forward ran, see ``agnograd.grad``)."""
    inputs = func.inputs
    assert inputs is not None, f"{func.label}: the graph was unchained"
    shape = inputs[i].shape
    assert shape is not None, f"{func.label}: input {i} has no shape yet"
    return tuple(shape)


def input_dtype(func: FunctionNode, i: int = 0) -> Any:
    """Dtype of the input ``i`` of ``func``, from its node (see :func:`input_shape`)."""
    inputs = func.inputs
    assert inputs is not None, f"{func.label}: the graph was unchained"
    return inputs[i].dtype


def constant(x: Any) -> Variable:
    """Wrap a raw result as a Variable that requires no gradient."""
    return Variable._new(x, False)


def normalize_axes(axis: int | tuple[int, ...] | None, ndim: int, op: str) -> tuple[int, ...]:
    """Non-negative, sorted axes; ``None`` means all of them, and a 0-d array takes
    axis 0 (as PyTorch's reductions do).

    Examples
    --------
    >>> from agnograd.functions._core import normalize_axes
    >>> normalize_axes((-1, 0), 3, "sum")
    (0, 2)
    >>> normalize_axes(3, 3, "sum")
    Traceback (most recent call last):
    ValueError: sum: axis 3 is out of range for an array of 3 dimensions
    """
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    result = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise ValueError(f"{op}: axis {a} is out of range for an array of {ndim} dimensions")
        result.append(a % ndim if ndim else 0)
    if len(set(result)) != len(result):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(sorted(result))


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


# -- complex rules ---------------------------------------------------------------------

# id(dtype) -> (dtype, is it complex): rules ask on every call. Keyed by identity,
# which needs no hashing (NumPy hashes a dtype anew each time) and never compares
# dtypes of two libraries (array_api_strict warns when compared with NumPy's).
_complex_dtypes: dict[int, tuple[Any, bool]] = {}
# The real dtype found last, compared first (one comparison where a backward pass
# asks of one dtype again and again).
_last_real: Any = None


def is_complex(a: Any) -> bool:
    """Whether the array or Variable ``a`` has a complex dtype."""
    global _last_real
    dtype = a.dtype
    if dtype is _last_real:
        return False
    known = _complex_dtypes.get(id(dtype))
    if known is not None and known[0] is dtype:
        result = known[1]
    else:
        result = bool(namespace_of(a).isdtype(dtype, "complex floating"))
        if len(_complex_dtypes) > 1024:  # dtype objects made per array: keep it bounded
            _complex_dtypes.clear()
        _complex_dtypes[id(dtype)] = (dtype, result)
    if not result:
        _last_real = dtype
    return result


def real_dtype(xp: Any, dtype: Any) -> Any:
    """The real dtype of the same precision as ``dtype`` (``dtype`` itself if real)."""
    if xp.isdtype(dtype, "complex floating"):
        return xp.float32 if dtype == xp.complex64 else xp.float64
    return dtype


def conjugate(xp: Any, a: Any) -> Any:
    """``conj(a)`` for complex arrays, ``a`` itself for real ones; a Python scalar's
    ``conjugate()``.

    Complex rules follow PyTorch's conjugate Wirtinger convention: the rule of a
    holomorphic ``f`` multiplies the upstream gradient by ``conj(f'(z))``. For real
    dtypes the conjugation is skipped, so real backprop pays nothing for it.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.functions._core import conjugate
    >>> conjugate(np, np.array([1 + 2j])), conjugate(np, np.array([1.0])), conjugate(np, 2j)
    (array([1.-2.j]), array([1.]), -2j)
    """
    # Every rule calls this: is_complex's last real dtype is compared here without a call.
    try:
        dtype = a.dtype
    except AttributeError:  # a Python scalar
        return a.conjugate()
    if dtype is _last_real:
        return a
    return xp.conj(a) if is_complex(a) else a


# -- elementwise nodes -------------------------------------------------------------------


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
    _gradients_fit = True  # elementwise, of one array
    _row_backward: Callable[..., tuple[Any, ...]]  # the backward its declaration made

    def _forward1(self, xp: Any, x: Any) -> Any:
        compute = self.compute
        if compute is None:
            return getattr(xp, self.fn)(x)
        return compute(xp, x)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self._forward1(self.xp, inputs[0]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # Through the accessors, which deal with double backprop, arrays written in
        # place and recorded versions (PyTorch). A row's class has a backward of its
        # own (see _UNARY_BACKWARD) that comes here for those alone.
        gy = grad_outputs[0]
        xp = namespace_of(gy) if takes_variables(self) else self.xp
        x = self.get_retained_inputs()[0] if self._retain_in else None
        y = self.get_retained_outputs()[0] if self._retain_out else None
        return (self.rule(xp, x, y, gy),)


# Unary's backward is its subclasses' where they have none of their own.
Unary._row_backward = Unary.backward

# The backward of a row's class: its rule, called with the raw arrays that the forward
# kept and its namespace, where nothing needs the accessors (see Unary.backward); a
# kept array that was freed goes through them, which raise, and so does one that may
# have been written in place since: the node recorded a version that was not 0, the
# library's count of writes (PyTorch's) is not 0 now, or, on a library without one,
# agnograd's write clock moved since the node linked. ``{x}`` and ``{y}`` read what
# the rule reads, ``{moved}`` whether a count is not 0.
_UNARY_BACKWARD = """\
def backward(self, indexes, grad_outputs):
    if self._variables_in_backward or self._saved_versions is not None:
        return Unary.backward(self, indexes, grad_outputs)
    x = {x}
    y = {y}
    count = _counted.get(self.xp)
    if count is None:
        now = _clock[0]
        if now and now != self._saved_at:
            return Unary.backward(self, indexes, grad_outputs)
    elif {moved}:
        return Unary.backward(self, indexes, grad_outputs)
    return (rule(self.xp, x, y, grad_outputs[0]),)
"""
_KEPT = "(self._saved_{0}puts or self.get_retained_{0}puts())[0]"


def unary(
    fn: str,
    saves: str,
    rule: Rule,
    doc: str,
    compute: Callable[[Any, Any], Any] | None = None,
    *,
    module: str | None = None,
) -> Callable[[Any], Variable]:
    """Define the node class of ``fn`` and return the function that applies it.

    ``compute(xp, x)`` gives the forward for functions outside the standard;
    standard functions are looked up by name in the input's namespace. The node
    class and the function report ``module`` (by default the caller's, as
    ``collections.namedtuple`` does). Chapter modules declare rows instead
    (:meth:`agnograd.functions._rows.Rows.unary`), which call this.
    """
    if module is None:
        module = sys._getframe(1).f_globals.get("__name__", __name__)
    cls_name = "".join(part.capitalize() for part in fn.split("_"))
    attrs = {
        "__module__": module,
        "__qualname__": cls_name,
        "fn": fn,
        "rule": staticmethod(rule),
        "_retain_in": (0,) if "x" in saves else (),
        "_retain_out": (0,) if "y" in saves else (),
    }
    if compute is not None:
        attrs["compute"] = staticmethod(compute)
    backward = _UNARY_BACKWARD.format(
        x=_KEPT.format("in") if "x" in saves else "None",
        y=_KEPT.format("out") if "y" in saves else "None",
        moved=" or ".join(f"count({k}) != 0" for k in "xy" if k in saves) or "False",
    )
    names = {
        "Unary": Unary,
        "_clock": _versions.clock,
        "_counted": _versions.counted,
        "rule": rule,
    }
    # The class's own backward, which compiled plans write in for it (_row_backward).
    attrs["backward"] = attrs["_row_backward"] = render(backward, names)
    node = type(cls_name, (Unary,), attrs)
    # The function, with the forward written in (agnograd.core._fast).
    # Forward mode's tangent of a real input: the rule with the tangent for the gradient.
    tangent = written_in("Node.rule", rule, "_rule", "xp, data, y, t")
    if compute is None:
        apply = specialise1(fn, node, f"xp.{fn}(data)", tangent, _rule=rule)
    else:
        apply = specialise1(fn, node, "compute(xp, data)", tangent, compute=compute, _rule=rule)
    apply.__name__ = apply.__qualname__ = fn
    apply.__module__ = module
    apply.__doc__ = doc
    apply.node = node
    return apply


class Binary(FunctionNode):
    """``fn(x1, x2)`` elementwise; a Python-scalar operand is kept in the node.

    ``rules[k](xp, x1, x2, y, gy)`` gives the gradient of operand ``k`` (asked only
    of array operands; a rule of None gives none). ``y`` is None unless the class
    sets ``saves_y``, and the array operands are None unless it sets ``saves_x``.
    """

    broadcasts = True
    fn: str
    rules: tuple[BinaryRule | None, BinaryRule | None]
    saves_x = True
    saves_y = False
    # Where the rules read different operands (the row says what each reads): for the
    # operands that are arrays (``which``), the ``_gradient_reads`` of their nodes.
    _reads_by_which: dict[tuple[int, ...], tuple[tuple[int, ...], ...]] | None = None

    def __init__(self, s1: Any, s2: Any) -> None:
        self.operands = (s1, s2)  # ARRAY where an input goes, else the scalar itself
        self.which = which = tuple(k for k, s in enumerate(self.operands) if s is ARRAY)
        if self.saves_x:
            self._retain_in = tuple(range(len(which)))
            reads = self._reads_by_which
            if reads is not None:
                self._gradient_reads = reads[which]
        if self.saves_y:
            self._retain_out = (0,)

    def _fill(self, arrays: tuple[Any, ...]) -> list[Any]:
        it = iter(arrays)
        return [next(it) if s is ARRAY else s for s in self.operands]

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (getattr(self.xp, self.fn)(*self._fill(inputs)),)

    def _forward1(self, xp: Any, x: Any) -> Any:  # one array operand, one Python scalar
        s1, s2 = self.operands
        return getattr(xp, self.fn)(x, s2) if s1 is ARRAY else getattr(xp, self.fn)(s1, x)

    def _forward2(self, xp: Any, x1: Any, x2: Any) -> Any:
        return getattr(xp, self.fn)(x1, x2)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        kept = kept_inputs(self, indexes) if self.saves_x else (None,) * len(self.which)
        x1, x2 = self._fill(kept)
        y = self.get_retained_outputs()[0] if self.saves_y else None
        result = []
        for i in indexes:
            rule = self.rules[self.which[i]]
            result.append(None if rule is None else rule(xp, x1, x2, y, gy))
        return tuple(result)


def binary(
    fn: str,
    saves: str | tuple[str, str],
    rules: tuple[BinaryRule | None, BinaryRule | None],
    doc: str,
    *,
    module: str,
) -> Callable[[Any, Any], Variable]:
    """Define the node class of the binary ``fn`` and return the function applying it;
    either operand may be a Python scalar (not both). See :class:`Binary`.

    ``saves`` says what the rules read: ``"x"`` (both operands) and/or ``"y"`` (the
    output), or, for each operand's rule, which of ``x1``, ``x2`` and ``y`` it reads
    (``("x1 y", "x2 y")``): a node then keeps only what the rules of the operands
    that require a gradient read."""
    cls_name = "".join(part.capitalize() for part in fn.split("_"))
    reads_by_which = None
    if isinstance(saves, tuple):
        each = [set(reads.split()) for reads in saves]
        assert all(r <= {"x1", "x2", "y"} for r in each), saves
        operand_reads = [tuple(k for k in (0, 1) if f"x{k + 1}" in r) for r in each]
        # For each choice of the operands that are arrays: by input, the inputs read.
        reads_by_which = {
            which: tuple(_input_reads(operand_reads[op], which) for op in which)
            for which in ((0, 1), (0,), (1,))
        }
        saves = ("x" if any(operand_reads) else "") + ("y" if "y" in set().union(*each) else "")
    attrs = {
        "__module__": module,
        "__qualname__": cls_name,
        "fn": fn,
        "rules": rules,
        "saves_x": "x" in saves,
        "saves_y": "y" in saves,
        "_reads_by_which": reads_by_which,
    }
    node = type(cls_name, (Binary,), attrs)

    def apply(x1: Any, x2: Any, /) -> Variable:
        s1, s2 = (x if type(x) in SCALARS else ARRAY for x in (x1, x2))
        if s1 is not ARRAY and s2 is not ARRAY:
            raise TypeError(f"{fn}: x1 and x2 are both Python scalars; make one of them an array")
        if s1 is ARRAY and s2 is ARRAY:
            return apply2(node(s1, s2), x1, x2)
        return apply1(node(s1, s2), x1 if s1 is ARRAY else x2)

    apply.__name__ = apply.__qualname__ = fn
    apply.__module__ = module
    apply.__doc__ = doc
    apply.node = node  # type: ignore[attr-defined]
    return apply


def _input_reads(operands: tuple[int, ...], which: tuple[int, ...]) -> tuple[int, ...]:
    """The inputs a rule reads, of the ``operands`` it reads: those that are arrays
    (``which``: operand ``which[i]`` is input ``i``)."""
    return tuple(which.index(k) for k in operands if k in which)


# -- functions without a gradient, forwarding ------------------------------------------


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
    from agnograd.backends._device import native_device

    return {k: native_device(raw(v)) for k, v in kwargs.items()}


def nondifferentiable(
    fn: str, doc: str, *, params: str | None = None, module: str | None = None
) -> Callable[..., Variable]:
    """The standard function ``fn`` as a node whose result carries no gradient (see
    :func:`forwarding` for ``params`` and ``module``)."""

    def compute(xp: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(xp, fn)(*args, **kwargs)

    def call(*args: Any, **kwargs: Any) -> Variable:
        return apply_nondifferentiable(compute, args, kwargs)

    compute.__name__ = fn
    return forwarding(fn, call, doc, params=params, module=module)


def forwarding(
    name: str,
    call: Callable[..., Any],
    doc: str,
    *,
    params: str | None = None,
    module: str | None = None,
) -> Callable[..., Any]:
    """``call`` as the standard's function ``name``: it has the standard's signature
    (``params`` where given, else the one :data:`~agnograd.functions._standard.SIGNATURES`
    lists), and a call that does not fit it is a ``TypeError`` before the backend
    sees it. The function reports ``module`` where given.

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
    sig = signature(name) if params is None else parse_signature(params)
    # Worked out once, so that a call is checked with a few comparisons rather than
    # Signature.bind (microseconds); a call that does not fit is bound, for the exact
    # complaint.
    parameters = list(sig.parameters.values())
    names = tuple(p.name for p in parameters if p.kind in (_ONLY, _EITHER))
    positional = sys.maxsize if any(p.kind is _VAR for p in parameters) else len(names)
    keywords = frozenset(p.name for p in parameters if p.kind in (_EITHER, _KW))
    # (position, name) of each required parameter; keyword-only ones have no position.
    required = [
        (names.index(p.name) if p.name in names else sys.maxsize, p.name)
        for p in parameters
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
    if module is not None:
        apply.__module__ = module
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
    return type(a) in SCALARS
