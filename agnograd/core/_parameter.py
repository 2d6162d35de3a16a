"""``Parameter``: a Variable that an initializer fills once its shape is known (Chainer)."""

from __future__ import annotations

import copy
import weakref
from typing import Any

from agnograd.backends import _backend
from agnograd.backends._device import Device, get_device
from agnograd.core import _initializers as initializers
from agnograd.core._variable import Variable, warn_zerograd

_MISSING_GRAD = (
    "the gradient of an uninitialised Parameter is not set yet; call initialize(shape) "
    "(it fills the gradient with NaN), or cleargrad() or zerograd() first"
)


class Parameter(Variable):
    """A Variable whose data an initializer makes, now or once its shape is known.

    Parameters
    ----------
    initializer : initializer, array, scalar or None
        What fills the data: an :mod:`agnograd.initializers` initializer or a
        function that fills the array it is given; a scalar (a constant); ``None``
        (NaN, so that reading a Parameter no one initialised shows). An array of any
        library without ``shape`` is the data itself, as ``Variable(array)`` takes it;
        with ``shape``, a constant broadcast to it.
    shape : int or tuple of int, optional
        Make the data now, of this shape; without it the Parameter stays
        uninitialised until :meth:`initialize` (or :meth:`copydata`,
        :meth:`addgrad`).
    name : str, optional

    Notes
    -----
    Data and gradient are made on NumPy unless :meth:`to_device` chose another device
    (or library) while the Parameter was uninitialised; then they are made there. The
    gradient starts as NaN, or as ``None`` after :meth:`cleargrad`, or as zeros after
    :meth:`zerograd`; reading it before either, while uninitialised, raises
    ``RuntimeError``. Copies (``copy.copy``) of an uninitialised Parameter share the
    data that :meth:`initialize` makes on any of them (Chainer's ``link.copy()``).
    Chainer's ``update_rule`` is kept and called by :meth:`update`, but agnograd has
    no optimizers of its own.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> from agnograd import initializers
    >>> w = agnograd.Parameter(initializers.Constant(0.5, dtype=np.float32))
    >>> w.array is None, w.dtype
    (True, dtype('float32'))
    >>> w.initialize((2,))
    >>> w.array, w.grad
    (array([0.5, 0.5], dtype=float32), array([nan, nan], dtype=float32))
    >>> agnograd.Parameter(2.0, (3,)).array
    array([2., 2., 2.], dtype=float32)
    """

    __slots__ = (
        "_copies",
        "_grad_initializer",
        "_grad_valid",
        "_initial_device",
        "initializer",
        "update_rule",
    )

    def __init__(self, initializer: Any = None, shape: Any = None, name: str | None = None) -> None:
        self.update_rule: Any = None
        self._initial_device: Device | None = None
        self._copies: list[weakref.ref[Parameter]] | None = None
        self._grad_initializer: Any = None
        self._grad_valid = True
        if initializer is None:
            initializer = initializers.NaN()
        elif type(initializer) in _backend.SCALARS:
            initializer = initializers.Constant(initializer)
        if shape is None:
            if _backend.is_array(initializer):
                super().__init__(initializer, name=name)  # the data itself
            else:
                super().__init__(None, name=name)
                self._grad_initializer = initializers.NaN()
                self._grad_valid = False
        else:
            device = None
            if _backend.is_array(initializer):
                device = get_device(_backend.as_array(initializer))
                initializer = initializers.Constant(initializer)
            data = initializers.generate_array(initializer, shape, device=device)
            grad = _backend.raw_namespace(data).full_like(data, float("nan"))
            super().__init__(data, name=name, grad=grad)
        self.initializer = initializer

    # -- initialisation ---------------------------------------------------------

    def initialize(self, shape: Any) -> None:
        """Make the data, of ``shape``, with the initializer, and the gradient (NaN,
        or zeros after :meth:`zerograd`, or none after :meth:`cleargrad`), on the
        device chosen by :meth:`to_device` (NumPy by default).

        Copies of this Parameter that are still uninitialised take the same data.
        """
        device = self._device_before_data()
        data = initializers.generate_array(self.initializer, shape, device=device)
        for param in self._group():
            if param._data is None or param is self:
                param._fill(data)

    def _fill(self, data: Any) -> None:
        self.array = data
        grad_init = self._grad_initializer
        grad = None
        if grad_init is not None:
            grad = initializers.generate_array(
                grad_init, tuple(data.shape), dtype=data.dtype, device=get_device(data)
            )
        self._set_grad_array(grad)
        self._grad_valid = True

    def _set_grad_array(self, grad: Any) -> None:
        if grad is None:
            self._grad_var = None
        else:
            Variable.grad.fset(self, grad)  # type: ignore[attr-defined]

    def _group(self) -> list[Parameter]:
        """This Parameter and its live copies made while it was uninitialised."""
        if self._copies is None:
            return [self]
        return [p for p in (ref() for ref in self._copies) if p is not None]

    def _device_before_data(self) -> Device:
        return self._initial_device or get_device("@numpy")

    # -- what an uninitialised Parameter knows ----------------------------------

    @property
    def dtype(self) -> Any:
        """The data's dtype; before initialisation, the initializer's (in the library
        of the device chosen), else ``RuntimeError``."""
        if self._data is not None or self._node.dtype is not None:
            return super().dtype
        own = getattr(self.initializer, "dtype", None)
        if own is None:
            raise RuntimeError(
                "Parameter.dtype: the Parameter is uninitialised and its initializer names "
                "no dtype; give the initializer a dtype or call initialize(shape) first"
            )
        device = self._device_before_data()
        dtype = initializers._resolve_dtype(own, None, device.xp)
        # As the data will have it (NumPy's arrays say dtype('float32'), not float32).
        return device.xp.empty((0,), dtype=dtype, device=device.native).dtype

    @property
    def xp(self) -> Any:
        """The namespace of the data, or of the device chosen for it (NumPy's)."""
        if self._data is None:
            return self._device_before_data().xp
        return super().xp

    @property
    def device(self) -> Any:
        """The data's :class:`~agnograd.Device`, or where :meth:`initialize` will put it."""
        if self._data is None:
            return self._device_before_data()
        return super().device

    @property
    def grad(self) -> Any:
        """Gradient array, or ``None``; ``RuntimeError`` while it is not set yet (see
        the class's notes)."""
        if not self._grad_valid:
            raise RuntimeError(f"Parameter.grad: {_MISSING_GRAD}")
        return Variable.grad.fget(self)  # type: ignore[attr-defined]

    @grad.setter
    def grad(self, g: Any) -> None:
        Variable.grad.fset(self, g)  # type: ignore[attr-defined]
        self._grad_valid = True

    @property
    def grad_var(self) -> Variable | None:
        """Gradient as a Variable; ``RuntimeError`` while it is not set yet."""
        if not self._grad_valid:
            raise RuntimeError(f"Parameter.grad_var: {_MISSING_GRAD}")
        return self._grad_var

    @grad_var.setter
    def grad_var(self, g: Variable | None) -> None:
        Variable.grad_var.fset(self, g)  # type: ignore[attr-defined]
        self._grad_valid = True

    def cleargrad(self) -> None:
        """Clear the gradient; an uninitialised Parameter will get none either."""
        super().cleargrad()
        if self._data is None:
            self._grad_initializer = None
        self._grad_valid = True

    def zerograd(self) -> None:
        """Fill the gradient with zeros (deprecated: use :meth:`cleargrad`); an
        uninitialised Parameter gets zeros when it is initialised."""
        warn_zerograd()
        if self._data is None:
            self._grad_initializer = initializers.Zero()
        else:
            self._grad_var = Variable._new(self.xp.zeros_like(self._data), False)
        self._grad_valid = True

    def _missing(self) -> str:
        """What to say of this Parameter where an operation needs its data before it
        was initialised: which Parameter, and ``initialize``."""
        if self._node.creator_node is not None:  # not a leaf any more: a Variable's case
            return super()._missing()
        what = f"the Parameter {self.name!r}" if self.name else "a Parameter (unnamed)"
        return (
            f"{what} is uninitialised (its data is made once its shape is known): call "
            "initialize(shape) on it first, or copydata() from a Variable of that shape"
        )

    # -- devices: an uninitialised Parameter remembers where its data will go ------

    def to_device(self, device: Any, /, *, stream: Any = None) -> Parameter:
        """As :meth:`Variable.to_device`; an uninitialised Parameter remembers ``device``
        for :meth:`initialize`."""
        if self._data is None:
            self._initial_device = get_device(device)
            return self
        super().to_device(device, stream=stream)
        return self

    def to_cpu(self) -> Parameter:
        """As :meth:`Variable.to_cpu`, for an uninitialised Parameter too."""
        if self._data is None:
            self._initial_device = self._probe().to_cpu().device
            return self
        super().to_cpu()
        return self

    def to_gpu(self, device: Any = None) -> Parameter:
        """As :meth:`Variable.to_gpu`, for an uninitialised Parameter too."""
        if self._data is None:
            self._initial_device = self._probe().to_gpu(device).device
            return self
        super().to_gpu(device)
        return self

    def _probe(self) -> Variable:
        """An empty Variable where the data will go: it finds the device that
        ``to_cpu``/``to_gpu`` would move data to, with their errors."""
        here = self._device_before_data()
        return Variable(here.xp.zeros((0,), device=here.native), requires_grad=False)

    # -- data from other Variables initialise an uninitialised Parameter ----------

    def copydata(self, var: Variable) -> None:
        """As :meth:`Variable.copydata`; an uninitialised Parameter on either side is
        initialised first (with the other's shape)."""
        if self._data is None and var._data is not None:
            self.initialize(tuple(var._data.shape))
        super().copydata(var)

    def addgrad(self, var: Variable) -> None:
        """As :meth:`Variable.addgrad`; an uninitialised Parameter is initialised first."""
        if self._data is None and var._data is not None:
            self.initialize(tuple(var._data.shape))
        super().addgrad(var)

    def update(self) -> None:
        """Call ``update_rule.update(self)`` (Chainer's optimizers), if one is set."""
        if self.update_rule is not None:
            self.update_rule.update(self)

    # -- copying and pickling -----------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        self._refuse_copy_of_non_leaf("pickling")
        return (_rebuild, (self._state(self._data, self._grad_var),))

    def __copy__(self) -> Parameter:
        self._refuse_copy_of_non_leaf("copy.copy() of")
        new = _rebuild(self._state(self._data, self._grad_var))
        if self._data is None:
            if self._copies is None:
                self._copies = [weakref.ref(self)]
            self._copies.append(weakref.ref(new))
            new._copies = self._copies
        return new

    def __deepcopy__(self, memo: dict[int, Any]) -> Parameter:
        self._refuse_copy_of_non_leaf("copy.deepcopy() of")
        state = copy.deepcopy(self._state(self._data, self._grad_var), memo)
        new = memo[id(self)] = _rebuild(state)
        return new

    def _state(self, data: Any, grad_var: Variable | None) -> dict[str, Any]:
        device = self._initial_device
        return {
            "data": data,
            "grad": None if grad_var is None else grad_var._data,
            "name": self.name,
            "requires_grad": self.requires_grad,
            "initializer": self.initializer,
            "grad_initializer": self._grad_initializer,
            "grad_valid": self._grad_valid,
            "device": None if device is None else device.name,
            "update_rule": self.update_rule,
            "persistent": self._node.persistent,
        }


def _rebuild(state: dict[str, Any]) -> Parameter:
    data = state["data"]
    param = Parameter(data if data is not None else state["initializer"], name=state["name"])
    param.initializer = state["initializer"]
    if data is not None:
        param.requires_grad = state["requires_grad"]
    param._set_grad_array(state["grad"])
    param._grad_initializer = state["grad_initializer"]
    param._grad_valid = state["grad_valid"]
    param._initial_device = None if state["device"] is None else get_device(state["device"])
    param.update_rule = state["update_rule"]
    param._node.persistent = state.get("persistent", False)  # absent in older pickles
    return param
