"""Debug mode (Chainer's ``set_debug``): NaN checks and where each function was called.

Debug mode is a function hook that ``agnograd.config.debug`` adds to this thread's
hooks (see :mod:`agnograd.core._config`), so operations pay nothing for it while it is
off: ``FunctionNode.apply`` and the engine call :func:`check_forward` and
:func:`check_backward` only where hooks are registered. While it is on:

- each function node records the stack of the code that called it;
- a NaN in the outputs of a function's forward, or in the gradients its backward
  returns, raises ``RuntimeError`` naming the function and that stack (Chainer's
  checks);
- an error raised during ``Variable.backward`` names the function whose backward ran
  last, with its stack ("Stacktrace of the function is below").
"""

from __future__ import annotations

import threading
import traceback
import weakref
from collections.abc import Iterable
from typing import Any

from agnograd.backends._backend import is_array, is_wrapper, raw_namespace
from agnograd.core import _config

# Where each function node was called from, while debug mode was on.
_stacks: weakref.WeakKeyDictionary[Any, traceback.StackSummary] = weakref.WeakKeyDictionary()
# Per thread: the function whose backward ran last (what an error in backward is about).
_current = threading.local()


def set_debug(debug: bool) -> None:
    """Turn debug mode on or off in this thread (``agnograd.config.debug``).

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> agnograd.set_debug(True)
    >>> y = F.sqrt(agnograd.Variable(np.array([0.0, 1.0])))
    >>> try:
    ...     y.backward(grad=np.array([np.nan, 1.0]))
    ... except RuntimeError as error:
    ...     print(str(error).splitlines()[0])
    NaN is detected on backward computation of Sqrt: in gradient 0 that its backward returned
    >>> agnograd.set_debug(False); agnograd.is_debug()
    False
    """
    _config.config.debug = bool(debug)


def is_debug() -> bool:
    """Whether debug mode is on in this thread.

    Examples
    --------
    >>> import agnograd
    >>> with agnograd.using_config("debug", True):
    ...     agnograd.is_debug()
    True
    """
    return bool(_config.config.debug)


class DebugHook:
    """The function hook of debug mode (a :class:`~agnograd.FunctionHook` in all but
    its base class, which lives in a layer above this one)."""

    name = "agnograd.debug"

    def forward_preprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        # Drop this frame and apply's: the stack ends in the user's call.
        _stacks[function] = traceback.StackSummary.from_list(traceback.extract_stack()[:-2])

    def forward_postprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        pass

    def backward_preprocess(self, function: Any, in_nodes: Any, out_grad: Any) -> None:
        _current.function = weakref.ref(function)

    def backward_postprocess(self, function: Any, in_nodes: Any, out_grad: Any) -> None:
        pass


def check_forward(function: Any, outputs: Iterable[Any]) -> None:
    """Raise ``RuntimeError`` if debug mode is on and an output of ``function`` holds
    NaN (Chainer's check after every forward)."""
    _check(function, outputs, "forward", "its output")


def check_backward(function: Any, grads: Iterable[Any]) -> None:
    """Raise ``RuntimeError`` if debug mode is on and a gradient that ``function``'s
    backward returned holds NaN (Chainer's check after every backward)."""
    _check(function, grads, "backward", "gradient {i} that its backward returned")


def _check(function: Any, arrays: Iterable[Any], computation: str, what: str) -> None:
    if not _config.config.debug:
        return
    for i, a in enumerate(arrays):
        if _has_nan(a):
            where = what.format(i=i) if "{i}" in what else f"{what} {i}"
            raise RuntimeError(
                _with_stack(
                    f"NaN is detected on {computation} computation of {function.label}: in {where}",
                    function,
                )
            )


def annotate(error: BaseException) -> None:
    """Add the stack of the function whose backward ran last to ``error``'s message
    (Chainer's "Stacktrace of the function is below"), in debug mode."""
    ref = getattr(_current, "function", None)
    function = None if ref is None else ref()
    if function is None or not _config.config.debug or function not in _stacks:
        return
    extra = _stack_text(function)
    if error.args and isinstance(error.args[0], str):
        if extra not in error.args[0]:
            error.args = (error.args[0] + extra, *error.args[1:])
    else:
        error.add_note(extra)


def forget_current() -> None:
    """Forget which function's backward ran last (a new backward starts)."""
    _current.function = None


def _with_stack(message: str, function: Any) -> str:
    return message + _stack_text(function) if function in _stacks else message


def _stack_text(function: Any) -> str:
    frames = "".join(traceback.format_list(_stacks[function]))
    return f"\n{'-' * 40}\nStacktrace of {function.label} (where it was called) is below:\n{frames}"


def _has_nan(value: Any) -> bool:
    data = value.array if is_wrapper(value) else value
    if data is None or not is_array(data):
        return False
    xp = raw_namespace(data)
    if not xp.isdtype(data.dtype, ("real floating", "complex floating")):
        return False
    return bool(xp.any(xp.isnan(data)))


_config.debug_hook = DebugHook()
