"""What a graph keeps per operation: the objects Python's collector tracks (a full
collection walks them all, so a big graph's cost per operation grows with them)."""

from __future__ import annotations

import gc

import numpy as np

import agnograd
import agnograd.functions as F


def test_a_graph_operation_keeps_four_objects_that_the_collector_tracks() -> None:
    # The node, its output's node, the weak reference to it and the outputs tuple: the
    # inputs of a node of one or two are kept in attributes, not in a tuple, since a
    # full collection walks every tracked object of a graph (benchmarks/bench_graph_size.py).
    x, w = agnograd.Variable(np.zeros(1)), agnograd.Variable(np.ones(1))

    def chain() -> agnograd.Variable:
        y = x
        for i in range(300):
            y = y * 1.0 if i % 3 == 0 else F.sin(y) if i % 3 == 1 else y + w
        return y

    chain().backward()  # (whatever its first run leaves in caches is not counted)
    gc.collect()
    before = len(gc.get_objects())
    y = chain()
    gc.collect()
    assert (len(gc.get_objects()) - before) / 300 <= 4.01
    assert y.node.rank == 300  # (alive while counted)


def test_a_nodes_inputs_read_back_as_they_were_set() -> None:
    f = F.sin(agnograd.Variable(np.ones(2))).creator_node
    (a,) = f.inputs
    assert f.inputs == (a,)
    for value in [(a, a), (a, a, a), [a], (), None, (None, a), (a, None), (a,)]:
        f.inputs = value
        assert f.inputs == value
        assert f.inputs.__class__ is value.__class__
