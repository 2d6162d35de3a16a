"""The code behind :mod:`agnograd.function_hooks` (its documentation is there)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

from agnograd.core._config import config


class FunctionHook:
    """Base class: override any of the four callbacks.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> class Count(agnograd.FunctionHook):
    ...     name = "Count"
    ...     calls = 0
    ...     def forward_preprocess(self, function, in_data):
    ...         self.calls += 1
    >>> with Count() as hook:
    ...     y = agnograd.Variable(np.ones(2)) * 2 + 1
    >>> hook.calls
    2
    """

    name = "FunctionHook"

    def __enter__(self) -> FunctionHook:
        hooks = config.function_hooks
        if self.name in hooks:
            raise KeyError(f"a hook named {self.name!r} is already registered in this thread")
        # Replace rather than mutate, so a FunctionNode iterating hooks is unaffected.
        config.function_hooks = {**hooks, self.name: self}
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        hooks = dict(config.function_hooks)
        hooks.pop(self.name, None)
        config.function_hooks = hooks

    def forward_preprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        """Called before ``function.forward`` with the raw input arrays."""

    def forward_postprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        """Called after ``function.forward``."""

    def backward_preprocess(self, function: Any, in_nodes: Any, out_grad: Any) -> None:
        """Called before ``function.backward`` with the input nodes and output gradients."""

    def backward_postprocess(self, function: Any, in_nodes: Any, out_grad: Any) -> None:
        """Called after ``function.backward``."""


class _Callbacks(FunctionHook):
    """nnabla's ``function_pre_hook`` and ``function_post_hook``: callables given to
    one ``forward`` (``phase="forward"``) or ``backward`` call, each called with the
    :class:`~agnograd.FunctionNode` before and after its forward (or backward).

    A callable that itself computes with agnograd is not called again for those
    operations, which are no part of the graph being run.
    """

    def __init__(self, phase: str, pre: Callable[[Any], Any] | None, post: Any) -> None:
        self.name = f"{phase} function_pre_hook/function_post_hook at {id(self):#x}"
        self._forward = phase == "forward"
        self._pre = pre
        self._post = post
        self._busy = False

    def _call(self, callback: Callable[[Any], Any] | None, function: Any) -> None:
        if callback is None or self._busy:
            return
        self._busy = True
        try:
            callback(function)
        finally:
            self._busy = False

    def forward_preprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        if self._forward:
            self._call(self._pre, function)

    def forward_postprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        if self._forward:
            self._call(self._post, function)

    def backward_preprocess(self, function: Any, in_nodes: Any, out_grad: Any) -> None:
        if not self._forward:
            self._call(self._pre, function)

    def backward_postprocess(self, function: Any, in_nodes: Any, out_grad: Any) -> None:
        if not self._forward:
            self._call(self._post, function)


def callbacks(
    op: str,
    function_pre_hook: Callable[[Any], Any] | None,
    function_post_hook: Callable[[Any], Any] | None,
) -> contextlib.AbstractContextManager[Any]:
    """The hook that runs nnabla's ``function_pre_hook`` and ``function_post_hook``
    of the call ``op`` (``"forward"``, ``"forward_all"``, ``"backward"``), to enter
    around it; nothing to enter when both are ``None``.

    ``f(func)`` is called with each :class:`~agnograd.FunctionNode` right before
    its forward (a forward ``op``) or its backward (``"backward"``), and ``g(func)``
    right after it, once the forward's outputs are in their Variables. While they are
    set the graph is walked, not run by a compiled plan.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> x = agnograd.Variable(np.ones(2, np.float32), need_grad=True)
    >>> y = F.sum(F.exp(x) * 2)
    >>> seen = []
    >>> y.backward(function_pre_hook=lambda f: seen.append(f.label))
    >>> seen
    ['Sum', 'MulConstant', 'Exp']
    >>> y.forward(function_post_hook=lambda f: seen.append(f.label))
    >>> seen[3:]
    ['Exp', 'MulConstant', 'Sum']
    """
    for name, f in (
        ("function_pre_hook", function_pre_hook),
        ("function_post_hook", function_post_hook),
    ):
        if f is not None and not callable(f):
            raise TypeError(
                f"{op}: {name} must be a callable taking the FunctionNode (or None), got "
                f"{type(f).__name__}; pass a function such as `lambda func: print(func.label)`"
            )
    if function_pre_hook is None and function_post_hook is None:
        return contextlib.nullcontext()
    phase = "backward" if op == "backward" else "forward"
    return _Callbacks(phase, function_pre_hook, function_post_hook)


def _describe(values: Any) -> str:
    from agnograd.backends._backend import label
    from agnograd.core._variable import Variable

    parts = []
    for v in values:
        if v is None:
            parts.append("None")
            continue
        data = v._data if isinstance(v, Variable) else v
        parts.append(label(tuple(data.shape), data.dtype))
    return "[" + "; ".join(parts) + "]"


class PrintHook(FunctionHook):
    """Print each function's name with the shapes and dtypes of its inputs and gradients.

    Examples
    --------
    >>> import sys, numpy as np, agnograd
    >>> x = agnograd.Variable(np.ones(2, dtype=np.float32))
    >>> with agnograd.PrintHook(file=sys.stdout):
    ...     y = agnograd.functions.sum(x * 2)
    ...     y.backward()
    forward  MulConstant inputs [(2), float32]
    forward  Sum inputs [(2), float32]
    backward Sum grads [float32]
    backward MulConstant grads [(2), float32]
    """

    name = "PrintHook"

    def __init__(self, file: TextIO | None = None) -> None:
        self.file = file

    def _print(self, text: str) -> None:
        print(text, file=self.file if self.file is not None else sys.stdout)

    def forward_preprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        self._print(f"forward  {function.label} inputs {_describe(in_data)}")

    def backward_preprocess(self, function: Any, in_nodes: Any, out_grad: Any) -> None:
        self._print(f"backward {function.label} grads {_describe(out_grad)}")


class TimerHook(FunctionHook):
    """Measure the wall time spent in each function's forward and backward.

    Timing is host-side: asynchronous backends (CUDA, JAX) may report the time to
    launch work rather than to finish it.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> with agnograd.TimerHook() as timer:
    ...     y = agnograd.functions.exp(agnograd.Variable(np.ones(3)))
    >>> sorted(timer.summary())
    ['Exp']
    >>> timer.total_time() >= 0
    True
    """

    name = "TimerHook"

    def __init__(self) -> None:
        self.call_history: list[tuple[str, float]] = []
        self._starts: list[float] = []

    def _start(self) -> None:
        self._starts.append(time.perf_counter())

    def _stop(self, function: Any) -> None:
        self.call_history.append((function.label, time.perf_counter() - self._starts.pop()))

    def forward_preprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        self._start()

    def forward_postprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        self._stop(function)

    def backward_preprocess(self, function: Any, in_nodes: Any, out_grad: Any) -> None:
        self._start()

    def backward_postprocess(self, function: Any, in_nodes: Any, out_grad: Any) -> None:
        self._stop(function)

    def total_time(self) -> float:
        """Seconds spent in all recorded calls."""
        return sum(t for _, t in self.call_history)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per function label: number of calls and total seconds."""
        table: dict[str, dict[str, float]] = defaultdict(
            lambda: {"occurrence": 0, "elapsed_time": 0.0}
        )
        for label, t in self.call_history:
            table[label]["occurrence"] += 1
            table[label]["elapsed_time"] += t
        return dict(table)
