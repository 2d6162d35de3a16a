"""The graph: ``Variable``, ``VariableNode``, ``FunctionNode`` and the engine.

With them: configuration (``_config``), the version counters that catch arrays
overwritten before backward (``_versions``), function hooks and debug mode, type
checks, initializers, Chainer's old-style ``Function`` and ``Parameter``. The core
imports only :mod:`agnograd.backends`; where it needs a layer above it (the
functions behind ``x + y``, transfer, define-then-run) it calls an entry of
``_extension`` that the layer fills in. The modules are private: the public names
are in :mod:`agnograd`.
"""
