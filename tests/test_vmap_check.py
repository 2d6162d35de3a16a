"""agnograd.testing.check_vmap: a function or node under vmap against a loop."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.functions as F
from agnograd.testing import backend_namespace, check_vmap
from agnograd.transforms import _batching_rules
from agnograd.transforms._batching import BatchedArray

BACKENDS = ["numpy", "array_api_strict", "torch"]


class Scale(agnograd.FunctionNode):
    """A user's node: ``x * w`` summed over its last axis, written with the namespace
    of its inputs (``self.xp``: under vmap, one of them may be batched alone) and its
    functions (array-api-strict's operators refuse a batched operand)."""

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x, w = inputs
        return (self.xp.sum(self.xp.multiply(x, w), axis=-1),)

    def backward(self, indexes: Any, grad_outputs: Any) -> Any:
        raise AssertionError("not called")


@pytest.mark.parametrize("backend", BACKENDS)
def test_functions_and_a_users_node_pass(backend: str) -> None:
    xp = backend_namespace(backend)
    x = xp.reshape(xp.arange(6, dtype=xp.float64), (2, 3)) / 7
    w = xp.asarray([0.5, -1.0, 2.0], dtype=xp.float64)
    check_vmap(lambda x, w: F.tanh(x @ w), (x, w))
    check_vmap(lambda x: (F.sum(x, axis=0), F.exp(x)), x)
    check_vmap(Scale(), (x, w))


@settings(max_examples=20, deadline=None)
@given(axes=st.tuples(st.sampled_from([0, 1, 2, None]), st.sampled_from([0, 1, None])))
def test_in_axes_drawn(axes: tuple[Any, Any]) -> None:
    x = np.arange(6.0).reshape(2, 3) / 7
    w = np.array([0.5, -1.0, 2.0])
    if axes == (None, None):
        return  # nothing batched: vmap refuses it
    check_vmap(lambda x, w: F.sin(x) * w, (x, w), in_axes=axes)


def test_a_wrong_batching_rule_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def reversed_sum(x: Any, /, **kwargs: Any) -> Any:
        out = _batching_rules._axis_rule("sum", _batching_rules.AXES["sum"], (x,), kwargs)
        return BatchedArray(out.data[::-1], out.level)  # the examples' order lost

    monkeypatch.setitem(_batching_rules.RULES, "sum", reversed_sum)
    with pytest.raises(AssertionError, match=r"output 0 under vmap\(in_axes=\(0,\)\)"):
        check_vmap(lambda x: F.sum(x, axis=0), np.arange(6.0).reshape(2, 3))


class Normalized(agnograd.FunctionNode):
    """A user's node whose forward reads a value in Python (``float``), which vmap
    cannot batch, and whose batching rule computes each example's scale instead."""

    rule_calls = 0

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        return (x / float(self.xp.max(self.xp.abs(x))),)

    def vmap(self, in_axes: Any, inputs: Any) -> Any:
        (x,) = inputs
        assert in_axes == (0,)
        type(self).rule_calls += 1
        xp = self.xp
        scale = xp.max(xp.abs(x), axis=tuple(range(1, x.ndim)), keepdims=True)
        return (xp.moveaxis(x / scale, 0, -1),), -1  # the batch on the last axis

    def backward(self, indexes: Any, grad_outputs: Any) -> Any:
        raise AssertionError("not called")


class WithoutRule(Normalized):
    vmap = None


class Shifted(agnograd.FunctionNode):
    """A user's node of two inputs whose rule is told which is batched."""

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x, w = inputs
        return (self.xp.add(x, w), self.xp.sum(w))

    def vmap(self, in_axes: Any, inputs: Any) -> Any:
        x, w = inputs
        if in_axes[1] is None:  # w shared: so is its sum
            return (self.xp.add(x, w), self.xp.sum(w)), (0, None)
        return NotImplemented  # forward, batched by the namespace's rules

    def backward(self, indexes: Any, grad_outputs: Any) -> Any:
        raise AssertionError("not called")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_users_node_with_a_batching_rule(backend: str) -> None:
    xp = backend_namespace(backend)
    x = xp.reshape(xp.arange(6, dtype=xp.float64), (2, 3)) - 2.5
    with pytest.raises(agnograd.ConcretizationTypeError):  # its forward alone
        check_vmap(WithoutRule(), x)
    Normalized.rule_calls = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", agnograd.VmapFallbackWarning)
        check_vmap(Normalized(), x)
        check_vmap(Shifted(), (x, x[0, ...] * 2.0))
    assert Normalized.rule_calls == 2  # in_axes 0 and -1: the rule, not the loop
    assert "vmap" not in Scale.__dict__
    assert Scale.forward is Scale.__dict__["forward"]  # nodes without a rule: as written
