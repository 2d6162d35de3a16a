"""``check_vmap``: a function or a node under :func:`agnograd.vmap` against a loop."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from agnograd.backends._backend import raw_namespace
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.testing._assertions import assert_allclose
from agnograd.transforms._vmap import vmap


def _examples(x: Any, size: int) -> list[Any]:
    """``size`` examples made of ``x``: itself, then its flip over every axis, which
    keeps the values (and the domain: a flipped symmetric positive definite matrix
    is one) but differs where the order matters (and, unlike alternating ones, makes
    no batch that reads the same backwards)."""
    flipped = raw_namespace(x).flip(x) if x.ndim else x
    return [x] + [flipped] * (size - 1)


def _outputs(y: Any) -> list[Any]:
    ys = list(y) if isinstance(y, tuple | list) else [y]
    return [v.array if isinstance(v, Variable) else v for v in ys]


def check_vmap(
    func: Callable[..., Any] | FunctionNode,
    x_data: Any,
    in_axes: Sequence[int | None] | None = None,
    *,
    batch_size: int = 3,
    atol: float = 1e-6,
    rtol: float = 1e-5,
) -> None:
    """Check ``func`` under :func:`agnograd.vmap` against a Python loop over the batch.

    A batch of ``batch_size`` examples is made of each input (the input, then its
    flip over every axis) and stacked along the input's axis of
    ``in_axes`` (an input at None is the same for every example). The results of
    ``vmap(func, in_axes)`` must equal those of ``func`` called on each example in
    turn, stacked along axis 0, within ``atol + rtol * |loop|``.

    Parameters
    ----------
    func : callable or FunctionNode
        ``func(*xs)`` takes one Variable per entry of ``x_data`` and returns a
        Variable or a tuple of Variables. A ``FunctionNode`` is applied to the inputs
        (a fresh copy each time), so that its forward under vmap is what is checked
        (its batching rule, for a class that defines ``vmap``).
    x_data : array or tuple of arrays
        One example's inputs, of any array API library and device.
    in_axes : sequence of int or None, optional
        Where each input's batch axis goes (``None``: not batched). Default: each
        of these in turn: every input batched along axis 0; every input batched
        along its last axis; each input unbatched while the others are along 0.
    batch_size : int
        How many examples to make.
    atol, rtol : float
        Tolerances of the comparison.

    Raises
    ------
    AssertionError
        Where an output of vmap differs from the loop's, naming ``in_axes`` and the
        output.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> from agnograd.testing import check_vmap
    >>> check_vmap(lambda x, w: F.tanh(x @ w), (np.ones(3), np.eye(3)))
    """
    xs = tuple(x_data) if isinstance(x_data, tuple | list) else (x_data,)
    if isinstance(func, FunctionNode):
        node = func

        def func(*inputs: Any) -> Any:
            outputs = copy.copy(node).apply(inputs)
            return outputs[0] if len(outputs) == 1 else outputs

    if in_axes is None:
        choices: list[tuple[int | None, ...]] = [
            (0,) * len(xs),
            tuple(x.ndim for x in xs),
        ]
        choices += [tuple(None if j == i else 0 for j in range(len(xs))) for i in range(len(xs))]
        if len(xs) == 1:
            choices.pop()  # nothing batched
    else:
        choices = [tuple(in_axes)]
    for axes in dict.fromkeys(choices):
        _check(func, xs, axes, batch_size, atol, rtol)


def _check(
    func: Callable[..., Any],
    xs: tuple[Any, ...],
    axes: tuple[int | None, ...],
    size: int,
    atol: float,
    rtol: float,
) -> None:
    examples = [
        [x] * size if a is None else _examples(x, size) for x, a in zip(xs, axes, strict=True)
    ]
    batched = [
        x if a is None else raw_namespace(x).stack(ex, axis=a)
        for x, a, ex in zip(xs, axes, examples, strict=True)
    ]
    got = _outputs(
        vmap(lambda *b: func(*[Variable(v, requires_grad=False) for v in b]), in_axes=axes)(
            *batched
        )
    )
    loop = [
        _outputs(func(*[Variable(ex[b], requires_grad=False) for ex in examples]))
        for b in range(size)
    ]
    for k, g in enumerate(got):
        want = raw_namespace(loop[0][k]).stack([row[k] for row in loop])
        try:
            assert_allclose(g, want, atol=atol, rtol=rtol)
        except AssertionError as error:
            raise AssertionError(
                f"check_vmap: output {k} under vmap(in_axes={axes}) differs from a loop over "
                f"the batch: {error}"
            ) from None
