"""A static graph re-run on inputs of a new shape computes what eager would.

"Shapes in a static graph are derived from the inputs at every run, never stored
from the build" (the design). Every function of agnograd's differentiable
namespace is called once here, its graph built under ``auto_forward(False)`` on
inputs of one shape; then its leaves are fed arrays of another shape (a longer
leading axis, an axis shrunk to one, another last axis, one more axis) and the
graph is run again: walked (``compile_after=None``), by the plan ``y.forward()``
compiles (``compile_after=0``) and by the plan of ``agnograd.static._compiled.compile``.
The values and the gradients (seeded with ones) must be those of eager on the new
inputs, on NumPy, array-api-strict and PyTorch. A function whose number of outputs
is the new shape's (``unstack``) refuses the run with an error that names it, and
a call that eager refuses on the new inputs (an argument given for the old shape)
must be refused by the graph too. So must a graph built by iterating over a
Variable (``for row in x``, ``list(x)``): it has one node per row, and a run on
another number of rows names the iteration, where ``agnograd.jit`` follows the new
batch size (random programs, against eager).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.core._printing import to_numpy
from agnograd.functions._table import DIFFERENTIABLE
from agnograd.static import _compiled, _replay
from agnograd.testing import backend_namespace
from agnograd.testing._domains_linalg import (
    gram,
    power_sums,
    symmetric,
    without_gauge_eig,
    without_signs_eigh,
    without_signs_svd,
)

pytest.importorskip("torch")
pytest.importorskip("array_api_strict")

BACKENDS = ("numpy", "array_api_strict", "torch")

Shape = tuple[int, ...]

#: The shape the graphs are built for, and the shapes they are run on next.
BUILT: Shape = (2, 3, 4)
CHANGES: dict[str, Shape] = {
    "longer-leading-axis": (5, 3, 4),
    "axis-shrunk-to-one": (2, 1, 4),
    "other-last-axis": (2, 3, 5),
    "extra-leading-axis": (2, 2, 3, 4),
}


@dataclasses.dataclass(frozen=True)
class Input:
    """One input of a case: its shape from the case's shape ``s``, and its values."""

    shape: Callable[[Shape], Shape] = lambda s: s
    kind: str = "real"  # "real", "complex", "bool", "index" (integers below s[-1])
    low: float = 0.5
    high: float = 2.0
    # Host-side conditioning of a square matrix (inv, eig, ...): + scale * diag(1..n).
    diagonal: float = 0.0


@dataclasses.dataclass(frozen=True)
class Case:
    """A call of the namespace function ``name`` on its inputs (as leaves)."""

    name: str
    inputs: tuple[Input, ...] = (Input(),)
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    args: tuple[Any, ...] = ()
    pre: Callable[..., tuple[Any, ...]] | None = None
    post: Callable[[Any], Any] | None = None
    sequence: bool = False  # the inputs go in one list (concat, stack)
    id: str = ""

    def __call__(self, *xs: Any) -> Any:
        xp = xs[0].__array_namespace__()
        fn = self.function(xp)
        args = self.args
        if self.name == "astype":  # the dtype of the inputs' library
            args = tuple(getattr(xp, a) for a in args)
        if self.pre is not None:
            xs = self.pre(*xs)
        if self.sequence:
            result = fn(list(xs), *args, **self.kwargs)
        else:
            result = fn(*xs, *args, **self.kwargs)
        return result if self.post is None else self.post(result)

    def function(self, xp: Any) -> Callable[..., Any]:
        fn = xp
        for part in self.name.split("."):
            fn = getattr(fn, part)
        return fn

    def arrays(self, backend: str, shape: Shape) -> list[Any]:
        """The inputs for the case's shape ``shape``, float64 (complex128) arrays of
        ``backend`` seeded by the case and the shape."""
        rng = np.random.default_rng(zlib.crc32(f"{self.name}{self.id}{shape}".encode()))
        xp = backend_namespace(backend)
        out = []
        for spec in self.inputs:
            s = spec.shape(shape)
            if spec.kind == "bool":
                a: Any = rng.uniform(size=s) < 0.5
            elif spec.kind == "index":
                a = rng.integers(0, shape[-1], size=s)
            else:
                a = rng.uniform(spec.low, spec.high, s)
                if spec.kind == "complex":
                    a = a + 1j * rng.uniform(spec.low, spec.high, s)
                if spec.diagonal:  # on the leading square block
                    n = min(s[-2:])
                    a[..., :n, :n] += spec.diagonal * np.diag(np.arange(1.0, n + 1))
            out.append(xp.asarray(a))
        return out


def _square(s: Shape) -> Shape:
    return (*s[:-2], s[-1], s[-1])


def _swap(s: Shape) -> Shape:
    return (*s[:-2], s[-1], s[-2])


# -- the cases, by the namespace's function names ---------------------------------------

_SMALL = Input(low=0.1, high=0.9)
_UNARY = {
    name: Case(name)
    for name in [
        *("abs", "asinh", "atan", "cos", "cosh", "exp", "expm1", "log", "log10", "log1p"),
        *("log2", "negative", "positive", "reciprocal", "sin", "sinh", "sqrt", "square"),
        *("tan", "tanh"),
    ]
}
_UNARY.update(
    {
        "acos": Case("acos", (_SMALL,)),
        "asin": Case("asin", (_SMALL,)),
        "atanh": Case("atanh", (_SMALL,)),
        "acosh": Case("acosh", (Input(low=1.5, high=3.0),)),
        "conj": Case("conj", (Input(kind="complex"),)),
        "real": Case("real", (Input(kind="complex"),)),
        "imag": Case("imag", (Input(kind="complex"),)),
    }
)
# The second operand broadcasts (its leading axis is missing).
_BROADCAST = (Input(), Input(lambda s: s[1:]))
_BINARY = {
    name: Case(name, _BROADCAST)
    for name in [
        *("add", "atan2", "copysign", "divide", "hypot", "logaddexp", "maximum", "minimum"),
        *("multiply", "pow", "remainder", "subtract"),
    ]
}
# Square matrices, well conditioned; and with eigenvalues (singular values) apart.
_INVERTIBLE = Input(_square, diagonal=1.0)
_APART = Input(_square, low=0.1, high=0.3, diagonal=2.0)

CASES: list[Case] = [
    *_UNARY.values(),
    *_BINARY.values(),
    Case("clip", kwargs={"min": 0.8, "max": 1.5}),
    Case("where", (Input(kind="bool"), Input(), Input(lambda s: s[1:]))),
    # statistical
    Case("sum", kwargs={"axis": (0, -1)}),
    Case("prod", kwargs={"axis": 0}),
    Case("mean", kwargs={"axis": -1, "keepdims": True}),
    Case("max", kwargs={"axis": -1}),
    Case("min"),
    Case("var", kwargs={"axis": -1, "correction": 1}),
    Case("std", kwargs={"axis": 0}),
    Case("cumulative_sum", kwargs={"axis": -1, "include_initial": True}),
    Case("cumulative_prod", kwargs={"axis": 0}),
    Case("diff", kwargs={"axis": -1, "n": 1}),
    # manipulation
    Case("astype", args=("float32",)),
    Case("broadcast_arrays", pre=lambda x: (x, x[:1])),
    Case("broadcast_to", (Input(lambda s: s[1:]),), args=(BUILT,)),
    Case("reshape", args=((-1, 4),)),
    Case("expand_dims", kwargs={"axis": (0, 2)}),
    Case("expand_dims", kwargs={"axis": -1}, id="last"),
    Case("squeeze", (Input(lambda s: (s[0], 1, *s[1:])),), kwargs={"axis": 1}),
    Case("squeeze", (Input(lambda s: (*s, 1)),), kwargs={"axis": -1}, id="last"),
    Case("concat", (Input(), Input()), kwargs={"axis": -1}, sequence=True),
    Case("concat", (Input(), Input()), kwargs={"axis": None}, sequence=True, id="flat"),
    Case("stack", (Input(), Input()), kwargs={"axis": 1}, sequence=True),
    Case("flip", kwargs={"axis": (0, 2)}),
    Case("moveaxis", args=(0, -1)),
    Case("permute_dims", args=((2, 0, 1),)),
    Case("matrix_transpose"),
    Case("linalg.matrix_transpose"),
    Case("repeat", args=(2,), kwargs={"axis": 1}),
    Case("repeat", args=(2,), id="flat"),
    Case("roll", args=((1, 2),), kwargs={"axis": (0, -1)}),
    Case("tile", args=((2, 1, 1),)),
    Case("unstack", kwargs={"axis": 0}),
    Case("unstack", kwargs={"axis": -1}, id="last"),
    # creation (differentiable)
    Case("meshgrid", (Input(lambda s: s[:1]), Input(lambda s: s[-1:])), kwargs={"indexing": "ij"}),
    Case("tril", kwargs={"k": 1}),
    Case("triu", kwargs={"k": -1}),
    # searching, sorting, indexing
    Case("sort", kwargs={"axis": -1, "descending": True}),
    Case("take", (Input(), Input(lambda s: (2,), kind="index")), kwargs={"axis": -1}),
    Case("take_along_axis", (Input(), Input(kind="index")), kwargs={"axis": -1}),
    # linear algebra
    Case("matmul", (Input(), Input(_swap))),
    Case("linalg.matmul", (Input(), Input(_swap))),
    Case("vecdot", (Input(), Input()), kwargs={"axis": -1}),
    Case("linalg.vecdot", (Input(), Input()), kwargs={"axis": 0}),
    Case("tensordot", (Input(), Input(lambda s: (*s[1:], 2))), kwargs={"axes": 2}),
    Case("linalg.tensordot", (Input(), Input(lambda s: (s[-1], 3))), kwargs={"axes": 1}),
    Case("linalg.outer", (Input(lambda s: s[-1:]), Input(lambda s: s[:1]))),
    Case("linalg.cross", (Input(lambda s: (*s[:-1], 3)),) * 2, kwargs={"axis": -1}),
    Case("linalg.diagonal", kwargs={"offset": 1}),
    Case("linalg.trace", kwargs={"offset": -1}),
    Case("linalg.det", (_INVERTIBLE,)),
    Case("linalg.slogdet", (_INVERTIBLE,)),
    Case("linalg.inv", (_INVERTIBLE,)),
    Case("linalg.matrix_power", (Input(_square, low=0.1, high=0.5),), args=(3,)),
    Case("linalg.solve", (_INVERTIBLE, Input(lambda s: (*s[:-2], s[-1], 2)))),
    Case("linalg.cholesky", (_INVERTIBLE,), pre=gram),
    Case("linalg.eigh", (_APART,), pre=symmetric, post=without_signs_eigh),
    Case("linalg.eigvalsh", (_APART,), pre=symmetric),
    Case("linalg.eig", (_APART,), post=without_gauge_eig),
    Case("linalg.eigvals", (_APART,), post=power_sums),
    Case("linalg.qr", (Input(lambda s: (*s[:-2], s[-1] + 1, s[-1]), diagonal=1.0),)),
    Case("linalg.pinv", (Input(_swap, diagonal=1.0),)),
    Case("linalg.svd", (_APART,), kwargs={"full_matrices": False}, post=without_signs_svd),
    Case("linalg.svdvals", (_APART,)),
    Case("linalg.matrix_norm", kwargs={"ord": "fro", "keepdims": True}),
    Case("linalg.matrix_norm", (_APART,), kwargs={"ord": "nuc", "keepdims": True}, id="nuc"),
    Case("linalg.vector_norm", kwargs={"axis": (0, -1), "ord": 3}),
]

_COMPLEX = Input(kind="complex")
for _name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    _in = Input() if _name in ("rfft", "ihfft") else _COMPLEX
    CASES += [
        Case(f"fft.{_name}", (_in,)),
        Case(f"fft.{_name}", (_in,), kwargs={"axis": 0, "norm": "ortho"}, id="axis0"),
        Case(f"fft.{_name}", (_in,), kwargs={"n": 6, "axis": 1}, id="n6"),
    ]
for _name in ("fftn", "ifftn", "rfftn", "irfftn"):
    _in = Input() if _name == "rfftn" else _COMPLEX
    CASES += [
        Case(f"fft.{_name}", (_in,)),
        Case(f"fft.{_name}", (_in,), kwargs={"axes": (-1, 0), "norm": "forward"}, id="axes"),
        Case(f"fft.{_name}", (_in,), kwargs={"s": (4, -1), "axes": (0, 1)}, id="s"),
    ]
for _name in ("fftshift", "ifftshift"):
    CASES += [
        Case(f"fft.{_name}"),
        Case(f"fft.{_name}", kwargs={"axes": (0, -1)}, id="axes"),
    ]

#: Functions whose number of outputs is the input's length along an axis: a graph
#: built for one length refuses to run on another.
REFUSED = {"unstack"}


def _id(case: Case) -> str:
    return f"{case.name}-{case.id}" if case.id else case.name


def test_every_differentiable_function_has_a_case() -> None:
    assert {case.name for case in CASES} == set(DIFFERENTIABLE)


# -- running a case -----------------------------------------------------------------------


def _combined(result: Any) -> Any:
    """One array of a function's result: its outputs flattened and joined."""
    if isinstance(result, Variable):
        return result
    xp = result[0].__array_namespace__()
    return xp.concat([xp.reshape(r, (-1,)) for r in result])


def _ones(y: Variable) -> Any:
    assert y.shape is not None
    return y.xp.ones(y.shape, dtype=y.dtype)


def _results(y: Variable, leaves: list[Variable]) -> list[np.ndarray | None]:
    return [to_numpy(y.array), *(None if x.grad is None else to_numpy(x.grad) for x in leaves)]


def eager(case: Case, arrays: list[Any]) -> tuple[list[np.ndarray | None], int]:
    """The values and gradients of ``case`` run eagerly on ``arrays``, and its count
    of outputs."""
    leaves = [Variable(a) for a in arrays]
    result = case(*leaves)
    y = _combined(result)
    y.backward(grad=_ones(y))
    return _results(y, leaves), 1 if isinstance(result, Variable) else len(result)


def assert_same(got: list[Any], want: list[Any], what: str) -> None:
    assert len(got) == len(want), what
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        part = f"{what}: " + ("value" if i == 0 else f"gradient of input {i - 1}")
        if b is None:
            assert a is None, part
            continue
        assert a is not None, part
        assert (a.shape, a.dtype) == (b.shape, b.dtype), part
        # Most results are the same bits, which assert_allclose would pass: it costs a
        # quarter of the sweep's time (~10,000 comparisons), array_equal a tenth of it.
        if not np.array_equal(a, b, equal_nan=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=part)


class Static:
    """The graph of a case built on one set of arrays, run by one of three means."""

    def __init__(self, case: Case, arrays: list[Any], means: str) -> None:
        self.leaves = [Variable(a) for a in arrays]
        with agnograd.auto_forward(False):
            result = case(*self.leaves)
            self.outputs = 1 if isinstance(result, Variable) else len(result)
            self.y = _combined(result)
        assert self.y.array is None, "the graph was computed while it was built"
        self.means = means
        self.plan = _compiled.compile(self.y) if means == "compile" else None

    def feed(self, arrays: list[Any]) -> None:
        for leaf, a in zip(self.leaves, arrays, strict=True):
            leaf.d = a

    def run(self) -> list[np.ndarray | None]:
        for leaf in self.leaves:
            leaf.cleargrad()
        y = self.y
        if self.plan is not None:
            self.plan.forward()
            self.plan.backward([_ones(y)])
        else:
            after = None if self.means == "walk" else 0
            with agnograd.using_config("compile_after", after):
                y.forward()
                y.backward(grad=_ones(y))
        return _results(y, self.leaves)

    def planned(self) -> bool:
        """Whether the last ``y.forward()`` ran a plan (the means "replay")."""
        state = _replay._replays.get(self.y._node)
        return state is not None and bool(state.plans)


MEANS = ("walk", "replay", "compile")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_a_static_graph_follows_its_inputs_shapes(case: Case, backend: str) -> None:
    built = case.arrays(backend, BUILT)
    before, built_outputs = eager(case, built)
    # Eager's answer for each change, the same for the three means (the arrays are
    # seeded by the case and the shape), computed at the first: None where eager
    # refuses the new shape.
    eagerly: dict[str, tuple[list[np.ndarray | None], int] | None] = {}
    for means in MEANS:
        for change, shape in CHANGES.items():
            what = f"{means}, {change}"
            # A graph for each change: the replay plans again only after as many runs
            # as it walked since its last plan.
            static = Static(case, built, means)
            assert_same(static.run(), before, f"{means}, built shape")
            arrays = case.arrays(backend, shape)
            static.feed(arrays)
            if change not in eagerly:
                try:
                    eagerly[change] = eager(case, arrays)
                except Exception:  # the arguments do not fit the new shape: refused eagerly
                    eagerly[change] = None
            expected = eagerly[change]
            if expected is None:
                with pytest.raises(Exception):  # noqa: B017, PT011 - eager's, whichever
                    static.run()
                continue
            want, outputs = expected
            if outputs != built_outputs:
                assert case.name in REFUSED, f"{what}: {outputs} outputs, not {built_outputs}"
                with pytest.raises(ValueError, match=case.name) as refused:
                    static.run()
                message = str(refused.value)
                assert str(BUILT) in message, message
                assert str(shape) in message, message
                continue
            # The replay walks a graph whose shapes changed twice before its next plan.
            for _ in range(3 if means == "replay" else 1):
                assert_same(static.run(), want, what)
            if means == "replay":
                assert static.planned(), f"{what}: the third run after the change ran no plan"


#: The cases whose gradient graph cannot be built before the graph has run, each
#: with why: ``agnograd.grad`` says so. Their rules need an output of a decomposition
#: that the function dropped, so no node of the graph will ever compute it.
NEEDS_A_RUN = {
    "linalg.eigvals": "eig's eigenvectors, dropped by eigvals",
    "linalg.eigvalsh": "eigh's eigenvectors, dropped by eigvalsh",
    "linalg.svdvals": "svd's singular vectors, dropped by svdvals",
    "linalg.matrix_norm-nuc": "svd's singular vectors, dropped by svdvals",
}


def _new_data(case: Case, backend: str, arrays: list[Any], shape: Shape) -> list[Any]:
    """Other data of the same shapes: the floating inputs scaled (within every
    case's domain), the masks negated, the indices shifted by one."""
    xp = backend_namespace(backend)
    out = []
    for a, spec in zip(arrays, case.inputs, strict=True):
        if spec.kind == "bool":
            a = xp.logical_not(a)
        elif spec.kind == "index":
            a = (a + 1) % shape[-1]
        else:
            a = a * 0.9
        out.append(a)
    return out


def _computed(grads: list[Variable | None]) -> list[np.ndarray | None]:
    """The gradient graph's results, computed from the data the inputs hold now."""
    got = []
    for g in grads:  # None where no gradient reaches the input, as eagerly
        if g is not None:
            g.forward()
        got.append(None if g is None else to_numpy(g.array))
    return got


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_the_gradient_graph_of_a_graph_not_run_yet(case: Case, backend: str) -> None:
    """``agnograd.grad`` under ``auto_forward(False)`` of outputs not computed yet
    builds the gradient graph (nnabla's ``nn.grad``), which ``forward()`` computes
    from the data the inputs hold then: eager's gradients, before and after new data;
    the cases of ``NEEDS_A_RUN``, and only they, are refused with an error that says so."""
    built = case.arrays(backend, BUILT)
    static = Static(case, built, "walk")
    wanted = [x for x in static.leaves if x.requires_grad]
    if _id(case) in NEEDS_A_RUN:
        with (
            agnograd.auto_forward(False),
            pytest.raises(RuntimeError, match="cannot be built before the graph has run"),
        ):
            agnograd.grad([static.y], wanted)
        return
    with agnograd.auto_forward(False):
        grads = agnograd.grad([static.y], wanted)
    for arrays in (built, _new_data(case, backend, built, BUILT)):
        static.feed(arrays)
        want, _ = eager(case, arrays)
        expected = [w for x, w in zip(static.leaves, want[1:], strict=True) if x.requires_grad]
        assert_same([None, *_computed(grads)], [None, *expected], "gradient graph")


def test_needs_a_run_names_cases() -> None:
    assert set(NEEDS_A_RUN) <= {_id(case) for case in CASES}


def _symbolic_and_eager(
    fn: Callable[..., Any], built: list[Any], later: list[Any], wanted: tuple[int, ...] = (0,)
) -> None:
    """The gradient graph of ``sum(fn(*leaves))`` built on ``built`` before any
    forward, run on ``built`` and then on ``later``, gives eager's gradients."""
    leaves = [Variable(a) for a in built]
    with agnograd.auto_forward(False):
        y = fn(*leaves)
        loss = y.__array_namespace__().sum(y)
        grads = agnograd.grad([loss], [leaves[i] for i in wanted])
    for arrays in (built, later):
        for leaf, a in zip(leaves, arrays, strict=True):
            leaf.d = a
        ref = [Variable(a) for a in arrays]
        out = fn(*ref)
        out.__array_namespace__().sum(out).backward()
        expected = [to_numpy(ref[i].grad) for i in wanted]
        assert_same([None, *_computed(grads)], [None, *expected], "gradient graph")


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("max", {"axis": -1}),
        ("min", {"axis": 0}),
        ("max", {}),
        ("min", {}),
        ("linalg.vector_norm", {"axis": -1, "ord": float("inf")}),
    ],
)
def test_a_gradient_graph_splits_ties_as_eager(name: str, kwargs: dict[str, Any], backend: str):
    """The positions of an extremum are nodes of the gradient graph: fed ties later,
    it splits the gradient among them as eager does."""
    xp = backend_namespace(backend)
    fn = Case(name, kwargs=kwargs).function
    built = xp.asarray(np.arange(24.0).reshape(2, 3, 4) % 7.0 + 0.5)
    tied = xp.asarray(np.array([1.0, 2.0, 2.0, 0.5] * 6).reshape(2, 3, 4))
    _symbolic_and_eager(lambda x: fn(x.__array_namespace__())(x, **kwargs), [built], [tied])


def test_a_gradient_graph_resolves_axes_from_its_nodes(backend: str) -> None:
    """Nodes whose backward read an axis that forward resolved (and that a node with
    its own shape inference never resolved before the gradient graph was built):
    ``vecdot`` and ``diff`` along the first of two equal axes, where a wrong axis
    gives a gradient of the right shape."""
    xp = backend_namespace(backend)
    rng = np.random.default_rng(0)
    a, b = (xp.asarray(rng.uniform(0.5, 2.0, (3, 3))) for _ in range(2))
    c, d = (xp.asarray(rng.uniform(0.5, 2.0, (3, 3))) for _ in range(2))
    weights = xp.asarray(rng.uniform(0.5, 2.0, (3,)))

    def vecdot(x1: Any, x2: Any) -> Any:
        return x1.__array_namespace__().vecdot(x1, x2, axis=0) * weights

    def diff(x: Any) -> Any:
        return x.__array_namespace__().diff(x, axis=0) * weights

    _symbolic_and_eager(vecdot, [a, b], [c, d], (0, 1))
    _symbolic_and_eager(diff, [a], [c])


def test_a_gradient_graph_reads_the_keys_and_masks_it_runs_on(backend: str) -> None:
    """Indices, masks and the singularity of a matrix are read by the gradient graph
    from the data it runs on, not from the data the inputs held when it was built."""
    xp = backend_namespace(backend)
    x = xp.asarray(np.arange(1.0, 7.0))
    i, j = xp.asarray(np.array([0, 2, 2])), xp.asarray(np.array([5, 1, 5]))
    _symbolic_and_eager(lambda v, k: v[k] * v[k], [x, i], [x, j])  # x[Variable]

    def labels(v: Any, t: Any) -> Any:
        return F.softmax_cross_entropy(v, t, reduce="no")

    logits = xp.asarray(np.arange(6.0).reshape(2, 3) / 4)
    t0, t1 = xp.asarray(np.array([0, 2])), xp.asarray(np.array([1, -1]))
    _symbolic_and_eager(labels, [logits, t0], [logits * 0.5, t1])
    _symbolic_and_eager(lambda v: F.relu(v) * v, [x - 3.5], [3.5 - x])
    _symbolic_and_eager(lambda v: v.__array_namespace__().where(v > 3, v * v, v), [x], [7 - x])
    # Zeros appear: cumulative_prod's gradient finds them in the new data.
    no_zeros = xp.asarray(np.array([[1.0, 2.0, 3.0], [0.5, 1.5, 2.0]]))
    zeros = xp.asarray(np.array([[1.0, 0.0, 3.0], [0.0, 1.5, 0.0]]))
    _symbolic_and_eager(
        lambda v: v.__array_namespace__().cumulative_prod(v, axis=1), [no_zeros], [zeros]
    )
    # An invertible matrix, then a singular one: det's gradient is then the adjugate.
    invertible = xp.asarray(np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]))
    singular = xp.asarray(np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]))
    _symbolic_and_eager(lambda m: m.__array_namespace__().linalg.det(m), [invertible], [singular])


# -- iterating over a Variable while building, then runs on other batch sizes ------------


def _summed_rows(h: Variable) -> Variable:
    total = None
    for row in h:
        total = row if total is None else total + row
    assert total is not None
    return total


def _first_row(h: Variable) -> Variable:
    first, *_ = h
    return first


def _xp(h: Variable) -> Any:
    return h.__array_namespace__()


# Steps of a random program over its state ``h`` (batch, 3), the input ``x`` (batch,
# 3) and the weight ``w`` (3, 3), each giving a new state of that shape; the first
# item says whether the step iterates over ``h``.
ITERATION_STEPS: dict[str, tuple[bool, Callable[[Variable, Variable, Variable], Variable]]] = {
    "tanh": (False, lambda h, x, w: F.tanh(h)),
    "matmul": (False, lambda h, x, w: h @ w),
    "mul-input": (False, lambda h, x, w: h * x),
    "center": (False, lambda h, x, w: h - F.mean(h, axis=0, keepdims=True)),
    "stack-rows": (True, lambda h, x, w: _xp(h).stack([r * 0.5 for r in h])),
    "concat-rows": (True, lambda h, x, w: _xp(h).reshape(_xp(h).concat(list(h)), (-1, 3))),
    "sum-rows": (True, lambda h, x, w: h + _summed_rows(h)),
    "first-row": (True, lambda h, x, w: h * _first_row(h)),
}


def _iterating_program(steps: list[str]) -> Callable[[Variable, Variable], Variable]:
    def program(x: Variable, w: Variable) -> Variable:
        h = x
        for name in steps:
            h = ITERATION_STEPS[name][1](h, x, w)
        return F.sum(h * h)

    return program


def _eager_value_and_grads(
    program: Callable[[Variable, Variable], Variable], arrays: list[Any]
) -> list[np.ndarray | None]:
    leaves = [Variable(a) for a in arrays]
    y = program(*leaves)
    y.backward()
    return _results(y, leaves)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(st.sampled_from(sorted(ITERATION_STEPS)), min_size=1, max_size=5),
    batches=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    means=st.sampled_from([*MEANS, "jit"]),
)
def test_iteration_while_building_then_other_batch_sizes(
    backend: str, steps: list[str], batches: list[int], means: str
) -> None:
    """A graph built on a batch of 2 by a random program, some of whose steps iterate
    over a Variable, run on a random sequence of batch sizes: eager's values and
    gradients on every run of the built size (and on every run where nothing
    iterates, and under ``jit`` always); a refusal that names the iteration and the
    new shape on the others, which leaves later runs exact."""
    xp = backend_namespace(backend)
    rng = np.random.default_rng(len(steps) * 10 + len(batches))
    program = _iterating_program(steps)
    iterates = any(ITERATION_STEPS[name][0] for name in steps)

    def arrays(batch: int) -> list[Any]:
        return [xp.asarray(rng.uniform(-1.0, 1.0, s)) for s in ((batch, 3), (3, 3))]

    built = arrays(2)
    leaves = [Variable(a) for a in built]
    jitted = agnograd.jit(agnograd.functional.value_and_grad(program, argnums=(0, 1)))
    with agnograd.auto_forward(False):
        y = program(*leaves)
    plan = _compiled.compile(y) if means == "compile" else None

    def run() -> None:
        for leaf in leaves:
            leaf.cleargrad()
        with agnograd.using_config("compile_after", None if means == "walk" else 0):
            if plan is not None:
                plan.run()
            else:
                y.forward()
                y.backward()

    for batch in batches:
        new = arrays(batch)
        want = _eager_value_and_grads(program, new)
        what = f"{means}, steps {steps}, batch {batch}"
        if means == "jit":
            value, grads = jitted(*new)
            got = [to_numpy(value), *(to_numpy(g) for g in grads)]
            # value_and_grad gives zeros where eager gives None (an unused input).
            for i, a in enumerate(new, start=1):
                want[i] = np.zeros(tuple(a.shape)) if want[i] is None else want[i]
            assert_same(got, want, what)
            continue
        for leaf, a in zip(leaves, new, strict=True):
            leaf.d = a
        if iterates and batch != 2:
            with pytest.raises(agnograd.type_check.InvalidType) as refused:
                run()
            message = str(refused.value)
            assert "iteration over" in message, f"{what}: {message}"
            assert f"shape ({batch}, 3)" in message, f"{what}: {message}"
            continue
        run()
        assert_same(_results(y, leaves), want, what)
