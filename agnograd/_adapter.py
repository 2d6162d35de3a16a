"""What an adapter tells agnograd about one array library."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Adapter:
    """Description of one array library, registered under the ``agnograd.backends``
    entry-point group.

    Parameters
    ----------
    name : str
        Short name used in device specifiers and messages (``"torch"``).
    modules : tuple of str
        Top-level modules whose array types this adapter owns; ownership is decided
        from ``type(array).__module__``, so the library is never imported to check.
    scatter_add : callable, optional
        ``scatter_add(dst, positions, values) -> array``: add 1-D ``values`` into the
        1-D ``dst`` at integer ``positions``, accumulating repeats. The result may be
        ``dst`` updated in place (it is a fresh buffer). Without it a sort-based
        composition of standard functions is used.

    Examples
    --------
    >>> from agnograd import Adapter
    >>> adapter = Adapter(name="mylib", modules=("mylib",))
    >>> adapter.owns(type("Array", (), {"__module__": "mylib.core"}))
    True
    """

    name: str
    modules: tuple[str, ...]
    scatter_add: Callable[[Any, Any, Any], Any] | None = None

    def owns(self, array_type: type) -> bool:
        """Whether arrays of ``array_type`` belong to this adapter's library."""
        return array_type.__module__.partition(".")[0] in self.modules
