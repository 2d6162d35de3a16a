"""Function hooks: code that runs before and after each forward and backward.

Use a hook as a context manager to register it (in this thread) for every
function node, or attach it to one node with ``FunctionNode.add_hook``.
"""

from agnograd.core._hooks import (
    FunctionHook,
    PrintHook,
    TimerHook,
)

__all__ = [
    "FunctionHook",
    "PrintHook",
    "TimerHook",
]
