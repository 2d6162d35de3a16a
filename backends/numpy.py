"""NumPy adapter."""

from typing import Any

from agnograd import Adapter


def _scatter_add(dst: Any, positions: Any, values: Any) -> Any:
    import numpy

    numpy.add.at(dst, positions, values)
    return dst


adapter = Adapter(name="numpy", modules=("numpy",), scatter_add=_scatter_add)
