"""``agnograd.vmap``: a function of one example run on a batch.

Every function with an input domain in the testing kit runs under ``vmap`` (each
input batched on axis 0, axis 1 or not at all, hypothesis choosing) against a Python
loop over the examples, on NumPy, array-api-strict and torch, so a new row is covered
by itself. Then the transform's own parts: in_axes and out_axes trees, chunking,
nesting, Variables, per-sample gradients (against a loop and ``torch.func``), the
loop fallback's warning, and the errors.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agnograd
from agnograd import Variable
from agnograd.func import grad, jvp, vmap
from agnograd.testing import backend_namespace, to_numpy
from agnograd.testing import strategies as ags
from agnograd.transforms import _batching_rules

torch = pytest.importorskip("torch")

BACKENDS = ("numpy", "array_api_strict", "torch")
EXAMPLES = settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = list(ags.registered_domains())


def leaves(y: Any) -> list[Any]:
    if isinstance(y, tuple | list):
        return [leaf for item in y for leaf in leaves(item)]
    return [y]


def examples(xp: Any, x: Any) -> list[Any]:
    """Three examples from one input: itself, its axes all reversed (a permutation,
    which keeps a matrix symmetric, definite or invertible), itself again."""
    flipped = xp.flip(x) if x.ndim else x
    return [x, flipped, x]


# Every function on each of the three libraries (a few milliseconds a case).
CASES = [(name, backend) for name in NAMES for backend in BACKENDS]


@pytest.mark.parametrize(("name", "backend"), CASES)
@EXAMPLES
@given(data=st.data())
def test_function_under_vmap_is_a_loop(name: str, backend: str, data: Any) -> None:
    xp = backend_namespace(backend)
    case = data.draw(ags.function_inputs(xp, name), label="case")
    per_input = [examples(xp, x) for x in case.inputs]
    axes = []
    batched = []
    for x, ex in zip(case.inputs, per_input, strict=True):
        axis = data.draw(st.sampled_from([0, 1, None] if x.ndim else [0, None]), label="axis")
        axes.append(axis)
        batched.append(x if axis is None else xp.stack(ex, axis=axis))
    if all(a is None for a in axes):
        axes[0], batched[0] = 0, xp.stack(per_input[0], axis=0)
    inputs = [
        [x if a is None else ex[k] for x, a, ex in zip(case.inputs, axes, per_input, strict=True)]
        for k in range(3)
    ]
    expected = [leaves(case(*inputs[k])) for k in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", agnograd.VmapFallbackWarning)
        got = leaves(vmap(lambda *xs: case(*xs), in_axes=tuple(axes))(*batched))
    assert len(got) == len(expected[0])
    for j, g in enumerate(got):
        assert not isinstance(g, Variable)  # raw arrays in, raw arrays out
        want = np.stack([to_numpy(expected[k][j]) for k in range(3)])
        np.testing.assert_allclose(to_numpy(g), want, rtol=1e-9, atol=1e-12)


# -- the transform


def loss(w: Any, x: Any) -> Any:
    xp = agnograd.namespace(w, x)
    return xp.sum(xp.tanh(x @ w) ** 2)


W = np.array([[0.5, -1.0, 0.2], [2.0, 0.3, -0.7]])
X = np.random.default_rng(0).normal(size=(5, 2))


def test_per_sample_gradients_equal_a_loop_and_torch_func() -> None:
    got = vmap(grad(loss), in_axes=(None, 0))(W, X)
    want = np.stack([grad(loss)(W, x) for x in X])
    np.testing.assert_allclose(got, want, rtol=1e-12)

    def torch_loss(w: Any, x: Any) -> Any:
        return torch.sum(torch.tanh(x @ w) ** 2)

    tw, tx = torch.tensor(W), torch.tensor(X)
    reference = torch.func.vmap(torch.func.grad(torch_loss), in_dims=(None, 0))(tw, tx)
    got_torch = vmap(grad(loss), in_axes=(None, 0))(tw, tx)
    assert isinstance(got_torch, torch.Tensor)
    torch.testing.assert_close(got_torch, reference)


@pytest.mark.parametrize("argnums", [0, 1])
def test_grad_of_vmap_sums_over_the_batch(argnums: int) -> None:
    def total(w: Any, x: Any) -> Any:
        out = vmap(loss, in_axes=(None, 0))(w, x)
        return agnograd.namespace(out).sum(out)

    got = grad(total, argnums=argnums)(W, X)
    per = [grad(loss, argnums=argnums)(W, x) for x in X]
    want = sum(per) if argnums == 0 else np.stack(per)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_backward_through_vmap_reaches_variables() -> None:
    w, x = Variable(W.copy()), Variable(X.copy())
    y = vmap(loss, in_axes=(None, 0))(w, x)
    assert isinstance(y, Variable)
    assert y.shape == (5,)
    agnograd.namespace(y).sum(y).backward()
    np.testing.assert_allclose(w.grad, sum(grad(loss)(W, r) for r in X), rtol=1e-12)
    np.testing.assert_allclose(x.grad, np.stack([grad(loss, 1)(W, r) for r in X]), rtol=1e-12)


def test_matmul_of_vectors_and_matrices() -> None:
    a, m = np.arange(6.0).reshape(3, 2), np.arange(12.0).reshape(3, 2, 2)
    np.testing.assert_allclose(vmap(lambda u, v: u @ v)(a, a), (a * a).sum(1))
    np.testing.assert_allclose(vmap(lambda u, v: u @ v)(a, m), np.einsum("bi,bij->bj", a, m))
    np.testing.assert_allclose(vmap(lambda v, u: v @ u)(m, a), np.einsum("bij,bj->bi", m, a))


def test_vmap_of_jvp() -> None:
    primal, tangent = vmap(lambda x, v: jvp(lambda y: y**3, (x,), (v,)))(X, np.ones_like(X))
    np.testing.assert_allclose(primal, X**3)
    np.testing.assert_allclose(tangent, 3 * X**2)


def test_nested_vmap() -> None:
    a = np.random.default_rng(1).normal(size=(2, 3, 4))

    def f(r: Any) -> Any:
        return r * agnograd.namespace(r).sum(r)

    np.testing.assert_allclose(vmap(vmap(f))(a), a * a.sum(-1, keepdims=True))
    # the inner vmap over axis 1 of each example, results out on axis 1
    got = vmap(vmap(f, in_axes=1, out_axes=1), in_axes=2, out_axes=0)(a)
    want = np.stack([a[:, :, k] * a[:, :, k].sum(0) for k in range(4)])
    np.testing.assert_allclose(got, want)


def test_in_axes_and_out_axes_trees() -> None:
    def f(p: Any, scale: Any) -> Any:
        return {"sum": p["a"] + p["b"] * scale, "a": p["a"]}

    a, b = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2)
    got = vmap(f, in_axes=({"a": 1, "b": 0}, None), out_axes={"sum": 0, "a": -1})(
        {"a": a, "b": b}, 2.0
    )
    np.testing.assert_allclose(got["sum"], a.T + b * 2.0)
    np.testing.assert_allclose(got["a"], a)


def test_chunk_size_gives_the_result_without_chunks() -> None:
    x = np.random.default_rng(2).normal(size=(7, 3))

    def f(r: Any) -> Any:
        xp = agnograd.namespace(r)
        return xp.exp(r) / xp.sum(xp.exp(r)), xp.sum(r)

    whole = vmap(f, out_axes=(1, 0))(x)
    for chunk in (1, 3, 7, 10):
        parts = vmap(f, out_axes=(1, 0), chunk_size=chunk)(x)
        for p, w in zip(parts, whole, strict=True):
            np.testing.assert_allclose(p, w, rtol=1e-15)


def test_unbatched_result_is_repeated_or_kept() -> None:
    c = np.ones(2)
    np.testing.assert_array_equal(vmap(lambda x: c)(X), np.ones((5, 2)))
    np.testing.assert_array_equal(vmap(lambda x: c, out_axes=None)(X), c)


def test_fallback_warns_once_per_function(monkeypatch: Any) -> None:
    monkeypatch.setattr(_batching_rules, "_warned", set())
    x = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    sort = vmap(lambda r: agnograd.namespace(r).unique_values(r))
    with pytest.warns(agnograd.VmapFallbackWarning, match="unique_values has no batching rule"):
        np.testing.assert_array_equal(sort(x), np.sort(x, axis=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sort(x)  # once only


@pytest.mark.parametrize(
    "body",
    [
        lambda x: x if x[0] > 0 else -x,
        lambda x: float(x[0]) * x,
        lambda x: x * x[0].item(),
        lambda x: x * int(x[0]),
        lambda x: np.asarray(x),
    ],
)
def test_data_dependent_python_is_refused(body: Any) -> None:
    with pytest.raises(agnograd.ConcretizationTypeError, match=r"vmap: .*test_vmap\.py"):
        vmap(body)(X)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writing_a_batched_value_into_a_shared_array_is_refused(backend: str) -> None:
    xp = backend_namespace(backend)

    def write(x: Any) -> Any:
        out = x.__array_namespace__().zeros(2, dtype=x.dtype)  # the library's own
        out[0] = x[0]
        return out

    # NumPy turns vmap's error into its own ValueError: vmap's is its cause
    with pytest.raises((agnograd.ConcretizationTypeError, ValueError)) as info:
        vmap(write)(xp.asarray(X))
    error = info.value if backend != "numpy" else info.value.__cause__
    assert isinstance(error, agnograd.ConcretizationTypeError)
    assert "writing into an array that every example shares" in str(error)
    assert "test_vmap.py" in str(error)
    assert "xp.where" in str(error)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", ["namespace", "variable"])
def test_writing_a_batched_value_makes_a_variable_batched(backend: str, make: str) -> None:
    xp = backend_namespace(backend)

    def write(w: Any, x: Any) -> Any:
        ns = agnograd.namespace(w, x)
        if make == "namespace":
            h = ns.zeros(3, dtype=x.dtype)
        else:
            h = Variable(xp.zeros(3, dtype=x.dtype), requires_grad=False)
        h[0] = x[1]
        h[1] = ns.sum(x * w)
        h[2:] = x[:1] ** 2
        return ns.sum(h * w[0])

    w = xp.asarray([0.5, -2.0])
    got = vmap(write, in_axes=(None, 0))(w, xp.asarray(X))
    want = np.stack([to_numpy(write(w, xp.asarray(r))) for r in X])
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12)
    # per-example gradients through the writes, as in a loop
    got = vmap(grad(write, argnums=(0, 1)), in_axes=(None, 0))(w, xp.asarray(X))
    for k in range(2):
        want = np.stack([to_numpy(grad(write, argnums=(0, 1))(w, xp.asarray(r))[k]) for r in X])
        np.testing.assert_allclose(to_numpy(got[k]), want, rtol=1e-12)


def test_setitem_per_example() -> None:
    def write(x: Any) -> Any:
        y = x * 1.0
        y[0] = x[1] * 10.0
        return y

    want = X.copy()
    want[:, 0] = X[:, 1] * 10.0
    np.testing.assert_allclose(vmap(write)(X), want)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: vmap(loss)(W, X), "disagree on the batch size: args\\[0\\] has 2"),
        (lambda: vmap(loss, in_axes=(None, 2))(W, X), "in_axes is 2 for args\\[1\\]"),
        (lambda: vmap(loss, in_axes=None)(W, X), "no argument is batched"),
        (lambda: vmap(loss, in_axes=(0,))(W, X), "args is a tuple of 2, not 1"),
        (lambda: vmap(loss, in_axes=(0, 1.5))(W, X), "each axis must be an int or None"),
        (lambda: vmap(loss, chunk_size=0), "chunk_size must be a positive int"),
        (lambda: vmap(lambda x: x, out_axes=None)(X), "out_axes is None for a result"),
    ],
)
def test_errors(call: Any, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        call()


# -- indexing with a batched index, writing a batched value


def gathers() -> list[Any]:
    """One example's gathers: ``take``, ``take_along_axis``, ``x[i]``, ``x[i, j]`` and
    ``x[:, i]`` (of a Variable)."""
    return [
        lambda x, i: agnograd.namespace(x).take(x, i, axis=1),
        lambda x, i: agnograd.namespace(x).take_along_axis(
            x, agnograd.namespace(i).stack([i, i]), axis=1
        ),
        lambda x, i: Variable(x)[i[:1] // 3],  # not the standard's either
        lambda x, i: Variable(x)[i[:1] // 3, i[1:2]],
        lambda x, i: Variable(x)[:, i],  # not the standard's: not on array-api-strict
    ]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", range(5))
@pytest.mark.parametrize("batch_x", [False, True])
def test_batched_index_into_an_array(backend: str, k: int, batch_x: bool) -> None:
    if k in (2, 4) and backend == "array_api_strict":
        pytest.skip("array-api-strict indexes with arrays only beside integers, all axes")
    xp = backend_namespace(backend)
    x = xp.reshape(xp.arange(12, dtype=xp.float64), (2, 6))
    xs = xp.stack([x, x * 2.0, -x])
    index = xp.asarray([[1, 0, 5], [2, 2, 1], [0, 4, 3]])
    f = gathers()[k]
    with warnings.catch_warnings():
        warnings.simplefilter("error", agnograd.VmapFallbackWarning)  # batched, no loop
        got = vmap(f, in_axes=(0 if batch_x else None, 0))(xs if batch_x else x, index)
    want = np.stack([to_numpy(f(xs[b, ...] if batch_x else x, index[b, ...])) for b in range(3)])
    np.testing.assert_array_equal(to_numpy(got), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_sample_gradient_through_a_batched_index(backend: str) -> None:
    xp = backend_namespace(backend)
    x = xp.reshape(xp.arange(12, dtype=xp.float64), (2, 6)) / 5.0
    index = xp.asarray([[1, 0, 1], [2, 2, 1], [0, 4, 3]])

    def loss(x: Any, i: Any) -> Any:
        ns = agnograd.namespace(x, i)
        return ns.sum(ns.take(x, i, axis=1) ** 3) + ns.sum(ns.sin(x[i // 3, i]))

    got = vmap(grad(loss), in_axes=(None, 0))(x, index)
    want = np.stack([to_numpy(grad(loss)(x, index[b, ...])) for b in range(3)])
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("f", "axes"),
    [
        (lambda a, s: a * s, (0, 0)),  # an example's 0-d float64 beside float32
        (lambda a, s: s - a, (0, 0)),
        (lambda a, s: agnograd.namespace(a, s).maximum(a, s), (None, 0)),
        (lambda a, s: agnograd.namespace(a, s).where(a > 0.5, s, a), (0, 0)),
        (lambda a, s: a[0] + s, (0, None)),  # a batched 0-d float32, a shared float64
        (lambda a, s: s > a, (0, 0)),
    ],
)
def test_type_promotion_of_0d_operands_is_the_loops(backend: str, f: Any, axes: Any) -> None:
    xp = backend_namespace(backend)
    a = xp.reshape(xp.arange(6, dtype=xp.float32), (3, 2)) / 7
    s = xp.asarray([1.0 / 3.0, 2.0, -1.0], dtype=xp.float64)
    args = (a if axes[0] == 0 else a[0, ...], s if axes[1] == 0 else s[0])
    got = vmap(f, in_axes=axes)(*args)
    pairs = list(zip(args, axes, strict=True))
    loop = [f(*(x if ax is None else x[b, ...] for x, ax in pairs)) for b in range(3)]
    assert to_numpy(got).dtype == to_numpy(loop[0]).dtype
    np.testing.assert_array_equal(to_numpy(got), np.stack([to_numpy(y) for y in loop]))


def _namespace_call(name: str, **kwargs: Any) -> Any:
    def call(*xs: Any) -> Any:
        return getattr(agnograd.namespace(*xs), name)(*xs, **kwargs)

    return call


_RNG = np.random.default_rng(3)
_SORTED = np.sort(_RNG.normal(size=(3, 6)), axis=1)
_GRID = np.arange(9.0).reshape(3, 3)
RULED = [
    (
        _namespace_call("tensordot", axes=([1], [0])),
        (_RNG.normal(size=(3, 2, 4)), _RNG.normal(size=(3, 4, 2, 5))),
    ),
    (_namespace_call("tensordot", axes=0), (_RNG.normal(size=(3, 2)), _RNG.normal(size=(3, 4)))),
    (_namespace_call("searchsorted"), (_SORTED, _RNG.normal(size=(3, 2, 4)))),
    (_namespace_call("searchsorted", side="right"), (_SORTED, _SORTED[::-1].copy())),
    (
        _namespace_call("isin"),
        (np.array([[1, 2, 3], [4, 4, 1], [0, 7, 2]]), np.array([[2, 9], [4, 1], [5, 0]])),
    ),
    (
        _namespace_call("isin", invert=True),
        (np.array([[1, 2], [4, 1], [0, 7]]), np.array([[2, 9], [4, 1], [5, 0]])),
    ),
    (_namespace_call("meshgrid"), (_GRID, _GRID[:, :2], _GRID)),
    (_namespace_call("meshgrid", indexing="ij"), (_GRID, _GRID[:, :2])),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", range(len(RULED)))
@pytest.mark.parametrize("unbatched", [None, 0, 1])
def test_functions_with_rules_of_their_own(
    backend: str, k: int, unbatched: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batched by a rule, no loop: equal to the loop, with the loop's dtypes."""
    monkeypatch.setattr(_batching_rules, "_warned", set())  # a loop would warn
    if k == 5 and backend == "array_api_strict":
        pytest.skip("array-api-strict 2.6's isin ignores invert")
    xp = backend_namespace(backend)
    f, arrays = RULED[k]
    axes = tuple(None if j == unbatched else 0 for j in range(len(arrays)))
    args = tuple(xp.asarray(a if ax == 0 else a[0]) for a, ax in zip(arrays, axes, strict=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error", agnograd.VmapFallbackWarning)
        got = leaves(vmap(f, in_axes=axes)(*args))
    pairs = list(zip(args, axes, strict=True))
    loop = [leaves(f(*(a if ax is None else a[b, ...] for a, ax in pairs))) for b in range(3)]
    for j, g in enumerate(got):
        want = np.stack([to_numpy(row[j]) for row in loop])
        assert to_numpy(g).dtype == want.dtype
        np.testing.assert_allclose(to_numpy(g), want, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["unique_values", "unique_counts", "unique_inverse", "unique_all"])
def test_set_functions_run_the_loop_once_warned(
    backend: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their results' sizes depend on the values: a loop, right where the examples agree
    on them, refused where they do not."""
    monkeypatch.setattr(_batching_rules, "_warned", set())
    xp = backend_namespace(backend)
    x = xp.asarray([[3.0, 1.0, 3.0, 2.0], [2.0, 2.0, 1.0, 3.0], [1.0, 3.0, 2.0, 1.0]])
    f = _namespace_call(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = leaves(vmap(f)(x))
        vmap(f)(x)
    assert all(w.category is agnograd.VmapFallbackWarning for w in caught)
    warned = [str(w.message).split()[1] for w in caught]
    assert len(warned) == len(set(warned)) >= 1  # once per function
    loop = [leaves(f(x[b, ...])) for b in range(3)]
    for j, g in enumerate(got):
        np.testing.assert_array_equal(to_numpy(g), np.stack([to_numpy(row[j]) for row in loop]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", agnograd.VmapFallbackWarning)
        with pytest.raises(ValueError, match="depends on each example's values"):
            vmap(f)(xp.asarray([[1.0, 1.0], [1.0, 2.0]]))


# -- with jit


def _scaled_sin(a: Any) -> Any:
    xp = agnograd.namespace(a)
    return xp.sin(a) * 2.0 + xp.sum(a)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_of_jit_is_the_loop_and_runs_eagerly(backend: str) -> None:
    xp = backend_namespace(backend)
    jitted = agnograd.jit(_scaled_sin)
    for size in (3, 3, 5):  # a plan made for one batch would not fit another
        x = xp.reshape(xp.arange(size * 2, dtype=xp.float64), (size, 2)) / 3.0
        want = np.stack([to_numpy(_scaled_sin(x[b, ...])) for b in range(size)])
        np.testing.assert_allclose(to_numpy(vmap(jitted)(x)), want, rtol=1e-12)
        np.testing.assert_allclose(to_numpy(jitted(x[0, ...])), want[0], rtol=1e-12)
    info = jitted.cache_info()
    assert (info.eager, info.misses, info.hits) == (3, 1, 2)  # the unbatched calls: a plan
    got = vmap(agnograd.jit(grad(loss)), in_axes=(None, 0))(xp.asarray(W), xp.asarray(X))
    want = np.stack([grad(loss)(W, r) for r in X])
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_jit_of_vmap_is_the_loop_and_says_it_runs_eagerly(backend: str) -> None:
    xp = backend_namespace(backend)
    jitted = agnograd.jit(vmap(_scaled_sin))
    x = xp.reshape(xp.arange(6, dtype=xp.float64), (3, 2)) / 3.0
    want = np.stack([to_numpy(_scaled_sin(x[b, ...])) for b in range(3)])
    with pytest.warns(agnograd.JitWarning, match="vmap batches arrays that hold data"):
        np.testing.assert_allclose(to_numpy(jitted(x)), want, rtol=1e-12)
    np.testing.assert_allclose(to_numpy(jitted(x)), want, rtol=1e-12)  # once per signature
    per_sample = agnograd.jit(vmap(grad(loss), in_axes=(None, 0)))
    with pytest.warns(agnograd.JitWarning):
        got = per_sample(xp.asarray(W), xp.asarray(X))
    np.testing.assert_allclose(to_numpy(got), np.stack([grad(loss)(W, r) for r in X]), rtol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "torch"])  # array-api-strict: no such writes
@pytest.mark.parametrize("value_axis", [0, None])
def test_writing_at_a_batched_index_is_the_loop(backend: str, value_axis: Any) -> None:
    xp = backend_namespace(backend)

    def write(w: Any, i: Any, v: Any) -> Any:
        ns = agnograd.namespace(w, i, v)
        h = ns.zeros((3, 2), dtype=w.dtype)
        h[i] = v * w[0]  # a row of its own per example
        g = ns.multiply(w, 1.0)  # a Variable
        g[i[:1]] = v[:1] * w[1]
        h[i[0], 1] = 2.0  # a batched index and an integer
        return ns.sum(h * h) + ns.sum(g * w)

    w = xp.asarray([0.5, 1.0, -1.0])
    index = xp.asarray([[0], [2], [1]])
    v = xp.asarray([[1.5, 2.0], [-2.0, 0.5], [3.0, 1.0]])
    args, axes = (w, index, v if value_axis == 0 else v[0, ...]), (None, 0, value_axis)

    def loop(f: Any) -> list[Any]:
        pairs = list(zip(args, axes, strict=True))
        return [f(*(a if ax is None else a[b, ...] for a, ax in pairs)) for b in range(3)]

    got = vmap(write, in_axes=axes)(*args)
    np.testing.assert_allclose(to_numpy(got), np.stack([to_numpy(y) for y in loop(write)]))
    f = grad(write, argnums=(0, 2))
    got = vmap(f, in_axes=axes)(*args)
    for k in range(2):
        want = np.stack([to_numpy(y[k]) for y in loop(f)])
        np.testing.assert_allclose(to_numpy(got[k]), want, rtol=1e-12)


def test_writing_at_a_batched_index_beside_a_slice() -> None:
    def into_a_variable(i: Any) -> Any:
        h = agnograd.namespace(i).zeros((2, 3))
        h[:, i] = 1.0  # computed out of place
        return h

    def into_a_batched_array(x: Any, i: Any) -> Any:
        y = x * 1.0
        y[:, i] = 1.0  # refused
        return y

    index = np.array([[0], [2]])
    want = np.zeros((2, 2, 3))
    want[0, :, 0] = want[1, :, 2] = 1.0
    np.testing.assert_array_equal(vmap(into_a_variable)(index), want)
    with pytest.raises(TypeError, match="integer arrays and integers for the first axes"):
        vmap(into_a_batched_array)(np.zeros((2, 2, 3)), index)
