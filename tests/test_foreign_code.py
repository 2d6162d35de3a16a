"""Other people's array API code runs unchanged on Variables and is differentiable.

Functions of array-api-extra, and of SciPy with ``SCIPY_ARRAY_API=1``, are given
Variables holding numpy, array_api_strict and torch arrays. They find agnograd's
namespace through ``array_api_compat.array_namespace``, return Variables of the same
backend with the values they return for the raw arrays, and their gradients agree
with central differences to first and second order (``agnograd.testing``). Inputs
are fixed, drawn once from a seeded generator inside each function's domain.

SciPy reads ``SCIPY_ARRAY_API`` once, when it is first imported, and another test
module of the same pytest process may import it first; so the SciPy cases run in
one subprocess with the variable set, which reports a JSON table.

Foreign code must be given Variables everywhere: ``array_namespace(variable,
raw_array)`` sees two namespaces and raises (wrap constants with
``agnograd.as_variable``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np
import pytest
from _session import computed_once
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import agnograd
from agnograd import Variable
from agnograd.testing import (
    assert_allclose,
    backend_namespace,
    check_backward,
    check_double_backward,
)

xpx = pytest.importorskip("array_api_extra")
pytest.importorskip("torch")

BACKENDS = ("numpy", "array_api_strict", "torch")


def inputs_for(name: str, specs: tuple[tuple[str, tuple[int, ...]], ...]) -> list[np.ndarray]:
    """float64 (or complex128) NumPy inputs from their domains, seeded by ``name``.

    Domains: ``any`` (standard normal), ``positive`` (in [0.5, 2]), ``away`` (0.3 to
    1.5 away from zero: the kinks of ``where``-based code), ``distinct`` (at least
    0.4 apart: no ties for max, sort and partition) and ``complex``.
    """
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    arrays = []
    for domain, shape in specs:
        if domain == "any":
            a = rng.standard_normal(shape)
        elif domain == "positive":
            a = rng.uniform(0.5, 2.0, shape)
        elif domain == "away":
            a = rng.uniform(0.3, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
        elif domain == "distinct":
            size = int(np.prod(shape))
            a = (rng.permutation(size) * 0.5 - size / 4 + rng.uniform(0, 0.1, size)).reshape(shape)
        elif domain == "complex":
            a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        else:
            raise ValueError(f"inputs_for: unknown domain {domain!r} for case {name!r}")
        arrays.append(np.asarray(a))
    return arrays


def on_backend(backend: str, arrays: list[np.ndarray]) -> tuple[Any, ...]:
    xp = backend_namespace(backend)
    return tuple(xp.asarray(a) for a in arrays)


def random_like(backend: str, y: Any, seed: int) -> Any:
    """A random array of ``y``'s shape and dtype on ``backend`` (an output gradient)."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(tuple(y.shape))
    if np.dtype(to_numpy(y).dtype).kind == "c":
        values = values + 1j * rng.standard_normal(tuple(y.shape))
    return backend_namespace(backend).asarray(values.astype(to_numpy(y).dtype))


def to_numpy(a: Any) -> np.ndarray:
    a = a.array if isinstance(a, Variable) else a
    if hasattr(a, "detach"):  # torch
        return a.detach().resolve_conj().numpy()
    return np.asarray(a)


def assert_same_backend(y: Any, x: Any, what: str) -> None:
    assert isinstance(y, Variable), f"{what} returned {type(y).__name__}, not a Variable"
    raw_y = array_api_compat.array_namespace(y.array)
    raw_x = array_api_compat.array_namespace(x)
    assert raw_y is raw_x, f"{what}: result lives in {raw_y.__name__}, input in {raw_x.__name__}"


# ---------------------------------------------------------------------------
# array-api-extra, differentiable


@dataclass(frozen=True)
class Case:
    name: str
    func: Callable[..., Any]
    specs: tuple[tuple[str, tuple[int, ...]], ...]
    # Maps a result (as NumPy) to what the function specifies: partition leaves the
    # order on either side of the k-th element to the implementation.
    canonical: Callable[[np.ndarray], np.ndarray] | None = None


def _partitioned(k: int) -> Callable[[np.ndarray], np.ndarray]:
    def canonical(a: np.ndarray) -> np.ndarray:
        return np.concatenate([np.sort(a[:k], axis=0), a[k : k + 1], np.sort(a[k + 1 :], axis=0)])

    return canonical


def _square(t: Any) -> Any:
    return t * t


def _negate(t: Any) -> Any:
    return -t


def _times(s: Any, t: Any) -> Any:
    return s * t


XPX_CASES = [
    Case("cov", xpx.cov, (("any", (3, 5)),)),
    Case("cov_1d", xpx.cov, (("any", (4,)),)),
    Case("sinc", xpx.sinc, (("away", (2, 3)),)),
    Case("kron", xpx.kron, (("any", (2, 2)), ("any", (3, 1)))),
    Case("pad", lambda v: xpx.pad(v, 1, constant_values=0.5), (("any", (2, 3)),)),
    Case("pad_widths", lambda v: xpx.pad(v, ((1, 0), (0, 2))), (("any", (2, 3)),)),
    Case("atleast_nd", lambda v: xpx.atleast_nd(v, ndim=3), (("any", (3,)),)),
    Case("expand_dims", lambda v: xpx.expand_dims(v, axis=(0, 2)), (("any", (2, 3)),)),
    Case("create_diagonal", xpx.create_diagonal, (("any", (2, 3)),)),
    Case("create_diagonal_offset", lambda v: xpx.create_diagonal(v, offset=-1), (("any", (3,)),)),
    Case(
        "apply_where",
        lambda v: xpx.apply_where(v > 0, v, _square, _negate),
        (("away", (2, 3)),),
    ),
    Case(
        "apply_where_fill",
        lambda a, b: xpx.apply_where(a > 0, (a, b), _times, fill_value=0.0),
        (("away", (4,)), ("any", (4,))),
    ),
    # In place on an intermediate (copy=None writes into it): a SetItem node.
    Case("at_set_intermediate", lambda v: xpx.at(v * 2.0, 1).set(5.0), (("any", (3,)),)),
    Case(
        "at_add_intermediate",
        lambda v: xpx.at(v * 1.0)[0].add(v[1] * v[2]),
        (("any", (3,)),),
    ),
    Case("at_set_copy", lambda v: xpx.at(v, 1).set(5.0, copy=True), (("any", (3,)),)),
    Case("at_add_copy", lambda v: xpx.at(v)[0].add(v[1] * v[2], copy=True), (("any", (3,)),)),
    Case("nan_to_num", lambda v: xpx.nan_to_num(v, fill_value=1.0), (("any", (2, 3)),)),
    Case("nansum", lambda v: xpx.nansum(v, axis=0), (("any", (2, 3)),)),
    Case("nanmean", lambda v: xpx.nanmean(v, axis=1), (("any", (2, 3)),)),
    Case("nanmax", lambda v: xpx.nanmax(v, axis=1), (("distinct", (2, 3)),)),
    Case("nanmin", xpx.nanmin, (("distinct", (2, 3)),)),
    Case("deg2rad", xpx.deg2rad, (("any", (3,)),)),
    Case("rad2deg", xpx.rad2deg, (("any", (3,)),)),
    Case("angle", xpx.angle, (("complex", (3,)),)),
    Case("partition", lambda v: xpx.partition(v, 2), (("distinct", (6,)),), _partitioned(2)),
    Case(
        "partition_2d",
        lambda v: xpx.partition(v, 1, axis=0),
        (("distinct", (4, 2)),),
        _partitioned(1),
    ),
]

XPX_MARKS: dict[str, list[Any]] = {
    # xpx.expand_dims is deprecated in favour of the standard's xp.expand_dims.
    "expand_dims": [pytest.mark.filterwarnings("ignore:.*expand_dims.*:DeprecationWarning")],
}


def _xpx_params() -> list[Any]:
    return [
        pytest.param(case, backend, id=f"{case.name}-{backend}", marks=XPX_MARKS.get(case.name, []))
        for case in XPX_CASES
        for backend in BACKENDS
    ]


@pytest.mark.parametrize(("case", "backend"), _xpx_params())
def test_array_api_extra_gradients(case: Case, backend: str) -> None:
    xs = on_backend(backend, inputs_for(case.name, case.specs))
    variables = [Variable(x) for x in xs]
    y = case.func(*variables)

    assert_same_backend(y, xs[0], f"xpx {case.name}")
    assert y.creator is not None, f"xpx {case.name}: the result is not connected to the graph"
    canonical = case.canonical or (lambda a: a)
    expected = canonical(to_numpy(case.func(*xs)))
    assert_allclose(canonical(to_numpy(y)), expected, rtol=1e-12, atol=1e-12)

    gy = random_like(backend, y, seed=1)
    check_backward(case.func, xs, gy)
    ggx = tuple(random_like(backend, x, seed=2 + i) for i, x in enumerate(xs))
    check_double_backward(case.func, xs, gy, ggx)


# Shapes from hypothesis (0-d included where the function takes it) for the
# functions of array-api-extra that accept any shape.
SHAPED: dict[str, tuple[Callable[..., Any], int, str]] = {
    # name -> (function, smallest ndim, domain)
    "sinc": (xpx.sinc, 0, "away"),
    "atleast_nd": (lambda v: xpx.atleast_nd(v, ndim=2), 0, "any"),
    "pad": (lambda v: xpx.pad(v, 1, constant_values=-1.0), 1, "any"),
    "kron": (lambda v: xpx.kron(v, v), 0, "any"),
    "nansum": (xpx.nansum, 0, "any"),
    "cov": (xpx.cov, 1, "any"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(SHAPED))
@settings(max_examples=4, deadline=None, database=None)
@given(data=st.data())
def test_array_api_extra_gradients_on_drawn_shapes(name: str, backend: str, data: Any) -> None:
    func, min_dims, domain = SHAPED[name]
    shape = data.draw(hnp.array_shapes(min_dims=min_dims, max_dims=2, min_side=1, max_side=3))
    if name == "cov":
        # At least two observations (the last axis): with one, cov divides by zero.
        shape = (*shape[:-1], max(shape[-1], 2))
    seed = data.draw(st.integers(0, 2**16), label="seed")
    (x,) = on_backend(backend, inputs_for(f"{name}{seed}", ((domain, shape),)))
    y = func(Variable(x))
    assert_same_backend(y, x, f"xpx {name}")
    gy = random_like(backend, y, seed=seed)
    check_backward(func, x, gy)
    check_double_backward(func, x, gy, random_like(backend, x, seed=seed + 1))


def test_foreign_code_finds_agnograd_namespace() -> None:
    for backend in BACKENDS:
        (x,) = on_backend(backend, [np.array([0.5, -1.0, 2.0])])
        v = Variable(x)
        xp = array_api_compat.array_namespace(v)
        assert xp is v.__array_namespace__()
        assert type(xp).__module__.startswith("agnograd"), xp
        # The functions the foreign code looks up compute on Variables.
        assert isinstance(xp.sum(xp.exp(v)), Variable)


def test_nan_functions_give_no_gradient_to_nans() -> None:
    # nansum and nanmean drop NaNs with where(isnan(x), 0, x): the NaN elements get
    # a zero gradient, the others what sum and mean give them.
    data = np.array([[0.5, np.nan, 1.2], [np.nan, -0.3, 0.7]])
    finite = ~np.isnan(data)
    for backend in BACKENDS:
        (x,) = on_backend(backend, [data])
        v = Variable(x)
        xp = v.__array_namespace__()
        loss = xp.sum(xpx.nansum(v, axis=1)) + xp.sum(xpx.nanmean(v, axis=1))
        loss.backward()
        expected = finite * (1.0 + 1.0 / finite.sum(axis=1, keepdims=True))
        assert_allclose(v.grad, expected, rtol=1e-12)


# ---------------------------------------------------------------------------
# array-api-extra, without a gradient: results are Variables that require none


@dataclass(frozen=True)
class PlainCase:
    name: str
    func: Callable[..., Any]
    data: tuple[Any, ...]


PLAIN_CASES = [
    PlainCase("nunique", xpx.nunique, ([0.3, 1.7, -0.4, 1.7],)),
    PlainCase("isclose", xpx.isclose, ([0.3, 1.7, -0.4], [0.3, 1.7 + 1e-3, -0.5])),
    PlainCase("isin", xpx.isin, ([0.3, 1.7, -0.4, 1.7], [1.7, 5.0])),
    PlainCase("searchsorted", xpx.searchsorted, ([-1.0, 0.5, 2.0], [0.3, 1.7, -3.0])),
    PlainCase("argpartition", lambda v: xpx.argpartition(v, 1), ([0.3, 1.7, -0.4, 2.5],)),
    # Set operations go through unique_values, which agnograd defines without a
    # gradient, so their values get none (see the module docstring of _set.py).
    PlainCase("setdiff1d", xpx.setdiff1d, ([0.3, 1.7, -0.4, 2.2], [1.7, 5.0])),
    PlainCase("union1d", xpx.union1d, ([0.3, 1.7, -0.4], [1.7, 5.0])),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", PLAIN_CASES, ids=[c.name for c in PLAIN_CASES])
def test_array_api_extra_without_gradient(case: PlainCase, backend: str) -> None:
    xs = on_backend(backend, [np.asarray(d, dtype=np.float64) for d in case.data])
    y = case.func(*(Variable(x) for x in xs))
    assert_same_backend(y, xs[0], f"xpx {case.name}")
    assert not y.requires_grad, (
        f"xpx {case.name}: the result requires a gradient; if agnograd made it "
        "differentiable on purpose, move the case to XPX_CASES"
    )
    np.testing.assert_array_equal(to_numpy(y), to_numpy(case.func(*xs)))


def test_one_hot_of_a_variable() -> None:
    for backend in BACKENDS:
        xp = backend_namespace(backend)
        idx = Variable(xp.asarray(np.array([0, 2, 1])), requires_grad=False)
        y = xpx.one_hot(idx, 3)
        assert_same_backend(y, idx.array, "xpx one_hot")
        np.testing.assert_array_equal(to_numpy(y), np.eye(3)[[0, 2, 1]])


def test_mixing_a_variable_with_a_raw_array_needs_as_variable() -> None:
    # array_api_compat sees agnograd's namespace and NumPy's and refuses to choose;
    # agnograd cannot change that, so foreign code must get Variables everywhere.
    # The refusal shows the namespaces, and agnograd's names the fix.
    a, b = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    v = Variable(a)
    with pytest.raises(TypeError, match=r"^Multiple namespaces.*agnograd\.as_variable"):
        xpx.kron(v, b)
    y = xpx.kron(v, agnograd.as_variable(b))
    y.grad = np.ones(4)
    y.backward()
    assert_allclose(v.grad, np.full(2, b.sum()))


# ---------------------------------------------------------------------------
# SciPy with SCIPY_ARRAY_API=1, in a subprocess

# name -> (function of the Variables, as source using special, stats and fft, and
# the input specs). Only array API code paths of SciPy: special functions that
# SciPy dispatches per backend (expit, erf, logit, entr, gammaln...) fall back to
# NumPy ufuncs for an unknown namespace and cannot take Variables.
SCIPY_CASES: dict[str, tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]] = {
    "special.logsumexp": ("lambda x: special.logsumexp(x, axis=1)", (("any", (2, 3)),)),
    "special.logsumexp_b": (
        "lambda x, b: special.logsumexp(x, b=b)",
        (("any", (3,)), ("positive", (3,))),
    ),
    "special.softmax": ("lambda x: special.softmax(x, axis=1)", (("any", (2, 3)),)),
    "special.log_softmax": ("lambda x: special.log_softmax(x, axis=-1)", (("any", (2, 3)),)),
    "special.xlogy": ("special.xlogy", (("positive", (3,)), ("positive", (3,)))),
    "special.rel_entr": ("special.rel_entr", (("positive", (3,)), ("positive", (3,)))),
    "stats.zscore": ("lambda x: stats.zscore(x, axis=1)", (("any", (2, 4)),)),
    "stats.variation": ("lambda x: stats.variation(x, axis=1)", (("positive", (2, 4)),)),
    "stats.moment": ("lambda x: stats.moment(x, order=3, axis=1)", (("any", (2, 4)),)),
    "stats.skew": ("lambda x: stats.skew(x, axis=1)", (("any", (2, 4)),)),
    "stats.kurtosis": ("lambda x: stats.kurtosis(x, axis=1)", (("any", (2, 4)),)),
    "stats.gmean": ("lambda x: stats.gmean(x, axis=1)", (("positive", (2, 4)),)),
    "stats.hmean": ("lambda x: stats.hmean(x, axis=1)", (("positive", (2, 4)),)),
    "stats.pmean": ("lambda x: stats.pmean(x, 3.0, axis=1)", (("positive", (2, 4)),)),
    "stats.sem": ("lambda x: stats.sem(x, axis=1)", (("any", (2, 4)),)),
    "stats.tvar": ("stats.tvar", (("any", (5,)),)),
    "fft.fft": ("fft.fft", (("any", (4,)),)),
    "fft.rfft": ("lambda x: fft.rfft(x, axis=0)", (("any", (4, 2)),)),
    "fft.dct": ("fft.dct", (("any", (4,)),)),
}

_SETITEM_SAVED = (
    "Known limitation (torch.autograd refuses too): scipy writes in place "
    "(xpx.at(a, i).set(v), copy=None) into an array that a later node saved for its "
    "backward, and agnograd's version check refuses that backward rather than computing "
    "a wrong gradient"
)
SCIPY_MARKS: dict[str, Any] = {
    "special.logsumexp_b": pytest.mark.xfail(reason=_SETITEM_SAVED, strict=True),
    "fft.dct": pytest.mark.xfail(
        reason="not array API code: scipy's dct calls np.asarray(x); agnograd refuses that "
        "with a TypeError while a gradient is required instead of losing the gradient",
        strict=True,
    ),
}

_SCIPY_SCRIPT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import array_api_compat, numpy as np
import scipy
from scipy import fft, special, stats
from scipy._lib import _array_api
import agnograd
from agnograd import Variable
from agnograd.testing import (
    assert_allclose, backend_namespace, check_backward, check_double_backward,
)

def first_lines(error):
    text = f"{type(error).__name__}: {error}"
    return "\n".join(text.splitlines()[:4])

def random_like(xp, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return xp.asarray(values.astype(dtype))

def host_dtype(a):
    return np.dtype(str(a.dtype).split(".")[-1])

def run(source, data, backend):
    func = eval(source)
    xp = backend_namespace(backend)
    xs = tuple(xp.asarray(np.asarray(d["re"]) + 1j * np.asarray(d["im"])
                           if d["im"] is not None else np.asarray(d["re"])) for d in data)
    row = {}
    try:
        variables = [Variable(x) for x in xs]
        found = _array_api.array_namespace(*variables)
        row["namespace"] = "ok" if found is variables[0].__array_namespace__() else repr(found)
        y = func(*variables)
        if not isinstance(y, Variable):
            row["variable"] = f"returned {type(y).__name__}"
            return row
        raw = array_api_compat.array_namespace(y.array)
        same = raw is array_api_compat.array_namespace(xs[0])
        row["variable"] = "ok" if same else f"result in {raw.__name__}"
        assert_allclose(y, func(*xs), rtol=1e-12, atol=1e-12)
        row["values"] = "ok"
        dtype = host_dtype(y.array)
        gy = random_like(xp, tuple(y.shape), dtype, 1)
        check_backward(func, xs, gy)
        row["backward"] = "ok"
        ggx = tuple(random_like(xp, tuple(x.shape), host_dtype(x), 2 + i)
                    for i, x in enumerate(xs))
        check_double_backward(func, xs, gy, ggx)
        row["double_backward"] = "ok"
    except Exception as error:
        row["error"] = first_lines(error)
    return row

request = json.load(sys.stdin)
report = {"SCIPY_ARRAY_API": bool(_array_api.SCIPY_ARRAY_API), "scipy": scipy.__version__,
          "cases": {}}
for name, case in request["cases"].items():
    report["cases"][name] = {b: run(case["func"], case["inputs"], b)
                             for b in request["backends"]}
print(json.dumps(report))
"""

SCIPY_CHECKS = ("namespace", "variable", "values", "backward", "double_backward")


def _encode(a: np.ndarray) -> dict[str, Any]:
    if np.iscomplexobj(a):
        return {"re": a.real.tolist(), "im": a.imag.tolist()}
    return {"re": a.tolist(), "im": None}


@pytest.fixture(scope="module")
def scipy_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("scipy")
    return computed_once(tmp_path_factory, "foreign-scipy-report", _scipy_report)


def _scipy_report() -> dict[str, Any]:
    cases = {
        name: {"func": source, "inputs": [_encode(a) for a in inputs_for(name, specs)]}
        for name, (source, specs) in SCIPY_CASES.items()
    }
    request = json.dumps({"cases": cases, "backends": list(BACKENDS)})
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _SCIPY_SCRIPT],
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


def _scipy_params() -> list[Any]:
    return [
        pytest.param(name, backend, id=f"{name}-{backend}", marks=SCIPY_MARKS.get(name, ()))
        for name in SCIPY_CASES
        for backend in BACKENDS
    ]


@pytest.mark.parametrize(("name", "backend"), _scipy_params())
def test_scipy_gradients(scipy_report: dict[str, Any], name: str, backend: str) -> None:
    row = scipy_report["cases"][name][backend]
    problems = [f"{check}: {row.get(check, 'not reached')}" for check in SCIPY_CHECKS]
    problems = [p for p in problems if not p.endswith(": ok")]
    if "error" in row:
        problems.append(row["error"])
    assert not problems, f"scipy {name} on {backend}:\n" + "\n".join(problems)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_namespace_name_is_a_dotted_name_of_its_own(backend: str) -> None:
    # array-api-compat tells namespaces apart by __name__ and asks it whether a
    # namespace is NumPy's or torch's; SciPy's and scikit-learn's suites build
    # regular expressions and module-like names from it.
    import re

    raw = backend_namespace(backend)
    xp = agnograd.namespace(raw)
    for ns in (xp, xp.linalg):
        name = ns.__name__
        assert name.startswith("agnograd.namespace.")
        assert all(part.isidentifier() for part in name.split(".")), name
        assert re.search(f"using {name}", f"When using {name}, ...")
    assert xp.__name__ == f"agnograd.namespace.{raw.__name__}"
    assert xp.linalg.__name__ == f"{xp.__name__}.linalg"
    for is_library in (
        array_api_compat.is_numpy_namespace,
        array_api_compat.is_torch_namespace,
        array_api_compat.is_array_api_strict_namespace,
    ):
        assert not is_library(xp), is_library.__name__  # never taken for the raw one
    names = {agnograd.namespace(backend_namespace(b)).__name__ for b in BACKENDS}
    assert len(names) == len(BACKENDS)
    v = Variable(raw.asarray([1.0]))
    assert array_api_compat.array_namespace(v, agnograd.as_variable(raw.asarray([2.0]))) is xp
