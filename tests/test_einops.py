"""einops' main API on Variables (``agnograd/interop/_einops.py``).

``einops.rearrange``, ``reduce``, ``repeat``, ``pack``, ``unpack`` and ``einsum``
on Variables of every host backend: the results are Variables of the input's
library with the values einops gives for the raw NumPy arrays, and their gradients
agree with central differences. einsum, which agnograd builds from ``matmul``, is
checked against einops' (NumPy's) on hypothesis-drawn patterns: repeated letters,
``...`` with broadcasting, one to three operands. The backend must exist whichever
of einops and agnograd is imported first: checked in fresh interpreters.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agnograd
from agnograd import Variable
from agnograd.testing import check_backward, check_double_backward

einops = pytest.importorskip("einops", minversion="0.8")

# name -> (einops module, x) -> result, for x of shape (b, h, w) with w even
CASES: dict[str, Callable[[Any, Any], Any]] = {
    "rearrange": lambda e, x: e.rearrange(x, "b h w -> w (b h)"),
    "rearrange (split)": lambda e, x: e.rearrange(x, "b h (w1 w2) -> w1 b h w2", w1=2),
    "rearrange (a list)": lambda e, x: e.rearrange([x, x * 2.0], "n b h w -> b (n h) w"),
    "reduce sum": lambda e, x: e.reduce(x, "b h w -> h", "sum"),
    "reduce mean (pooling)": lambda e, x: e.reduce(x, "b h (w w2) -> b h w", "mean", w2=2),
    "reduce max": lambda e, x: e.reduce(x, "b h w -> b w", "max"),
    "reduce prod": lambda e, x: e.reduce(x, "b h w -> b 1 w", "prod"),
    "repeat": lambda e, x: e.repeat(x, "b h w -> b (r h) w c", r=2, c=3),
    "pack": lambda e, x: e.pack([x, x * x], "b * w")[0],
    "unpack": lambda e, x: e.unpack(x, [(1,), (-1,)], "b * w")[1],
    "einsum": lambda e, x: e.einsum(x, x, "b h w, c h w -> b c"),
    "einsum (diagonal)": lambda e, x: e.einsum(x[:, :2, :2], "b i i -> i b"),
}


@st.composite
def shapes(draw: st.DrawFn) -> tuple[int, int, int]:
    return draw(st.integers(1, 3)), draw(st.integers(2, 3)), 2 * draw(st.integers(1, 2))


@pytest.mark.parametrize("name", list(CASES))
def test_main_api_on_variables(backend: Any, name: str) -> None:
    # einops' handling of the pattern and the shapes is the same on every library and
    # is drawn 8 times on each of the others; JAX compiles each operation anew for
    # each shape drawn (half a second an example): 2 examples check its arrays.
    @settings(max_examples=2 if backend.name == "jax" else 8, deadline=None)
    @given(shape=shapes(), seed=st.integers(0, 2**16))
    def check(shape: tuple[int, ...], seed: int) -> None:
        case = CASES[name]
        rng = np.random.default_rng(seed)
        data = rng.uniform(0.5, 1.5, shape)  # positive: prod is smooth
        if name == "reduce max":  # 0.1 apart: max is differentiable at the point and near it
            data = 1.0 + rng.permutation(data.size).reshape(shape) * 0.1
        x = backend.asarray(data, dtype="float64" if backend.name != "jax" else "float32")
        y = case(einops, Variable(x))
        assert isinstance(y, Variable), f"einops {name} returned {type(y).__name__}"
        assert type(y.array) is type(x), f"einops {name} returned a {type(y.array).__name__}"
        assert y.creator is not None, f"einops {name}: the result is not connected to the graph"
        expected = case(einops, data)  # einops' NumPy backend
        backend.assert_close(y, expected, rtol=1e-5, atol=1e-5)
        gy = backend.asarray(rng.standard_normal(expected.shape))
        check_backward(lambda v: case(einops, v), x, gy)

    check()


def test_raw_arrays_beside_variables_and_parse_shape() -> None:
    x = Variable(np.arange(6.0).reshape(2, 3))
    raw = np.ones((2, 3))
    assert isinstance(einops.rearrange([x, raw], "n a b -> a (n b)"), Variable)
    packed, shapes_ = einops.pack([x, raw], "a *")
    assert isinstance(packed, Variable)
    assert packed.shape == (2, 6)
    assert shapes_ == [(3,), (3,)]
    assert einops.parse_shape(x, "a b") == {"a": 2, "b": 3}
    np.testing.assert_array_equal(einops.asnumpy(x), x.array)
    # an integer Variable reduces, but has no mean (einops' rule for every backend)
    k = agnograd.as_variable(np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(einops.reduce(k, "a b -> b", "sum").array, [3, 5, 7])
    with pytest.raises(NotImplementedError, match="reduce_mean is not available"):
        einops.reduce(k, "a b -> b", "mean")


def test_the_backend_reads_gradients_to_numpy(backend: Any) -> None:
    # einops' own suite reads gradients through the backend: x.grad is a raw array.
    x = Variable(backend.asarray([[1.0, 2.0], [3.0, 4.0]]))
    einops_backend = einops._backends.get_backend(x)
    einops.reduce(x * x, "a b -> a", "sum").backward()
    for array in (x, x.grad, x.array):
        values = einops_backend.to_numpy(array)
        assert isinstance(values, np.ndarray)
    np.testing.assert_array_equal(einops_backend.to_numpy(x.grad), [[2.0, 4.0], [6.0, 8.0]])


# --- einsum against einops' NumPy backend ------------------------------------------


@st.composite
def einsum_problems(draw: st.DrawFn) -> tuple[str, list[np.ndarray]]:
    """An einops einsum pattern and operands: letters of a, b, c, d (repeated within
    an operand for a diagonal), ``...`` with broadcasting, 1 to 3 operands."""
    size = {a: draw(st.integers(1, 3)) for a in "abcd"}
    ellipsis = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    use_ellipsis = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    specs, operands = [], []
    for _ in range(draw(st.integers(1, 3))):
        names = draw(st.lists(st.sampled_from("abcd"), max_size=3))
        shape = [size[a] for a in names]
        if use_ellipsis:
            # a right-aligned part of the ellipsis' shape, lengths 1 broadcasting
            n = draw(st.integers(0, len(ellipsis)))
            dims = [d if draw(st.booleans()) else 1 for d in ellipsis[len(ellipsis) - n :]]
            at = draw(st.integers(0, len(names)))
            names = [*names[:at], "...", *names[at:]]
            shape = [*shape[:at], *dims, *shape[at:]]
        specs.append(" ".join(names))
        operands.append(rng.standard_normal(shape))
    used = sorted({a for s in specs for a in s.split() if a != "..."})
    out = draw(st.permutations(used)).copy() if used else []
    out = out[: draw(st.integers(0, len(out)))]
    if use_ellipsis:
        out.insert(draw(st.integers(0, len(out))), "...")
    return ", ".join(specs) + " -> " + " ".join(out), operands


@settings(max_examples=60, deadline=None)
@given(problem=einsum_problems())
def test_einsum_matches_numpy_and_differentiates(problem: tuple[str, list[np.ndarray]]) -> None:
    pattern, operands = problem
    expected = einops.einsum(*operands, pattern)
    y = einops.einsum(*map(Variable, operands), pattern)
    assert isinstance(y, Variable)
    np.testing.assert_allclose(y.array, expected, rtol=1e-10, atol=1e-12, err_msg=pattern)
    gy = np.random.default_rng(0).standard_normal(np.shape(expected))
    check_backward(lambda *vs: einops.einsum(*vs, pattern), tuple(operands), gy)


@pytest.mark.parametrize(
    ("pattern", "shapes_"),
    [
        ("... a, ... -> ... a", [(2, 3, 4), (3,)]),  # ellipses of two ranks, right-aligned
        ("a ..., ... b -> ... a b", [(4, 1, 3), (2, 3, 5)]),  # a length 1 broadcasts
        ("a b, b c, c d -> d a", [(2, 3), (3, 4), (4, 2)]),
        ("a a b, b -> a", [(3, 3, 2), (2,)]),
        ("a b, a b ->", [(2, 3), (2, 3)]),
    ],
)
def test_einsum_cases(pattern: str, shapes_: list[tuple[int, ...]]) -> None:
    operands = [np.random.default_rng(i).standard_normal(s) for i, s in enumerate(shapes_)]
    y = einops.einsum(*map(Variable, operands), pattern)
    np.testing.assert_allclose(y.array, einops.einsum(*operands, pattern), rtol=1e-12)


def test_einsum_has_second_derivatives() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 3, 3)), rng.standard_normal((3, 4))
    pattern = "n i i, i j -> n j"
    gy = rng.standard_normal((2, 4))
    ggs = (rng.standard_normal(a.shape), rng.standard_normal(b.shape))
    check_double_backward(lambda x, w: einops.einsum(x, w, pattern), (a, b), gy, ggs)


@pytest.mark.parametrize(
    ("shapes_", "pattern", "match"),
    [
        (((2, 3),), "a b, b c -> a c", "must name the axes of each of the 1 operands"),
        (((2, 3), (4, 3)), "a b, a b -> a", "has lengths 2 and 4"),
        (((2, 3, 4),), "... a -> a", "no '...' in the output"),
    ],
)
def test_einsum_errors_name_the_pattern(shapes_: Any, pattern: str, match: str) -> None:
    operands = [Variable(np.ones(s)) for s in shapes_]
    with pytest.raises(ValueError, match=f"einsum: .*{match}"):
        einops.einsum(*operands, pattern)


# --- defined whichever is imported first -------------------------------------------

_PROBE = """
{imports}
import sys, numpy as np
x = agnograd.Variable(np.arange(6.0).reshape(2, 3))
y = einops.rearrange(x, "a b -> b a")
assert type(y) is agnograd.Variable and y.shape == (3, 2), y
einops.einsum(x, x, "a b, a c -> b c")[0, 1].backward()
assert x.grad.tolist() == [[1.0, 0.0, 0.0], [4.0, 3.0, 0.0]], x.grad
finders = [type(f).__name__ for f in sys.meta_path]
assert "_Finder" not in finders, finders  # imports no longer pass through it
"""


# A finder ahead of agnograd's that loads einops._backends itself.
_GREEDY = """
import importlib.machinery, sys
class Greedy:
    def find_spec(self, name, path, target=None):
        if name == "einops._backends":
            return importlib.machinery.PathFinder.find_spec(name, path)
        return None
"""


@pytest.mark.parametrize(
    "imports",
    [
        "import agnograd\nimport einops",
        "import einops\nimport agnograd",
        "import einops._backends\nimport agnograd\nimport einops",
        # a finder put ahead of agnograd's after agnograd was imported
        "import agnograd\n" + _GREEDY + "sys.meta_path.insert(0, Greedy())\nimport einops",
    ],
    ids=["agnograd-first", "einops-first", "einops-half-loaded", "another-finder-first"],
)
def test_the_backend_exists_whichever_is_imported_first(imports: str) -> None:
    probe = _PROBE.format(imports=textwrap.dedent(imports))
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
