"""CuPy adapter."""

from typing import Any

from agnograd import Adapter


def _scatter_add(dst: Any, positions: Any, values: Any) -> Any:
    import cupyx

    cupyx.scatter_add(dst, positions, values)
    return dst


adapter = Adapter(name="cupy", modules=("cupy",), scatter_add=_scatter_add)
