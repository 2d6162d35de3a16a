"""``Variable``'s operators, a mixin of :class:`agnograd.Variable`.

Each operator calls the function of the same name in ``agnograd.functions._operators``
through the core's extension point (those functions build on the differentiable
functions, which build on ``Variable``). ``__hash__`` stays identity-based although
``==`` is elementwise, as for tensors.

The in-place operators (``__iadd__``, ...) write nothing: ``h += a`` binds ``h`` to
a new Variable, ``h + a``, leaving every other name for the old one unchanged, as in
Chainer and nnabla (the array API standard allows either), and raises ``TypeError``
where ``h + a`` has another dtype or shape than ``h``, as the standard asks of an
in-place operator. Writing into a Variable's data is explicit: ``x[key] = value``,
``x.d[...] = ...``, :meth:`~agnograd.Variable.copydata`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agnograd.core import _extension

if TYPE_CHECKING:
    from agnograd.core._variable_node import VariableNode


class Operators:
    """Arithmetic, bitwise, comparison, indexing and conversion dunders."""

    __slots__ = ()
    __hash__ = object.__hash__

    if TYPE_CHECKING:  # what the DLPack methods below read of the Variable
        _data: Any
        _node: VariableNode

        def _describe(self) -> str: ...

    def __add__(self, other: Any) -> Any:
        return _extension.operators.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return _extension.operators.radd(self, other)

    def __sub__(self, other: Any) -> Any:
        return _extension.operators.sub(self, other)

    def __rsub__(self, other: Any) -> Any:
        return _extension.operators.rsub(self, other)

    def __mul__(self, other: Any) -> Any:
        return _extension.operators.mul(self, other)

    def __rmul__(self, other: Any) -> Any:
        return _extension.operators.rmul(self, other)

    def __truediv__(self, other: Any) -> Any:
        return _extension.operators.truediv(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _extension.operators.rtruediv(self, other)

    def __floordiv__(self, other: Any) -> Any:
        return _extension.operators.floordiv(self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return _extension.operators.rfloordiv(self, other)

    def __mod__(self, other: Any) -> Any:
        return _extension.operators.mod(self, other)

    def __rmod__(self, other: Any) -> Any:
        return _extension.operators.rmod(self, other)

    def __pow__(self, other: Any) -> Any:
        return _extension.operators.pow_(self, other)

    def __rpow__(self, other: Any) -> Any:
        return _extension.operators.rpow(self, other)

    def __matmul__(self, other: Any) -> Any:
        return _extension.operators.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return _extension.operators.rmatmul(self, other)

    def __and__(self, other: Any) -> Any:
        return _extension.operators.and_(self, other)

    def __rand__(self, other: Any) -> Any:
        return _extension.operators.rand(self, other)

    def __or__(self, other: Any) -> Any:
        return _extension.operators.or_(self, other)

    def __ror__(self, other: Any) -> Any:
        return _extension.operators.ror(self, other)

    def __xor__(self, other: Any) -> Any:
        return _extension.operators.xor(self, other)

    def __rxor__(self, other: Any) -> Any:
        return _extension.operators.rxor(self, other)

    def __lshift__(self, other: Any) -> Any:
        return _extension.operators.lshift(self, other)

    def __rlshift__(self, other: Any) -> Any:
        return _extension.operators.rlshift(self, other)

    def __rshift__(self, other: Any) -> Any:
        return _extension.operators.rshift(self, other)

    def __rrshift__(self, other: Any) -> Any:
        return _extension.operators.rrshift(self, other)

    # In place: a new Variable of the same dtype and shape (see the module).
    def __iadd__(self, other: Any) -> Any:
        return _extension.operators.iadd(self, other)

    def __isub__(self, other: Any) -> Any:
        return _extension.operators.isub(self, other)

    def __imul__(self, other: Any) -> Any:
        return _extension.operators.imul(self, other)

    def __itruediv__(self, other: Any) -> Any:
        return _extension.operators.itruediv(self, other)

    def __ifloordiv__(self, other: Any) -> Any:
        return _extension.operators.ifloordiv(self, other)

    def __imod__(self, other: Any) -> Any:
        return _extension.operators.imod(self, other)

    def __ipow__(self, other: Any) -> Any:
        return _extension.operators.ipow(self, other)

    def __imatmul__(self, other: Any) -> Any:
        return _extension.operators.imatmul(self, other)

    def __iand__(self, other: Any) -> Any:
        return _extension.operators.iand(self, other)

    def __ior__(self, other: Any) -> Any:
        return _extension.operators.ior(self, other)

    def __ixor__(self, other: Any) -> Any:
        return _extension.operators.ixor(self, other)

    def __ilshift__(self, other: Any) -> Any:
        return _extension.operators.ilshift(self, other)

    def __irshift__(self, other: Any) -> Any:
        return _extension.operators.irshift(self, other)

    def __lt__(self, other: Any) -> Any:
        return _extension.operators.lt(self, other)

    def __le__(self, other: Any) -> Any:
        return _extension.operators.le(self, other)

    def __gt__(self, other: Any) -> Any:
        return _extension.operators.gt(self, other)

    def __ge__(self, other: Any) -> Any:
        return _extension.operators.ge(self, other)

    def __getitem__(self, other: Any) -> Any:
        return _extension.operators.getitem(self, other)

    def __eq__(self, other: object) -> Any:
        return _extension.operators.eq(self, other)

    def __ne__(self, other: object) -> Any:
        return _extension.operators.ne(self, other)

    def __setitem__(self, key: Any, value: Any) -> None:
        _extension.operators.setitem(self, key, value)

    def __neg__(self) -> Any:
        return _extension.operators.neg(self)

    def __pos__(self) -> Any:
        return _extension.operators.pos(self)

    def __abs__(self) -> Any:
        return _extension.operators.abs_(self)

    def __invert__(self) -> Any:
        return _extension.operators.invert(self)

    def __bool__(self) -> bool:
        return _extension.operators.bool_(self)

    def __int__(self) -> int:
        return _extension.operators.int_(self)

    def __float__(self) -> float:
        return _extension.operators.float_(self)

    def __complex__(self) -> complex:
        return _extension.operators.complex_(self)

    def __index__(self) -> int:
        return _extension.operators.index(self)

    def reshape(self, *shape: Any, unlink: bool = False) -> Any:
        """Return a Variable of the same elements in a new shape (a tuple, ints, ``-1``).

        With ``unlink=True`` (nnabla) the result shares the data but has no creator, so
        no gradient flows back through it.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> agnograd.Variable(np.arange(6.0)).reshape(2, -1).shape
        (2, 3)
        >>> agnograd.Variable(np.arange(6.0)).reshape((3, 2), unlink=True).creator is None
        True
        """
        if len(shape) == 1 and isinstance(shape[0], tuple | list):
            shape = tuple(shape[0])
        return _extension.operators.reshape(self, shape, unlink)

    def transpose(self, *axes: Any) -> Any:
        """Permute the axes (reverse them when none are given, or ``None``).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> agnograd.Variable(np.zeros((1, 2, 3))).transpose(2, 0, 1).shape
        (3, 1, 2)
        """
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], tuple | list)):
            axes = () if axes[0] is None else tuple(axes[0])  # x.transpose(None): NumPy's
        return _extension.operators.transpose(self, axes or None)

    @property
    def T(self) -> Any:  # noqa: N802 - the standard's name
        """Transposition (axes reversed).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> agnograd.Variable(np.zeros((2, 3))).T.shape
        (3, 2)
        """
        return _extension.operators.transpose(self, None)

    @property
    def mT(self) -> Any:  # noqa: N802 - the standard's name
        """Transposition of the last two axes.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> agnograd.Variable(np.zeros((4, 2, 3))).mT.shape
        (4, 3, 2)
        """
        return _extension.operators.matrix_transpose(self)

    def __dlpack__(
        self,
        /,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: Any = None,
        copy: bool | None = None,
    ) -> Any:
        """The data's DLPack capsule (the standard's ``__dlpack__``).

        Refused with ``BufferError`` while a gradient is expected, like NumPy's
        conversion: the importing library would compute without agnograd, and the
        gradient would silently be lost. Only the arguments given are passed on, so
        libraries that predate the newer ones (``max_version``, ``dl_device``,
        ``copy``) still answer.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> np.from_dlpack(agnograd.Variable(np.ones(2), requires_grad=False))
        array([1., 1.])
        >>> np.from_dlpack(agnograd.Variable(np.ones(2)))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        BufferError: DLPack export of Variable ((2), float64, numpy), which requires a gradient: ...
        """
        if self._node.requires_grad:
            raise BufferError(
                f"DLPack export of {self._describe()}, which requires a gradient: the "
                "importing library (numpy.from_dlpack, torch.from_dlpack, torch.as_tensor, "
                "...) would compute without agnograd and the gradient would be lost. Use "
                "the differentiable namespace (x.__array_namespace__().from_dlpack or "
                "asarray, which accept a device), or take x.array explicitly"
            )
        given = {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
        return self._data.__dlpack__(**{k: v for k, v in given.items() if v is not None})

    def __dlpack_device__(self) -> Any:
        """The data's DLPack device (the standard's ``__dlpack_device__``)."""
        return self._data.__dlpack_device__()


def bind(**functions: Any) -> None:
    """Make the operators named (``__add__=f``) call ``f(self, other)`` directly.

    ``agnograd.functions._operators`` binds the arithmetic operators, the hottest
    path of all, so that ``x * 2`` spends no call and lookups on the extension point.
    """
    for name, function in functions.items():
        assert callable(getattr(Operators, name, None)), name  # an operator defined above
        setattr(Operators, name, function)
