"""Configuration: backprop mode, function hooks and user flags, per thread.

Each entry lives in a :class:`contextvars.ContextVar`, so a value set in one thread
(or asyncio task) is invisible to the others. The three entries every operation
reads (``enable_backprop``, ``auto_forward``, ``function_hooks``) share one
variable, :data:`MODE`, so that ``FunctionNode.apply`` reads its configuration with
a single lookup.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Final

#: The entries every operation reads, in the order MODE holds them, with defaults.
MODE_DEFAULTS: dict[str, Any] = {
    "enable_backprop": True,
    "auto_forward": True,
    "function_hooks": MappingProxyType({}),
}
_FIELDS = tuple(MODE_DEFAULTS)
#: Where each entry sits in MODE's tuple: ``MODE.get()[HOOKS]``.
BACKPROP: Final = 0
AUTO_FORWARD: Final = 1
HOOKS: Final = 2

#: ``(enable_backprop, auto_forward, function_hooks)`` of this thread, as one plain
#: tuple (which unpacks faster than a named one).
MODE: contextvars.ContextVar[tuple[bool, bool, Mapping[str, Any]]] = contextvars.ContextVar(
    "agnograd.mode",
    default=tuple(MODE_DEFAULTS.values()),
)


#: The function nodes whose backward this thread runs with Variables (double backprop,
#: a node that asks for them): the engine adds one around the call, and counts the
#: threads that do so in the node's ``_variables_in_backward`` (see takes_variables).
WITH_VARIABLES: contextvars.ContextVar[frozenset[Any]] = contextvars.ContextVar(
    "agnograd.with_variables", default=frozenset()
)


def takes_variables(func: Any) -> bool:
    """Whether this thread runs the backward of the node ``func`` with Variables, not
    arrays. Another thread may be running the same node's backward the other way
    (threads share a graph): the node's count says whether any thread does (read
    first, so the common case costs one attribute), the thread's context which.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> from agnograd.core._config import takes_variables
    >>> y = agnograd.functions.sin(agnograd.Variable(np.ones(2)))
    >>> takes_variables(y.creator_node)
    False
    """
    return bool(func._variables_in_backward) and func in WITH_VARIABLES.get()


# Counts the threads that run a node's backward with Variables (taking_variables).
_counting = threading.Lock()


@contextlib.contextmanager
def taking_variables(func: Any) -> Iterator[None]:
    """Run the backward of the node ``func`` with Variables in this thread, within the
    block: the engine's, for double backprop and the nodes that ask for them."""
    with _counting:
        func._variables_in_backward += 1
    token = WITH_VARIABLES.set(WITH_VARIABLES.get() | {func})
    try:
        yield
    finally:
        WITH_VARIABLES.reset(token)
        with _counting:
            func._variables_in_backward -= 1


#: The name under which forward mode's innermost level sits among the function hooks
#: while a jvp runs (see ``FunctionNode.apply``).
FORWARD_MODE: Final = "agnograd.jvp"


class LevelHooks(dict[str, Any]):
    """The function hooks while a jvp runs with no other hook and no jvp outside it:
    its level alone, under :data:`FORWARD_MODE`, also as ``.level``. The fast paths
    (agnograd.core._fast) know it by its class, and hand their results to the level's
    ``push1`` and ``push2`` (agnograd.transforms._forward) instead of taking the
    general path."""

    __slots__ = ("level",)

    def __init__(self, level: Any) -> None:
        self[FORWARD_MODE] = level
        self.level = level


def _mode_with(name: str, value: Any) -> tuple[bool, bool, Mapping[str, Any]]:
    """This thread's MODE with the entry ``name`` set to ``value``."""
    mode: list[Any] = list(MODE.get())
    mode[_FIELDS.index(name)] = value
    backprop, auto_forward, hooks = mode
    return backprop, auto_forward, hooks


#: The function hook of debug mode (agnograd.core._debug fills it in when imported): setting
#: ``config.debug`` adds it to this thread's hooks or removes it, so that debug mode
#: costs operations nothing while it is off.
debug_hook: Any = None


def _mode_with_debug(debug: bool) -> tuple[bool, bool, Mapping[str, Any]]:
    """This thread's MODE with the debug hook among its hooks, or not."""
    backprop, auto_forward, hooks = MODE.get()
    hook = debug_hook
    if hook is None or (hook.name in hooks) == debug:
        return backprop, auto_forward, hooks
    if debug:
        return backprop, auto_forward, {**hooks, hook.name: hook}
    return backprop, auto_forward, {k: v for k, v in hooks.items() if k != hook.name}


_entries: dict[str, contextvars.ContextVar[Any]] = {
    "debug": contextvars.ContextVar("agnograd.debug", default=False),
    # How many runs of an unchanged graph y.forward() walks before it compiles the
    # graph into a plan and runs that instead (agnograd.static._replay); None: never.
    "compile_after": contextvars.ContextVar("agnograd.compile_after", default=10),
    # Whether the results of operations recorded now are recomputed in backward
    # instead of kept from forward (nnabla's nn.recompute; agnograd.recompute).
    "recompute": contextvars.ContextVar("agnograd.recompute", default=False),
}
_UNSET = object()


def _value(name: str) -> Any:
    if name in MODE_DEFAULTS:
        return MODE.get()[_FIELDS.index(name)]
    entry = _entries.get(name)
    if entry is None:
        return _UNSET
    try:
        return entry.get()
    except LookupError:  # an entry added in another thread, never set in this one
        return _UNSET


class _Config:
    """agnograd's configuration; each thread sees its own values.

    Read entries as attributes; set them with :func:`using_config` (or by
    assignment, which lasts until changed). New entries may be added by name.

    Examples
    --------
    >>> import agnograd
    >>> agnograd.config.enable_backprop
    True
    >>> print(agnograd.config.show())
    auto_forward     True
    compile_after    10
    debug            False
    enable_backprop  True
    function_hooks   {}
    recompute        False
    """

    def __getattr__(self, name: str) -> Any:
        value = _value(name)
        if value is _UNSET:
            raise AttributeError(
                f"agnograd.config has no entry {name!r}; known entries: {sorted(self._names())} "
                "(add one with agnograd.using_config)"
            )
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name in MODE_DEFAULTS:
            MODE.set(_mode_with(name, value))
            return
        entry = _entries.get(name)
        if entry is None:
            entry = _entries[name] = contextvars.ContextVar(f"agnograd.{name}")
        if name == "debug":
            MODE.set(_mode_with_debug(bool(value)))
        entry.set(value)

    def __delattr__(self, name: str) -> None:
        if name in MODE_DEFAULTS:  # back to the default
            MODE.set(_mode_with(name, MODE_DEFAULTS[name]))
            return
        if _value(name) is _UNSET:
            raise AttributeError(f"agnograd.config has no entry {name!r}")
        if name == "debug":
            MODE.set(_mode_with_debug(False))
        _entries[name].set(_UNSET)

    def _names(self) -> list[str]:
        return [*_FIELDS, *(name for name in _entries if _value(name) is not _UNSET)]

    def show(self) -> str:
        """Return the entries visible in this thread as ``name value`` lines."""
        lines = []
        for name in sorted(self._names()):
            value = getattr(self, name)
            shown = dict(value) if isinstance(value, Mapping) else value
            lines.append(f"{name:<16} {shown!r}")
        return "\n".join(lines)


config = _Config()


class _Setting(contextlib.ContextDecorator, contextlib.AbstractContextManager[None]):
    """What :func:`using_config` returns: one entry set for the length of a block.

    A class rather than a generator: backward enters two of these per call, and a
    generator-based context manager costs several times as much. Re-entrant, and
    usable as a decorator, like the ones of :mod:`contextlib`.
    """

    __slots__ = ("_entry", "_tokens", "_value")

    def __init__(self, entry: contextvars.ContextVar[Any], value: Any) -> None:
        self._entry = entry
        self._value = value
        self._tokens: list[contextvars.Token[Any]] = []

    def __enter__(self) -> None:
        self._tokens.append(self._entry.set(self._value))

    def __exit__(self, *exc_info: object) -> None:
        self._entry.reset(self._tokens.pop())


class _DebugSetting(_Setting):
    """``config.debug`` set for a block, with the debug hook among the hooks or not."""

    __slots__ = ("_mode_tokens",)

    def __init__(self, entry: contextvars.ContextVar[Any], value: Any) -> None:
        super().__init__(entry, value)
        self._mode_tokens: list[contextvars.Token[Any]] = []

    def __enter__(self) -> None:
        self._mode_tokens.append(MODE.set(_mode_with_debug(bool(self._value))))
        super().__enter__()

    def __exit__(self, *exc_info: object) -> None:
        super().__exit__(*exc_info)
        MODE.reset(self._mode_tokens.pop())


class _ModeSetting(_Setting):
    """One field of :data:`MODE` set for a block (the other fields as they are then)."""

    __slots__ = ()

    def __enter__(self) -> None:
        name, value = self._value
        self._tokens.append(MODE.set(_mode_with(name, value)))


class _GraphMode(_Setting):
    """``enable_backprop`` and ``auto_forward`` set for a block at once."""

    __slots__ = ()

    def __enter__(self) -> None:
        backprop, auto_forward = self._value
        self._tokens.append(MODE.set((backprop, auto_forward, MODE.get()[HOOKS])))


def graph_mode(
    enable_backprop: bool, auto_forward: bool
) -> contextlib.AbstractContextManager[None]:
    """``using_config("enable_backprop", ...)`` and ``using_config("auto_forward",
    ...)`` in one block, which sets this thread's mode once (each ``with`` costs about
    0.6 µs, and backward enters one for every call).

    Examples
    --------
    >>> import agnograd
    >>> from agnograd.core._config import graph_mode
    >>> with graph_mode(False, True):
    ...     agnograd.config.enable_backprop, agnograd.config.auto_forward
    (False, True)
    """
    return _GraphMode(MODE, (bool(enable_backprop), bool(auto_forward)))


def using_config(name: str, value: Any) -> contextlib.AbstractContextManager[None]:
    """Set ``agnograd.config.<name>`` to ``value`` inside a ``with`` block, in this thread.

    Examples
    --------
    >>> import agnograd
    >>> with agnograd.using_config("debug", True):
    ...     agnograd.config.debug
    True
    >>> agnograd.config.debug
    False
    """
    if name in MODE_DEFAULTS:
        return _ModeSetting(MODE, (name, value))
    entry = _entries.get(name)
    if entry is None:
        entry = _entries[name] = contextvars.ContextVar(f"agnograd.{name}")
    if name == "debug":
        return _DebugSetting(entry, value)
    return _Setting(entry, value)


def no_backprop_mode() -> contextlib.AbstractContextManager[None]:
    """Build no graph inside the block: results carry no creator.

    Nestable and thread-local.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(np.ones(2))
    >>> with agnograd.no_backprop_mode():
    ...     y = x * 2
    >>> y.creator is None
    True
    """
    return using_config("enable_backprop", False)


def force_backprop_mode() -> contextlib.AbstractContextManager[None]:
    """Build the graph inside the block even within :func:`no_backprop_mode`.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(np.ones(2))
    >>> with agnograd.no_backprop_mode(), agnograd.force_backprop_mode():
    ...     y = x * 2
    >>> y.creator is not None
    True
    """
    return using_config("enable_backprop", True)


@contextlib.contextmanager
def eager_recording() -> Iterator[None]:
    """Compute and record the graph inside the block, even within
    :func:`no_backprop_mode` or ``auto_forward(False)``: for tools that differentiate
    a function they run themselves (``agnograd.functional``, the JAX bridge).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> from agnograd.core._config import eager_recording
    >>> x = agnograd.Variable(np.ones(2))
    >>> with agnograd.no_backprop_mode(), eager_recording():
    ...     y = x * 2
    >>> y.creator is not None, y.array is not None
    (True, True)
    """
    with graph_mode(True, True):
        yield


def auto_forward(enabled: bool = True) -> contextlib.AbstractContextManager[None]:
    """Compute operations as they are called (``True``, the default) or only build
    the graph (``False``: define-then-run, run it later with ``forward()``).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(shape=(2,))
    >>> with agnograd.auto_forward(False):
    ...     y = x * 2 + 1
    >>> y.array is None, y.shape
    (True, (2,))
    >>> x.d = np.array([1.0, 2.0], dtype=np.float32)
    >>> y.forward(); y.d
    array([3., 5.], dtype=float32)
    """
    return using_config("auto_forward", bool(enabled))


def recompute(enabled: bool = True) -> _Setting:
    """Mark the results of the operations recorded inside the block for recomputation
    (nnabla's ``nn.recompute``; as a decorator, nnabla's ``nn.recompute_fn``).

    Sets :attr:`Variable.recompute <agnograd.Variable.recompute>` of each result made
    with auto-forward off: ``forward()`` frees its data once no later function of the
    forward reads it, and backward computes it again, from the nearest data still
    held, just before a function's backward reads it. The gradients are those of a
    run without recomputation, bit for bit; the peak memory is lower where marked
    blocks alternate with unmarked results (the checkpoints backward recomputes
    from). Blocks nest; ``recompute(False)`` leaves results inside unmarked.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> x = agnograd.Variable(np.array([0.5, 1.0], np.float32), need_grad=True)
    >>> with agnograd.auto_forward(False):
    ...     with agnograd.recompute():
    ...         h = F.sin(F.exp(x))
    ...     y = F.sum(F.tanh(h))
    >>> h.recompute, y.recompute
    (True, False)
    >>> y.forward(clear_no_need_grad=True)
    >>> h.d is None  # freed in forward
    True
    >>> y.backward(clear_buffer=True)
    >>> x.g
    array([-0.05415173, -2.103062  ], dtype=float32)
    """
    return _Setting(_entries["recompute"], bool(enabled))


def set_auto_forward(enabled: bool) -> None:
    """Switch auto-forward on or off for this thread until changed again.

    Examples
    --------
    >>> import agnograd
    >>> agnograd.set_auto_forward(False); agnograd.get_auto_forward()
    False
    >>> agnograd.set_auto_forward(True)
    """
    config.auto_forward = bool(enabled)


def get_auto_forward() -> bool:
    """Whether operations compute immediately (eager, the default) in this thread.

    Examples
    --------
    >>> import agnograd
    >>> agnograd.get_auto_forward()
    True
    """
    return MODE.get()[AUTO_FORWARD]
