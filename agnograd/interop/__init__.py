"""Bridges between agnograd's autograd and the autograd systems of other libraries.

Each bridge is a submodule, imported on its own (``import agnograd.interop.torch``):
importing :mod:`agnograd` or this package imports no array library.

- :mod:`agnograd.interop.torch`: :func:`~agnograd.interop.torch.function` runs a
  function written with agnograd inside ``torch.autograd`` (torch models call it
  with tensors), and :func:`~agnograd.interop.torch.node` runs a torch function or
  ``nn.Module`` inside agnograd's graph.
- :mod:`agnograd.interop.jax`: :func:`~agnograd.interop.jax.function` makes a
  function written with agnograd a ``jax.custom_vjp`` function that ``jax.jit``,
  ``jax.grad`` and ``jax.vmap`` accept, and :func:`~agnograd.interop.jax.node` runs
  a JAX function inside agnograd's graph through ``jax.vjp``.

See the guide ``docs/bridges.md``.
"""
