"""Dask: forward and backward build lazy task graphs; a distributed cluster runs them.

Laziness is checked by running forward and backward under a dask scheduler that
fails on any compute; the gradients are then computed on a
``dask.distributed.LocalCluster`` and compared with the same model on NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Variable

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


def _refuse_to_compute(*args: object, **kwargs: object) -> None:
    raise AssertionError("something computed a dask graph during forward or backward")


def _data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "x": rng.standard_normal((12, 5)),
        "w1": rng.standard_normal((8, 5)) * 0.5,
        "b1": rng.standard_normal(8) * 0.1,
        "w2": rng.standard_normal((3, 8)) * 0.5,
        "b2": np.zeros(3),
        "onehot": np.eye(3)[rng.integers(0, 3, 12)],
        "pick": np.array([0, 3, 3, 7, 11, 11, 11]),
    }


def _loss(v: dict[str, Variable]) -> Variable:
    # A two-layer MLP with cross entropy against one-hot targets, plus integer-array
    # indexing with repeats (its backward is a scatter-add, which must stay lazy too).
    # (F.softmax_cross_entropy turns its count of valid labels into a Python int,
    # which computes the graph.)
    h = F.tanh(F.linear(v["x"], v["w1"], v["b1"]))
    y = F.linear(h, v["w2"], v["b2"])
    cross_entropy = -F.sum(F.log_softmax(y) * v["onehot"]) / y.shape[0]
    picked = F.get_item(h, v["pick"])
    return cross_entropy + F.mean(picked * picked)


def _variables(arrays: dict[str, object]) -> dict[str, Variable]:
    constants = {"x", "onehot", "pick"}
    return {k: Variable(a, requires_grad=k not in constants) for k, a in arrays.items()}


def _on_dask(data: dict[str, np.ndarray]) -> dict[str, object]:
    chunks = {
        "x": (4, 5),
        "w1": (4, 5),
        "b1": 4,
        "w2": (3, 4),
        "b2": 3,
        "onehot": (4, 3),
        "pick": 4,
    }
    return {k: da.from_array(a, chunks=chunks[k]) for k, a in data.items()}


def test_forward_and_backward_stay_lazy_and_match_numpy():
    data = _data()
    reference = _variables(dict(data))
    _loss(reference).backward()
    v = _variables(_on_dask(data))
    with dask.config.set(scheduler=_refuse_to_compute):
        loss = _loss(v)
        loss.backward()
    for name in ("w1", "b1", "w2", "b2"):
        grad = v[name].grad
        assert isinstance(grad, da.Array), name
        np.testing.assert_allclose(grad.compute(scheduler="sync"), reference[name].grad, rtol=1e-10)
    np.testing.assert_allclose(loss.array.compute(scheduler="sync"), reference_loss(data))


def reference_loss(data: dict[str, np.ndarray]) -> float:
    """The loss by hand in NumPy, independent of agnograd."""
    h = np.tanh(data["x"] @ data["w1"].T + data["b1"])
    y = h @ data["w2"].T + data["b2"]
    y = y - y.max(axis=1, keepdims=True)
    log_p = y - np.log(np.exp(y).sum(axis=1, keepdims=True))
    cross_entropy = -(log_p * data["onehot"]).sum() / len(y)
    picked = h[data["pick"]]
    return float(cross_entropy + (picked * picked).mean())


@pytest.mark.slow
def test_training_step_on_a_local_cluster():
    distributed = pytest.importorskip("distributed")
    data = _data()
    reference = _variables(dict(data))
    _loss(reference).backward()
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        v = _variables(_on_dask(data))
        with dask.config.set(scheduler=_refuse_to_compute):
            loss = _loss(v)
            loss.backward()
        names = ("w1", "b1", "w2", "b2")
        futures = client.compute([loss.array, *(v[n].grad for n in names)])
        computed_loss, *grads = client.gather(futures)
        assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.workers)) == 2
    np.testing.assert_allclose(computed_loss, reference_loss(data))
    for name, grad in zip(names, grads, strict=True):
        np.testing.assert_allclose(grad, reference[name].grad, rtol=1e-10)


def test_moving_between_dask_and_numpy():
    x = Variable(da.from_array(np.arange(4.0), chunks=2), grad=da.ones(4, chunks=2))
    assert x.device.name == "@dask"
    x.to_device("@numpy")
    assert isinstance(x.array, np.ndarray)
    assert isinstance(x.grad, np.ndarray)
    x.to_device("@dask")
    assert isinstance(x.array, da.Array)
    np.testing.assert_array_equal(x.array.compute(), np.arange(4.0))
    assert x.to_cpu() is x  # dask is host memory already


def test_copy_from_numpy_to_dask_sends_gradients_back():
    x = Variable(np.array([1.0, 2.0, 3.0]))
    y = F.copy(x, "@dask")
    assert isinstance(y.array, da.Array)
    F.sum(y * y).backward()
    assert isinstance(x.grad, np.ndarray)
    np.testing.assert_allclose(x.grad, [2.0, 4.0, 6.0])


def test_dask_arrays_have_no_views():
    x = Variable(da.ones(3, chunks=2))
    with pytest.raises(BufferError, match="not memory buffers"):
        x.view.numpy  # noqa: B018
    with pytest.warns(agnograd.backends._device.CopyWarning):
        assert isinstance(x.view("numpy", allow_copy=True), np.ndarray)


def test_cholesky_gives_the_lower_factor_and_its_gradient():
    a = np.array([[4.0, 2.0, 0.4], [2.0, 5.0, 1.0], [0.4, 1.0, 3.0]])
    seed = np.arange(9.0).reshape(3, 3)
    reference = Variable(a)
    expected = agnograd.namespace(reference).linalg.cholesky(reference)
    F.sum(expected * seed).backward()
    x = Variable(da.from_array(a, chunks=3))
    y = agnograd.namespace(x).linalg.cholesky(x)
    F.sum(y * da.from_array(seed)).backward()
    np.testing.assert_allclose(y.array.compute(), np.linalg.cholesky(a), atol=1e-12)
    np.testing.assert_allclose(x.grad.compute(), reference.grad, rtol=1e-10)
