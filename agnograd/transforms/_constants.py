"""What a transform does not differentiate, and the namespace its function sees.

JAX users pass data beside the parameters: ``value_and_grad(loss)(w, X, y)``
differentiates ``w`` only. A function that asks for one namespace for the three
(``array_api_compat.array_namespace(w, X, y)``) would get agnograd's for the
Variable ``w`` and the library's own for ``X`` and ``y``, and array-api-compat
refuses to choose. So :func:`constants` passes the raw arrays of the arguments that
are not differentiated as Variables that require no gradient, once it has checked
that they are arrays of the differentiated arguments' library and device, and
:func:`restore` gives the caller's own arrays back where the function returns them.
Arrays the function takes from outside (a closure) cannot be wrapped: :func:`call`
turns array-api-compat's refusal into an error that says how to fix it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

from agnograd.backends._backend import is_array
from agnograd.backends._device import Device, device_of
from agnograd.core._trees import flatten, leaf_paths, tree_map, unflatten_from
from agnograd.core._variable import Variable

#: The fix for a function of ``torch.autograd.functional``'s transforms, which
#: differentiate every argument they pass.
WRAP = (
    "wrap each raw array that func takes from outside with agnograd.as_variable(array), "
    "a Variable that requires no gradient"
)

#: The fix for a function of JAX's transforms, which pass the raw arrays of the
#: arguments they do not differentiate as constants.
PASS_AS_ARGUMENT = (
    "pass each raw array that the function takes from outside as an argument (those "
    "it is not differentiated with respect to reach it as constants), or wrap it with "
    "agnograd.as_variable(array)"
)

_MIXED = "Multiple namespaces for array inputs"
_OURS = re.compile(r"<agnograd namespace for ([\w.]+)")
_THEIRS = re.compile(r"<module '(?:array_api_compat\.)?([\w.]+)'")


def devices_of(xs: Sequence[Variable]) -> Callable[[], list[Device]]:
    """The devices (and so the libraries) of the differentiated Variables, in order,
    looked up on the first call only: most calls pass no raw array to check."""
    return functools.cache(lambda: list(dict.fromkeys(x.device for x in xs)))


def constants(
    tree: Any,
    where: str,
    devices: Callable[[], list[Device]],
    op: str,
    made: dict[int, tuple[Variable, Any]],
) -> Any:
    """``tree``, an argument that is not differentiated, with each raw array in its
    tuples, lists and dicts passed as a constant Variable; Variables and everything
    else as they are. ``made`` records each constant (by ``id``) with its array."""
    leaves, structure = flatten(tree)
    raw = [i for i, x in enumerate(leaves) if not isinstance(x, Variable) and is_array(x)]
    if not raw:
        return tree
    paths = leaf_paths(structure, where)
    for i in raw:
        _check(leaves[i], paths[i], devices(), op)
        const = Variable(leaves[i], requires_grad=False)
        made[id(const)] = (const, leaves[i])
        leaves[i] = const
    # New containers in place of the caller's, which are never written to.
    return unflatten_from(structure, iter(leaves))


def restore(tree: Any, made: dict[int, tuple[Variable, Any]]) -> Any:
    """``tree`` with the constants of :func:`constants` replaced by the caller's arrays."""

    def leaf(x: Any) -> Any:
        entry = made.get(id(x))
        return entry[1] if entry is not None and entry[0] is x else x

    return tree_map(leaf, tree)


def _check(array: Any, where: str, devices: list[Device], op: str) -> None:
    """An argument that is not differentiated must be an array of the differentiated
    arguments' library and device (any of them, if those are on several)."""
    if getattr(array, "requires_grad", False) is True:
        raise TypeError(
            f"{op}: {where} requires a gradient in torch's own autograd, whose graph "
            "agnograd cannot reach; pass tensor.detach()"
        )
    if not devices:
        return
    device = device_of(array)
    if device in devices:
        return
    ref = devices[0]
    if device.backend not in {d.backend for d in devices}:
        article = "an" if device.backend[0] in "aeiou" else "a"
        raise TypeError(
            f"{op}: {where} is {article} {device.backend} array, but the differentiated "
            f"arguments are {ref.backend} arrays, and the function would get two namespaces; "
            f"create it with {ref.backend}, or pass agnograd.functions.copy(array, '{ref}')"
        )
    raise ValueError(
        f"{op}: {where} is on {device}, but the differentiated arguments are on "
        f"{', '.join(map(str, devices))}; move it there first, e.g. "
        f"agnograd.functions.copy(array, '{ref}')"
    )


def call(op: str, fix: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)``; array-api-compat's refusal of a Variable beside a
    raw array becomes an error naming ``op`` and ``fix``."""
    try:
        return func(*args, **kwargs)
    except TypeError as e:
        hint = mixed_namespaces(str(e), op, fix)
        if hint is None:
            raise
        raise TypeError(hint) from e


def mixed_namespaces(message: str, op: str, fix: str) -> str | None:
    """What to say instead of array-api-compat's ``message``, when it refused
    Variables (agnograd's namespace) beside raw arrays; ``None`` for anything else.

    Examples
    --------
    >>> from agnograd.transforms._constants import mixed_namespaces
    >>> print(mixed_namespaces(  # doctest: +NORMALIZE_WHITESPACE
    ...     "Multiple namespaces for array inputs: [<agnograd namespace for numpy>, "
    ...     "<module 'array_api_compat.numpy' from '...'>]", "vjp", "wrap them"))
    vjp: the function got a Variable and a raw numpy array in one call to
    array_namespace, which refuses to choose between their namespaces; wrap them
    """
    if not message.startswith(_MIXED):
        return None
    ours, theirs = set(_OURS.findall(message)), set(_THEIRS.findall(message))
    if not ours or not theirs:
        return None
    if theirs <= ours:
        raw = " and ".join(sorted(theirs))
        return (
            f"{op}: the function got a Variable and a raw {raw} array in one call to "
            f"array_namespace, which refuses to choose between their namespaces; {fix}"
        )
    return (
        f"{op}: the function got Variables of {' and '.join(sorted(ours))} and raw arrays of "
        f"{' and '.join(sorted(theirs - ours))} in one call to array_namespace; move the "
        "arrays to one library first (agnograd.functions.copy(array, device))"
    )
