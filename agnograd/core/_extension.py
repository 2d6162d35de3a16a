"""Where the graph core calls the layers built on it.

The graph core (``Variable``, ``VariableNode``, ``FunctionNode`` and the engine)
imports nothing from the layers above it: the differentiable functions, the
namespace, devices and transfer, define-then-run. Where the core needs one of them
it calls an entry of this module, which that layer fills in once, when it is
imported (``import agnograd`` imports them all):

``operators``
    ``agnograd.functions._operators``: the functions behind Variable's operators
    (``x + y`` calls ``operators.add(x, y)``).
``namespace``
    ``agnograd.functions._namespace.differentiable_namespace``, behind
    ``Variable.__array_namespace__``.
``transfer``
    ``agnograd.functions._transfer``: ``Variable.device``, ``to_device``, ``to_cpu``,
    ``to_gpu``, ``to_chx``, ``from_chx``, ``view``, ``addgrad``, ``copydata``;
    ``from_dlpack`` and ``asarray`` of a Variable, behind the namespace's functions
    of those names; and ``follow_data``, which the engine calls for a leaf that
    moved after a graph used it.
``define_then_run``
    ``agnograd.static._define_then_run``: ``apply_deferred`` (``FunctionNode.apply``
    with auto-forward off), ``forward_all`` and ``unlinked``; and nnabla's recompute
    (``is_recompute``, ``set_recompute``, ``restore``, from ``_recompute``).
``replay``
    ``agnograd.static._replay``: ``Variable.forward`` and the plain
    ``Variable.backward`` after it, which run a compiled plan of a graph run often enough.

Examples
--------
>>> import agnograd
>>> from agnograd.core import _extension
>>> _extension.operators.__name__, _extension.define_then_run.__name__
('agnograd.functions._operators', 'agnograd.static._define_then_run')
"""

from __future__ import annotations

from typing import Any

operators: Any = None
namespace: Any = None
transfer: Any = None
define_then_run: Any = None
replay: Any = None
