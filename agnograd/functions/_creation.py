"""Creation functions: constants on the namespace's backend, plus ``tril``/``triu``.

Functions that take no array (``zeros``, ``arange``, ...) need to know the
backend, so the namespace binds them to its raw namespace (:class:`Bound`).
"""

from __future__ import annotations

from typing import Any

from agnograd.functions._core import Bound, constant, nondifferentiable


def _constant_maker(name: str) -> Bound:
    def bind(raw: Any) -> Any:
        fn = getattr(raw, name)

        def apply(*args: Any, **kwargs: Any) -> Any:
            return constant(fn(*args, **kwargs))

        apply.__name__ = apply.__qualname__ = name
        apply.__doc__ = f"``{name}`` of the backend, as a Variable that requires no gradient."
        return apply

    return Bound(bind)


DIFFERENTIABLE: dict[str, Any] = {}
NON_DIFFERENTIABLE: dict[str, Any] = {
    **{
        name: _constant_maker(name)
        for name in ("arange", "empty", "eye", "full", "linspace", "ones", "zeros")
    },
    **{
        name: nondifferentiable(name, f"``{name}`` of the backend; the result has no gradient.")
        for name in ("empty_like", "full_like", "ones_like", "zeros_like")
    },
}
UNSUPPORTED: dict[str, str] = {}
