"""How a ``Variable`` prints: ``repr``, ``str``, ``summary``, ``debug_print``; a
mixin of :class:`agnograd.Variable`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import array_api_compat
import numpy

from agnograd._backend import backend_name

if TYPE_CHECKING:
    from agnograd._variable import VariableNode


class Printing:
    """NumPy's formatting for any library's arrays (viewed, or copied to the host)."""

    __slots__ = ()

    if TYPE_CHECKING:  # what the methods below read of the Variable
        _data: Any
        _node: VariableNode

        @property
        def name(self) -> str | None: ...
        @property
        def label(self) -> str: ...
        @property
        def device(self) -> Any: ...
        @property
        def requires_grad(self) -> bool: ...
        @property
        def grad(self) -> Any: ...
        @property
        def xp(self) -> Any: ...

    def _format(self, separator: str) -> str:
        name = f" {self.name}" if self.name else ""
        prefix = f"variable{name}("
        if self._data is None:
            return prefix + "None)"
        body = numpy.array2string(to_numpy(self._data), None, None, None, separator, prefix)
        return f"{prefix}{body})"

    def __repr__(self) -> str:
        return self._format(", ")

    def __str__(self) -> str:
        return self._format(" ")

    def summary(self) -> str:
        """One-line summary: name (or address), shape, dtype and backend.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> agnograd.Variable(np.zeros((2, 3), np.float32), name="w").summary()
        '<variable w: (2, 3), float32, numpy>'
        """
        who = self.name if self.name else f"at 0x{id(self):x}"
        backend = "uninitialised" if self._data is None else backend_name(self.xp)
        return f"<variable {who}: {self.label}, {backend}>"

    def debug_print(self) -> str:
        """Multi-line description: shape, dtype, backend, device and statistics.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> print(agnograd.Variable(np.array([1.0, 3.0]), name="v").debug_print())
        <variable v: (2), float64, numpy>
        - device: @numpy
        - requires_grad: True
        - data: mean=2.00000000, std=1.00000000
        - grad: None
        """
        lines = [self.summary()]
        if self._data is not None:
            lines.append(f"- device: {self.device}")
        lines.append(f"- requires_grad: {self.requires_grad}")
        for what, arr in (("data", self._data), ("grad", self.grad)):
            if arr is None:
                lines.append(f"- {what}: None")
                continue
            values = to_numpy(arr)
            if values.dtype.kind in "fc" and values.size:
                lines.append(f"- {what}: mean={values.mean():.8f}, std={values.std():.8f}")
            else:
                lines.append(f"- {what}: {values!r}")
        return "\n".join(lines)


def to_numpy(array: Any) -> numpy.ndarray:
    """A NumPy copy or view of any array, for printing only."""
    for convert in (numpy.asarray, numpy.from_dlpack):
        try:
            return convert(array)
        except Exception:  # e.g. GPU arrays refuse implicit host copies
            continue
    return numpy.from_dlpack(array_api_compat.to_device(array, "cpu"))
