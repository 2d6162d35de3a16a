"""Arguments and results nested in tuples, lists and dicts (JAX's pytrees), as the
function transforms read them: the walk is :mod:`agnograd.core._trees`'s; here, what
the transforms accept as a leaf."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agnograd.backends._backend import is_array
from agnograd.core._trees import flatten, leaf_paths, tree_map, unflatten_from
from agnograd.core._variable import Variable


def _tree_leaves(tree: Any, where: str, op: str = "value_and_grad") -> list[Any]:
    """The arrays and Variables of a tuple/list/dict nest, in order."""
    return _tree_flatten(tree, where, op)[0]


def _tree_flatten(tree: Any, where: str, op: str) -> tuple[list[Any], Any]:
    """The arrays and Variables of a tuple/list/dict nest, in order, and its structure
    (for agnograd.core._trees.unflatten_from)."""
    leaves, structure = flatten(tree)
    for i, leaf in enumerate(leaves):
        if not (isinstance(leaf, Variable) or is_array(leaf)):
            raise TypeError(
                f"{op}: {leaf_paths(structure, where)[i]} is a {type(leaf).__name__}; "
                "differentiated arguments must be arrays or Variables, or tuples, lists or "
                "dicts of them (convert Python numbers first, e.g. np.asarray(1.0))"
            )
    return leaves, structure


def _tree_unflatten(tree: Any, leaves: Iterator[Any]) -> Any:
    """``tree``'s structure with its leaves taken from ``leaves`` in order."""
    return unflatten_from(flatten(tree)[1], leaves)


def _tree_arrays(tree: Any) -> Any:
    """``tree`` with its Variables replaced by their arrays."""
    return tree_map(lambda x: x.array if isinstance(x, Variable) else x, tree)
