"""PyTorch adapter."""

from typing import Any

from agnograd import Adapter


def _scatter_add(dst: Any, positions: Any, values: Any) -> Any:
    return dst.index_add_(0, positions, values)


adapter = Adapter(name="torch", modules=("torch",), scatter_add=_scatter_add)
