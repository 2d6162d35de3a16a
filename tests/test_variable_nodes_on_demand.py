"""A Variable of no graph (no creator, no gradient required) gets its VariableNode
only when something asks for it: results under no_backprop_mode, of constants, of a
jvp. Whatever asks sees the node it would have seen had it been made at once."""

from __future__ import annotations

import copy
import pickle
import weakref

import numpy as np
import pytest
from _session import fast_paths

import agnograd
import agnograd.functions as F
from agnograd import Variable, VariableNode

PATHS = pytest.mark.parametrize("fast", [True, False], ids=["fast", "general"])


def _constant(backend, values):
    return Variable(backend.asarray(values), requires_grad=False)


@PATHS
def test_a_result_of_no_graph_gets_its_node_when_asked(backend, fast):
    with fast_paths(fast):
        y = F.tanh(_constant(backend, [0.5, 1.0])) * 2.0
    assert y._n is None  # nothing made yet
    assert y.requires_grad is False
    assert y.creator is None
    assert y.rank == 0
    node = y.node
    assert isinstance(node, VariableNode)
    assert y.node is node
    assert node.get_variable() is y
    assert node.creator_node is None
    assert not node.requires_grad
    assert node.rank == 0
    assert node.shape == (2,)
    assert node.dtype == y.dtype
    assert node.name is None


@PATHS
def test_a_variable_of_no_graph_joins_a_graph_on_either_side(backend, fast):
    x = Variable(backend.asarray([1.0, 2.0]))
    with fast_paths(fast):
        c = F.exp(_constant(backend, [0.5, -1.0]))
        y = F.sum(x * c + c * x + (x + c))
    y.backward()
    want = 2 * np.exp(np.array([0.5, -1.0])) + 1
    np.testing.assert_allclose(np.asarray(x.grad), want)
    assert c.grad is None
    assert c.node.requires_grad is False  # made when the graph took it as an input


def test_a_variable_of_no_graph_can_require_a_gradient_later(backend):
    c = F.exp(_constant(backend, [0.0, 1.0]))
    c.requires_grad = True
    F.sum(c * c).backward()
    np.testing.assert_allclose(np.asarray(c.grad), 2 * np.exp([0.0, 1.0]))


@PATHS
def test_a_node_made_inside_a_jvp_takes_over_the_tangent(fast):
    x, v = np.array([0.25, 1.5]), np.array([1.0, -2.0])

    def f(a, ask):
        b = F.sin(a)
        if ask:
            b.name = "b"  # makes b's node, mid-jvp
            assert b.node.name == "b"
        return b * 3.0 + b

    with fast_paths(fast):
        y, t = agnograd.func.jvp(lambda a: f(a, ask=False), (x,), (v,))
        y2, t2 = agnograd.func.jvp(lambda a: f(a, ask=True), (x,), (v,))
    np.testing.assert_allclose(t, 4 * np.cos(x) * v)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(t2, t)


def test_a_constant_made_with_a_name_has_its_node():
    c = Variable(np.ones(2), name="c", requires_grad=False)
    assert c._n is not None
    assert c.node.name == "c"
    d = Variable(np.ones(2), requires_grad=False)
    d.name = "d"
    assert d.node.name == "d"
    assert d.name == "d"


def test_copies_and_pickles_of_a_variable_of_no_graph(backend):
    y = F.tanh(_constant(backend, [0.5, 1.0]))
    for other in (copy.copy(y), copy.deepcopy(y), pickle.loads(pickle.dumps(y))):
        assert other is not y
        assert other.requires_grad is False
        np.testing.assert_array_equal(np.asarray(other.array), np.asarray(y.array))
        assert other.node.get_variable() is other


def test_a_variable_of_no_graph_dies_with_its_last_reference():
    y = F.tanh(Variable(np.ones(3), requires_grad=False))
    ref = weakref.ref(y)
    del y
    assert ref() is None
    z = F.tanh(Variable(np.ones(3), requires_grad=False))
    node = z.node
    del z
    assert node.get_variable_or_none() is None  # the node holds its Variable weakly
