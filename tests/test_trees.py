"""The tree module (``agnograd.core._trees``): arguments and results nested in
tuples, lists and dicts, as ``jit``, the transforms and the bridges walk them.

Trees drawn by hypothesis (tuples, lists, namedtuples, dicts with odd keys,
``OrderedDict``, ``defaultdict``, empty ones among them; arrays, Variables,
Python scalars, strings and ``None`` as leaves) go through flatten and unflatten
and come back the same: the same containers, keys in the same order, the very
leaf objects; their structure is hashable and equal to that of a tree nesting
alike, as jit's signature needs. The prefix broadcast that ``vmap``'s ``in_axes``
is read with, and the errors that say where two trees part, are tested by hand;
so is what jit and the transforms do with the containers.
"""

from __future__ import annotations

import collections
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agnograd
from agnograd import Variable
from agnograd.core._trees import (
    LEAF,
    StructureError,
    broadcast_prefix,
    flatten,
    flatten_into,
    leaf_paths,
    match,
    num_leaves,
    tree_map,
    unflatten,
    unflatten_from,
)
from agnograd.functional import value_and_grad


class Pair(NamedTuple):
    a: Any
    b: Any


class Tagged(list[Any]):
    """A list subclass: a container, rebuilt as its own type."""


class Box:
    """A leaf holding another."""

    def __init__(self, x: Any) -> None:
        self.x = x


CONTAINERS = (tuple, list, dict)

# Keys whose repr Python reads back (leaf_paths' paths are checked by eval).
KEYS = st.one_of(
    st.integers(-3, 3),
    st.text(alphabet="ab'\"[]\\ é", max_size=4),
    st.none(),
    st.booleans(),
    st.tuples(st.integers(0, 2), st.text(alphabet="xy", max_size=2)),
    st.frozensets(st.integers(0, 2), max_size=2),
)

LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.complex_numbers(),
    st.text(max_size=3),
    st.builds(np.asarray, st.lists(st.floats(-5, 5), max_size=3)),
    st.builds(lambda v: Variable(np.asarray(v)), st.floats(-5, 5)),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    items = st.lists(children, max_size=4)
    entries = st.lists(st.tuples(KEYS, children), max_size=4).map(lambda kv: dict(kv))
    return st.one_of(
        items.map(tuple),
        items,
        items.map(Tagged),
        st.tuples(children, children).map(lambda ab: Pair(*ab)),
        entries,
        entries.map(collections.OrderedDict),
        entries.map(lambda d: collections.defaultdict(list, d)),
    )


TREES = st.recursive(LEAVES, _containers, max_leaves=12)


def reference_leaves(tree: Any) -> list[Any]:
    """The leaves in order, walked here without the module."""
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in reference_leaves(value)]
    if isinstance(tree, tuple | list):
        return [leaf for item in tree for leaf in reference_leaves(item)]
    return [tree]


def assert_same(got: Any, want: Any) -> None:
    """The same containers (types, keys in order, a defaultdict's factory) holding
    the very same leaf objects."""
    assert type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want)
        if isinstance(want, collections.defaultdict):
            assert got.default_factory is want.default_factory
        for k in want:
            assert_same(got[k], want[k])
    elif isinstance(want, tuple | list):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_same(g, w)
    else:
        assert got is want


def other_structure(tree: Any) -> Any:
    """A tree that nests otherwise: its outermost container of another type."""
    if isinstance(tree, list):
        return tuple(tree)
    if isinstance(tree, dict) and len(tree) > 1:
        return dict(reversed(list(tree.items())))  # the keys in another order
    return [tree]


@settings(max_examples=150, deadline=None)
@given(tree=TREES)
def test_flatten_unflatten_round_trip(tree: Any) -> None:
    leaves, structure = flatten(tree)
    want = reference_leaves(tree)
    assert len(leaves) == len(want) == num_leaves(structure)
    assert all(g is w for g, w in zip(leaves, want, strict=True))
    assert_same(unflatten(structure, leaves), tree)
    # Hashable, and equal (hash included) for a tree that nests alike.
    again = flatten(unflatten(structure, leaves))[1]
    assert again == structure
    assert hash(again) == hash(structure)
    assert flatten(other_structure(tree))[1] != structure
    # Each path reads its leaf back.
    for path, leaf in zip(leaf_paths(structure, "t"), leaves, strict=True):
        assert eval(path, {"t": tree}) is leaf
    # Mapping every leaf to itself copies nothing; mapping changes only the leaves.
    assert tree_map(lambda x: x, tree) is tree
    assert_same(tree_map(lambda x, y: y, tree, tree), tree)
    boxes, boxed = flatten(tree_map(Box, tree))
    assert boxed == structure
    assert all(box.x is x for box, x in zip(boxes, want, strict=True))


@settings(max_examples=60, deadline=None)
@given(trees=st.lists(TREES, min_size=1, max_size=3))
def test_several_trees_flatten_into_one_list_and_rebuild_from_one_iterator(
    trees: list[Any],
) -> None:
    leaves: list[Any] = []
    structures = [flatten_into(t, leaves) for t in trees]
    it = iter(leaves)
    for tree, structure in zip(trees, structures, strict=True):
        assert_same(unflatten_from(structure, it), tree)
    assert next(it, None) is None


def test_leaves_and_empty_containers() -> None:
    for leaf in (None, 1, 2.5, "s", np.ones(2), Variable(np.ones(1)), {1, 2}):
        leaves, structure = flatten(leaf)
        assert len(leaves) == 1
        assert leaves[0] is leaf
        assert structure is LEAF
    for empty in ((), [], {}, collections.OrderedDict(), Pair((), [])):
        leaves, structure = flatten(empty)
        assert leaves == []
        assert_same(unflatten(structure, []), empty)
    assert flatten(())[1] != flatten([])[1] != flatten({})[1]
    assert flatten({"a": 1, "b": 2})[1] != flatten({"b": 2, "a": 1})[1]
    assert flatten(Pair(1, 2))[1] != flatten((1, 2))[1]
    with pytest.raises(ValueError, match="unflatten: the structure has 2 leaves, but 3"):
        unflatten(flatten((1, 2))[1], [1, 2, 3])


# -- several trees, and prefixes ------------------------------------------------------

ARGS = (np.ones(2), {"w": np.ones(3), "b": np.ones(1)}, [np.ones(4), (np.ones(5),)])


def test_broadcast_prefix_applies_a_leaf_to_a_whole_subtree() -> None:
    structure = flatten(ARGS)[1]
    assert broadcast_prefix(0, structure) == [0] * 5
    assert broadcast_prefix(None, structure) == [None] * 5
    assert broadcast_prefix((0, None, 1), structure) == [0, None, None, 1, 1]
    assert broadcast_prefix([1, {"b": 0, "w": None}, [None, 0]], structure) == [
        1,
        None,
        0,
        None,
        0,
    ]
    assert broadcast_prefix((0, {"w": 1, "b": 2}, [3, (4,)]), structure) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("prefix", "where", "got", "expected"),
    [
        ((0, None), "", "a tuple", "a tuple of 3, not 2"),
        ((0, {"w": 0}, None), "[1]", "a dict with keys ['w']", "a dict with keys ['b', 'w']"),
        ((0, [0, 1], None), "[1]", "a list", "a dict with keys ['b', 'w']"),
        ((0, {"w": (0,), "b": 0}, 0), "[1]['w']", "a tuple", "one array"),
        ((0, 0, [0, {"x": 0}]), "[2][1]", "a dict with keys ['x']", "a tuple of 1"),
    ],
)
def test_a_prefix_that_does_not_fit_names_the_place(
    prefix: Any, where: str, got: str, expected: str
) -> None:
    with pytest.raises(StructureError) as caught:
        broadcast_prefix(prefix, flatten(ARGS)[1], leaf="one array")
    error = caught.value
    assert (error.where, error.got, error.expected) == (where, got, expected)
    message = error.message("vmap(f)", "in_axes", "args", "give in_axes args' structure")
    assert message == (
        f"vmap(f): in_axes{where} is {got}, but args{where} is {expected}; "
        "give in_axes args' structure"
    )


def test_match_and_tree_map_of_several_trees() -> None:
    tree = {"w": (1, 2), "b": [3]}
    # Any sequence for a sequence, the keys in any order; the structure's order.
    assert match({"b": (30,), "w": [10, 20]}, flatten(tree)[1]) == [10, 20, 30]
    assert tree_map(lambda x, y, z: x + y + z, tree, tree, tree) == {"w": (3, 6), "b": [9]}
    with pytest.raises(StructureError, match=r"\['b'\] is a int, but .* a list of 1"):
        tree_map(lambda x, y: x, tree, {"w": (1, 2), "b": 3})
    with pytest.raises(StructureError, match=r"\['w'\] is a tuple, .* a tuple of 2, not 1"):
        match({"w": (1,), "b": [3]}, flatten(tree)[1])


# -- what jit and the transforms do with the containers -------------------------------


def test_jit_retraces_when_the_structure_changes() -> None:
    def f(xs: Any) -> Any:
        values = list(xs.values()) if isinstance(xs, dict) else list(xs)
        return values[0] - values[1]

    jitted = agnograd.jit(f)
    a, b = np.array([1.0]), np.array([3.0])
    calls: list[tuple[Any, float]] = [
        ({"a": a, "b": b}, -2.0),
        ({"b": b, "a": a}, 2.0),  # the keys in another order: another trace
        ((a, b), -2.0),
        ([a, b], -2.0),
        (Pair(a, b), -2.0),
        (collections.OrderedDict(a=a, b=b), -2.0),
        ({"a": a, "b": b}, -2.0),  # the first signature again: its plan
    ]
    for xs, want in calls:
        assert float(jitted(xs)[0]) == want
    assert jitted.cache_info()[:2] == (1, 6)


def test_containers_keep_their_types_through_jit_and_the_transforms() -> None:
    def f(params: Any) -> Any:
        return {"x": params["x"] * 2.0, "n": params["n"]}

    params = collections.defaultdict(list, x=np.array([1.0, 2.0]), n=Tagged([np.ones(1)]))
    got = agnograd.jit(f)(params)
    assert type(got) is dict
    assert type(got["n"]) is Tagged

    def loss(params: Any, data: Any) -> Any:
        assert type(data) is collections.OrderedDict
        return agnograd.functions.sum(params["x"] * data["y"])

    data = collections.OrderedDict(y=np.array([3.0, 4.0]))
    _, grads = value_and_grad(loss)({"x": np.array([1.0, 2.0])}, data)
    np.testing.assert_array_equal(grads["x"], [3.0, 4.0])
    _, grads = value_and_grad(lambda p: agnograd.functions.sum(p["x"] ** 2))(params)
    assert type(grads) is collections.defaultdict
    assert grads.default_factory is list
    np.testing.assert_array_equal(grads["x"], [2.0, 4.0])


def test_jit_names_the_leaf_it_refuses() -> None:
    jitted = agnograd.jit(lambda x, opts: x)
    with pytest.raises(TypeError, match=r"jit\(<lambda>\): argument 1\['o'\]\[1\] is a set"):
        jitted(np.ones(1), collections.OrderedDict(o=[1, {2}]))
