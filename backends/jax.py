"""JAX adapter."""

from typing import Any

from agnograd import Adapter


def _scatter_add(dst: Any, positions: Any, values: Any) -> Any:
    return dst.at[positions].add(values)


adapter = Adapter(name="jax", modules=("jax", "jaxlib"), scatter_add=_scatter_add)
