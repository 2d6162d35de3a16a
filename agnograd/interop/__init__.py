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

One bridge needs no import: einops' main API (``einops.rearrange``, ``reduce``,
``repeat``, ``einsum``, ``pack``, ``unpack``) takes Variables, differentiably, as
soon as einops is imported, before or after agnograd (its backend is defined then;
agnograd never imports einops).

See the guide ``docs/bridges.md``.
"""

from agnograd.interop import _einops

# einops' main API on Variables: its backend is defined once einops is imported
# (agnograd never imports einops itself).
_einops.install()
