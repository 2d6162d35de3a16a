"""Define-then-run (nnabla) and the compiled plans that replay a graph.

``_define_then_run`` builds graphs without data and runs them (``forward_all``),
``_replay`` decides when ``y.forward()`` and ``y.backward()`` run a compiled plan,
``_compiled`` makes and checks plans, ``_compiled_steps`` and ``_compiled_trace``
their steps, and ``_compiled_jax`` lowers a plan to one XLA program. The modules
are private: the public names are in :mod:`agnograd`.
"""
