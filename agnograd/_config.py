"""Thread-local configuration: backprop mode, function hooks and user flags."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

_DEFAULTS: dict[str, Any] = {
    "enable_backprop": True,
    "auto_forward": True,
    "debug": False,
}


class _Config(threading.local):
    """Per-thread configuration values; unset names fall back to global defaults.

    Examples
    --------
    >>> import agnograd
    >>> agnograd.config.enable_backprop
    True
    """

    def __init__(self) -> None:
        self.__dict__.update(_DEFAULTS)
        self.function_hooks: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"agnograd.config has no entry {name!r}; known entries: "
            f"{sorted(self.__dict__)} (set new ones with agnograd.using_config)"
        )

    def show(self) -> str:
        """Return the current configuration as ``name value`` lines.

        Examples
        --------
        >>> import agnograd
        >>> print(agnograd.config.show().splitlines()[1])
        debug            False
        """
        return "\n".join(
            f"{name:<16} {value!r}" for name, value in sorted(self.__dict__.items())
        )


config = _Config()


@contextlib.contextmanager
def using_config(name: str, value: Any) -> Iterator[None]:
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
    missing = object()
    old = config.__dict__.get(name, missing)
    setattr(config, name, value)
    try:
        yield
    finally:
        if old is missing:
            delattr(config, name)
        else:
            setattr(config, name, old)


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
