"""One call of a function under test (:class:`FunctionCase`) and the registry of the
input domains that draw them, keyed by the array API standard's names.

A domain draws inputs where its function is smooth and well-conditioned (``log`` on
positive numbers, a divisor away from zero, matrices far from singular) and the
other arguments of one call. Kinks that remain possible (``maximum`` of equal
values) are left to ``detect_nondifferentiable``. The domains themselves live in
``_domains.py`` (elementwise, statistical, manipulation, searching, sorting,
indexing) and ``_domains_linalg.py`` (linear algebra and FFT).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import array_api_compat
import numpy
from hypothesis import strategies as st

from agnograd.backends._backend import dtype_name


@dataclass(frozen=True)
class FunctionCase:
    """One call of a function: its array inputs and the other arguments.

    ``case(*xs)`` calls ``case.function(*xs, *case.args, **case.kwargs)`` -- with the
    inputs packed in one list when ``case.sequence`` (``concat``, ``stack``). A domain
    may route the inputs through ``pre`` first (``x @ x.mT`` makes a well-conditioned
    matrix a valid input of ``cholesky``) and the outputs through ``post`` (``U * U`` keeps
    only what the sign convention of ``svd`` does not decide).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> from agnograd.testing.strategies import FunctionCase
    >>> case = FunctionCase("sum", (np.ones((2, 3)),), kwargs={"axis": 1}, function=F.sum)
    >>> case
    sum((2, 3) float64, axis=1)
    >>> case(*case.inputs)
    variable([3., 3.])
    """

    name: str
    inputs: tuple[Any, ...]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    sequence: bool = False
    function: Callable[..., Any] | None = None
    pre: Callable[..., tuple[Any, ...]] | None = None
    post: Callable[[Any], Any] | None = None

    def __call__(self, *xs: Any) -> Any:
        fn = self.function
        if fn is None:
            raise TypeError(f"FunctionCase {self.name}: no function to call")
        if self.pre is not None:
            xs = self.pre(*xs)
        if self.sequence:
            result = fn(list(xs), *self.args, **self.kwargs)
        else:
            result = fn(*xs, *self.args, **self.kwargs)
        return result if self.post is None else self.post(result)

    def with_function(self, function: Callable[..., Any]) -> FunctionCase:
        """The same call with another function (a backend's own, for reference)."""
        return dataclasses.replace(self, function=function)

    def with_inputs(self, inputs: tuple[Any, ...]) -> FunctionCase:
        """The same call on other inputs (moved to another device, say)."""
        return dataclasses.replace(self, inputs=inputs)

    def __repr__(self) -> str:
        parts = [
            f"({', '.join(map(str, x.shape))}{',' if len(x.shape) == 1 else ''}) "
            f"{dtype_name(x.dtype)}"
            for x in self.inputs
        ]
        return self._format(parts)

    def describe(self) -> str:
        """The call with the input values, exactly (what hypothesis reports)."""
        parts = []
        for x in self.inputs:
            values = values_text(x)
            # A 0-d value gets parentheses: float64(0.), beside float64[0., 1.].
            parts.append(f"{dtype_name(x.dtype)}{values if x.shape else f'({values})'}")
        return self._format(parts)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.describe())

    def _format(self, parts: list[str]) -> str:
        if self.sequence:
            parts = [f"[{', '.join(parts)}]"]
        parts += [_short(a) for a in self.args]
        parts += [f"{k}={_short(v)}" for k, v in self.kwargs.items()]
        call = f"{self.name}({', '.join(parts)})"
        if self.pre is not None:
            call = f"{call} on {getattr(self.pre, '__name__', 'pre')}(inputs)"
        if self.post is not None:
            call = f"{getattr(self.post, '__name__', 'post')}({call})"
        return call


def values_text(x: Any) -> str:
    """The values of an array of any library, exactly, as NumPy writes them."""
    from agnograd.testing._assertions import to_numpy

    return numpy.array2string(to_numpy(x), separator=", ", floatmode="unique", threshold=1000)


def _short(value: Any) -> str:
    if isinstance(value, type) and value.__module__ != "builtins":
        # A scalar type such as np.float32 (astype's dtype), whose shape and dtype
        # attributes are descriptors of the class.
        return dtype_name(value)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"<array {tuple(value.shape)} {dtype_name(value.dtype)}>"
    if type(value).__module__ == "builtins":
        return repr(value)
    return dtype_name(value)  # a dtype object of some library


def _representable(value: float, bits: int, *, up: bool) -> float:
    """``value`` rounded inwards to a float of ``bits`` bits (hypothesis wants bounds
    the dtype can hold exactly)."""
    kind: Any = {16: numpy.float16, 32: numpy.float32}.get(bits)
    if kind is None:
        return value
    rounded = kind(value)
    if up and float(rounded) < value:
        rounded = numpy.nextafter(rounded, kind(numpy.inf))
    elif not up and float(rounded) > value:
        rounded = numpy.nextafter(rounded, kind(-numpy.inf))
    return float(rounded)


class Context:
    """What a domain needs to draw inputs: the namespace, dtype and device."""

    def __init__(self, xp: Any, dtype: Any, device: Any, xps: Any) -> None:
        self.xp = xp
        self.dtype = dtype
        self.device = device
        self.xps = xps
        self.complex_dtype = xp.complex128 if dtype == xp.float64 else xp.complex64

    def shape(
        self, *, min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4
    ) -> st.SearchStrategy[tuple[int, ...]]:
        sides = st.integers(min_side, max_side)
        return st.lists(sides, min_size=min_dims, max_size=max_dims).map(tuple)

    def elements(self, low: float, high: float, *, both_signs: bool = False) -> Any:
        """Values in ``[low, high]`` (and ``[-high, -low]`` with ``both_signs``)."""
        bits = int(self.xp.finfo(self.dtype).bits)

        def interval(lo: float, hi: float) -> Any:
            lo, hi = _representable(lo, bits, up=True), _representable(hi, bits, up=False)
            return self.xps.from_dtype(
                self.dtype, min_value=lo, max_value=hi, allow_subnormal=False
            )

        if not both_signs:
            return interval(low, high)
        return interval(low, high) | interval(-high, -low)

    def array(
        self,
        shape: Any,
        low: float = -2.0,
        high: float = 2.0,
        *,
        both_signs: bool = False,
        unique: bool = False,
    ) -> st.SearchStrategy[Any]:
        """Real arrays of the context's dtype; ``unique`` avoids ties (kinks of sort)."""
        elements = self.elements(low, high, both_signs=both_signs)
        strategy = self.xps.arrays(self.dtype, shape, elements=elements, unique=unique)
        return strategy.map(self.place)

    def complex_array(self, shape: Any, low: float = -2.0, high: float = 2.0) -> Any:
        """Complex arrays whose real and imaginary parts lie in ``[low, high]``."""
        from agnograd.testing._numerical import from_host, host64

        elements = self.elements(low, high)

        @st.composite
        def draw(draw: Any) -> Any:
            size = draw(shape) if isinstance(shape, st.SearchStrategy) else shape
            parts = self.xps.arrays(self.dtype, size, elements=elements)
            real, imag = host64(draw(parts)), host64(draw(parts))
            return from_host(self.xp, real + 1j * imag, self.complex_dtype, self.device)

        return draw()

    def typed_array(self, dtype: Any, shape: Any, elements: Any = None) -> st.SearchStrategy[Any]:
        return self.xps.arrays(dtype, shape, elements=elements).map(self.place)

    def index_dtype(self) -> Any:
        info = self.xp.__array_namespace_info__()
        return info.default_dtypes(device=self.device)["indexing"]

    def place(self, a: Any) -> Any:
        if self.device is None:
            return a
        return array_api_compat.to_device(a, self.device)


Domain = Callable[[Context, str], st.SearchStrategy[FunctionCase]]
_DOMAINS: dict[str, Domain] = {}


def register_domain(*names: str) -> Callable[[Domain], Domain]:
    """Register the decorated ``domain(ctx, name) -> strategy`` for ``names``."""

    def decorate(domain: Domain) -> Domain:
        for name in names:
            _DOMAINS[name] = domain
        _kept_cases.cache_clear()  # strategies built from the domains replaced
        return domain

    return decorate


def _load() -> None:
    # Importing the modules registers their domains.
    from agnograd.testing import _domains, _domains_linalg  # noqa: F401


def registered_domains() -> list[str]:
    """Names of the functions that have an input domain.

    Examples
    --------
    >>> from agnograd.testing import strategies as ags
    >>> "log" in ags.registered_domains(), "linalg.solve" in ags.registered_domains()
    (True, True)
    """
    _load()
    return sorted(_DOMAINS)


def function_inputs(
    xp: Any,
    name: str,
    *,
    dtype: Any = None,
    device: Any = None,
    function: Callable[..., Any] | None = None,
) -> st.SearchStrategy[FunctionCase]:
    """Inputs of the function ``name`` drawn from its registered domain.

    ``name`` is the standard's name (``"log"``, ``"linalg.solve"``, ``"fft.rfft"``);
    ``function`` defaults to agnograd's differentiable ``name`` (the entry of its
    namespace table, else ``agnograd.functions.<name>``). Real inputs have ``dtype``
    (default: float64 where the device has it, else float32), complex ones the
    complex dtype of the same precision.

    Examples
    --------
    >>> import numpy as np
    >>> from hypothesis import given, settings
    >>> from agnograd.testing import check_backward, strategies as ags
    >>> @settings(max_examples=5, database=None)
    ... @given(case=ags.function_inputs(np, "log"))
    ... def test_log(case):
    ...     check_backward(case, case.inputs, np.ones(case.inputs[0].shape))
    >>> test_log()
    """
    from agnograd.testing._backends import default_float
    from agnograd.testing.strategies import _compliant, _resolve_dtype

    _load()
    if name not in _DOMAINS:
        raise KeyError(
            f"function_inputs: no input domain is registered for {name!r}; registered: "
            f"{', '.join(registered_domains())}"
        )
    if function is None:
        function = _agnograd_function(name)
    dtype = default_float(xp, device) if dtype is None else _resolve_dtype(xp, dtype, device)
    key = (_compliant(xp), name, dtype, device, function)
    try:
        hash(key)
    except TypeError:  # an unhashable device or function: built for this call alone
        return _cases(*key)
    return _kept_cases(*key)


def _cases(
    xp: Any, name: str, dtype: Any, device: Any, function: Callable[..., Any]
) -> st.SearchStrategy[FunctionCase]:
    from agnograd.testing.strategies import array_api_strategies

    ctx = Context(xp, dtype, device, array_api_strategies(xp))
    domain = _DOMAINS[name](ctx, name)

    # A composite, so that hypothesis reports a failing case by its describe()
    # rather than by the chain of strategies that built it.
    @st.composite
    def cases(draw: Any) -> FunctionCase:
        return draw(domain).with_function(function)

    return cases()


# A strategy draws the same way each time it is drawn from, and tests draw
# ``function_inputs(xp, name)`` inside the test, at each example: building it anew
# costs more than drawing from it (hypothesis reads the source of each composite it
# wraps). Kept per namespace, name, dtype, device and function, all that it depends on.
_kept_cases = functools.lru_cache(maxsize=4096)(_cases)


def _agnograd_function(name: str) -> Callable[..., Any]:
    from agnograd import functions
    from agnograd.functions._table import DIFFERENTIABLE

    if name in DIFFERENTIABLE:
        return DIFFERENTIABLE[name]
    if hasattr(functions, name):
        return getattr(functions, name)
    raise KeyError(f"function_inputs: agnograd has no differentiable function {name!r}")
