"""``agnograd.vmap`` with values that every example shares: Variables the function
closes over or takes with ``in_axes=None`` (their gradient summed over the batch by
a backward after ``vmap`` returned, per example by one inside it), ``jvp`` of an
unbatched point with batched tangents, and vmaps running in several threads.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.func import grad, jvp, vmap
from agnograd.testing import backend_namespace
from agnograd.transforms import _vmap

pytest.importorskip("torch")

BACKENDS = ("numpy", "torch")
W0 = np.array([[0.5, -1.0, 0.2], [2.0, 0.3, -0.7]])
X0 = np.random.default_rng(0).normal(size=(5, 2))


def to_numpy(a: Any) -> np.ndarray:
    a = a.array if isinstance(a, Variable) else a
    return a.numpy() if hasattr(a, "numpy") else np.asarray(a)


def loss(x: Any, w: Any) -> Any:
    xp = agnograd.namespace(x, w)
    return xp.sum(xp.tanh(x @ w) ** 2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("closed_over", [True, False])
def test_shared_variable_gets_the_batch_summed_by_a_backward_after_vmap(
    backend: str, closed_over: bool
) -> None:
    xp = backend_namespace(backend)
    w, xs = Variable(xp.asarray(W0)), xp.asarray(X0)
    ys = vmap(lambda x: loss(x, w))(xs) if closed_over else vmap(loss, in_axes=(0, None))(xs, w)
    agnograd.namespace(ys).sum(ys).backward()
    ref = Variable(xp.asarray(W0))
    for x in xs:
        loss(x, ref).backward()  # the loop's gradients, accumulated
    assert to_numpy(w.grad).shape == W0.shape
    np.testing.assert_allclose(to_numpy(w.grad), to_numpy(ref.grad), rtol=1e-12)


def test_shared_variable_computed_outside_vmap_gets_the_sum() -> None:
    w = Variable(W0.copy())
    scaled = w * 3.0  # closed over, with a creator: the sum flows on through it
    ys = vmap(lambda x: loss(x, scaled))(X0)
    agnograd.namespace(ys).sum(ys).backward()
    want = 3.0 * sum(grad(loss, argnums=1)(x, 3.0 * W0) for x in X0)
    np.testing.assert_allclose(w.grad, want, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("closed_over", [True, False])
def test_shared_variable_gets_per_example_gradients_from_a_backward_inside_vmap(
    backend: str, closed_over: bool
) -> None:
    xp = backend_namespace(backend)
    w, xs = Variable(xp.asarray(W0)), xp.asarray(X0)

    def per_example(x: Any, w: Any) -> Any:
        return agnograd.grad([loss(x, w)], [w])[0]

    if closed_over:
        got = vmap(lambda x: per_example(x, w))(xs)
    else:
        got = vmap(per_example, in_axes=(0, None))(xs, w)
    want = np.stack([to_numpy(per_example(x, w)) for x in xs])
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12)
    # and through agnograd.func.grad of a closure over the unbatched point
    w0 = xp.asarray(W0)
    got = vmap(lambda x: grad(lambda v: loss(x, v))(w0))(xs)
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12)


def test_grad_of_a_function_whose_vmap_closes_over_its_argument() -> None:
    def total(w: Any) -> Any:
        ys = vmap(lambda x: loss(x, w))(X0)
        return agnograd.namespace(ys).sum(ys)

    want = sum(grad(loss, argnums=1)(x, W0) for x in X0)
    np.testing.assert_allclose(grad(total)(W0), want, rtol=1e-12)


def test_shared_variable_that_requires_no_gradient_costs_no_node(monkeypatch: Any) -> None:
    made = []
    monkeypatch.setattr(_vmap._Share, "forward", lambda self, xs: made.append(self) or xs)
    w, xs = Variable(W0.copy(), requires_grad=False), Variable(X0.copy())
    ys = vmap(lambda x: loss(x, w))(xs)
    agnograd.namespace(ys).sum(ys).backward()
    assert made == []
    np.testing.assert_allclose(xs.grad, np.stack([grad(loss)(x, W0) for x in X0]), rtol=1e-12)


def test_jvp_of_an_unbatched_point_with_batched_tangents() -> None:
    x0 = np.array([0.3, -1.2])

    def f(y: Any) -> Any:
        xp = agnograd.namespace(y)
        return xp.sum(xp.tanh(y @ W0) ** 2) + xp.mean(xp.exp(y))

    tangents = np.eye(2)
    primal, columns = vmap(lambda v: jvp(f, (x0,), (v,)))(tangents)
    want = np.stack([jvp(f, (x0,), (v,))[1] for v in tangents])
    np.testing.assert_allclose(columns, want, rtol=1e-12)
    np.testing.assert_allclose(primal, np.repeat(f(x0)[None], 2))


def test_vmaps_in_two_threads() -> None:
    rounds, barrier, failures = 20, threading.Barrier(2), []
    want_sum = sum(grad(loss, argnums=1)(x, W0) for x in X0)
    want_per = np.stack([grad(loss, argnums=1)(x, W0) for x in X0])

    def one_round(w: Variable) -> None:
        def f(x: Any) -> Any:
            barrier.wait(timeout=10)  # both threads inside their vmaps at once
            return loss(x, w)

        ys = vmap(f)(X0)
        barrier.wait(timeout=10)  # one thread's backward while the other's vmap runs
        per = vmap(lambda x: agnograd.grad([loss(x, w)], [w])[0])(X0)
        agnograd.namespace(ys).sum(ys).backward()
        np.testing.assert_allclose(w.grad, want_sum, rtol=1e-12)
        np.testing.assert_allclose(to_numpy(per), want_per, rtol=1e-12)

    def work() -> None:
        try:
            for _ in range(rounds):
                one_round(Variable(W0.copy()))
        except BaseException as error:  # reported by the main thread
            failures.append(error)
            barrier.abort()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict", "torch"])
def test_vmap_of_a_vjp_gives_the_jacobian_in_one_backward(backend: str) -> None:
    # The point unbatched, the cotangents batched: the backward's rules run once, on
    # the batch of seeds (the rows of an identity), and give the Jacobian's rows.
    xp = backend_namespace(backend)
    x = xp.linspace(-1.0, 1.0, 4, dtype=xp.float64)

    def f(x: Any) -> Any:
        return F.tanh(x) * 2.0 + F.sum(x * x)

    _, vjp_fn = agnograd.func.vjp(f, x)
    (rows,) = agnograd.vmap(vjp_fn)(xp.eye(4, dtype=xp.float64))
    np.testing.assert_allclose(to_numpy(rows), to_numpy(agnograd.func.jacrev(f)(x)), rtol=1e-12)


def test_backward_with_batched_seeds_into_unbatched_leaves_is_refused() -> None:
    x = agnograd.Variable(np.linspace(-1.0, 1.0, 4))
    y = F.tanh(x)
    with pytest.raises(TypeError, match=r"backward: grad_outputs\[0\]"):
        agnograd.vmap(lambda s: agnograd.backward([y], [s]))(np.eye(4))
    assert x.grad is None
