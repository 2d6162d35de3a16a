"""Define-then-run (nnabla) and the compiled plans that replay a graph.

``_define_then_run`` builds graphs without data and runs them (``forward_all``),
with ``_buffers`` (the arrays nodes hold) and ``_recompute`` (nnabla's
``Variable.recompute``); ``_replay`` decides when ``y.forward()`` and
``y.backward()`` run a compiled plan; ``_compiled`` makes, runs and checks plans,
``_compiled_graph`` works out what a plan needs from its graph, ``_compiled_steps``
are the steps it runs (rules traced by ``agnograd.functions._rule_trace``), and
``_compiled_jax`` lowers a plan to one XLA program. ``_jit`` (``agnograd.jit``)
traces a function once per signature into such a graph (``_jit_trace``: the
arguments, the trace and what it refuses) and re-runs its plan. The modules are
private: the public names are in :mod:`agnograd`.
"""
