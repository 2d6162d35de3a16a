"""Version counters for arrays that agnograd writes in place (``x[key] = v``).

A FunctionNode that keeps an array for backward records its version; if the
array is overwritten afterwards, backward raises instead of using the new values.
Arrays never written in place cost nothing: while no write has happened, the
registry is empty and neither saving nor reading checks anything.
"""

from __future__ import annotations

import weakref
from typing import Any

# id(array) -> number of in-place writes; entries leave with their arrays.
versions: dict[int, int] = {}


def bump(array: Any) -> None:
    """Record one more in-place write into ``array``."""
    key = id(array)
    if key not in versions:
        try:
            weakref.finalize(array, versions.pop, key, None)
        except TypeError:  # not weak-referenceable: cannot be tracked safely
            return
        versions[key] = 0
    versions[key] += 1


def of(arrays: tuple[Any, ...]) -> tuple[int, ...]:
    """The current versions of ``arrays``."""
    return tuple([versions.get(id(a), 0) for a in arrays])


def check(func: Any, what: str, arrays: tuple[Any, ...], recorded: tuple[int, ...] | None) -> None:
    """Raise if one of ``arrays`` was written in place after ``func`` saved it."""
    now = of(arrays)
    before = recorded if recorded is not None else (0,) * len(arrays)
    for i, (a, b) in enumerate(zip(now, before, strict=True)):
        if a != b:
            raise RuntimeError(
                f"backward of {func.label}: saved {what} {i} was overwritten in place after "
                f"the forward used it (version {b} then, {a} now), so its gradient would be "
                "wrong; write into a copy instead (x = xp.asarray(x, copy=True)) or set the "
                "values before using them"
            )
