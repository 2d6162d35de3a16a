"""The arguments and results of the transforms that take a function and return one
(JAX's ``value_and_grad``; ``agnograd.func``'s ``grad``, ``vjp``, ``jacrev``, ...).

:func:`differentiate` makes the positional arguments that ``argnums`` names fresh
leaves, in their tuples, lists and dicts (JAX's pytrees), and passes the raw arrays
of the others as constants (``_constants``); :meth:`Differentiated.nest` puts one
result per leaf back in the arguments' nesting. :func:`output_leaves` reads the
Variables of what the function returns, :func:`leaves_like` the arrays given in
that structure (the cotangents of ``vjp``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agnograd.backends._backend import is_array, owned
from agnograd.core._trees import StructureError, flatten, leaf_paths, match, tree_map
from agnograd.core._variable import Variable
from agnograd.functions import identity
from agnograd.transforms._constants import constants, devices_of
from agnograd.transforms._symbolic import is_symbolic
from agnograd.transforms._transforms import _leaf, forward_levels
from agnograd.transforms._trees import _tree_leaves, _tree_unflatten


def argnums_tuple(argnums: Any, op: str) -> tuple[int, ...]:
    """``argnums`` as a tuple: an int, or a sequence of ints (JAX's and torch's)."""
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        return (argnums,)
    if (
        isinstance(argnums, Sequence)
        and not isinstance(argnums, str)
        and argnums
        and all(isinstance(a, int) and not isinstance(a, bool) for a in argnums)
    ):
        return tuple(argnums)
    raise TypeError(
        f"{op}: argnums must be an int or a non-empty sequence of ints, got {argnums!r}"
    )


@dataclass
class Differentiated:
    """A call's arguments as the function gets them, and the leaves to differentiate."""

    args: list[Any]  #: the positional arguments, leaves and constants in place
    kwargs: dict[str, Any]  #: the keyword arguments, constants in place
    xs: list[Variable]  #: the leaves, argument by argument, each in its nesting's order
    nested: bool  #: whether the results stay connected to the arguments (Variables)
    symbolic: bool  #: whether the arguments are Variables of a graph not run (jit)
    wrapped: dict[int, tuple[Variable, Any]]  #: the constants, for ``restore``
    original: tuple[Any, ...]  #: the positional arguments as the caller gave them
    positions: list[int]  #: the differentiated positions, each once
    requested: list[int]  #: the positions as ``argnums`` names them
    single: bool  #: ``argnums`` was an int
    #: the jvps running (innermost first), where the arguments are nested only by
    #: their tangents
    carriers: tuple[Any, ...] = ()
    #: the graph nodes known to reach no root that requires a gradient but the leaves
    clean: set[Any] = field(default_factory=set)

    def given(self, results: Any, levels: Sequence[Any] | None = None) -> Any:
        """``results`` (a tuple, list or dict nesting them) as the caller gets them:
        under jvps that alone nest the arguments (``carriers``, or the ``levels``
        given), each Variable that depends on nothing requiring a gradient but the
        fresh leaves is given back as the jvps' arguments are, a Variable that
        requires no gradient with raw tangents (so that a jvp of raw arrays returns
        raw arrays); one connected to a Variable from outside that requires a
        gradient (captured by the function, or a tangent) stays connected."""
        if levels is None:
            if not self.carriers:
                return results
            levels = self.carriers
        private = {x._node for x in self.xs}
        return tree_map(lambda r: self._reseated(r, levels, private), results)

    def _reseated(self, result: Any, levels: Sequence[Any], private: set[Any]) -> Any:
        """``result`` as a Variable that requires no gradient, with its tangent at each
        of ``levels`` reseated at the levels outside that one (a raw array outside
        all): what the levels give an operation of raw arrays. As it is where it
        depends on a Variable from outside that requires a gradient."""
        if not isinstance(result, Variable) or _reaches_outside(result, private, self.clean):
            return result
        if not levels:
            return result.array
        new = Variable(result.array, requires_grad=False)
        for i, level in enumerate(levels):
            t = level.tangent(result)
            if t is not None:
                level.set(new, self._reseated(t, levels[i + 1 :], private))
        return new

    def nest(self, flat: Sequence[Any]) -> Any:
        """One result per leaf (as :meth:`given` gives them), in the nesting of the
        argument it belongs to; a tuple over ``argnums`` unless it was an int. A
        position named twice gets the same results twice (as JAX)."""
        it: Iterator[Any] = iter(flat)
        by_position = {p: _tree_unflatten(self.original[p], it) for p in self.positions}
        trees = tuple(by_position[p] for p in self.requested)
        return trees[0] if self.single else trees


def differentiate(
    op: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    argnums: Any,
    numbers: tuple[int, ...],
    label: str = "argument {}",
) -> Differentiated:
    """The arguments of a call of a function transformed by ``op``, with respect to
    the positions ``numbers`` (``argnums`` as the user gave it), each named by
    ``label`` in errors."""
    if any(not -len(args) <= a < len(args) for a in numbers):
        raise TypeError(
            f"{op}: differentiating with respect to argnums={argnums!r} needs at least "
            f"{max(a + 1 if a >= 0 else -a for a in numbers)} positional arguments, but "
            f"the function was called with {len(args)}"
        )
    # A position named twice (argnums=(0, 0)) is differentiated once, its results
    # given twice, as JAX does.
    requested = [a % len(args) for a in numbers]
    positions = list(dict.fromkeys(requested))
    leaves = [_tree_leaves(args[p], label.format(p), op) for p in positions]
    symbolic = is_symbolic(x for tree in leaves for x in tree)  # under agnograd.jit
    levels = forward_levels()
    nested = symbolic or any(
        isinstance(x, Variable) and x.requires_grad for tree in leaves for x in tree
    )
    # Any argument with a tangent of a running jvp, differentiated or not, makes
    # the results depend on it (jacfwd of jacrev with respect to another argument).
    carried = bool(levels) and any(
        level.tangent(x) is not None
        for level in levels
        for x in _variables((args, tuple(kwargs.values())))
    )
    new_args = list(args)
    xs: list[Variable] = []
    for p, tree in zip(positions, leaves, strict=True):
        # A fresh leaf in place of an argument of a running jvp carries its tangents
        # (forward over reverse: jvp of grad, jacfwd of jacrev).
        made = [_leaf(x, op, label.format(p), nested or carried) for x in tree]
        xs.extend(made)
        new_args[p] = _tree_unflatten(args[p], iter(made))
    # The other arguments' raw arrays as constants: the function sees one namespace.
    devices = devices_of(xs)
    wrapped: dict[int, tuple[Variable, Any]] = {}
    for p, arg in enumerate(args):
        if p not in positions:
            new_args[p] = constants(arg, label.format(p), devices, op, wrapped)
    new_kwargs = {
        k: constants(arg, f"keyword argument {k!r}", devices, op, wrapped)
        for k, arg in kwargs.items()
    }
    return Differentiated(
        new_args,
        new_kwargs,
        xs,
        nested or carried,
        symbolic,
        wrapped,
        args,
        positions,
        requested,
        isinstance(argnums, int),
        # Results connected to the fresh leaves alone are given back as the jvps'
        # arguments are (Variables that require no gradient, raw tangents), so that a
        # jvp of raw arrays returns raw arrays.
        tuple(levels) if carried and not nested else (),
    )


def _reaches_outside(x: Variable, private: set[Any], clean: set[Any]) -> bool:
    """Whether ``x``'s graph reaches a Variable that requires a gradient and is none
    of the ``private`` leaves (their nodes), whose gradient the caller may ask for.
    ``clean`` holds the nodes known to reach none, and gains those walked here."""
    stack = [x._node]
    seen: set[Any] = set()
    while stack:
        node = stack.pop()
        if not node.requires_grad or node in seen or node in clean:
            continue
        seen.add(node)
        creator = node.creator_node
        if creator is None:
            if node not in private:
                return True
        elif creator.inputs:
            stack.extend(creator.inputs)
    clean |= seen
    return False


def _variables(tree: Any) -> list[Variable]:
    """The Variables in ``tree``'s tuples, lists and dicts (anything else skipped)."""
    return [x for x in flatten(tree)[0] if isinstance(x, Variable)]


def own(results: list[Any], nested: bool, symbolic: bool) -> list[Any]:
    """``results`` (one per leaf, arrays unless ``nested``) each the caller's own:
    arrays copied where they share memory or are broadcast views; under
    ``agnograd.jit`` (``symbolic``) one Variable given twice (the gradient of
    ``a + b``) made two outputs, which jit makes two arrays, as ``owned`` does."""
    if not nested:
        return owned(results)
    if symbolic:
        firsts: set[int] = set()
        for i, g in enumerate(results):
            if id(g) in firsts:
                results[i] = identity(g)
            firsts.add(id(g))
    return results


def split_aux(result: Any, has_aux: bool, op: str, fun: str = "func") -> tuple[Any, Any]:
    """``(value, aux)`` of what the function (named ``fun``) returned; ``aux`` is
    None without ``has_aux``."""
    if not has_aux:
        return result, None
    if not (isinstance(result, tuple | list) and len(result) == 2):
        got = type(result).__name__
        if isinstance(result, tuple | list):
            got = f"{got} of {len(result)}"
        raise TypeError(
            f"{op}: has_aux=True needs {fun} to return a pair (value, aux), got a {got}"
        )
    return result[0], result[1]


def output_leaves(tree: Any, op: str, where: str = "the output of func") -> list[Variable]:
    """The Variables of what a function returned, in its tuples, lists and dicts."""
    leaves, structure = flatten(tree)
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Variable):
            continue
        place = leaf_paths(structure, where)[i]
        if is_array(leaf):
            raise TypeError(
                f"{op}: {place} is a {type(leaf).__module__.split('.')[0]} array, not a "
                "Variable: func computed outside agnograd's graph (e.g. numpy.sum on a "
                "Variable); compute with x.__array_namespace__() or agnograd.functions"
            )
        kind = type(leaf).__name__
        article = "an" if kind[0] in "aeiou" else "a"
        raise TypeError(
            f"{op}: {place} is {article} {kind}; func must return Variables, or "
            "tuples, lists or dicts of them (return anything else as aux, with has_aux=True)"
        )
    return leaves


def leaves_like(tree: Any, ref: Any, op: str, name: str) -> list[tuple[str, Any]]:
    """The leaves of ``tree``, which must nest as ``ref`` does (func's output), in
    ``ref``'s order, each with its place (``name[0]['w']``); ``name`` is ``tree``'s
    name."""
    structure = flatten(ref)[1]
    try:
        leaves = match(tree, structure, leaf="one array")
    except StructureError as error:
        raise TypeError(
            f"{op}: {name}{error.where} is {error.got}, but the output of func there is "
            f"{error.expected}; give {name} the structure of func's output"
        ) from None
    return list(zip(leaf_paths(structure, name), leaves, strict=True))
