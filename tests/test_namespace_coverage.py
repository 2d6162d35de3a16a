"""Every name of the array API standard (2025.12) is accounted for exactly once."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import agnograd
from agnograd.functions import _standard, _table
from agnograd.testing import backend_namespace

TABLES = {
    "differentiable": set(_table.DIFFERENTIABLE),
    "non-differentiable": set(_table.NON_DIFFERENTIABLE),
    "unsupported": set(_table.UNSUPPORTED),
    "passed through or wrapped": set(_table.PASSTHROUGH) | {"asarray", "__array_namespace_info__"},
}


def declarations() -> dict[str, list[str]]:
    """Where each name is declared: the rows of every chapter module, read before
    _table merges them (a name in two chapters would hide in the merged dicts; _table
    refuses it at import anyway)."""
    found: dict[str, list[str]] = {}
    for chapter in _table.CHAPTERS:
        for row in chapter.ROWS.rows.values():
            if not row.standard:
                continue  # an extra of agnograd.functions, not in the namespace
            kind = "differentiable" if row.differentiable else "non-differentiable"
            kind = "unsupported" if row.function is None else kind
            found.setdefault(row.name, []).append(f"{chapter.__name__} ({kind})")
    for name in TABLES["passed through or wrapped"]:
        found.setdefault(name, []).append("passed through or wrapped")
    return found


DECLARED = declarations()


@pytest.mark.parametrize("name", _standard.ALL)
def test_each_name_is_declared_exactly_once(name: str) -> None:
    holders = DECLARED.get(name, [])
    assert len(holders) == 1, f"{name!r} is in {holders or 'no table'}"


def test_no_differentiable_function_is_unsupported() -> None:
    # The target of issue 3: whatever has a derivative has a rule.
    assert not _table.UNSUPPORTED


def test_the_lists_hold_only_names_of_the_standard() -> None:
    standard = set(_standard.ALL)
    for table, names in TABLES.items():
        assert names <= standard, table
    assert set(DECLARED) <= standard


@pytest.mark.parametrize("name", sorted(set(_standard.ALL) - set(_standard.DATA_TYPES)))
def test_every_name_resolves_in_the_namespace(name: str) -> None:
    obj = agnograd.namespace(np)
    *parents, last = name.split(".")
    for part in parents:
        obj = getattr(obj, part)
    assert hasattr(obj, last)


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict", "torch"])
def test_dir_lists_every_name_the_namespace_offers(backend: str) -> None:
    # Names resolve on first use (__getattr__): without __dir__, dir() and tab
    # completion showed none of the functions.
    xp = agnograd.namespace(backend_namespace(backend))
    for name in (*_table.DIFFERENTIABLE, *_table.NON_DIFFERENTIABLE):
        *parents, last = name.split(".")
        obj = xp
        for part in parents:
            assert part in dir(obj), name
            obj = getattr(obj, part)
        assert last in dir(obj), name
    assert {"asarray", "float64", "pi", "finfo", "__array_namespace_info__"} <= set(dir(xp))
    for ns in (xp, xp.linalg, xp.fft):
        for name in dir(ns):
            getattr(ns, name)  # everything listed resolves


@pytest.mark.parametrize(
    "name", sorted(n for n in _table.DIFFERENTIABLE if n in set(_standard.ELEMENTWISE))
)
def test_signatures_keep_the_positional_only_marker(name: str) -> None:
    # The standard's elementwise functions take their arrays positionally only.
    fn = _table.DIFFERENTIABLE[name]
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        pytest.skip(f"{name} has no introspectable signature")
    arrays = [p for p in params if p.name in ("x", "x1", "x2")]
    assert arrays, f"{name} has no x/x1/x2 parameter: {params}"
    assert all(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in arrays), name


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict"])
@pytest.mark.parametrize("name", sorted(_standard.SIGNATURES))
def test_forwarded_functions_have_the_standard_signature(backend: str, name: str) -> None:
    xp = agnograd.namespace(backend_namespace(backend))
    assert inspect.signature(getattr(xp, name)) == _standard.signature(name)


@pytest.mark.parametrize("name", sorted(_standard.ELEMENTWISE))
def test_elementwise_signatures_are_the_standards(name: str) -> None:
    # Written out, made from a row, or forwarded (their parameters come from the row's
    # arity): array-api-strict's own signatures are the reference.
    strict = backend_namespace("array_api_strict")

    def parameters(fn: object) -> list[tuple[str, object, object]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    xp = agnograd.namespace(strict)
    assert parameters(getattr(xp, name)) == parameters(getattr(strict, name))


def test_a_call_that_does_not_fit_the_signature_names_the_function() -> None:
    xp = agnograd.namespace(np)
    with pytest.raises(TypeError, match=r"argmax: too many positional arguments"):
        xp.argmax(np.ones(3), 0)
    with pytest.raises(TypeError, match=r"zeros: got an unexpected keyword argument 'like'"):
        xp.zeros(3, like=None)
    with pytest.raises(TypeError, match=r"can_cast: missing a required argument: 'to'"):
        xp.can_cast(np.float32)
    with pytest.raises(TypeError, match=r"equal: 'x1' parameter is positional only"):
        xp.equal(x1=np.ones(2), x2=np.ones(2))
    with pytest.raises(TypeError, match=r"full_like: multiple values for argument 'fill_value'"):
        xp.full_like(np.ones(2), 1.0, fill_value=2.0)
    with pytest.raises(TypeError, match=r"linspace: missing a required argument: 'num'"):
        xp.linspace(0.0, 1.0, dtype=np.float64)
    assert xp.argsort(np.array([2.0, 1.0]), axis=0, stable=False).shape == (2,)


def test_the_standard_version_and_inspection_object() -> None:
    xp = agnograd.namespace(np)
    assert xp.__array_api_version__ == _standard.VERSION == "2025.12"
    info = xp.__array_namespace_info__()
    assert info.devices() == (agnograd.get_device("@numpy"),)  # a tuple in 2025.12
    assert info.default_dtypes()["real floating"] == np.float64


def test_the_inspection_object_speaks_agnograd_devices() -> None:
    strict = backend_namespace("array_api_strict")
    info = agnograd.namespace(strict).__array_namespace_info__()
    devices = info.devices()
    assert all(isinstance(d, agnograd.Device) for d in devices)
    assert info.default_device() == agnograd.get_device("@array_api_strict:CPU_DEVICE")
    x = agnograd.Variable(strict.asarray([1.0], device=strict.Device("device1")))
    assert x.device in devices
    assert strict.Device("device1") in devices
    no_x64 = agnograd.get_device("@array_api_strict:no_x64")
    assert info.default_dtypes(device=no_x64)["real floating"] == strict.float32
    assert strict.float64 not in info.dtypes(device=no_x64, kind="real floating").values()


def test_dlpack_has_the_standard_signature_and_passes_only_given_arguments() -> None:
    x = agnograd.Variable(np.arange(3.0), requires_grad=False)  # else refused: test_interop
    params = inspect.signature(agnograd.Variable.__dlpack__).parameters
    assert list(params) == ["self", "stream", "max_version", "dl_device", "copy"]
    assert params["self"].kind is inspect.Parameter.POSITIONAL_ONLY
    np.testing.assert_array_equal(np.from_dlpack(x), [0.0, 1.0, 2.0])
    assert "dltensor" in repr(x.__dlpack__(max_version=(1, 0)))
