"""JAX inside agnograd: :func:`agnograd.interop.jax.node`, a JAX function applied
as one node of agnograd's graph, its backward ``jax.vjp``, compiled by ``jax.jit``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import array_api_compat
import jax
import jax.numpy as jnp

from agnograd.backends._backend import dtype_name, is_array
from agnograd.core._config import config, takes_variables
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.interop._jax_arrays import (
    _FLOAT0,
    _conj,
    _cotangent,
    _from_jax,
    _home,
    _refuse_narrowing,
    _to_jax,
)


def node(fn: Callable[..., Any], /, *, jit: bool = True) -> Callable[..., Any]:
    """An agnograd operation that computes with the JAX function ``fn``.

    The result takes Variables (or arrays, as constants) of one library -- NumPy,
    PyTorch, JAX, ... -- as positional arguments, and returns Variables of that
    library, in the structure ``fn`` returns (an array, or a tuple, list or dict of
    arrays). Keyword arguments are passed to ``fn`` as they are: settings, not
    differentiated. Forward converts the inputs to JAX arrays, runs ``fn`` and
    converts the outputs back. Backward runs ``jax.vjp(fn, ...)`` on the saved
    inputs and applies its pullback to the gradients; compiled, that computes the
    forward again (cheaper than taking ``jax.vjp``'s residuals out of a compiled
    forward, which copies them), while ``jit=False`` keeps the forward's own
    ``jax.vjp``. Double backprop applies the pullback itself as a bridged node (its
    backward is again a ``jax.vjp``), so gradients of any order flow through
    ``fn``.

    Conversions go through DLPack without a copy where JAX allows it: PyTorch CPU
    tensors always, NumPy arrays when their buffer is 64-byte aligned (NumPy's
    allocator only promises 16, so some are copied); read-only or negatively
    strided arrays are copied. Results come back without a copy, as read-only NumPy
    arrays for NumPy, and so do the gradients it gives: to update a leaf's gradient
    in place (``x.grad *= s``), copy it first. JAX without its x64 mode would
    compute 64-bit inputs in 32 bits: they are refused, not narrowed. JAX arrays
    and tracers pass through untouched, so a node works inside :func:`function` and
    ``jax.jit`` too.

    Parameters
    ----------
    fn : callable
        A function of JAX arrays returning an array or a pytree of arrays.
    jit : bool
        Compile the forward and the backward with ``jax.jit``, once per function,
        input shapes and keyword settings (which must then be hashable). ``False``
        runs ``fn`` op by op, for a function that ``jax.jit`` cannot trace (Python
        control flow on values): many times slower for a small function, since JAX
        dispatches (and the first time compiles) each operation on its own.

    Returns
    -------
    callable
        ``fn`` as a function of Variables.

    Examples
    --------
    >>> import numpy as np, jax.numpy as jnp, agnograd
    >>> import agnograd.interop.jax as bridge
    >>> softplus = bridge.node(lambda x: jnp.logaddexp(x, 0.0))
    >>> x = agnograd.Variable(np.array([-1.0, 0.0, 2.0], dtype=np.float32))
    >>> y = softplus(x)
    >>> type(y.array).__name__, y.dtype
    ('ndarray', dtype('float32'))
    >>> agnograd.functions.sum(y).backward()
    >>> x.grad.round(4)
    array([0.2689, 0.5   , 0.8808], dtype=float32)
    """
    if not callable(fn):
        raise TypeError(
            f"agnograd.interop.jax.node(fn): fn must be a JAX function, got {type(fn).__name__}"
        )
    name = getattr(fn, "__name__", type(fn).__name__)
    jitted = _Jitted() if jit else None

    @functools.wraps(fn)
    def bridged(*inputs: Any, **kwargs: Any) -> Any:
        if not inputs:
            raise TypeError(
                f"{name} (agnograd.interop.jax.node): needs at least one array or Variable "
                "input; for a function of no arrays, call it directly"
            )
        for key, value in kwargs.items():
            if isinstance(value, Variable) or is_array(value):
                raise TypeError(
                    f"{name} (agnograd.interop.jax.node): keyword argument {key!r} is an "
                    "array or Variable; pass arrays by position (keywords are static "
                    "settings, not differentiated)"
                )
            if jit:
                try:
                    hash(value)
                except TypeError:
                    raise TypeError(
                        f"{name} (agnograd.interop.jax.node): keyword argument {key!r} is a "
                        f"{type(value).__name__}, which is not hashable; jax.jit keys its "
                        "compilations on the settings: pass a tuple instead of a list, or "
                        "make the node with jit=False"
                    ) from None
        func = _Bridged(_Fn(fn, tuple(sorted(kwargs.items())), name), jitted)
        func._needs_vjp = config.enable_backprop and any(
            isinstance(x, Variable) and x.requires_grad for x in inputs
        )
        outputs = func.apply(inputs)
        return jax.tree.unflatten(func._tree, outputs)

    return bridged


class _Fn:
    """``fn`` with its keyword settings bound, checking what it returns. Hashable and
    equal for the same function and settings: ``jax.jit``'s static argument, so that
    each node of the same function reuses one compilation."""

    __slots__ = ("__weakref__", "fn", "kwargs", "name")

    def __init__(self, fn: Callable[..., Any], kwargs: tuple[tuple[str, Any], ...], name: str):
        self.fn, self.kwargs, self.name = fn, kwargs, name

    def __hash__(self) -> int:
        return hash((self.fn, self.kwargs))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Fn) and (self.fn, self.kwargs) == (other.fn, other.kwargs)

    def __call__(self, *xs: Any) -> Any:
        out = self.fn(*xs, **dict(self.kwargs))
        for k, y in enumerate(jax.tree.leaves(out)):
            if not isinstance(y, jax.Array):
                raise TypeError(
                    f"jax:{self.name}: output {k} of the JAX function is a {type(y).__name__}, "
                    "not a JAX array; return an array or a pytree (tuple, list, dict) of "
                    "arrays"
                )
        return out


class _VJP:
    """``(x1, ..., xn, gy1, ..., gym) -> (gx1, ..., gxn)``: the pullback of ``fn`` in
    agnograd's convention, as a JAX function of its own (for double backprop)."""

    __slots__ = ("__weakref__", "fn", "n", "name")

    def __init__(self, fn: Any, n: int) -> None:
        self.fn, self.n, self.name = fn, n, f"vjp({fn.name})"

    def __hash__(self) -> int:
        return hash((self.fn, self.n))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _VJP) and (self.fn, self.n) == (other.fn, other.n)

    def __call__(self, *args: Any) -> tuple[Any, ...]:
        xs, gys = args[: self.n], args[self.n :]
        out, pullback = jax.vjp(self.fn, *xs)
        leaves, tree = jax.tree.flatten(out)
        avals = tuple((tuple(y.shape), y.dtype) for y in leaves)
        gxs = _apply_pullback(tree, avals, tuple(range(self.n)), pullback, gys)
        # An input of integers gets a zero of its own (its gradient is never used).
        return tuple(jnp.zeros_like(x) if g is None else g for x, g in zip(xs, gxs, strict=True))


def _apply_pullback(
    tree: Any,
    avals: tuple[tuple[tuple[int, ...], Any], ...],
    wanted: tuple[int, ...],
    pullback: Any,
    gys: Any,
) -> tuple[Any, ...]:
    """The gradients of the inputs at ``wanted``, from agnograd's gradients ``gys`` of
    the outputs (``None`` for a missing one), in agnograd's convention; ``None`` for
    integers. Under ``jax.jit`` XLA drops the work for the inputs left out."""
    cts = [_cotangent(g, aval) for g, aval in zip(gys, avals, strict=True)]
    gxs = pullback(jax.tree.unflatten(tree, cts))
    return tuple(None if gxs[i].dtype == _FLOAT0 else _conj(gxs[i]) for i in wanted)


def _recompute_pullback(fn: Any, wanted: tuple[int, ...], xs: Any, gys: Any) -> tuple[Any, ...]:
    """:func:`_apply_pullback` of ``jax.vjp(fn, *xs)``, linearised anew."""
    out, pullback = jax.vjp(fn, *xs)
    leaves, tree = jax.tree.flatten(out)
    avals = tuple((tuple(y.shape), y.dtype) for y in leaves)
    return _apply_pullback(tree, avals, wanted, pullback, gys)


class _Jitted:
    """The compiled forward and backward of one ``node``, per function with its
    settings (a ``_Fn``, or the ``_VJP`` of double backprop), each compiled by JAX
    once per input shapes.

    The functions are closed over, not passed as static arguments: JAX's global
    caches keep static arguments alive, and with them the function and all it
    closes over, for as long as the process runs. These belong to the node.

    The compiled backward linearises ``fn`` again from the inputs rather than taking
    ``jax.vjp``'s residuals out of the compiled forward: residuals leave a jitted
    function as copies (the inputs among them), which costs more than recomputing.
    """

    __slots__ = ("_compiled",)

    def __init__(self) -> None:
        self._compiled: dict[Any, tuple[Any, Any]] = {}

    def _of(self, fn: Any) -> tuple[Any, Any]:
        pair = self._compiled.get(fn)
        if pair is None:
            pair = self._compiled[fn] = (
                jax.jit(lambda *xs: fn(*xs)),
                jax.jit(
                    lambda wanted, xs, gys: _recompute_pullback(fn, wanted, xs, gys),
                    static_argnums=0,
                ),
            )
        return pair

    def evaluate(self, fn: Any, *xs: Any) -> Any:
        return self._of(fn)[0](*xs)

    def recompute(self, fn: Any, wanted: tuple[int, ...], xs: Any, gys: Any) -> Any:
        return self._of(fn)[1](wanted, xs, gys)


class _Bridged(FunctionNode):
    """A JAX function applied as one node: forward ``fn``, backward ``jax.vjp``."""

    _needs_vjp = True
    _tree: Any = None
    _pullback: Any = None  # jax.vjp's, op by op (jit=False)
    _xs: tuple[Any, ...] = ()  # the inputs as JAX arrays (jit=True)
    # (shape, JAX dtype) of each output, and the library's dtype of each output
    _avals: tuple[tuple[tuple[int, ...], Any], ...] = ()
    _dtypes: tuple[Any, ...] = ()

    def __init__(self, fn: _Fn | _VJP, jit: _Jitted | None) -> None:
        self._fn = fn
        self._jit = jit

    @property
    def label(self) -> str:
        return f"jax:{self._fn.name}"

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        home = _home(inputs[0])
        xs = tuple(_to_jax(a, self.label, i) for i, a in enumerate(inputs))
        fn = self._fn
        if self._jit is not None:
            out = self._jit.evaluate(fn, *xs)
            if self._needs_vjp:
                self._xs = xs
        elif self._needs_vjp:
            out, self._pullback = jax.vjp(fn, *xs)
        else:
            out = fn(*xs)
        leaves, self._tree = jax.tree.flatten(out)
        self._avals = tuple((tuple(y.shape), y.dtype) for y in leaves)
        self.retain_inputs(tuple(range(len(inputs))))  # for double backprop
        outputs = tuple(_from_jax(y, home, self.label) for y in leaves)
        self._dtypes = tuple(y.dtype for y in outputs)
        return outputs

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        # Define-then-run: the shapes and dtypes come from jax.eval_shape, since JAX
        # cannot run on agnograd's abstract values.
        specs = []
        for i, a in enumerate(inputs):
            _refuse_narrowing(dtype_name(a.dtype), self.label, i)
            specs.append(jax.ShapeDtypeStruct(tuple(a.shape), jnp.dtype(dtype_name(a.dtype))))
        leaves, self._tree = jax.tree.flatten(jax.eval_shape(self._fn, *specs))
        xp = self.xp
        return tuple(
            (tuple(y.shape), y.dtype if xp is jnp else getattr(xp, dtype_name(y.dtype)))
            for y in leaves
        )

    def backward(
        self, target_input_indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        xs = self.get_retained_inputs()  # also checks that no input was written since
        if takes_variables(self) or any(isinstance(g, Variable) for g in grad_outputs):
            return self._double_backward(target_input_indexes, xs, grad_outputs)
        if not self._xs and self._pullback is None:
            raise RuntimeError(
                f"{self.label}: nothing was saved for backward (the node ran without "
                "backprop); run it again with inputs that require a gradient"
            )
        home = _home(xs[0])
        gys = tuple(
            None if g is None else _to_jax(g, self.label, k) for k, g in enumerate(grad_outputs)
        )
        wanted = target_input_indexes
        if self._jit is not None:
            gxs = self._jit.recompute(self._fn, wanted, self._xs, gys)
        else:
            gxs = _apply_pullback(self._tree, self._avals, wanted, self._pullback, gys)
        return tuple(None if g is None else _from_jax(g, home, self.label) for g in gxs)

    def _double_backward(
        self, indexes: tuple[int, ...], xs: tuple[Any, ...], grad_outputs: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        gys: list[Any] = []
        raw0 = xs[0].array if isinstance(xs[0], Variable) else xs[0]
        for g, (shape, _), dtype in zip(grad_outputs, self._avals, self._dtypes, strict=True):
            if g is None:  # no gradient reached this output: a constant zero
                g = self.xp.zeros(shape, dtype=dtype, device=array_api_compat.device(raw0))
            gys.append(g)
        pullback = _Bridged(_VJP(self._fn, len(xs)), self._jit)
        gxs = pullback.apply((*xs, *gys))
        return tuple(gxs[i] for i in indexes)
