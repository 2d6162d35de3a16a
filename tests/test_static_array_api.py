"""Array API code builds define-then-run graphs: the same code, eager or static.

Under ``auto_forward(False)`` a function's result has no data until ``forward()``,
but its namespace (``x.__array_namespace__()``), shape, dtype and device are known,
so array API code, written by hand or by others (array-api-extra, SciPy with
``SCIPY_ARRAY_API=1``), links a graph instead of computing. Each case runs the code
twice on the same inputs: eagerly, and on intermediate results of a graph built
with auto-forward off (Variables without data), which is then run with
``forward()`` and ``backward()``. The values and the gradients must be the eager
ones, on NumPy, array-api-strict and PyTorch.

Code whose flow or result shape depends on the values (``if xp.any(...)``, boolean
mask indexing) cannot be built ahead of the data: it is refused when the graph is
built, with an error that says so.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zlib
from collections.abc import Callable
from typing import Any

import array_api_compat
import numpy as np
import pytest

import agnograd
from agnograd import Variable
from agnograd.core._printing import to_numpy
from agnograd.testing import backend_namespace

xpx = pytest.importorskip("array_api_extra")
pytest.importorskip("torch")

BACKENDS = ("numpy", "array_api_strict", "torch")


def inputs(name: str, shapes: tuple[tuple[int, ...], ...], backend: str) -> list[Any]:
    """float64 arrays of ``backend`` in [0.5, 2] (inside every case's domain), seeded
    by ``name``."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    xp = backend_namespace(backend)
    return [xp.asarray(rng.uniform(0.5, 2.0, shape)) for shape in shapes]


def eager_and_static(
    func: Callable[..., Any], arrays: list[Any], seed: int = 0
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``(value, gradients)`` of ``func`` computed eagerly, then through a graph built
    with auto-forward off, as NumPy arrays; the output gradient is random."""
    results = []
    gy = None
    for static in (False, True):
        leaves = [Variable(a) for a in arrays]
        with agnograd.auto_forward(not static):
            # Intermediate results: in the static graph they have no data yet.
            operands = [leaf * 1.0 for leaf in leaves]
            y = func(*operands)
        assert isinstance(y, Variable), f"returned {type(y).__name__}"
        if static:
            assert y.array is None, "the graph was computed while it was built"
            y.forward()
        if gy is None:
            rng = np.random.default_rng(seed)
            xp = backend_namespace_of(y)
            gy = xp.asarray(rng.standard_normal(tuple(y.shape)).astype(to_numpy(y.array).dtype))
        y.backward(grad=gy)
        results.append((to_numpy(y.array), *(to_numpy(leaf.grad) for leaf in leaves)))
    return results[0], results[1]


def backend_namespace_of(y: Variable) -> Any:
    return array_api_compat.array_namespace(y.array)


def assert_same(eager: tuple[Any, ...], static: tuple[Any, ...]) -> None:
    for i, (a, b) in enumerate(zip(eager, static, strict=True)):
        what = "value" if i == 0 else f"gradient of input {i - 1}"
        assert (a.shape, a.dtype) == (b.shape, b.dtype), what
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, err_msg=what)


# ---------------------------------------------------------------------------------
# The namespace of a Variable without data


def test_the_namespace_of_a_result_without_data_is_its_library_s() -> None:
    for backend in BACKENDS:
        (a,) = inputs("namespace", ((3,),), backend)
        x = Variable(a)
        with agnograd.auto_forward(False):
            h = x * 2.0
        assert h.array is None
        assert h.__array_namespace__() is x.__array_namespace__()
        assert array_api_compat.array_namespace(h) is x.__array_namespace__()
        assert h.xp is x.xp
        assert h.device == x.device


def test_an_uninitialised_variable_has_no_namespace() -> None:
    with pytest.raises(RuntimeError, match="neither data nor a creator"):
        Variable().__array_namespace__()


# ---------------------------------------------------------------------------------
# Array API code written by hand


def mlp_loss(x: Any, w: Any, b: Any) -> Any:
    """A small network, written once against the array API standard."""
    xp = array_api_compat.array_namespace(x, w, b)
    h = xp.tanh(x @ w + b)
    logits = h - xp.max(h, axis=-1, keepdims=True)
    log_p = logits - xp.log(xp.sum(xp.exp(logits), axis=-1, keepdims=True))
    scale = xp.asarray(0.5, dtype=x.dtype, device=x.device)
    return -xp.mean(log_p[..., 0]) + scale * xp.sum(w * w) / w.shape[0]


def elementwise_mix(a: Any, b: Any) -> Any:
    """Many elementwise functions, operators and Python scalars together."""
    xp = a.__array_namespace__()
    c = xp.where(a > b, xp.hypot(a, b), xp.atan2(a, b) ** 2)
    d = xp.clip(c, 0.1, None) / (1 + xp.abs(b)) - xp.logaddexp(a, 2.0)
    e = xp.sign(d) * xp.sqrt(xp.square(d) + 1) + xp.expm1(-a) * xp.log1p(b)
    f = xp.maximum(e, xp.minimum(a, b)) + xp.copysign(xp.reciprocal(b), -a)
    return xp.sum(f * xp.astype(xp.isfinite(f), f.dtype), axis=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_written_array_api_code(backend: str) -> None:
    arrays = inputs("mlp", ((4, 3), (3, 5), (5,)), backend)
    assert_same(*eager_and_static(mlp_loss, arrays))
    arrays = inputs("mix", ((2, 3), (3,)), backend)
    assert_same(*eager_and_static(elementwise_mix, arrays))


# ---------------------------------------------------------------------------------
# array-api-extra


def masked_fill(x: Any) -> Any:
    """Writes with masks computed from the data, of a scalar and of a 0-d result."""
    xp = x.__array_namespace__()
    y = xp.log(x) * x
    y[y < -0.1] = 0.0
    y[y > 0.5] = xp.min(x)
    return y * x


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_with_keys_computed_in_the_graph(backend: str) -> None:
    assert_same(*eager_and_static(masked_fill, inputs("masked", ((5,),), backend)))


XPX_CASES: dict[str, tuple[Callable[..., Any], tuple[tuple[int, ...], ...]]] = {
    "sinc": (xpx.sinc, ((2, 3),)),
    "cov": (xpx.cov, ((3, 5),)),
    "cov_1d": (xpx.cov, ((4,),)),
    "kron": (xpx.kron, ((2, 2), (3, 1))),
    "pad": (lambda v: xpx.pad(v, 1, constant_values=0.5), ((2, 3),)),
    "pad_widths": (lambda v: xpx.pad(v, ((1, 0), (0, 2))), ((2, 3),)),
    "atleast_nd": (lambda v: xpx.atleast_nd(v, ndim=3), ((3,),)),
    "expand_dims": (lambda v: xpx.expand_dims(v, axis=(0, 2)), ((2, 3),)),
    "create_diagonal": (xpx.create_diagonal, ((2, 3),)),
    "at_set": (lambda v: xpx.at(v * 2.0, 1).set(5.0), ((3,),)),
    "at_add": (lambda v: xpx.at(v * 1.0)[0].add(v[1] * v[2]), ((3,),)),
    "nan_to_num": (lambda v: xpx.nan_to_num(v, fill_value=1.0), ((2, 3),)),
    "nansum": (lambda v: xpx.nansum(v, axis=0), ((2, 3),)),
    "nanmean": (lambda v: xpx.nanmean(v, axis=1), ((2, 3),)),
    "deg2rad": (xpx.deg2rad, ((3,),)),
    "rad2deg": (xpx.rad2deg, ((3,),)),
    "partition": (lambda v: xpx.partition(v, 2), ((6,),)),
}


def _params(cases: dict[str, Any]) -> list[Any]:
    """Each case on each backend, with ids ``name-backend``."""
    return [
        pytest.param(name, backend, id=f"{name}-{backend}")
        for name in cases
        for backend in BACKENDS
    ]


@pytest.mark.filterwarnings("ignore:.*expand_dims.*:DeprecationWarning")
@pytest.mark.parametrize(("name", "backend"), _params(XPX_CASES))
def test_array_api_extra(name: str, backend: str) -> None:
    func, shapes = XPX_CASES[name]
    assert_same(*eager_and_static(func, inputs(name, shapes, backend)))


# Value-dependent code: refused when the graph is built, saying why.
XPX_REFUSED: dict[str, tuple[Callable[..., Any], tuple[tuple[int, ...], ...], str]] = {
    "nanmax": (lambda v: xpx.nanmax(v, axis=1), ((2, 3),), "bool.. of a Variable without data"),
    "apply_where": (
        lambda v: xpx.apply_where(v > 1, v, lambda t: t * t, lambda t: -t),
        ((2, 3),),
        "data-dependent shape",
    ),
    "isclose": (xpx.isclose, ((3,), (3,)), "data-dependent shape"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(XPX_REFUSED))
def test_value_dependent_array_api_extra_is_refused_at_build_time(name: str, backend: str) -> None:
    func, shapes, message = XPX_REFUSED[name]
    leaves = [Variable(a) for a in inputs(name, shapes, backend)]
    with agnograd.auto_forward(False), pytest.raises((TypeError, RuntimeError), match=message):
        func(*[leaf * 1.0 for leaf in leaves])


# ---------------------------------------------------------------------------------
# SciPy with SCIPY_ARRAY_API=1, in a subprocess (see tests/test_foreign_code.py: SciPy
# reads the variable once, when it is first imported)

# name -> (function, as source using special, stats and fft; input shapes)
SCIPY_CASES: dict[str, tuple[str, tuple[tuple[int, ...], ...]]] = {
    "special.softmax": ("lambda x: special.softmax(x, axis=1)", ((2, 3),)),
    "special.xlogy": ("special.xlogy", ((3,), (3,))),
    "special.logsumexp": ("lambda x: special.logsumexp(x, axis=1)", ((2, 3),)),
    "special.log_softmax": ("lambda x: special.log_softmax(x, axis=-1)", ((2, 3),)),
    "stats.sem": ("lambda x: stats.sem(x, axis=1)", ((2, 4),)),
    "stats.skew": ("lambda x: stats.skew(x, axis=1)", ((2, 4),)),
    "stats.kurtosis": ("lambda x: stats.kurtosis(x, axis=1)", ((2, 4),)),
    "stats.gmean": ("lambda x: stats.gmean(x, axis=1)", ((2, 4),)),
    "stats.zscore": ("lambda x: stats.zscore(x, axis=1)", ((2, 4),)),
    "fft.fft": ("fft.fft", ((4,),)),
    "fft.rfft": ("lambda x: fft.rfft(x, axis=0)", ((4, 2),)),
    # Value-dependent: refused when the graph is built.
    "stats.moment": ("lambda x: stats.moment(x, order=3, axis=1)", ((2, 4),)),
    "stats.variation": ("lambda x: stats.variation(x, axis=1)", ((2, 4),)),
}

_REFUSED = {
    "stats.moment": "bool.. of a Variable without data",  # if xp.any(...)
    "stats.variation": "data-dependent shape",  # x[mask]
}


_SCIPY_SCRIPT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import numpy as np
from scipy import fft, special, stats
from scipy._lib import _array_api
sys.path.insert(0, sys.argv[1])
from test_static_array_api import eager_and_static, inputs

def run(source, shapes, backend):
    try:
        eager, static = eager_and_static(eval(source), inputs(source, shapes, backend))
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}".splitlines()[0]}
    return {"eager": [encode(a) for a in eager], "static": [encode(a) for a in static]}

def encode(a):
    return {"dtype": str(a.dtype), "re": np.real(a).tolist(), "im": np.imag(a).tolist()}

request = json.load(sys.stdin)
report = {"SCIPY_ARRAY_API": bool(_array_api.SCIPY_ARRAY_API), "cases": {}}
for name, (source, shapes) in request["cases"].items():
    shapes = tuple(tuple(s) for s in shapes)
    report["cases"][name] = {b: run(source, shapes, b) for b in request["backends"]}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def scipy_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("scipy")
    # Here, not at the top: the subprocess imports this module (and not conftest.py).
    from _session import computed_once

    return computed_once(tmp_path_factory, "static-scipy-report", _scipy_report)


def _scipy_report() -> dict[str, Any]:
    request = json.dumps({"cases": SCIPY_CASES, "backends": list(BACKENDS)})
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _SCIPY_SCRIPT, os.path.dirname(__file__)],
        input=request,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"the SciPy subprocess failed:\n{done.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert report["SCIPY_ARRAY_API"], "SCIPY_ARRAY_API=1 did not reach SciPy in the subprocess"
    return report


@pytest.mark.parametrize(("name", "backend"), _params(SCIPY_CASES))
def test_scipy(scipy_report: dict[str, Any], name: str, backend: str) -> None:
    row = scipy_report["cases"][name][backend]
    if name in _REFUSED:
        assert "error" in row, "value-dependent code built a graph"
        assert re.search(_REFUSED[name], row["error"]), row["error"]
        return
    assert "error" not in row, row.get("error")
    assert_same(*(tuple(_decode(a) for a in row[which]) for which in ("eager", "static")))


def _decode(a: dict[str, Any]) -> np.ndarray:
    dtype = np.dtype(a["dtype"])
    values = np.asarray(a["re"]) + 1j * np.asarray(a["im"]) if dtype.kind == "c" else a["re"]
    return np.asarray(values, dtype=dtype)
