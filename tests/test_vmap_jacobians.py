"""Jacobians through ``vmap``, and ``vmap`` with the other transforms.

``jacrev``, ``jacfwd``, ``hessian`` and ``agnograd.functional.jacobian(...,
vectorize=True)`` build a Jacobian from one batched pass per output (rows) or per
input (columns) instead of one pass per element: the same blocks as the loop of
``vectorize=False``, on NumPy, array-api-strict and torch, complex conventions
included. Then ``vmap`` composed with ``grad``, ``jvp``, ``jacrev``, ``jacfwd`` and
``hessian`` in either order, against Python loops and ``torch.func``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd.func import grad, hessian, jacfwd, jacrev, jvp, vmap
from agnograd.functional import hessian as full_hessian
from agnograd.functional import jacobian
from agnograd.testing import backend_namespace, to_numpy

torch = pytest.importorskip("torch")

BACKENDS = ("numpy", "array_api_strict", "torch")
RNG = np.random.default_rng(0)
W = RNG.normal(size=(3, 4))
X = RNG.normal(size=(5, 3))


def leaves(tree: Any) -> list[Any]:
    if isinstance(tree, tuple | list):
        return [leaf for item in tree for leaf in leaves(item)]
    return [tree]


def assert_same(got: Any, want: Any, exact: bool = True) -> None:
    got, want = leaves(got), leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = to_numpy(g), to_numpy(w)
        assert g.shape == w.shape
        assert g.dtype == w.dtype
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def layer(w: Any, x: Any) -> Any:
    return F.tanh(x @ w)


def loss(w: Any, x: Any) -> Any:
    return F.sum(F.tanh(x @ w) ** 2)


def two_outputs(a: Any, b: Any) -> Any:
    # each output depends on each input (strict), one of them a matrix
    return F.sum(a) * F.exp(b), F.reshape(F.tanh(b), (2, 2)) * F.sum(a * a)


def lib(xp: Any, a: np.ndarray) -> Any:
    return xp.asarray(a)


# --- vectorize=True gives the loop's blocks ------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_vectorized_jacobian_is_the_loops(backend: str, strategy: str) -> None:
    xp = backend_namespace(backend)
    a, b = lib(xp, RNG.normal(size=(2, 3))), lib(xp, RNG.normal(size=4))
    for create_graph in (False, True):
        for strict in (False, True):
            kwargs = dict(create_graph=create_graph, strict=strict, strategy=strategy)
            want = jacobian(two_outputs, (a, b), **kwargs)
            got = jacobian(two_outputs, (a, b), vectorize=True, **kwargs)
            assert_same(got, want, exact=backend != "torch")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_vectorized_hessian_is_the_loops(backend: str, strategy: str) -> None:
    xp = backend_namespace(backend)
    w, x = lib(xp, W), lib(xp, X[0])
    kwargs = dict(outer_jacobian_strategy=strategy)
    want = full_hessian(loss, (w, x), **kwargs)
    got = full_hessian(loss, (w, x), vectorize=True, **kwargs)
    assert_same(got, want, exact=backend != "torch")


@pytest.mark.parametrize("backend", BACKENDS)
def test_vectorized_complex_conventions_are_the_loops(backend: str) -> None:
    xp = backend_namespace(backend)
    r = lib(xp, np.array([0.5, -1.0, 2.0]))
    z = lib(xp, np.array([1.0 + 2.0j, -0.5j, 3.0]))

    def mixed(a: Any, b: Any) -> Any:  # complex and real outputs of real and complex inputs
        return F.sum(a) * F.sin(b), F.real(b * b) + a

    for strategy in ("reverse-mode", "forward-mode"):
        want = jacobian(mixed, (r, z), strategy=strategy)
        assert_same(jacobian(mixed, (r, z), vectorize=True, strategy=strategy), want, False)
    holomorphic = lambda b: F.sum(b**3)  # noqa: E731
    assert_same(full_hessian(holomorphic, z, vectorize=True), full_hessian(holomorphic, z), False)
    assert_same(jacrev(lambda b: F.exp(b))(z), jacobian(F.exp, z), False)
    assert_same(jacfwd(lambda b: F.exp(b))(z), jacobian(F.exp, z), False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_func_jacobians_are_the_loops(backend: str) -> None:
    xp = backend_namespace(backend)
    w, x = lib(xp, W), lib(xp, X[0])
    exact = backend != "torch"
    assert_same(jacrev(layer, argnums=(0, 1))(w, x), jacobian(layer, (w, x)), exact)
    columns = jacobian(layer, (w, x), strategy="forward-mode")
    assert_same(jacfwd(layer, argnums=(0, 1))(w, x), columns, exact)
    assert_same(hessian(loss)(w, x), full_hessian(loss, (w, x))[0][0], False)


# torch's forward mode calls torch.jit.script, deprecated in torch 2.13.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_vectorized_jacobian_is_torchs(strategy: str) -> None:
    import torch.autograd.functional as TF

    a, b = torch.tensor(RNG.normal(size=(2, 3))), torch.tensor(RNG.normal(size=4))

    def torch_two_outputs(a: Any, b: Any) -> Any:
        return a.sum() * torch.exp(b), torch.tanh(b).reshape(2, 2) * (a * a).sum()

    want = TF.jacobian(torch_two_outputs, (a, b), vectorize=True, strategy=strategy)
    got = jacobian(two_outputs, (a, b), vectorize=True, strategy=strategy)
    for g, w in zip(leaves(got), leaves(want), strict=True):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_rows_a_pass_does_not_batch_are_the_callers_own() -> None:
    # floor's derivative is zeros that no seed reaches: the same for every row
    x = np.array([0.5, 1.5, 2.5])
    for block in (
        jacobian(F.floor, x, vectorize=True),
        jacrev(F.floor)(x),
        jacfwd(lambda v: F.floor(v) + 0.0 * v)(x),
    ):
        np.testing.assert_array_equal(block, np.zeros((3, 3)))
        block[0, 0] = 1.0  # writable, and shares no memory between rows
        assert block[1, 1] == 0.0


def test_one_batched_backward_per_output(monkeypatch: pytest.MonkeyPatch) -> None:
    import agnograd.transforms._transforms as transforms

    passes = []
    real = transforms._grad

    def counting(*args: Any, **kwargs: Any) -> Any:
        passes.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(transforms, "_grad", counting)
    a, b = RNG.normal(size=(2, 3)), RNG.normal(size=4)
    jacrev(two_outputs, argnums=(0, 1))(a, b)
    assert len(passes) == 2  # one per output, not 4 + 16
    passes.clear()
    jacrev(jacrev(loss))(W, X[0])
    assert len(passes) == 1 + 1  # the gradient's pass, then all its rows at once


# --- vmap with the other transforms, in either order ----------------------------------


def loop(f: Any, *args: Any, in_axes: tuple[Any, ...]) -> Any:
    """``f`` on each example, stacked: what ``vmap(f, in_axes)`` gives."""
    n = next(a.shape[0] for a, ax in zip(args, in_axes, strict=True) if ax is not None)
    per = [
        leaves(f(*[a if ax is None else a[k] for a, ax in zip(args, in_axes, strict=True)]))
        for k in range(n)
    ]
    return [np.stack([to_numpy(p[j]) for p in per]) for j in range(len(per[0]))]


TRANSFORMS = {
    "grad": lambda: grad(loss),
    "grad_x": lambda: grad(loss, argnums=1),
    "jacrev": lambda: jacrev(layer),
    "jacrev_both": lambda: jacrev(layer, argnums=(0, 1)),
    "jacfwd": lambda: jacfwd(layer),
    "jacfwd_x": lambda: jacfwd(layer, argnums=1),
    "hessian": lambda: hessian(loss),
    "hessian_x": lambda: hessian(loss, argnums=1),
    "jvp": lambda: lambda w, x: jvp(lambda v: layer(v, x), (w,), (w * 0.5,))[1],
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_vmap_of_a_transform_is_a_loop(name: str) -> None:
    f = TRANSFORMS[name]()
    got = leaves(vmap(f, in_axes=(None, 0))(W, X))
    assert_same(got, loop(f, W, X, in_axes=(None, 0)), exact=False)


@pytest.mark.parametrize("name", ["jacrev", "jacfwd", "hessian"])
def test_vmap_over_both_arguments(name: str) -> None:
    f = TRANSFORMS[name]()
    ws = np.stack([W, W * 0.5, -W, W, W * 2.0])
    assert_same(leaves(vmap(f)(ws, X)), loop(f, ws, X, in_axes=(0, 0)), exact=False)


def batched_layer(w: Any, xs: Any) -> Any:
    return vmap(layer, in_axes=(None, 0))(w, xs)


def batched_loss(w: Any, xs: Any) -> Any:
    out = vmap(loss, in_axes=(None, 0))(w, xs)
    return agnograd.namespace(out).sum(out)


@pytest.mark.parametrize(
    ("outer", "f", "want"),
    [
        (jacrev, batched_layer, lambda: jacobian(lambda w: F.tanh(X @ w), W)),
        (jacfwd, batched_layer, lambda: jacobian(lambda w: F.tanh(X @ w), W)),
        (hessian, batched_loss, lambda: full_hessian(lambda w: F.sum(F.tanh(X @ w) ** 2), W)),
        (grad, batched_loss, lambda: sum(grad(loss)(W, x) for x in X)),
    ],
    ids=["jacrev", "jacfwd", "hessian", "grad"],
)
def test_a_transform_of_vmap_is_of_the_whole_batch(outer: Any, f: Any, want: Any) -> None:
    assert_same(outer(f)(W, X), want(), exact=False)


def test_jvp_of_vmap() -> None:
    v = np.ones_like(X)
    _, got = jvp(lambda xs: batched_layer(W, xs), (X,), (v,))
    want = np.stack([jvp(lambda x: layer(W, x), (x,), (r,))[1] for x, r in zip(X, v, strict=True)])
    assert_same(got, want, exact=False)


def torch_layer(w: Any, x: Any) -> Any:
    return torch.tanh(x @ w)


def torch_loss(w: Any, x: Any) -> Any:
    return torch.sum(torch.tanh(x @ w) ** 2)


def torch_batched_layer(w: Any, xs: Any) -> Any:
    return torch.func.vmap(torch_layer, in_dims=(None, 0))(w, xs)


def torch_batched_loss(w: Any, xs: Any) -> Any:
    return torch.func.vmap(torch_loss, in_dims=(None, 0))(w, xs).sum()


# torch.func.jacfwd calls torch.jit.script, deprecated in torch 2.13.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", ["grad", "jacrev", "jacfwd", "hessian"])
def test_either_order_is_torch_funcs(name: str) -> None:
    ours, theirs = getattr(agnograd.func, name), getattr(torch.func, name)
    scalar = name in ("grad", "hessian")
    f, tf = (loss, torch_loss) if scalar else (layer, torch_layer)
    tw, tx = torch.tensor(W), torch.tensor(X)
    want = torch.func.vmap(theirs(tf), in_dims=(None, 0))(tw, tx)
    got = vmap(ours(f), in_axes=(None, 0))(tw, tx)
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    g, tg = (batched_loss, torch_batched_loss) if scalar else (batched_layer, torch_batched_layer)
    torch.testing.assert_close(ours(g)(tw, tx), theirs(tg)(tw, tx), rtol=1e-12, atol=1e-12)


# --- what the compositions needed of vmap itself -------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_batched_seeds_reach_rules_that_use_their_nodes_namespace(backend: str) -> None:
    # conj's and real's rules call the node's namespace on the gradient: with batched
    # seeds into a graph of unbatched arrays, it is the two combined
    xp = backend_namespace(backend)
    z = lib(xp, np.array([1.0 + 2.0j, -0.5j, 3.0]))

    def f(v: Any) -> Any:
        return F.conj(v) * 2.0 + F.real(v)

    _, vjp_fn = agnograd.func.vjp(f, z)
    eye = xp.eye(3, dtype=xp.complex128)
    (rows,) = vmap(vjp_fn)(eye)
    want = np.stack([to_numpy(vjp_fn(eye[k, ...])[0]) for k in range(3)])
    np.testing.assert_array_equal(to_numpy(rows), want)


def test_a_batched_operand_on_the_right_of_an_unbatched_strict_array() -> None:
    # array-api-strict's operators refuse an operand they do not know; the node asks
    # the batched array's reflected operator
    xp = backend_namespace("array_api_strict")
    x = agnograd.Variable(xp.asarray([1.0, 2.0]), requires_grad=False)
    got = vmap(lambda w: x * w)(xp.asarray(W[:2, :2].T))
    np.testing.assert_array_equal(to_numpy(got), W[:2, :2].T * np.array([1.0, 2.0]))


def test_a_pass_that_cannot_batch_takes_the_loop() -> None:
    # the gradient of indexing an unbatched array takes no batched seed yet
    x = np.array([1.0, 2.0, 3.0])
    f = lambda v: v[0] * v[1:]  # noqa: E731
    assert_same(jacrev(f)(x), jacobian(f, x))
    assert_same(jacobian(f, x, vectorize=True), jacobian(f, x))
