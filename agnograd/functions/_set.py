"""Set functions of the array API standard (no gradients: they return indices and counts).

The named-tuple results keep the standard's field names (``unique_all(x).counts``).
They also back every multi-output function without a gradient (``nonzero``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from agnograd.core._variable import Variable
from agnograd.functions._core import ARRAY, NonDifferentiable, _is_scalar, raw
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)


class UniqueAllResult(NamedTuple):
    """Result of :func:`unique_all`."""

    values: Variable
    indices: Variable
    inverse_indices: Variable
    counts: Variable


class UniqueCountsResult(NamedTuple):
    """Result of :func:`unique_counts`."""

    values: Variable
    counts: Variable


class UniqueInverseResult(NamedTuple):
    """Result of :func:`unique_inverse`."""

    values: Variable
    inverse_indices: Variable


class NonDifferentiableTuple(NonDifferentiable):
    """A function without a gradient that returns several arrays (a tuple)."""

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        it = iter(inputs)
        args = [next(it) if a is ARRAY else a for a in self.template]
        return tuple(self.compute(self.xp, *args, **self.kwargs))


def apply_nondifferentiable_tuple(
    compute: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Variable, ...]:
    """Apply ``compute(xp, *args, **kwargs)``, which returns a tuple, as one node."""
    template = tuple(ARRAY if not _is_scalar(a) and a is not None else a for a in args)
    arrays = tuple(a for a in args if not _is_scalar(a) and a is not None)
    kwargs = {k: raw(v) for k, v in kwargs.items()}
    return NonDifferentiableTuple(compute, template, kwargs).apply(arrays)


def _unique_all(xp: Any, x: Any) -> Any:
    try:
        return xp.unique_all(x)
    except NotImplementedError:  # array-api-compat's PyTorch namespace lacks it
        return unique_all_by_sorting(xp, x)


_unique_all.__name__ = "unique_all"


def unique_all_by_sorting(xp: Any, x: Any) -> tuple[Any, Any, Any, Any]:
    """``unique_all`` written with standard functions: a stable sort, then the first
    element of each run of equal values. NaNs are distinct, as the standard says.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> from agnograd.functions._set import unique_all_by_sorting
    >>> values, indices, inverse, counts = unique_all_by_sorting(xp, xp.asarray([3, 1, 3, 2]))
    >>> [int(v) for v in values], [int(i) for i in indices], [int(c) for c in counts]
    ([1, 2, 3], [1, 3, 0], [1, 1, 2])
    >>> [int(i) for i in inverse]
    [2, 0, 2, 1]
    """
    flat = xp.reshape(x, (-1,))
    n = flat.shape[0]
    order = xp.argsort(flat, stable=True)
    ordered = xp.take(flat, order, axis=0)
    head = xp.ones((1,) if n else (0,), dtype=xp.bool, device=ordered.device)
    # NaN != NaN, so each NaN starts its own run.
    starts_run = xp.concat([head, ordered[1:] != ordered[:-1]])
    (starts,) = xp.nonzero(starts_run)
    run = xp.cumulative_sum(xp.astype(starts_run, starts.dtype)) - 1
    inverse = xp.reshape(xp.take(run, xp.argsort(order), axis=0), tuple(x.shape))
    bounds = xp.concat([starts, xp.asarray([n], dtype=starts.dtype, device=starts.device)])
    counts = bounds[1:] - bounds[:-1]
    return xp.take(ordered, starts, axis=0), xp.take(order, starts, axis=0), inverse, counts


@ROWS.declare("unique_all", differentiable=False)
def unique_all(x: Any, /) -> UniqueAllResult:
    """Unique values of ``x`` with the index of their first occurrence, the inverse
    indices (shaped like ``x``) and their counts; nothing has a gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> result = agnograd.namespace(np).unique_all(np.array([2.0, 1.0, 2.0]))
    >>> result.values, result.counts
    (variable([1., 2.]), variable([1, 2]))
    """
    return UniqueAllResult(*apply_nondifferentiable_tuple(_unique_all, (x,), {}))


@ROWS.declare("unique_counts", differentiable=False)
def unique_counts(x: Any, /) -> UniqueCountsResult:
    """Unique values of ``x`` and how often each occurs; nothing has a gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace(np).unique_counts(np.array([2.0, 1.0, 2.0])).counts
    variable([1, 2])
    """

    def compute(xp: Any, a: Any) -> Any:
        try:
            return xp.unique_counts(a)
        except NotImplementedError:
            values, _, _, counts = unique_all_by_sorting(xp, a)
            return values, counts

    compute.__name__ = "unique_counts"
    return UniqueCountsResult(*apply_nondifferentiable_tuple(compute, (x,), {}))


@ROWS.declare("unique_inverse", differentiable=False)
def unique_inverse(x: Any, /) -> UniqueInverseResult:
    """Unique values of ``x`` and, for each element of ``x``, the index of its value.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace(np).unique_inverse(np.array([2.0, 1.0, 2.0])).inverse_indices
    variable([1, 0, 1])
    """

    def compute(xp: Any, a: Any) -> Any:
        try:
            return xp.unique_inverse(a)
        except NotImplementedError:
            values, _, inverse, _ = unique_all_by_sorting(xp, a)
            return values, inverse

    compute.__name__ = "unique_inverse"
    return UniqueInverseResult(*apply_nondifferentiable_tuple(compute, (x,), {}))


# -- forwarded to the backend
ROWS.nondifferentiable(
    "isin", "Whether each element of ``x1`` is in ``x2``; the result has no gradient."
)
ROWS.nondifferentiable(
    "unique_values", "The unique values of ``x``, sorted; the result has no gradient."
)

# Derived from the rows (none is exported: they have no gradient).
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
