"""Third-party array API code on Variables: keeps docs/third-party.md true.

Each function or estimator of scikit-learn and einops that the page lists is run on
Variables holding numpy, array_api_strict and torch arrays and its outcome on each
backend is stated here (:class:`Expect`):

- ``GRADIENT``: it returns a Variable of the input's backend with the values it
  returns for the raw arrays, and its gradient agrees with central differences
  (``agnograd.testing.check_backward``);
- ``FLOAT``: a Python float with the right value (the library calls ``float()``:
  no gradient);
- ``RAISES``: calling it on Variables raises, with the message ``match``;
- ``BAD_GRADIENT``: right values, but the backward pass raises or disagrees with
  central differences, with the message ``match``.

A case whose outcome changes fails with a message that says so: update the page and
the case together. :func:`test_the_page_lists_every_case_with_its_outcome` checks
that the page's tables and the cases here agree, row by row; the SciPy and
array-api-extra rows are checked against tests/test_foreign_code.py, which tests them.

scikit-learn dispatches to the array API only with ``SCIPY_ARRAY_API=1``, which SciPy
reads once, at its first import, and other modules of the same pytest process import
SciPy (JAX does): so the scikit-learn cases (and the SciPy functions that the page
lists as failing) run in one subprocess with the variable set, which reports a JSON
table, as tests/test_foreign_code.py does for SciPy; this module imports neither.
einops needs nothing of the kind and runs here.

scikit-learn and einops are optional: their tests skip where they are not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import array_api_compat
import numpy as np
import pytest
from _session import computed_once

import agnograd
from agnograd import Variable
from agnograd.testing import assert_allclose, backend_namespace, check_backward, to_numpy

pytest.importorskip("torch")

BACKENDS = ("numpy", "array_api_strict", "torch")
ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "third-party.md"

GRADIENT, FLOAT, RAISES, BAD_GRADIENT = "gradient", "float", "raises", "bad gradient"


@dataclass(frozen=True)
class Expect:
    """What a case does on one backend (see the module docstring)."""

    outcome: str
    # RAISES, BAD_GRADIENT: a regular expression the error ("Type: message") matches.
    match: str = ""
    # "ok" when the raw arrays work, else a regular expression their error matches:
    # the library itself does not take them, so the failure is not agnograd's.
    raw: str = "ok"


def inputs_for(name: str, specs: tuple[tuple[str, tuple[int, ...]], ...]) -> list[np.ndarray]:
    """float64 NumPy inputs from their domains, seeded by ``name``.

    Domains: ``any`` (standard normal), ``positive`` (in [0.5, 2]), ``unit`` (in
    [0.1, 0.9]: probabilities), ``spd`` (a symmetric positive definite matrix),
    ``distinct`` (at least 0.4 apart: no ties for max and min) and ``labels`` (int64
    class labels 0 and 1, both present: not differentiable).
    """
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    arrays = []
    for domain, shape in specs:
        if domain == "any":
            a = rng.standard_normal(shape)
        elif domain == "positive":
            a = rng.uniform(0.5, 2.0, shape)
        elif domain == "unit":
            a = rng.uniform(0.1, 0.9, shape)
        elif domain == "spd":
            m = rng.standard_normal(shape)
            a = m @ m.T + shape[0] * np.eye(shape[0])
        elif domain == "distinct":
            size = int(np.prod(shape))
            a = (rng.permutation(size) * 0.5 - size / 4 + rng.uniform(0, 0.1, size)).reshape(shape)
        elif domain == "labels":
            a = np.arange(int(np.prod(shape))).reshape(shape) % 2
            rng.shuffle(a)
        else:
            raise ValueError(f"inputs_for: unknown domain {domain!r} for case {name!r}")
        arrays.append(np.asarray(a))
    return arrays


# ---------------------------------------------------------------------------
# scikit-learn (and SciPy's failing special functions), in a subprocess


@dataclass(frozen=True)
class SubprocessCase:
    source: str  # a function of the inputs, as source using the script's imports
    specs: tuple[tuple[str, tuple[int, ...]], ...]
    expect: Expect | dict[str, Expect]  # one for every backend, or one per backend

    def expected(self, backend: str) -> Expect:
        return self.expect[backend] if isinstance(self.expect, dict) else self.expect


X43 = (("any", (4, 3)),)
XY = (("any", (4, 3)), ("any", (3, 3)))
XY_POSITIVE = (("positive", (4, 3)), ("positive", (3, 3)))
PAIRED = (("any", (4, 3)), ("any", (4, 3)))
TRUE_PRED = (("any", (5, 2)), ("any", (5, 2)))
X_LABELS = (("any", (8, 3)), ("labels", (8,)))
X_TARGET = (("any", (8, 3)), ("any", (8,)))

ASARRAY_REFUSED = r"TypeError: numpy\.asarray\(\) of Variable .* which requires a gradient"
OVERWRITTEN = r"RuntimeError: backward of \w+: saved (input|output) 0 was overwritten in place"
NAN_GRADIENT = r"<grads, d>\s+= nan"


def _per_backend(numpy: Expect, others: Expect) -> dict[str, Expect]:
    return {"numpy": numpy, "array_api_strict": others, "torch": others}


_ok = Expect(GRADIENT)
_float = Expect(FLOAT)
# sklearn functions that are not array API code pass NumPy's dtype np.float64 to the
# namespace, which array_api_strict and torch refuse, raw arrays or Variables.
_numpy_dtype = {
    "array_api_strict": Expect(
        RAISES, match="'dtype' must be a dtype, not a <class 'type'>", raw="'dtype' must be a dtype"
    ),
    "torch": Expect(
        RAISES,
        match="astype: <class 'numpy.float64'> is not a dtype of array_api_compat.torch",
        raw="argument 'dtype' must be torch.dtype",
    ),
}

SKLEARN_CASES: dict[str, SubprocessCase] = {
    # sklearn.utils.extmath
    "softmax": SubprocessCase("lambda x: extmath.softmax(x)", X43, _ok),
    "row_norms": SubprocessCase("extmath.row_norms", X43, _ok),
    "row_norms(squared=True)": SubprocessCase(
        "lambda x: extmath.row_norms(x, squared=True)", X43, _ok
    ),
    "safe_sparse_dot": SubprocessCase(
        "extmath.safe_sparse_dot", (("any", (4, 3)), ("any", (3, 2))), _ok
    ),
    "fast_logdet": SubprocessCase("extmath.fast_logdet", (("spd", (4, 4)),), _ok),
    "randomized_svd": SubprocessCase(
        "lambda x: extmath.randomized_svd(x, 2, random_state=0)[1]", (("any", (8, 3)),), _ok
    ),
    # sklearn.metrics.pairwise
    "euclidean_distances": SubprocessCase("pairwise.euclidean_distances", XY, _ok),
    "rbf_kernel": SubprocessCase("lambda x, y: pairwise.rbf_kernel(x, y, gamma=0.3)", XY, _ok),
    "linear_kernel": SubprocessCase("pairwise.linear_kernel", XY, _ok),
    "polynomial_kernel": SubprocessCase(
        "lambda x, y: pairwise.polynomial_kernel(x, y, degree=2)", XY, _ok
    ),
    "sigmoid_kernel": SubprocessCase("pairwise.sigmoid_kernel", XY, _ok),
    "laplacian_kernel": SubprocessCase("pairwise.laplacian_kernel", XY, _ok),
    "chi2_kernel": SubprocessCase("pairwise.chi2_kernel", XY_POSITIVE, _ok),
    "additive_chi2_kernel": SubprocessCase("pairwise.additive_chi2_kernel", XY_POSITIVE, _ok),
    "cosine_similarity": SubprocessCase("pairwise.cosine_similarity", XY, _ok),
    "cosine_distances": SubprocessCase("pairwise.cosine_distances", XY, _ok),
    "manhattan_distances": SubprocessCase("pairwise.manhattan_distances", XY, _ok),
    "pairwise_distances": SubprocessCase("pairwise.pairwise_distances", XY, _ok),
    "pairwise_kernels": SubprocessCase(
        "lambda x, y: pairwise.pairwise_kernels(x, y, metric='rbf')", XY, _ok
    ),
    "paired_euclidean_distances": SubprocessCase(
        "pairwise.paired_euclidean_distances", PAIRED, _ok
    ),
    "paired_cosine_distances": SubprocessCase("pairwise.paired_cosine_distances", PAIRED, _ok),
    # sklearn.metrics: one score per output is an array; the average, a float
    **{
        f'{name}(multioutput="raw_values")': SubprocessCase(
            f"lambda t, p: metrics.{name}(t, p, multioutput='raw_values')", TRUE_PRED, _ok
        )
        for name in (
            "mean_squared_error",
            "root_mean_squared_error",
            "mean_absolute_error",
            "r2_score",
            "explained_variance_score",
        )
    },
    "mean_squared_error": SubprocessCase("metrics.mean_squared_error", TRUE_PRED, _float),
    "r2_score": SubprocessCase("metrics.r2_score", TRUE_PRED, _float),
    "log_loss": SubprocessCase("metrics.log_loss", (("labels", (6,)), ("unit", (6,))), _float),
    "accuracy_score": SubprocessCase(
        "metrics.accuracy_score", (("labels", (6,)), ("labels", (6,))), _float
    ),
    # sklearn.preprocessing
    "normalize": SubprocessCase("preprocessing.normalize", X43, _ok),
    "Normalizer": SubprocessCase("lambda x: preprocessing.Normalizer().fit_transform(x)", X43, _ok),
    "MinMaxScaler": SubprocessCase(
        "lambda x: preprocessing.MinMaxScaler().fit_transform(x)", X43, _ok
    ),
    "MaxAbsScaler": SubprocessCase(
        "lambda x: preprocessing.MaxAbsScaler().fit_transform(x)", X43, _ok
    ),
    "KernelCenterer": SubprocessCase(
        "lambda k: preprocessing.KernelCenterer().fit_transform(k)", (("any", (4, 4)),), _ok
    ),
    # Piecewise constant: its gradient is zero, as central differences say.
    "Binarizer": SubprocessCase("lambda x: preprocessing.Binarizer().fit_transform(x)", X43, _ok),
    "minmax_scale": SubprocessCase(
        "preprocessing.minmax_scale", X43, {"numpy": _ok, **_numpy_dtype}
    ),
    "StandardScaler": SubprocessCase(
        "lambda x: preprocessing.StandardScaler().fit_transform(x)",
        X43,
        Expect(BAD_GRADIENT, match=NAN_GRADIENT),
    ),
    "scale": SubprocessCase(
        "preprocessing.scale",
        X43,
        {"numpy": Expect(RAISES, match=ASARRAY_REFUSED), **_numpy_dtype},
    ),
    "PolynomialFeatures": SubprocessCase(
        "lambda x: preprocessing.PolynomialFeatures(2).fit_transform(x)",
        X43,
        Expect(BAD_GRADIENT, match=OVERWRITTEN.replace(r"\w+", "Mul")),
    ),
    # sklearn.decomposition
    "PCA(svd_solver='full')": SubprocessCase(
        "lambda x: decomposition.PCA(2, svd_solver='full').fit_transform(x)",
        (("any", (8, 3)),),
        _ok,
    ),
    "PCA.inverse_transform": SubprocessCase(
        "lambda x: (lambda p: p.inverse_transform(p.transform(x)))("
        "decomposition.PCA(2, svd_solver='full').fit(x))",
        (("any", (8, 3)),),
        _ok,
    ),
    "PCA(svd_solver='randomized')": SubprocessCase(
        "lambda x: decomposition.PCA(2, svd_solver='randomized', random_state=0).fit_transform(x)",
        (("any", (8, 3)),),
        _ok,
    ),
    "PCA(svd_solver='covariance_eigh')": SubprocessCase(
        "lambda x: decomposition.PCA(2, svd_solver='covariance_eigh').fit_transform(x)",
        (("any", (8, 3)),),
        # np.flip returns a view, which sklearn then writes into; torch.flip copies.
        {
            "numpy": Expect(BAD_GRADIENT, match=OVERWRITTEN.replace(r"\w+", "Eigh")),
            "array_api_strict": Expect(BAD_GRADIENT, match=OVERWRITTEN.replace(r"\w+", "Eigh")),
            "torch": _ok,
        },
    ),
    # sklearn.discriminant_analysis, naive_bayes, linear_model, kernel_approximation
    "LinearDiscriminantAnalysis()": SubprocessCase(
        "lambda x, y: discriminant_analysis.LinearDiscriminantAnalysis().fit(x, y).transform(x)",
        X_LABELS,
        _ok,
    ),
    "LinearDiscriminantAnalysis.predict_proba": SubprocessCase(
        "lambda x, y: discriminant_analysis.LinearDiscriminantAnalysis().fit(x, y)"
        ".predict_proba(x)",
        X_LABELS,
        _ok,
    ),
    **{
        f"LinearDiscriminantAnalysis(solver='{solver}')": SubprocessCase(
            f"lambda x, y: discriminant_analysis.LinearDiscriminantAnalysis(solver='{solver}')"
            ".fit(x, y).decision_function(x)",
            X_LABELS,
            {
                "numpy": Expect(RAISES, match=ASARRAY_REFUSED),
                "array_api_strict": Expect(
                    RAISES, match="Expected Array", raw="Expected Array or Python scalar"
                ),
                "torch": Expect(RAISES, match=ASARRAY_REFUSED, raw="Concatenation operation"),
            },
        )
        for solver in ("eigen", "lsqr")
    },
    "GaussianNB": SubprocessCase(
        "lambda x, y: naive_bayes.GaussianNB().fit(x, y).predict_proba(x)", X_LABELS, _ok
    ),
    "Ridge(solver='svd')": SubprocessCase(
        "lambda x, y: linear_model.Ridge(solver='svd').fit(x, y).coef_", X_TARGET, _ok
    ),
    "Ridge.predict": SubprocessCase(
        "lambda x, y: linear_model.Ridge(solver='svd').fit(x, y).predict(x)", X_TARGET, _ok
    ),
    "RidgeCV": SubprocessCase(
        "lambda x, y: linear_model.RidgeCV(alphas=(0.1, 1.0)).fit(x, y).coef_", X_TARGET, _ok
    ),
    "Ridge(solver='cholesky')": SubprocessCase(
        "lambda x, y: linear_model.Ridge(solver='cholesky').fit(x, y).coef_",
        X_TARGET,
        _per_backend(
            Expect(RAISES, match="only supports solver 'svd'"),
            Expect(RAISES, match="only supports solver 'svd'", raw="only supports solver 'svd'"),
        ),
    ),
    "Nystroem": SubprocessCase(
        "lambda x: kernel_approximation.Nystroem(n_components=3, random_state=0).fit_transform(x)",
        (("any", (8, 3)),),
        _ok,
    ),
    "LogisticRegression": SubprocessCase(
        "lambda x, y: linear_model.LogisticRegression().fit(x, y).coef_",
        X_LABELS,
        Expect(RAISES, match=ASARRAY_REFUSED),
    ),
    "PoissonRegressor": SubprocessCase(
        "lambda x, y: linear_model.PoissonRegressor().fit(x, y).coef_",
        (("any", (8, 3)), ("positive", (8,))),
        Expect(RAISES, match=ASARRAY_REFUSED),
    ),
}

# SciPy's special functions that it computes per backend (a NumPy ufunc for an
# unknown namespace): not differentiable through agnograd. The SciPy functions that
# work are tested in tests/test_foreign_code.py.
SCIPY_FAILING: dict[str, SubprocessCase] = {
    f"special.{name}": SubprocessCase(
        f"special.{name}", (("unit", (3,)),), Expect(RAISES, match=ASARRAY_REFUSED)
    )
    for name in ("expit", "logit", "erf", "ndtr", "entr", "gammaln")
}

# Cases whose page row says Variables that require no gradient (agnograd.as_variable)
# work: the result is a Variable with the values of the raw arrays.
WORK_AS_CONSTANTS = {"LogisticRegression", "PoissonRegressor", *SCIPY_FAILING}

_SCRIPT = r"""
import json, os, sys, warnings
warnings.simplefilter("ignore")
import array_api_compat, numpy as np
import scipy, sklearn
from scipy import special
from sklearn import (decomposition, discriminant_analysis, kernel_approximation,
                     linear_model, metrics, naive_bayes, preprocessing)
from sklearn.metrics import pairwise
from sklearn.utils import extmath
import agnograd
from agnograd import Variable
from agnograd.testing import assert_allclose, backend_namespace, check_backward

def first_lines(error):
    return "\n".join(f"{type(error).__name__}: {error}".splitlines()[:6])

def values_equal(actual, desired):
    if isinstance(actual, float):
        assert isinstance(desired, float), f"raw gave {type(desired).__name__}"
        assert abs(actual - desired) <= 1e-12 * (1 + abs(desired)), (actual, desired)
    else:
        assert_allclose(actual, desired, rtol=1e-12, atol=1e-12)

def run(source, arrays, labels, backend, constants):
    func = eval(source)
    xp = backend_namespace(backend)
    xs = tuple(xp.asarray(np.asarray(a)) for a in arrays)
    row = {}
    with sklearn.config_context(array_api_dispatch=True):
        try:
            raw = func(*xs)
            row["raw"] = "ok"
        except Exception as error:
            raw, row["raw"] = None, first_lines(error)
        if constants:
            try:
                y = func(*(agnograd.as_variable(x) for x in xs))
                values_equal(y, raw)
                row["constants"] = "ok" if isinstance(y, Variable) else type(y).__name__
            except Exception as error:
                row["constants"] = first_lines(error)
        # Labels are Variables too (no gradient): foreign code needs Variables everywhere.
        def wrapped(*xs_or_vs):
            args = [agnograd.as_variable(a) if i in labels else a for i, a in enumerate(xs_or_vs)]
            return func(*args)
        try:
            y = wrapped(*(x if i in labels else Variable(x) for i, x in enumerate(xs)))
        except Exception as error:
            row["call"] = first_lines(error)
            return row
        if isinstance(y, float):
            row["result"] = "float"
        elif isinstance(y, Variable):
            namespace = array_api_compat.array_namespace
            same = namespace(y.array) is namespace(xs[0])
            row["result"] = "Variable" if same else "Variable of another backend"
        else:
            row["result"] = type(y).__name__
            return row
        if raw is not None:
            try:
                values_equal(y, raw)
                row["values"] = "ok"
            except AssertionError as error:
                row["values"] = first_lines(error)
        if isinstance(y, Variable):
            row["requires_grad"] = y.requires_grad
            if y.requires_grad:
                diff = [i for i in range(len(xs)) if i not in labels]
                def of_diff(*ds):
                    args = list(xs)
                    for i, d in zip(diff, ds):
                        args[i] = d
                    return wrapped(*args)
                gy = xp.asarray(np.random.default_rng(1).standard_normal(tuple(y.shape)))
                try:
                    check_backward(of_diff, tuple(xs[i] for i in diff), gy)
                    row["backward"] = "ok"
                except Exception as error:
                    row["backward"] = first_lines(error)
    return row

request = json.load(sys.stdin)
report = {"SCIPY_ARRAY_API": os.environ.get("SCIPY_ARRAY_API"), "cases": {}}
for name, case in request["cases"].items():
    report["cases"][name] = {
        backend: run(case["source"], case["inputs"], case["labels"], backend, case["constants"])
        for backend in request["backends"]
    }
# scikit-learn's dispatch checks the variable on every call.
del os.environ["SCIPY_ARRAY_API"]
try:
    with sklearn.config_context(array_api_dispatch=True):
        pairwise.euclidean_distances(Variable(np.ones((2, 2))))
    report["without SCIPY_ARRAY_API"] = "ok"
except Exception as error:
    report["without SCIPY_ARRAY_API"] = first_lines(error)
report["versions"] = {"sklearn": sklearn.__version__, "scipy": scipy.__version__}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def sklearn_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if importlib.util.find_spec("sklearn") is None:
        pytest.skip("scikit-learn is not installed")
    return computed_once(tmp_path_factory, "sklearn-report", _sklearn_report)


def _sklearn_report() -> dict[str, Any]:
    cases = {}
    for name, case in {**SKLEARN_CASES, **SCIPY_FAILING}.items():
        cases[name] = {
            "source": case.source,
            "inputs": [a.tolist() for a in inputs_for(name, case.specs)],
            "labels": [i for i, (domain, _) in enumerate(case.specs) if domain == "labels"],
            "constants": name in WORK_AS_CONSTANTS,
        }
    request = json.dumps({"cases": cases, "backends": list(BACKENDS)})
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        input=request,
        capture_output=True,
        text=True,
        env={**os.environ, "SCIPY_ARRAY_API": "1"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"the scikit-learn subprocess failed:\n{done.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert report["SCIPY_ARRAY_API"] == "1", "SCIPY_ARRAY_API=1 did not reach the subprocess"
    return report


def _verdict(expect: Expect, row: dict[str, Any]) -> list[str]:
    """What differs between ``row`` (the subprocess's findings) and ``expect``."""
    problems = []
    if expect.raw == "ok":
        if row["raw"] != "ok":
            problems.append(f"the raw arrays fail: {row['raw']}")
    elif row["raw"] == "ok" or not re.search(expect.raw, row["raw"]):
        problems.append(
            f"the raw arrays: expected an error matching {expect.raw!r}, got {row['raw']}"
        )
    if expect.outcome == RAISES:
        if "call" not in row:
            problems.append(f"expected an error matching {expect.match!r}, but it ran: {row}")
        elif not re.search(expect.match, row["call"]):
            problems.append(f"expected an error matching {expect.match!r}, got {row['call']}")
        return problems
    if "call" in row:
        return [*problems, f"calling it on Variables raises {row['call']}"]
    wanted = "float" if expect.outcome == FLOAT else "Variable"
    if row["result"] != wanted:
        problems.append(f"returned {row['result']}, expected a {wanted}")
    if row.get("values", "ok") != "ok":
        problems.append(f"values differ from the raw arrays': {row['values']}")
    backward = row.get("backward", "not run: the result requires no gradient")
    if expect.outcome == GRADIENT and backward != "ok":
        problems.append(f"gradient: {backward}")
    if expect.outcome == BAD_GRADIENT and (
        backward == "ok" or not re.search(expect.match, backward)
    ):
        problems.append(f"backward: expected an error matching {expect.match!r}, got {backward}")
    return problems


def _params(cases: dict[str, SubprocessCase]) -> list[Any]:
    return [
        pytest.param(name, backend, id=f"{name}-{backend}")
        for name in cases
        for backend in BACKENDS
    ]


@pytest.mark.parametrize(("name", "backend"), _params(SKLEARN_CASES))
def test_sklearn(sklearn_report: dict[str, Any], name: str, backend: str) -> None:
    expect = SKLEARN_CASES[name].expected(backend)
    row = sklearn_report["cases"][name][backend]
    problems = _verdict(expect, row)
    if name in WORK_AS_CONSTANTS and row.get("constants") != "ok":
        problems.append(f"on constants (agnograd.as_variable): {row.get('constants')}")
    versions = ", ".join(f"{k} {v}" for k, v in sklearn_report["versions"].items())
    assert not problems, (
        f"scikit-learn {name} on {backend} ({versions}) no longer does what "
        f"docs/third-party.md says ({expect.outcome}); update the page and this case:\n"
        + "\n".join(problems)
    )


@pytest.mark.parametrize(("name", "backend"), _params(SCIPY_FAILING))
def test_scipy_special_functions_take_no_differentiable_variables(
    sklearn_report: dict[str, Any], name: str, backend: str
) -> None:
    expect = SCIPY_FAILING[name].expected(backend)
    row = sklearn_report["cases"][name][backend]
    problems = _verdict(expect, row)
    if row.get("constants") != "ok":
        problems.append(f"on constants (agnograd.as_variable): {row.get('constants')}")
    assert not problems, (
        f"scipy {name} on {backend} no longer does what docs/third-party.md says; update "
        "the page and this case:\n" + "\n".join(problems)
    )


def test_sklearn_needs_scipy_array_api(sklearn_report: dict[str, Any]) -> None:
    assert re.search(
        r"RuntimeError: .*SCIPY_ARRAY_API=1", sklearn_report["without SCIPY_ARRAY_API"]
    ), sklearn_report["without SCIPY_ARRAY_API"]


# ---------------------------------------------------------------------------
# einops: its array API module and its main API, in this process


@dataclass(frozen=True)
class EinopsCase:
    call: Callable[[Any, Any], Any]  # (einops module, x) -> result
    domain: str = "any"
    main_only: bool = False  # einops.array_api has no einsum


def _callable_reduction(t: Any, axis: tuple[int, ...]) -> Any:
    xp = t.__array_namespace__()
    return xp.sum(t * t, axis=axis)


EINOPS_CASES: dict[str, EinopsCase] = {
    "rearrange": EinopsCase(lambda ea, x: ea.rearrange(x, "b h w -> w b h")),
    "rearrange (merge axes)": EinopsCase(lambda ea, x: ea.rearrange(x, "b h w -> b (h w)")),
    "rearrange (split axes)": EinopsCase(
        lambda ea, x: ea.rearrange(x, "b h (w1 w2) -> b w1 h w2", w1=2)
    ),
    **{
        f'reduce("{op}")': EinopsCase(
            lambda ea, x, op=op: ea.reduce(x, "b h w -> b w", op),
            "distinct" if op in ("max", "min") else "any",
        )
        for op in ("sum", "mean", "max", "min", "prod")
    },
    "reduce (pooling)": EinopsCase(lambda ea, x: ea.reduce(x, "b h (w w2) -> b h w", "mean", w2=2)),
    "reduce (a callable)": EinopsCase(
        lambda ea, x: ea.reduce(x, "b h w -> b", _callable_reduction)
    ),
    "repeat": EinopsCase(lambda ea, x: ea.repeat(x, "b h w -> b h w c", c=2)),
    "repeat (tile)": EinopsCase(lambda ea, x: ea.repeat(x, "b h w -> b (r h) w", r=2)),
    "pack": EinopsCase(lambda ea, x: ea.pack([x, x * 2.0], "b * w")[0]),
    "unpack": EinopsCase(lambda ea, x: ea.unpack(x, [(1,), (2,)], "b * w")[1]),
    "einsum": EinopsCase(lambda ea, x: ea.einsum(x, x, "b h w, c h w -> b c"), main_only=True),
}


# Each case through both of einops' entries: einops.array_api (which calls
# __array_namespace__) and the main module (on agnograd's einops backend).
EINOPS_RUNS = [
    (module, name)
    for name, case in EINOPS_CASES.items()
    for module in ("einops.array_api", "einops")
    if module == "einops" or not case.main_only
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("module", "name"), EINOPS_RUNS)
def test_einops(module: str, name: str, backend: str) -> None:
    pytest.importorskip("einops", minversion="0.8")
    einops_module = importlib.import_module(module)
    case = EINOPS_CASES[name]
    (data,) = inputs_for(name, ((case.domain, (2, 3, 4)),))
    x = backend_namespace(backend).asarray(data)

    def func(v: Any) -> Any:
        return case.call(einops_module, v)

    y = func(Variable(x))
    assert isinstance(y, Variable), f"einops {name} returned {type(y).__name__}"
    assert array_api_compat.array_namespace(y.array) is array_api_compat.array_namespace(x)
    assert y.creator is not None, f"einops {name}: the result is not connected to the graph"
    # einops.array_api takes no raw torch tensor (no __array_namespace__) and passes
    # shapes as lists, which array_api_strict refuses: NumPy's values are the reference.
    assert_allclose(y, func(data), rtol=1e-12, atol=1e-12)
    gy = backend_namespace(backend).asarray(np.random.default_rng(1).standard_normal(y.shape))
    check_backward(func, x, gy)


def test_einops_array_api_takes_variables_where_it_takes_no_raw_array() -> None:
    # What the page says of the raw arrays, beside the Variables that work.
    pytest.importorskip("einops", minversion="0.8")
    import torch
    from einops import array_api

    with pytest.raises(AttributeError, match="__array_namespace__"):
        array_api.rearrange(torch.ones((2, 3)), "a b -> b a")
    strict = backend_namespace("array_api_strict")
    with pytest.raises(TypeError, match="must be a tuple of ints"):
        array_api.rearrange(strict.ones((2, 3)), "a b -> (a b)")
    for x in (torch.ones((2, 3)), strict.ones((2, 3))):
        assert array_api.rearrange(Variable(x), "a b -> (a b)").shape == (6,)


# ---------------------------------------------------------------------------
# The page's tables agree with the cases

STATUS = re.compile(r"^(yes|values only|no|partly)\b")


def page_rows(section: str) -> dict[str, str]:
    """Every name in backquotes in the first cell of a table row of the page's section
    ``## {section}`` -> the status its second cell starts with."""
    text = PAGE.read_text()
    assert f"\n## {section}\n" in text, f"docs/third-party.md has no section '## {section}'"
    part = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in part.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = re.findall(r"`([^`]+)`", cells[0])
        if not names:  # the header
            continue
        status = STATUS.match(cells[1])
        assert status, f"docs/third-party.md, {section}: {cells[1]!r} is not a status"
        for name in names:
            assert name not in rows, f"docs/third-party.md, {section}: {name} listed twice"
            rows[name] = status.group(1)
    return rows


def status_of(expects: list[Expect]) -> str:
    outcomes = {e.outcome for e in expects}
    if outcomes == {GRADIENT}:
        return "yes"
    if outcomes == {FLOAT}:
        return "values only"
    if outcomes <= {RAISES, BAD_GRADIENT}:
        return "no"
    return "partly"


def _statuses(cases: dict[str, SubprocessCase]) -> dict[str, str]:
    return {name: status_of([c.expected(b) for b in BACKENDS]) for name, c in cases.items()}


# The page's name for a case of tests/test_foreign_code.py, where they differ.
SCIPY_PAGE_NAMES = {"special.logsumexp(x, b=b)": "special.logsumexp_b"}


def test_the_page_lists_every_case_with_its_outcome() -> None:
    expected = {
        "scikit-learn": _statuses(SKLEARN_CASES),
        "einops": dict.fromkeys(EINOPS_CASES, "yes"),
    }
    for section, statuses in expected.items():
        assert page_rows(section) == statuses, f"docs/third-party.md, {section}"

    # SciPy and array-api-extra: tested by tests/test_foreign_code.py (working, and
    # failing where it marks the case xfail) or by the cases above.
    foreign = (ROOT / "tests" / "test_foreign_code.py").read_text()
    scipy_rows = {SCIPY_PAGE_NAMES.get(n, n): status for n, status in page_rows("SciPy").items()}
    scipy_cases = foreign.split("SCIPY_CASES: dict", 1)[1].split("\n}\n", 1)[0]
    for name in re.findall(r'^    "([\w.]+)": \(', scipy_cases, flags=re.MULTILINE):
        assert name in scipy_rows, f"SciPy {name}, a case of test_foreign_code.py, is not listed"
    for name, status in scipy_rows.items():
        if name in SCIPY_FAILING:
            assert status == "no", name
            continue
        assert f'"{name}": (' in foreign, f"SciPy {name} is not a case of test_foreign_code.py"
        xfail = f'"{name}": pytest.mark.xfail' in foreign
        assert status == ("no" if xfail else "yes"), f"SciPy {name}: the page says {status}"
    # array-api-extra: the functions of XPX_CASES are differentiable, those of
    # PLAIN_CASES and one_hot give values only.
    differentiable = foreign.split("XPX_CASES = [", 1)[1].split("\n]\n", 1)[0]
    plain = foreign.split("PLAIN_CASES = [", 1)[1].split("\n]\n", 1)[0]
    plain += foreign.split("def test_one_hot_of_a_variable", 1)[1].split("\ndef ", 1)[0]
    xpx_rows = page_rows("array-api-extra")
    for name in set(re.findall(r"xpx\.(\w+)\b", differentiable + plain)):
        assert name in xpx_rows, f"xpx.{name}, tested by test_foreign_code.py, is not listed"
    for name, status in xpx_rows.items():
        called = rf"xpx\.{re.escape(name)}\b"
        in_differentiable = re.search(called, differentiable) is not None
        in_plain = re.search(called, plain) is not None
        assert in_differentiable != in_plain, (
            f"array-api-extra {name} is not a case of test_foreign_code.py, or is in both lists"
        )
        assert status == ("yes" if in_differentiable else "values only"), (
            f"array-api-extra {name}: the page says {status}"
        )


def test_constants_make_mixed_calls_work() -> None:
    # The page's rule: a raw array next to a Variable gives two namespaces; wrap it.
    a, b = np.array([[1.0, 2.0]]), np.array([[3.0, -1.0]])
    with pytest.raises(TypeError, match="Multiple namespaces"):
        array_api_compat.array_namespace(Variable(a), b)
    xp = array_api_compat.array_namespace(Variable(a), agnograd.as_variable(b))
    assert xp is Variable(a).__array_namespace__()
    assert to_numpy(xp.sum(Variable(a) * agnograd.as_variable(b))).item() == 1.0
