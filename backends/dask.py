"""Dask adapter: dask arrays cannot be updated in place, so scatter-add uses the
standard-only composition, which keeps the result a lazy dask graph."""

from agnograd import Adapter

adapter = Adapter(name="dask", modules=("dask",))
