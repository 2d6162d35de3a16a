"""The checks run on every differentiable function, each returning (status, reason).

Each check is a hypothesis test run in-process; its raw status is ``pass``, ``fail``
or ``skip``. Expected failures are applied afterwards from the backend's xfail list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy
from hypothesis import HealthCheck, Phase, given, reject, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

import agnograd
from agnograd.testing import (
    NondifferentiableError,
    assert_allclose,
    check_backward,
    check_double_backward,
    to_numpy,
)
from agnograd.testing._backends import as_device, supports_float64, usable_devices
from agnograd.testing._numerical import from_host
from agnograd.testing.strategies import FunctionCase, function_inputs, registered_domains

CHECKS = ("backward", "double_backward", "devices", "dlpack", "cross_device")


@dataclass(frozen=True)
class Target:
    """What the suite runs against: a namespace on one device, in one dtype."""

    backend: str
    xp: Any
    device: Any
    dtype: Any
    max_examples: int
    shrink: bool = False


def _settings(target: Target, examples: int | None = None) -> settings:
    # Shrinking a failure costs seconds per cell; the report names the failing
    # example either way, and --shrink asks for the minimal one.
    phases = [p for p in Phase if target.shrink or p is not Phase.shrink]
    return settings(
        max_examples=examples or target.max_examples,
        database=None,
        deadline=None,
        derandomize=True,
        print_blob=False,
        phases=phases,
        suppress_health_check=list(HealthCheck),
    )


def _random(xp: Any, shape: tuple[int, ...], dtype: Any, device: Any, rng: Any) -> Any:
    values = rng.standard_normal(shape)
    if xp.isdtype(dtype, "complex floating"):
        values = values + 1j * rng.standard_normal(shape)
    return from_host(xp, values, dtype, device)


def _is_float(xp: Any, x: Any) -> bool:
    return xp.isdtype(x.dtype, ("real floating", "complex floating"))


def _output_grads(target: Target, case: FunctionCase, rng: Any) -> tuple[Any, ...]:
    with agnograd.no_backprop_mode():
        outputs = case(*[agnograd.Variable(x) for x in case.inputs])
    outputs = outputs if isinstance(outputs, tuple | list) else (outputs,)
    xp = target.xp
    return tuple(
        _random(xp, tuple(y.shape), y.dtype, array_api_compat.device(y.array), rng)
        if _is_float(xp, y.array)
        else None
        for y in outputs
    )


def _cases(target: Target, name: str, function: Callable[..., Any]) -> Any:
    return function_inputs(
        target.xp, name, dtype=target.dtype, device=target.device, function=function
    )


def _run(test: Callable[[], None]) -> tuple[str, str]:
    try:
        test()
    except Unsatisfiable as error:
        return "fail", f"no input away from kinks was found ({error})"
    except Exception as error:
        return "fail", _reason(error)
    return "pass", ""


def _reason(error: BaseException) -> str:
    message = str(error).strip() or type(error).__name__
    lines = [f"{type(error).__name__}: {message}"]
    # The notes hold hypothesis's falsifying example and where agnograd failed.
    lines += [note.strip() for note in getattr(error, "__notes__", ())]
    return "\n".join(lines)


# -- first and second order ----------------------------------------------------------


def check_first_order(target: Target, name: str, function: Callable[..., Any]) -> tuple[str, str]:
    """check_backward on hypothesis inputs from the function's domain."""

    @_settings(target)
    @given(case=_cases(target, name, function), seed=st.integers(0, 2**32 - 1))
    def test(case: FunctionCase, seed: int) -> None:
        rng = numpy.random.default_rng(seed)
        y_grad = _output_grads(target, case, rng)
        try:
            check_backward(case, case.inputs, y_grad, detect_nondifferentiable=True, seed=seed)
        except NondifferentiableError:
            reject()

    return _run(test)


def check_second_order(target: Target, name: str, function: Callable[..., Any]) -> tuple[str, str]:
    """check_double_backward on hypothesis inputs from the function's domain."""

    @_settings(target)
    @given(case=_cases(target, name, function), seed=st.integers(0, 2**32 - 1))
    def test(case: FunctionCase, seed: int) -> None:
        rng = numpy.random.default_rng(seed)
        xp = target.xp
        y_grad = _output_grads(target, case, rng)
        x_grad_grad = tuple(
            _random(xp, tuple(x.shape), x.dtype, array_api_compat.device(x), rng)
            if _is_float(xp, x)
            else None
            for x in case.inputs
        )
        try:
            check_double_backward(
                case, case.inputs, y_grad, x_grad_grad, detect_nondifferentiable=True, seed=seed
            )
        except NondifferentiableError:
            reject()

    return _run(test)


# -- devices and DLPack --------------------------------------------------------------


def _forward_backward(case: FunctionCase, inputs: tuple[Any, ...], rng_seed: int) -> Any:
    variables = [agnograd.Variable(x) for x in inputs]
    outputs = case(*variables)
    outputs = outputs if isinstance(outputs, tuple | list) else (outputs,)
    xp = array_api_compat.array_namespace(*inputs)
    rng = numpy.random.default_rng(rng_seed)
    seeds = [
        _random(xp, tuple(y.shape), y.dtype, array_api_compat.device(y.array), rng)
        if _is_float(xp, y.array)
        else None
        for y in outputs
    ]
    used = [k for k, s in enumerate(seeds) if s is not None]
    targets = [v for v, x in zip(variables, inputs, strict=True) if _is_float(xp, x)]
    grads = agnograd.grad([outputs[k] for k in used], targets, [seeds[k] for k in used])
    return [y.array for y in outputs], [None if g is None else g.array for g in grads]


def check_devices(target: Target, name: str, function: Callable[..., Any]) -> tuple[str, str]:
    """Outputs and gradients stay on the inputs' device, on every device of the
    backend, and agree with the results on the main device.

    Where a device lacks the inputs' dtype (array-api-strict's ``no_float64``), the
    narrowed inputs are compared with the same narrowed inputs on the main device:
    narrowing alone can turn distinct values into ties, or a tiny one into zero.
    """
    xp = target.xp
    devices = usable_devices(xp)
    checked: list[str] = []

    @_settings(target, max(1, target.max_examples // 3))
    @given(case=_cases(target, name, function), seed=st.integers(0, 2**32 - 1))
    def test(case: FunctionCase, seed: int) -> None:
        checked.clear()
        for device in devices:
            inputs = tuple(_move(xp, x, device) for x in case.inputs)
            here = tuple(array_api_compat.to_device(x, target.device) for x in inputs)
            reference = _forward_backward(case, here, seed)
            outputs, grads = _forward_backward(case, inputs, seed)
            label = as_device(target.backend, device).name
            for kind, arrays in (("output", outputs), ("gradient", grads)):
                for k, a in enumerate(arrays):
                    if a is None:
                        continue
                    where = array_api_compat.device(a)
                    if where != device:
                        raise AssertionError(
                            f"{kind} {k} is on device {where!r} although every input is on "
                            f"{device!r}"
                        )
            low = any(x.dtype in (xp.float32, xp.complex64) for x in inputs if _is_float(xp, x))
            rtol = 1e-4 if low else 1e-10
            for kind, mine, ref in (
                ("output", outputs, reference[0]),
                ("gradient", grads, reference[1]),
            ):
                for k, (a, b) in enumerate(zip(mine, ref, strict=True)):
                    if (a is None) != (b is None):
                        raise AssertionError(f"{kind} {k} is None on one device only")
                    if a is not None:
                        assert_allclose(
                            a, b, rtol=rtol, atol=rtol, err_msg=f"{kind} {k} on {label}"
                        )
            checked.append(label)

    status, reason = _run(test)
    if status == "pass":
        reason = f"devices: {', '.join(checked)}"
    return status, reason


def _move(xp: Any, x: Any, device: Any) -> Any:
    """``x`` on ``device``, narrowed first where the device lacks its dtype
    (array-api-strict's ``no_float64`` and ``no_x64`` devices)."""
    info = xp.__array_namespace_info__()
    if x.dtype not in info.dtypes(device=device).values():
        for kind in ("complex floating", "real floating", "indexing", "integral"):
            if xp.isdtype(x.dtype, "integral" if kind == "indexing" else kind):
                x = xp.astype(x, info.default_dtypes(device=device)[kind])
                break
    return array_api_compat.to_device(x, device)


_DLPACK_CPU = 1


def check_dlpack(target: Target, name: str, function: Callable[..., Any]) -> tuple[str, str]:
    """Every output and gradient array exports through DLPack: back into the same
    library, and into NumPy when it lives on the CPU."""
    xp = target.xp
    if not hasattr(xp, "from_dlpack"):
        return "skip", f"{xp.__name__} has no from_dlpack"

    @_settings(target, max(1, target.max_examples // 3))
    @given(case=_cases(target, name, function), seed=st.integers(0, 2**32 - 1))
    def test(case: FunctionCase, seed: int) -> None:
        outputs, grads = _forward_backward(case, case.inputs, seed)
        arrays = [(f"output {k}", a) for k, a in enumerate(outputs)]
        arrays += [(f"gradient {k}", g) for k, g in enumerate(grads) if g is not None]
        for label, a in arrays:
            try:
                same = xp.from_dlpack(a)
            except Exception as error:
                raise AssertionError(
                    f"{label} ({type(a).__name__} of shape {tuple(a.shape)}) does not "
                    f"re-import with {xp.__name__}.from_dlpack: {type(error).__name__}: {error}"
                ) from None
            assert_allclose(same, a, rtol=0, err_msg=f"{label} through from_dlpack")
            if a.__dlpack_device__()[0] != _DLPACK_CPU:
                continue
            try:
                host = numpy.from_dlpack(a)
            except Exception as error:
                raise AssertionError(
                    f"{label} ({type(a).__name__} of shape {tuple(a.shape)}) is not viewable "
                    f"by numpy.from_dlpack: {type(error).__name__}: {error}"
                ) from None
            assert_allclose(host, to_numpy(a), rtol=0, err_msg=f"{label} in NumPy")

    return _run(test)


def check_cross_device(target: Target, name: str, function: Callable[..., Any]) -> tuple[str, str]:
    """Inputs on the main device are copied (``agnograd.functions.copy``) to another
    device of the backend, the function runs there, and the gradients must come back
    to the main device equal to those computed without leaving it."""
    if name not in registered_domains():
        return "fail", "no domain registered"
    xp = target.xp
    info = xp.__array_namespace_info__()
    others = [
        d
        for d in usable_devices(xp)
        if d != target.device and target.dtype in info.dtypes(device=d).values()
    ]
    if not others:
        return "skip", "the backend has one device (with this dtype) here"
    other = others[0]

    @_settings(target, max(1, target.max_examples // 3))
    @given(case=_cases(target, name, function), seed=st.integers(0, 2**32 - 1))
    def test(case: FunctionCase, seed: int) -> None:
        reference = _forward_backward(case, case.inputs, seed)
        sources = [agnograd.Variable(x) for x in case.inputs]
        moved = [agnograd.functions.copy(v, other) for v in sources]
        outputs = case(*moved)
        outputs = outputs if isinstance(outputs, tuple | list) else (outputs,)
        rng = numpy.random.default_rng(seed)
        seeds = [
            _random(xp, tuple(y.shape), y.dtype, array_api_compat.device(y.array), rng)
            if _is_float(xp, y.array)
            else None
            for y in outputs
        ]
        used = [k for k, g in enumerate(seeds) if g is not None]
        targets = [v for v, x in zip(sources, case.inputs, strict=True) if _is_float(xp, x)]
        grads = agnograd.grad([outputs[k] for k in used], targets, [seeds[k] for k in used])
        for k, (g, ref) in enumerate(zip(grads, reference[1], strict=True)):
            if (g is None) != (ref is None):
                raise AssertionError(f"gradient {k} is None on one path only")
            if g is None:
                continue
            where = array_api_compat.device(g.array)
            if where != target.device:
                raise AssertionError(
                    f"gradient {k} is on {where!r}, not on the input's device {target.device!r}"
                )
            assert_allclose(g.array, ref, rtol=1e-6, atol=1e-6, err_msg=f"gradient {k}")

    status, reason = _run(test)
    if status == "pass":
        reason = f"through {as_device(target.backend, other).name}"
    return status, reason


RUNNERS: dict[str, Callable[[Target, str, Callable[..., Any]], tuple[str, str]]] = {
    "backward": check_first_order,
    "double_backward": check_second_order,
    "devices": check_devices,
    "dlpack": check_dlpack,
    "cross_device": check_cross_device,
}


def run_check(
    target: Target, name: str, function: Callable[..., Any], check: str
) -> tuple[str, str]:
    """Raw status and reason of one check of one function."""
    if name not in registered_domains():
        return "fail", "no domain registered"
    return RUNNERS[check](target, name, function)


def default_dtype(xp: Any, device: Any) -> Any:
    """float64 where the device has it (tight checks), else float32."""
    return xp.float64 if supports_float64(xp, device) else xp.float32


__all__ = ["CHECKS", "RUNNERS", "Target", "default_dtype", "run_check"]
