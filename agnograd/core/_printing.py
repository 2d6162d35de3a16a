"""How a ``Variable`` prints: ``repr``, ``str``, ``summary``, ``debug_print``; a
mixin of :class:`agnograd.Variable`."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import array_api_compat
import numpy

from agnograd.backends._backend import adapter_for, backend_name, raw_namespace

if TYPE_CHECKING:
    from agnograd.core._variable_node import VariableNode


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
        try:
            values = _host_values(self._data)
            body = numpy.array2string(values, None, None, None, separator, prefix)
            if separator == ", " and values.size == 0 and values.ndim > 1:
                body += f", shape={values.shape}"  # "[]" alone hides it (NumPy's repr)
        except Exception as error:  # printing never raises: describe what is there
            body = f"<{self._unprintable(error)}>"
        return f"{prefix}{body})"

    def _unprintable(self, error: Exception) -> str:
        """What can be told of data whose values cannot be shown, and why not."""
        what = [self.label, _library(self._data)]
        with contextlib.suppress(Exception):  # a device no adapter knows: left out
            what.append(f"on {self.device}")
        return f"{', '.join(what)}; values not shown ({_reason(error)})"

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
        backend = "uninitialised" if self._data is None else _library(self._data)
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
            try:
                values = _host_values(arr)
            except Exception as error:
                lines.append(f"- {what}: values not shown ({_reason(error)})")
                continue
            if values.dtype.kind in "fc" and values.size:
                lines.append(f"- {what}: mean={values.mean():.8f}, std={values.std():.8f}")
            else:
                lines.append(f"- {what}: {values!r}")
        return "\n".join(lines)


def to_numpy(array: Any) -> numpy.ndarray:
    """A NumPy copy or view of any array with the same values and dtype.

    Tries NumPy's conversion, then DLPack (as it is, then the library's exportable
    copy: PyTorch's tensors that require grad or carry a lazy conjugate bit), then a
    copy on the host, whose error is raised when that fails too.
    """
    for convert in (numpy.asarray, numpy.from_dlpack, _from_export_copy):
        try:
            return convert(array)
        except Exception:  # e.g. GPU arrays refuse implicit host copies
            continue
    return numpy.from_dlpack(array_api_compat.to_device(array, "cpu"))


def _from_export_copy(array: Any) -> numpy.ndarray:
    adapter = adapter_for(array)
    if adapter is None:
        raise TypeError(f"no installed adapter owns {type(array).__qualname__} arrays")
    return numpy.from_dlpack(adapter.copy_for_export(array))


def _host_values(array: Any) -> numpy.ndarray:
    """The values to print: :func:`to_numpy`, or for floating dtypes that NumPy lacks
    (bfloat16, float8, ...) the values in float32 or complex64, which hold them exactly."""
    try:
        return to_numpy(array)
    except Exception:
        xp = array_api_compat.array_namespace(array)
        for kind, wide in (("real floating", "float32"), ("complex floating", "complex64")):
            if xp.isdtype(array.dtype, kind) and array.dtype != getattr(xp, wide):
                return to_numpy(xp.astype(array, getattr(xp, wide)))
        raise


def _reason(error: Exception) -> str:
    """An error's type and first line, for a one-line message."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _library(array: Any) -> str:
    """The library of ``array``, for messages: its namespace's short name."""
    try:
        return backend_name(raw_namespace(array))
    except Exception:
        return f"{type(array).__module__}.{type(array).__qualname__}"
