"""The Variables that share a node's buffer (those ``Variable.unlinked()`` makes),
and storing a computed array in a node and in every Variable that shares it."""

from __future__ import annotations

import weakref
from typing import Any

from agnograd.backends._backend import as_array
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode

# node -> Variables made by `unlinked()` that share its buffer: forward updates them.
_unlinked: weakref.WeakKeyDictionary[VariableNode, weakref.WeakSet[Variable]] = (
    weakref.WeakKeyDictionary()
)
# node of an unlinked Variable -> the node it was unlinked from (for its library).
_unlinked_source: weakref.WeakKeyDictionary[VariableNode, VariableNode] = (
    weakref.WeakKeyDictionary()
)


def set_node_data(node: VariableNode, data: Any) -> None:
    """Store a computed array in the node and in its Variable (and unlinked copies)."""
    data = as_array(data)  # a 0-d NumPy result is a scalar
    node._data = data
    var = node._variable()
    if var is not None:
        var._data = data
    node.shape, node.dtype = tuple(data.shape), data.dtype
    shared = _unlinked.get(node)
    if shared:
        for other in shared:
            other._data = data
            if other._node._data is not None:
                other._node._data = data
            other._node.shape, other._node.dtype = node.shape, node.dtype
