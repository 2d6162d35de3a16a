"""Arguments and results nested in tuples, lists and dicts (JAX's pytrees), as the
function transforms walk them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agnograd.backends._backend import is_array
from agnograd.core._variable import Variable


def _tree_leaves(tree: Any, where: str, op: str = "value_and_grad") -> list[Any]:
    """The arrays and Variables of a tuple/list/dict nest, in order."""
    if isinstance(tree, tuple | list):
        return [leaf for i, t in enumerate(tree) for leaf in _tree_leaves(t, f"{where}[{i}]", op)]
    if isinstance(tree, dict):
        return [leaf for k, t in tree.items() for leaf in _tree_leaves(t, f"{where}[{k!r}]", op)]
    if isinstance(tree, Variable) or is_array(tree):
        return [tree]
    raise TypeError(
        f"{op}: {where} is a {type(tree).__name__}; differentiated arguments "
        "must be arrays or Variables, or tuples, lists or dicts of them (convert Python "
        "numbers first, e.g. np.asarray(1.0))"
    )


def _tree_unflatten(tree: Any, leaves: Iterator[Any]) -> Any:
    """``tree``'s structure with its leaves taken from ``leaves`` in order."""
    if isinstance(tree, tuple | list):
        return _rebuilt(tree, [_tree_unflatten(t, leaves) for t in tree])
    if isinstance(tree, dict):
        return {k: _tree_unflatten(t, leaves) for k, t in tree.items()}
    return next(leaves)


def _tree_arrays(tree: Any) -> Any:
    """``tree`` with its Variables replaced by their arrays."""
    if isinstance(tree, Variable):
        return tree.array
    if isinstance(tree, tuple | list):
        return _rebuilt(tree, [_tree_arrays(t) for t in tree])
    if isinstance(tree, dict):
        return {k: _tree_arrays(t) for k, t in tree.items()}
    return tree


def _rebuilt(tree: tuple[Any, ...] | list[Any], items: list[Any]) -> Any:
    """A tuple or list of ``tree``'s type holding ``items`` (a namedtuple by field)."""
    kind = type(tree)
    return kind(*items) if hasattr(tree, "_fields") else kind(items)
