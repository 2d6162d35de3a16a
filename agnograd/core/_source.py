"""Functions made from source: the hot paths written once as text, into each body.

``_variable.NEW_VARIABLE`` and ``_link.LINK`` are the making of an operation's output
and its linking into the graph; the functions that FunctionNode.apply calls are made
of them, and so are the fast paths of agnograd's own nodes (``_fast``), which have
them in their bodies, where calls would cost a tenth of an operation.
"""

from __future__ import annotations

from typing import Any


def render(source: str, namespace: dict[str, Any]) -> Any:
    """The function defined by ``source`` (one ``def``), its globals ``namespace``.

    Examples
    --------
    >>> from agnograd.core._source import render
    >>> render("def twice(x):\\n    return 2 * x", {})(21)
    42
    """
    code = compile(source, f"<agnograd: {source.split('(', 1)[0][4:]}>", "exec")
    local: dict[str, Any] = {}
    exec(code, namespace, local)
    (function,) = local.values()
    return function
