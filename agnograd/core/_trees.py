"""Arguments and results nested in tuples, lists and dicts (JAX's pytrees): one
walk for ``agnograd.jit``, the function transforms and the bridges.

A *tree* is a tuple, list or dict (a namedtuple, an ``OrderedDict``, a
``defaultdict`` or another subclass of the three included) of trees, or a *leaf*:
anything else, ``None``, numbers and strings included. Which leaves a caller
accepts (arrays, Variables, Python numbers) is the caller's to check, with the
paths :func:`leaf_paths` gives for its errors.

:func:`flatten` gives a tree's leaves, in order (a dict's in its keys' order), and
its *structure*: nested tuples, hashable, equal for trees that nest alike (the
same container types, lengths and keys in the same order), which is what a jit
signature is keyed by. :func:`unflatten` puts leaves back in a structure,
:func:`tree_map` maps leaves of trees that nest alike. :func:`broadcast_prefix`
reads a tree *prefix* (vmap's ``in_axes``: one value stands for a whole subtree)
against a structure, and :class:`StructureError` says where the two part.

optree (the C++ tree library torch can use) was measured on jit's arguments (a
dict of four arrays, a pair and a float): it flattens them no faster than this
module and unflattens a result in 1.7 us where this module takes 5, about 3 us of
a jitted call's 110 to 150. Not worth a dependency, nor a second implementation
to fall back on without it: the walk is this module's, in Python.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from typing import Any

#: A leaf in a structure.
LEAF = "*"

#: A structure: :data:`LEAF`, or ``(type, keys, children)`` with the dict keys
#: (None for a tuple or list) and a structure per item; a ``defaultdict``'s has its
#: ``default_factory`` fourth.
Structure = Any

_CONTAINERS = (tuple, list, dict)


def flatten(tree: Any) -> tuple[list[Any], Structure]:
    """The leaves of ``tree`` in order, and its structure.

    Examples
    --------
    >>> from agnograd.core._trees import flatten, unflatten
    >>> leaves, structure = flatten({"w": (1.0, None), "b": [2.0]})
    >>> leaves
    [1.0, None, 2.0]
    >>> unflatten(structure, ["x", "y", "z"])
    {'w': ('x', 'y'), 'b': ['z']}
    """
    leaves: list[Any] = []
    return leaves, flatten_into(tree, leaves)


def flatten_into(tree: Any, leaves: list[Any]) -> Structure:
    """``tree``'s structure, its leaves appended to ``leaves`` (several trees into
    one list, as jit flattens its arguments)."""
    cls = tree.__class__
    # Exact types first: the common case costs two comparisons; a leaf among the items
    # of a tuple or list (their common case) is taken without a call.
    if cls is tuple or cls is list:
        return (cls, None, tuple([_item(t, leaves) for t in tree]))
    if cls is dict:
        return (dict, tuple(tree), tuple([_item(t, leaves) for t in tree.values()]))
    if not isinstance(tree, _CONTAINERS):
        leaves.append(tree)
        return LEAF
    if isinstance(tree, dict):
        children = tuple([flatten_into(t, leaves) for t in tree.values()])
        if isinstance(tree, collections.defaultdict):
            return (cls, tuple(tree), children, tree.default_factory)
        return (cls, tuple(tree), children)
    return (cls, None, tuple([flatten_into(t, leaves) for t in tree]))


def _item(tree: Any, leaves: list[Any]) -> Structure:
    """:func:`flatten_into` of an item of a container."""
    if isinstance(tree, _CONTAINERS):
        return flatten_into(tree, leaves)
    leaves.append(tree)
    return LEAF


def unflatten(structure: Structure, leaves: Iterable[Any]) -> Any:
    """A tree of ``structure`` holding ``leaves``, which must be exactly as many as
    it has."""
    leaves = list(leaves)
    if len(leaves) != num_leaves(structure):
        raise ValueError(
            f"unflatten: the structure has {num_leaves(structure)} leaves, but "
            f"{len(leaves)} were given"
        )
    return unflatten_from(structure, iter(leaves))


def unflatten_from(structure: Structure, leaves: Iterator[Any]) -> Any:
    """A tree of ``structure`` holding the next leaves of ``leaves``, which may hold
    more (several trees rebuilt from one iterator)."""
    if structure is LEAF:
        return next(leaves)
    cls, keys, children = structure[0], structure[1], structure[2]
    items = [unflatten_from(child, leaves) for child in children]
    if cls is tuple or cls is list:
        return cls(items)
    if cls is dict:
        return dict(zip(keys, items, strict=True))
    return _rebuilt(structure, items)


def _rebuilt(structure: Structure, items: list[Any]) -> Any:
    """A container of ``structure``'s (a subclass's) type holding ``items``."""
    cls, keys = structure[0], structure[1]
    if keys is None:
        return cls(*items) if hasattr(cls, "_fields") else cls(items)  # a namedtuple by field
    pairs = zip(keys, items, strict=True)
    return cls(structure[3], pairs) if len(structure) > 3 else cls(pairs)


def num_leaves(structure: Structure) -> int:
    """How many leaves a tree of ``structure`` has."""
    if structure is LEAF:
        return 1
    return sum([num_leaves(child) for child in structure[2]])


def leaf_paths(structure: Structure, root: str) -> list[str]:
    """Where each leaf of ``structure`` is, in order, as Python reads it from ``root``
    (``args[1]['w']``), for errors.

    Examples
    --------
    >>> from agnograd.core._trees import flatten, leaf_paths
    >>> leaf_paths(flatten((1.0, {"w": 2.0, 3: [4.0]}))[1], "args")
    ['args[0]', "args[1]['w']", 'args[1][3][0]']
    """
    paths: list[str] = []
    _paths(structure, root, paths)
    return paths


def _paths(structure: Structure, where: str, paths: list[str]) -> None:
    if structure is LEAF:
        paths.append(where)
        return
    keys = structure[1]
    for i, child in enumerate(structure[2]):
        _paths(child, f"{where}[{i if keys is None else repr(keys[i])}]", paths)


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """``tree`` with ``f(leaf, *others)`` in place of each leaf, ``others`` the leaves
    at the same place in the trees ``rest``, which must nest as ``tree`` does (any
    sequence for a sequence, a dict with the same keys for a dict; else
    :class:`StructureError`). Where ``f`` gives every leaf back as it is,
    ``tree`` itself: the caller's containers are never written to, nor copied for
    nothing.

    Examples
    --------
    >>> from agnograd.core._trees import tree_map
    >>> tree_map(lambda a, b: a + b, {"w": (1, 2)}, {"w": [10, 20]})
    {'w': (11, 22)}
    """
    leaves, structure = flatten(tree)
    others = [match(other, structure) for other in rest]
    new = [f(*args) for args in zip(leaves, *others, strict=True)]
    if all(n is old for n, old in zip(new, leaves, strict=True)):
        return tree
    return unflatten_from(structure, iter(new))


class StructureError(TypeError):
    """A tree that does not nest as the structure it is read against.

    ``where`` is the path from the trees' roots to the first place they part
    (``[1]['w']``), ``got`` what the given tree has there (``a list``) and
    ``expected`` what the structure has (``a tuple of 2``, ``a dict with keys
    ['b', 'w']``, or the ``leaf`` description the caller chose): callers phrase
    their errors with them (:meth:`message`).
    """

    def __init__(self, where: str, got: str, expected: str) -> None:
        super().__init__(f"{where or 'the root'} is {got}, but the structure there is {expected}")
        self.where, self.got, self.expected = where, got, expected

    def message(self, op: str, given: str, tree: str, fix: str) -> str:
        """``op: given[where] is ..., but tree[where] is ...; fix``."""
        return (
            f"{op}: {given}{self.where} is {self.got}, but {tree}{self.where} is "
            f"{self.expected}; {fix}"
        )


def match(tree: Any, structure: Structure, leaf: str = "one leaf") -> list[Any]:
    """The leaves of ``tree``, which must nest as ``structure`` does (any sequence
    of the same length for a sequence, a dict with the same keys, in any order, for
    a dict), in ``structure``'s order; else :class:`StructureError`, which
    describes a leaf of ``structure`` as ``leaf``."""
    found: list[Any] = []
    _walk(tree, structure, "", found, False, leaf)
    return found


def broadcast_prefix(prefix: Any, structure: Structure, leaf: str = "one leaf") -> list[Any]:
    """One value of the tree prefix ``prefix`` per leaf of ``structure``: where
    ``prefix`` has a leaf (an int, None) and ``structure`` a subtree, the value
    stands for every leaf of the subtree, as vmap's ``in_axes`` for its arguments;
    elsewhere ``prefix`` must nest as ``structure`` (see :func:`match`), else
    :class:`StructureError`.

    Examples
    --------
    >>> from agnograd.core._trees import broadcast_prefix, flatten
    >>> args = (1.0, {"w": 2.0, "b": 3.0}, [4.0, 5.0])
    >>> broadcast_prefix((0, {"b": None, "w": 1}, None), flatten(args)[1])
    [0, 1, None, None, None]
    >>> broadcast_prefix((0, {"w": 1}, None), flatten(args)[1])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    agnograd.core._trees.StructureError: [1] is a dict with keys ['w'], but ... ['b', 'w']
    """
    found: list[Any] = []
    _walk(prefix, structure, "", found, True, leaf)
    return found


def _walk(
    given: Any, structure: Structure, where: str, found: list[Any], prefix: bool, leaf: str
) -> None:
    if structure is LEAF:
        if isinstance(given, _CONTAINERS):
            raise StructureError(where, _described(given), leaf)
        found.append(given)
        return
    cls, keys, children = structure[0], structure[1], structure[2]
    if prefix and not isinstance(given, _CONTAINERS):
        found.extend([given] * num_leaves(structure))
        return
    if keys is None:
        if not isinstance(given, tuple | list) or len(given) != len(children):
            expected = f"a {cls.__name__} of {len(children)}"
            if isinstance(given, tuple | list):
                expected += f", not {len(given)}"
            raise StructureError(where, _described(given), expected)
        for i, (g, child) in enumerate(zip(given, children, strict=True)):
            _walk(g, child, f"{where}[{i}]", found, prefix, leaf)
        return
    if not isinstance(given, dict) or given.keys() != set(keys):
        raise StructureError(where, _described(given), f"a dict with keys {_keys(keys)}")
    for k, child in zip(keys, children, strict=True):
        _walk(given[k], child, f"{where}[{k!r}]", found, prefix, leaf)


def _described(given: Any) -> str:
    """``given`` as an error names it: ``a list``, ``a dict with keys [...]``."""
    if isinstance(given, dict):
        return f"a dict with keys {_keys(given)}"
    return f"a {type(given).__name__}"


def _keys(keys: Iterable[Any]) -> str:
    """``['b', 'w']``: the keys as Python writes them, sorted (any order matches)."""
    return f"[{', '.join(sorted(map(repr, keys)))}]"
