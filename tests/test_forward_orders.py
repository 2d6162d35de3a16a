"""Forward mode at second order for every function with an input domain, on NumPy,
array-api-strict and torch, drawn from the declarations as ``test_forward.py``'s
first-order test is (so that a new function is covered by itself), and at first order
on JAX and Dask.

Second order is checked against reverse over reverse (``agnograd.grad`` with
``enable_double_backprop``): for a random weight ``g`` of the outputs and the real
function ``phi(x) = <g, f(x)>``, with ``H`` its Hessian (that of the real and imaginary
parts of a complex input), forward over forward (the jvp of the jvp along ``t``, along
``u``) gives ``<g, D2f[t, u]> = <t, H u>``, forward over reverse (the jvp of the
gradient of ``phi`` along ``u``) gives ``H u``, and reverse over forward (the gradient of
``<g, jvp(f, x, t)>``) gives ``H t``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, reject, settings
from hypothesis import strategies as st
from test_forward import (
    BACKENDS,
    NAMES,
    CountBackward,
    leaves,
    split,
    tangents_for,
    to_numpy,
)

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.testing import backend_namespace
from agnograd.testing import strategies as ags
from agnograd.transforms._forward import jvp

# Two: hypothesis tries its simplest inputs first (0-d arrays, mostly), then one draw
# of its own; about 15 s of CPU for the 330 cases.
SECOND_EXAMPLES = settings(
    max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def pairing(a: Any, b: Any) -> Any:
    """``Re(sum(conj(a) b))`` of Variables or arrays, differentiably."""
    if floating_complex(a) or floating_complex(b):
        return F.sum(F.real(F.multiply(F.conj(a), b)))
    return F.sum(F.multiply(a, b))


def floating_complex(a: Any) -> bool:
    a = a.array if isinstance(a, Variable) else a
    return bool(agnograd.namespace(a).isdtype(a.dtype, "complex floating"))


def weights_for(xp: Any, outputs: list[Any], seed: int) -> list[Any]:
    """A random weight ``g`` per output (complex for a complex output)."""
    return tangents_for(xp, [y.array if isinstance(y, Variable) else y for y in outputs], seed)


def total(terms: Any) -> Any:
    result = None
    for term in terms:
        result = term if result is None else result + term
    return result


def number(x: Any) -> float:
    return float(to_numpy(x))


def real_pairing(a: Any, b: Any) -> float:
    """``Re(sum(conj(a) b))`` of two arrays, on the host."""
    return float(np.real(np.vdot(to_numpy(a), to_numpy(b))))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NAMES)
@SECOND_EXAMPLES
@given(data=st.data())
def test_second_order_against_reverse_over_reverse(name: str, backend: str, data: Any) -> None:
    xp = backend_namespace(backend)
    case = data.draw(ags.function_inputs(xp, name), label="case")
    where, f = split(xp, case)
    primals = [case.inputs[i] for i in where]
    if not primals:
        return
    if name == "std":
        # Its Hessian grows as 1/std (the first derivative has a kink at constant
        # inputs): near them the rounding errors of both sides grow as much.
        assume(float(np.min(to_numpy(f(*primals)))) > 0.1)
    seed = data.draw(st.integers(0, 2**16), label="seed")
    t = tangents_for(xp, primals, seed)
    u = tangents_for(xp, primals, seed + 1)
    g = weights_for(xp, leaves(f(*primals)), seed + 2)

    def phi(*xs: Any) -> Any:
        return total(pairing(w, y) for w, y in zip(g, leaves(f(*xs)), strict=True))

    # reverse over reverse: H u
    xs = [Variable(p, requires_grad=True) for p in primals]
    grads = agnograd.grad([phi(*xs)], xs, enable_double_backprop=True)
    along_u = total(pairing(d, v) for d, v in zip(grads, u, strict=True) if d is not None)
    hu = [None] * len(xs) if along_u is None else agnograd.grad([along_u], xs)
    hu = [
        np.zeros(tuple(x.shape)) if h is None else to_numpy(h) for x, h in zip(xs, hu, strict=True)
    ]
    t_hu = sum(real_pairing(a, b) for a, b in zip(t, hu, strict=True))

    # forward over forward: <g, D2f[t, u]>
    def along_t(*ys: Any) -> Any:
        return tuple(leaves(jvp(f, ys, tuple(t))[1]))

    _, second = jvp(along_t, tuple(primals), tuple(u))
    ff = sum(number(pairing(w, s)) for w, s in zip(g, second, strict=True))
    np.testing.assert_allclose(ff, t_hu, rtol=1e-6, atol=1e-8, err_msg="forward over forward")

    # forward over reverse: H u
    gradient = agnograd.func.grad(phi, argnums=tuple(range(len(primals))))
    _, hvp = jvp(gradient, tuple(primals), tuple(u))
    for got, want in zip(hvp, hu, strict=True):
        np.testing.assert_allclose(
            to_numpy(got), want, rtol=1e-6, atol=1e-8, err_msg="forward over reverse"
        )

    # agnograd.functional.hvp (reverse over forward for real inputs): H u
    if not any(floating_complex(p) for p in primals):
        _, products = agnograd.functional.hvp(phi, tuple(primals), tuple(u))
        for got, want in zip(products, hu, strict=True):
            np.testing.assert_allclose(
                to_numpy(got), want, rtol=1e-6, atol=1e-8, err_msg="functional.hvp"
            )

    # reverse over forward: <u, H t>
    xs = [Variable(p, requires_grad=True) for p in primals]
    _, tangent = jvp(f, tuple(xs), tuple(t))
    psi = total(pairing(w, s) for w, s in zip(g, leaves(tangent), strict=True))
    ht = agnograd.grad([psi], xs)
    rf = sum(real_pairing(h, v) for h, v in zip(ht, u, strict=True) if h is not None)
    np.testing.assert_allclose(rf, t_hu, rtol=1e-6, atol=1e-8, err_msg="reverse over forward")


# -- JAX and Dask: first order, against the adjoint (reverse mode) ----------------------

# An eager JAX operation compiles for each new shape, and every Dask example builds and
# computes graphs: one example of each function costs about 40 s on JAX, so hypothesis
# draws the functions here, as it draws their inputs. The reference is the adjoint,
# one backward: <g, J t> == <vjp(g), t> for a random weight g of the outputs (the
# real inner product, so that it holds for complex inputs and outputs too).


def sampled(examples: int) -> Any:
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )


@sampled(6)
@given(data=st.data())
def test_jvp_on_jax_is_the_adjoint_of_backward(data: Any) -> None:
    jax = pytest.importorskip("jax")
    # 64 bits for this test alone (never a global switch: other tests share the process)
    with jax.enable_x64(True):
        check_adjoint("jax", data)


@sampled(8)
@given(data=st.data())
def test_jvp_on_dask_is_the_adjoint_of_backward(data: Any) -> None:
    pytest.importorskip("dask")
    check_adjoint("dask", data)


def check_adjoint(backend: str, data: Any) -> None:
    xp = backend_namespace(backend)
    name = data.draw(st.sampled_from(NAMES), label="name")
    case = data.draw(ags.function_inputs(xp, name), label="case")
    where, f = split(xp, case)
    primals = [case.inputs[i] for i in where]
    if not primals:
        return
    try:
        ys = leaves(f(*primals))
    except (AttributeError, NotImplementedError, ValueError):
        # Dask has no slogdet, det, eigh, cross or pinv, and its other decompositions
        # take 2-d arrays only: nothing to differentiate.
        if backend != "dask" or not name.startswith("linalg."):
            raise
        reject()
    seed = data.draw(st.integers(0, 2**16), label="seed")
    t = tangents_for(xp, primals, seed)
    with CountBackward() as hook:
        output, out_tangent = jvp(f, tuple(primals), tuple(t))
    assert hook.calls == 0, f"{name}: {hook.calls} backward calls during jvp"
    g = weights_for(xp, ys, seed + 1)
    xs = [Variable(p, requires_grad=True) for p in primals]
    phi = total(pairing(w, y) for w, y in zip(g, leaves(f(*xs)), strict=True))
    grads = agnograd.grad([phi], xs)
    forward = sum(real_pairing(w, s) for w, s in zip(g, leaves(out_tangent), strict=True))
    reverse = sum(real_pairing(d, v) for d, v in zip(grads, t, strict=True) if d is not None)
    np.testing.assert_allclose(forward, reverse, rtol=1e-6, atol=1e-8, err_msg=name)
    for y, ref in zip(leaves(output), ys, strict=True):
        np.testing.assert_array_equal(to_numpy(y), to_numpy(ref))
