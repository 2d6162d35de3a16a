"""Bridges between agnograd and JAX, in both directions.

- :func:`function` turns a Python function of Variables into a JAX function (a
  ``jax.custom_vjp``) that ``jax.jit``, ``jax.grad`` and ``jax.vmap`` accept. Its
  forward runs the function on Variables that wrap JAX arrays or tracers; its
  backward runs agnograd's backward pass (:func:`agnograd.grad`), again on JAX
  arrays or tracers, so JAX traces and compiles both.
- :func:`node` turns a JAX function into an agnograd operation on Variables of
  NumPy, PyTorch, JAX or any library that JAX can read through DLPack. Its forward
  runs the function (compiled by ``jax.jit``), its backward ``jax.vjp`` of it on
  the saved inputs, and its double backward a bridged node of that pullback (a vjp
  of the vjp), so gradients of every order flow.

Both save the inputs for backward and compute the forward again there, as
``jax.checkpoint`` does: nothing but arrays crosses from forward to backward, which
is what makes the JAX side safe under ``jax.jit``.

Gradients of complex functions follow agnograd's (PyTorch's) convention on the
agnograd side and JAX's on the JAX side; the bridges convert between them (the
two differ by a complex conjugation).

Importing this module imports JAX; ``import agnograd`` does not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import array_api_compat
import jax
import jax.numpy as jnp
import numpy as np

from agnograd.backends._backend import dtype_name, is_array, raw_namespace
from agnograd.backends._device import Device, _view_target, device_of, transfer, view
from agnograd.core._config import config, eager_recording
from agnograd.core._engine import grad
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable

__all__ = ["function", "node"]

_FLOAT0 = jax.dtypes.float0
# The dtypes that JAX turns into their 32-bit kin unless its x64 mode is on.
_WIDE = frozenset({"float64", "int64", "uint64", "complex128"})


# --- agnograd inside JAX -------------------------------------------------------------


def function(f: Callable[..., Any] | None = None, /, *, nondiff_argnums: Sequence[int] = ()) -> Any:
    """A JAX function (``jax.custom_vjp``) that runs ``f`` on Variables.

    ``f`` takes Variables and returns a Variable or a pytree (tuple, list, dict)
    of Variables, computed with agnograd: operators, :mod:`agnograd.functions`,
    the differentiable namespace, your own :class:`~agnograd.FunctionNode`\\ s.
    The result takes JAX arrays (or pytrees of them) in the same positions and
    returns JAX arrays in the structure ``f`` returned, and works under
    ``jax.jit``, ``jax.grad``, ``jax.vjp`` and ``jax.vmap``.

    The backward pass saves only the inputs: it runs ``f`` again with the graph
    recorded and then agnograd's backward on it, both on JAX values, so the
    residuals are arrays and the rule is safe under ``jax.jit`` (like
    ``jax.checkpoint``: one more forward per backward, which XLA may merge with the
    first under ``jit``). Because that backward is itself made of JAX operations,
    ``jax.grad(jax.grad(...))``, ``jax.hessian`` and ``jax.jacrev`` work too;
    forward mode (``jax.jvp``, ``jax.jacfwd`` applied directly) does not, as for
    every ``custom_vjp``.

    Parameters
    ----------
    f : callable
        A function of Variables returning a Variable or a pytree of Variables.
        Used as ``@function`` or ``@function(nondiff_argnums=...)``.
    nondiff_argnums : sequence of int
        Positions of arguments that are not arrays (flags, sizes, functions): they
        reach ``f`` as they are and get no gradient (``jax.custom_vjp``'s own
        argument; they must be hashable under ``jax.jit``). Constants can also be
        closed over.

    Returns
    -------
    callable
        ``f`` as a function of JAX arrays.

    Examples
    --------
    >>> import numpy as np, jax, jax.numpy as jnp
    >>> import agnograd.functions as F
    >>> import agnograd.interop.jax as bridge
    >>> @bridge.function
    ... def loss(x, w):
    ...     return F.sum(F.tanh(x @ w) ** 2)
    >>> x = jnp.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    >>> w = jnp.array([0.5, -0.25])
    >>> np.asarray(jax.jit(jax.grad(loss, argnums=1))(x, w)).round(4)
    array([ 1.1873, -0.9933], dtype=float32)
    >>> np.asarray(jax.vmap(loss, in_axes=(0, None))(x, w)).round(4)  # one loss per row
    array([0.2136, 0.2136, 0.06  ], dtype=float32)
    """
    if f is None:
        return functools.partial(function, nondiff_argnums=nondiff_argnums)
    if not callable(f):
        raise TypeError(
            f"agnograd.interop.jax.function(f): f must be a function of Variables, got "
            f"{type(f).__name__}"
        )
    static = tuple(sorted({int(i) for i in nondiff_argnums}))
    if any(i < 0 for i in static):
        raise ValueError(
            f"agnograd.interop.jax.function: nondiff_argnums must be non-negative positions, "
            f"got {tuple(nondiff_argnums)}"
        )
    name = getattr(f, "__name__", type(f).__name__)

    def primal(*args: Any) -> Any:
        _, outputs, tree = _run(f, name, args, static)
        return jax.tree.unflatten(tree, [y.array for y in outputs])

    def forward(*args: Any) -> tuple[Any, tuple[Any, ...]]:
        # The residuals are the inputs, arrays or tracers: nothing of Python's, so
        # that the rule works under jax.jit, where forward and backward are traced
        # apart.
        residuals = tuple(arg for i, arg in enumerate(args) if i not in static)
        return primal(*args), residuals

    def backward(*rest: Any) -> tuple[Any, ...]:
        *fixed, residuals, cotangents = rest
        args = _merge(fixed, residuals, static)
        variables, outputs, tree = _run(f, name, args, static)
        return _pull_back(name, args, static, variables, outputs, tree, cotangents)

    core = jax.custom_vjp(primal, nondiff_argnums=static)
    core.defvjp(forward, backward)

    @functools.wraps(f)
    def bridged(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(
                f"{name} (agnograd.interop.jax.function): keyword arguments "
                f"{sorted(kwargs)} are not supported; pass them by position, or bind "
                "non-array ones with functools.partial before bridging"
            )
        for i in static:
            if i >= len(args):
                raise TypeError(
                    f"{name} (agnograd.interop.jax.function): nondiff_argnums names "
                    f"position {i}, but the call has {len(args)} arguments"
                )
        for i, arg in enumerate(args):
            if i not in static:
                _check_argument(name, i, arg)
        return core(*args)

    return bridged


def _check_argument(name: str, index: int, arg: Any) -> None:
    for leaf in jax.tree.leaves(arg, is_leaf=lambda v: isinstance(v, Variable)):
        if isinstance(leaf, Variable):
            raise TypeError(
                f"{name} (agnograd.interop.jax.function): argument {index} holds a "
                "Variable; the bridged function takes JAX arrays -- pass x.array, or "
                "call the undecorated function on Variables"
            )
        if not (isinstance(leaf, jax.Array | np.ndarray | np.generic | int | float | complex)):
            raise TypeError(
                f"{name} (agnograd.interop.jax.function): argument {index} holds a "
                f"{type(leaf).__name__}, which is not an array; list its position in "
                "nondiff_argnums, or close over it"
            )


def _merge(fixed: Sequence[Any], residuals: Sequence[Any], static: tuple[int, ...]) -> list[Any]:
    """The arguments in their positions, from the static ones and the residuals."""
    fixed_it, res_it = iter(fixed), iter(residuals)
    total = len(fixed) + len(residuals)
    return [next(fixed_it) if i in static else next(res_it) for i in range(total)]


def _is_variable(v: Any) -> bool:
    return isinstance(v, Variable)


def _run(
    f: Callable[..., Any], name: str, args: Sequence[Any], static: tuple[int, ...]
) -> tuple[list[list[Variable]], list[Variable], Any]:
    """Run ``f`` on Variables wrapping ``args``: the Variables of each argument, the
    output Variables (flattened) and the outputs' tree structure."""
    variables: list[list[Variable]] = []
    call_args = list(args)
    for i, arg in enumerate(args):
        if i in static:
            variables.append([])
            continue
        leaves, tree = jax.tree.flatten(arg)
        wrapped = []
        for leaf in leaves:
            a = jnp.asarray(leaf)
            wrapped.append(Variable(a, requires_grad=_inexact(a.dtype)))
        variables.append(wrapped)
        call_args[i] = jax.tree.unflatten(tree, wrapped)
    with eager_recording():
        result = f(*call_args)
    outputs, tree = jax.tree.flatten(result, is_leaf=_is_variable)
    for k, y in enumerate(outputs):
        if isinstance(y, Variable):
            continue
        where = f"output {k} of {name}" if len(outputs) > 1 else f"the output of {name}"
        if is_array(y):
            raise TypeError(
                f"agnograd.interop.jax.function: {where} is a "
                f"{type(y).__module__.split('.')[0]} array, not a Variable: {name} computed "
                "it outside agnograd's graph (e.g. with jax.numpy on x.array), so it would "
                "get no gradient; compute with agnograd.functions or "
                "x.__array_namespace__()"
            )
        raise TypeError(
            f"agnograd.interop.jax.function: {where} is a {type(y).__name__}; {name} must "
            "return a Variable or a pytree (tuple, list, dict) of Variables"
        )
    return variables, outputs, tree


def _pull_back(
    name: str,
    args: Sequence[Any],
    static: tuple[int, ...],
    variables: list[list[Variable]],
    outputs: list[Variable],
    tree: Any,
    cotangents: Any,
) -> tuple[Any, ...]:
    """JAX's cotangents of the arguments, from agnograd's backward pass."""
    cts = tree.flatten_up_to(cotangents)
    seeded: dict[int, Variable] = {}
    for y, ct in zip(outputs, cts, strict=True):
        if not y.requires_grad or ct.dtype == _FLOAT0:
            continue
        seed = _conj(ct)
        if id(y) in seeded:  # the same Variable returned twice: its cotangents add up
            seed = y._grad_var.array + seed  # type: ignore[union-attr]
        # The seed is set as the output's gradient directly rather than passed as
        # grad_outputs, whose device check refuses a concrete cotangent for a traced
        # output (JAX tracers report no device), as jax.grad(jax.grad(...)) gives.
        y._grad_var = Variable._new(seed, False)
        seeded[id(y)] = y
    targets = [v for vs in variables for v in vs if v.requires_grad]
    found: dict[int, Any] = {}
    if seeded and targets:
        ys = list(seeded.values())
        gxs = grad(ys, targets)
        for v, g in zip(targets, gxs, strict=True):
            if g is not None:
                found[id(v)] = _conj(g.array)
    result = []
    for i, arg in enumerate(args):
        if i in static:
            continue
        # None is JAX's symbolic zero: an input with no gradient allocates nothing.
        grads = [found.get(id(v)) for v in variables[i]]
        result.append(jax.tree.unflatten(jax.tree.structure(arg), grads))
    return tuple(result)


def _inexact(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.inexact))


# --- JAX inside agnograd -------------------------------------------------------------


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
        if self._variables_in_backward or any(isinstance(g, Variable) for g in grad_outputs):
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


def _cotangent(g: Any, aval: tuple[tuple[int, ...], Any]) -> Any:
    """JAX's cotangent for an output with ``aval``, from agnograd's gradient ``g``."""
    shape, dtype = aval
    if not _inexact(dtype):
        return np.zeros(shape, dtype=_FLOAT0)
    if g is None:
        return jnp.zeros(shape, dtype=dtype)
    return _conj(g)


def _conj(g: Any) -> Any:
    """Between agnograd's (PyTorch's) convention for complex gradients and JAX's."""
    return jnp.conj(g) if jnp.iscomplexobj(g) else g


def _home(array: Any) -> Device | None:
    """The device to return results to: ``None`` for JAX arrays (no conversion)."""
    return None if isinstance(array, jax.Array) else device_of(array)


def _refuse_narrowing(name: str, op: str, index: int) -> None:
    if name in _WIDE and not jax.config.read("jax_enable_x64"):
        raise TypeError(
            f"{op}: input {index} is {name}, which JAX without its x64 mode would "
            f"compute in 32 bits; enable it (jax.config.update('jax_enable_x64', True), or "
            "`with jax.enable_x64(True):` around the computation), or cast the input to a "
            "32-bit dtype first"
        )


def _to_jax(array: Any, op: str, index: int) -> Any:
    """``array`` as a JAX array: itself if it is one (or a tracer), else a DLPack view
    of its memory, else a copy (unaligned, read-only or negatively strided memory)."""
    if isinstance(array, jax.Array):
        return array
    _refuse_narrowing(dtype_name(array.dtype), op, index)
    try:
        return view(array, "jax")
    except BufferError:
        pass
    # A dense copy in the array's own library first: JAX's DLPack import refuses
    # some layouts even for a copy (torch's broadcast gradients, with stride 0).
    dense = raw_namespace(array).asarray(array, copy=True)
    return transfer(dense, _view_target(device_of(array), "jax")[0])


def _from_jax(array: Any, home: Device | None, op: str) -> Any:
    """The JAX ``array`` as an array on ``home`` (a view where DLPack allows it)."""
    if home is None:
        return array
    if isinstance(array, jax.core.Tracer):
        raise TypeError(
            f"{op}: the JAX function returned a traced value for {home.backend} inputs "
            "(it closes over a value of jax.jit or jax.grad); give the node JAX inputs "
            "inside JAX transformations"
        )
    try:
        return view(array, home)
    except BufferError:
        return transfer(array, home, copy=True)
