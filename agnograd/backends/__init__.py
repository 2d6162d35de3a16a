"""Array libraries as agnograd sees them, before any graph exists.

Which namespace and adapter an array belongs to (``_backend``), what an adapter
tells agnograd about its library (``_adapter``), devices as values and moving raw
arrays between them (``_device``), and arrays of shape and dtype only, on which
define-then-run evaluates a forward without data (``_abstract``, with the shape and
dtype rules of ``_shape_dtype``). Nothing here knows about Variables. The modules
are private: the public names are in :mod:`agnograd`.
"""
