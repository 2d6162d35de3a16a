"""Dask adapter: one device, ``'@dask'``.

Dask arrays are lazy task graphs, so agnograd's backward builds more graph rather
than computing: gradients of dask arrays are dask arrays. Dask arrays cannot be
updated in place, so the scatter-add hook is built on ``dask.array.bincount``,
which stays lazy. There are no views (a graph has no buffer to share): moving to
another library computes the graph.
"""

from __future__ import annotations

from typing import Any

from agnograd import Adapter


def _namespace() -> Any:
    """array-api-compat's Dask namespace, with a ``linalg.cholesky`` that gives the
    lower factor: array-api-compat's own (1.12 and earlier, at least) returns the
    upper one, and fails with ``upper=True``."""
    import types

    import array_api_compat.dask.array
    import dask.array

    compat: Any = array_api_compat.dask.array

    def cholesky(x: Any, /, *, upper: bool = False) -> Any:
        lower = dask.array.linalg.cholesky(x, lower=True)
        return compat.conj(compat.matrix_transpose(lower)) if upper else lower

    linalg = types.ModuleType(compat.linalg.__name__, compat.linalg.__doc__)
    vars(linalg).update(vars(compat.linalg), cholesky=cholesky)
    # Named as array-api-compat's, so that its is_dask_namespace() still knows it.
    xp = types.ModuleType(compat.__name__, compat.__doc__)
    vars(xp).update(vars(compat), linalg=linalg)
    return xp


def _parse_device(text: str) -> str:
    if text in ("", "cpu"):
        return "cpu"
    raise ValueError(f"dask has one device, '@dask'; got {text!r}")


def _from_dlpack(obj: Any, device: Any, copy: bool | None) -> Any:
    # Dask's chunks are NumPy arrays: import into NumPy, then wrap as one chunk.
    import dask.array
    import numpy

    # Already in host memory: name no device (see the NumPy adapter).
    on_host = obj.__dlpack_device__()[0] == 1
    array = (
        numpy.from_dlpack(obj, copy=copy)
        if on_host
        else numpy.from_dlpack(obj, device="cpu", copy=copy)
    )
    return dask.array.from_array(array)


def _scatter_add(dst: Any, positions: Any, values: Any) -> Any:
    # bincount sums repeated positions, stays lazy, and knows its length from
    # minlength (the sort-based fallback would give chunks of unknown size).
    import dask.array

    n = dst.shape[0]
    values = values.rechunk(positions.chunks)  # bincount pairs chunks one to one

    def sums(weights: Any) -> Any:
        return dask.array.bincount(positions, weights=weights, minlength=n)

    # bincount takes real weights only
    complex_values = values.dtype.kind == "c"
    total = sums(values.real) + 1j * sums(values.imag) if complex_values else sums(values)
    return dst + total.astype(dst.dtype)


adapter = Adapter(
    name="dask",
    modules=("dask",),
    scatter_add=_scatter_add,
    namespace=_namespace,
    devices=lambda: ["cpu"],
    device_name=lambda device: "",
    parse_device=_parse_device,
    default_device=lambda: "cpu",
    device_of=lambda array: "cpu",
    to_device=lambda array, device, stream: array,
    from_dlpack=_from_dlpack,
    dlpack_device=lambda device: (1, 0),
    export_copy=lambda array: array.compute(),
    views=False,
    order=60,
    title="Dask",
)
