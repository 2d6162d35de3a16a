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
  last, with its stack ("Stacktrace of the function is below");
- each array that a function keeps for its backward, of a library that counts no
  writes of its own (NumPy, array-api-strict, CuPy), is fingerprinted when the
  function runs, and its backward raises if the array changed since: a write into
  it or any view of its memory that agnograd does not see (``v.array[0] = 1``),
  which outside debug mode goes unnoticed. PyTorch counts every write itself, so
  there agnograd catches them all in any mode.
"""

from __future__ import annotations

import hashlib
import threading
import traceback
import weakref
from collections.abc import Iterable
from typing import Any

import numpy

from agnograd.backends._backend import adapter_for, is_array, is_wrapper, raw_namespace
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
        check_fingerprints(function)

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


# What each function node kept, while debug mode was on: the identities of its tuples
# of kept inputs and outputs, and a fingerprint of each array in them (None for one
# whose library counts its writes itself).
_kept: weakref.WeakKeyDictionary[Any, tuple[int, int, tuple[Any, ...], tuple[Any, ...]]] = (
    weakref.WeakKeyDictionary()
)


def keep_fingerprints(function: Any) -> None:
    """In debug mode, fingerprint the arrays that ``function`` just kept for its
    backward (:func:`check_fingerprints` compares them before it runs)."""
    if not _config.config.debug:
        return
    saved_in = function._saved_inputs or ()
    saved_out = function._saved_outputs or ()
    if saved_in or saved_out:
        prints_in = tuple([_fingerprint(a) for a in saved_in])
        prints_out = tuple([_fingerprint(a) for a in saved_out])
        _kept[function] = (id(saved_in), id(saved_out), prints_in, prints_out)


def check_fingerprints(function: Any) -> None:
    """Raise if an array that ``function`` kept in debug mode changed since: written
    in place through any view of its memory, seen by agnograd or not."""
    record = _kept.get(function)
    if record is None:
        return
    id_in, id_out, prints_in, prints_out = record
    for what, saved, ident, prints in (
        ("input", function._saved_inputs, id_in, prints_in),
        ("output", function._saved_outputs, id_out, prints_out),
    ):
        if saved is None or id(saved) != ident:
            continue  # freed, or kept anew by a later forward (define-then-run)
        for i, (array, print_) in enumerate(zip(saved, prints, strict=True)):
            if print_ is not None and not _unchanged(array, print_):
                raise RuntimeError(
                    _with_stack(
                        f"backward of {function.label}: saved {what} {i} was written in "
                        f"place after the forward used it (debug mode found its values "
                        f"changed since {function.label} kept it: a write into the array or "
                        "any view of its memory, such as v.array[0] = 1), so its gradient "
                        "would be wrong; write into a copy instead "
                        "(x = xp.asarray(x, copy=True)) or set the values before using them",
                        function,
                    )
                )


def _fingerprint(array: Any) -> Any:
    """A digest of ``array``'s bytes, where they can be read in host memory (NumPy,
    and others through DLPack), else a copy; None for an array of a library that
    counts its writes (PyTorch: the version check covers it)."""
    adapter = adapter_for(array)
    if adapter is not None and adapter.write_count is not None:
        return None
    host = _host(array)
    if host is None:
        return raw_namespace(array).asarray(array, copy=True)
    return hashlib.blake2b(numpy.ascontiguousarray(host).tobytes(), digest_size=16).digest()


def _host(array: Any) -> Any:
    if isinstance(array, numpy.ndarray | numpy.generic):
        return numpy.asarray(array)
    try:
        return numpy.from_dlpack(array)
    except Exception:  # on a device, or no DLPack: compared as a copy
        return None


def _unchanged(array: Any, print_: Any) -> bool:
    if isinstance(print_, bytes):
        return _fingerprint(array) == print_
    xp = raw_namespace(array)
    same = (array == print_) | ((array != array) & (print_ != print_))  # NaN stays NaN
    return bool(xp.all(same))


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
