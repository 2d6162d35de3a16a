"""Input domains of the standard's elementwise, statistical, manipulation, searching,
sorting and indexing functions (linear algebra and FFT: ``_domains_linalg.py``)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from agnograd.functions import _elementwise
from agnograd.testing._cases import Context, FunctionCase, register_domain

# -- elementwise ---------------------------------------------------------------------

# The domains of the chapter's rows (agnograd/functions/_rows.py): an interval per
# operand where the function is smooth and well-conditioned, or complex inputs only.
# Extras (``softplus``) are not the standard's: the conformance runner has no
# reference for them.
_ROWS = {
    name: row
    for name, row in _elementwise.CHAPTER.items()
    if row.standard and row.differentiable and row.domain is not None
}


@register_domain(*_ROWS)
def _elementwise_row(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    domain = _ROWS[name].domain
    assert domain is not None
    if domain == "complex":
        return ctx.complex_array(ctx.shape()).map(lambda z: FunctionCase(name, (z,)))
    if len(domain) == 1:
        ((low, high, both),) = domain
        return ctx.array(ctx.shape(), low, high, both_signs=both).map(
            lambda x: FunctionCase(name, (x,))
        )
    (l1, h1, b1), (l2, h2, b2) = domain

    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shapes = draw(ctx.xps.mutually_broadcastable_shapes(2, max_dims=3, max_side=4))
        s1, s2 = shapes.input_shapes
        x1 = draw(ctx.array(s1, l1, h1, both_signs=b1))
        x2 = draw(ctx.array(s2, l2, h2, both_signs=b2))
        return FunctionCase(name, (x1, x2))

    return draw()


@register_domain("clip")
def _clip(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    return ctx.array(ctx.shape()).map(
        lambda x: FunctionCase(name, (x,), kwargs={"min": -1.0, "max": 1.0})
    )


# -- statistical ---------------------------------------------------------------------


def _axes(ndim: int) -> st.SearchStrategy[Any]:
    if ndim == 0:
        return st.none()
    single = st.integers(-ndim, ndim - 1)
    several = st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple)
    return st.none() | single | several


@register_domain("sum", "mean", "prod", "max", "min", "var", "std")
def _reduction(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    low = 0.5 if name == "prod" else -2.0
    # Ties are kinks of max and min.
    unique = name in ("max", "min")

    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape())
        x = draw(ctx.array(shape, low, 2.0, unique=unique))
        kwargs = {"axis": draw(_axes(len(shape))), "keepdims": draw(st.booleans())}
        return FunctionCase(name, (x,), kwargs=kwargs)

    return draw()


@register_domain("cumulative_sum", "cumulative_prod")
def _cumulative(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    low = 0.5 if name == "cumulative_prod" else -2.0

    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape(min_dims=1))
        x = draw(ctx.array(shape, low, 2.0))
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        kwargs = {"axis": axis, "include_initial": draw(st.booleans())}
        return FunctionCase(name, (x,), kwargs=kwargs)

    return draw()


# -- manipulation --------------------------------------------------------------------


@register_domain("astype")
def _astype(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    xp = ctx.xp
    target = xp.float32 if ctx.dtype == xp.float64 else ctx.dtype
    return ctx.array(ctx.shape()).map(lambda x: FunctionCase(name, (x,), args=(target,)))


@register_domain("broadcast_to")
def _broadcast_to(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shapes = draw(ctx.xps.mutually_broadcastable_shapes(2, max_dims=3, max_side=4))
        x = draw(ctx.array(shapes.input_shapes[0]))
        return FunctionCase(name, (x,), kwargs={"shape": shapes.result_shape})

    return draw()


@register_domain("reshape")
def _reshape(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape())
        size = 1
        for s in shape:
            size *= s
        target = draw(
            st.sampled_from([(size,), (-1,), (*shape, 1), tuple(reversed(shape)), (1, size)])
        )
        return FunctionCase(name, (draw(ctx.array(shape)),), kwargs={"shape": target})

    return draw()


@register_domain("permute_dims")
def _permute_dims(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape())
        axes = tuple(draw(st.permutations(range(len(shape)))))
        return FunctionCase(name, (draw(ctx.array(shape)),), kwargs={"axes": axes})

    return draw()


@register_domain("matrix_transpose", "linalg.matrix_transpose")
def _matrix_transpose(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    return ctx.array(ctx.shape(min_dims=2, max_dims=4)).map(lambda x: FunctionCase(name, (x,)))


@register_domain("expand_dims")
def _expand_dims(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape())
        axis = draw(st.integers(-len(shape) - 1, len(shape)))
        return FunctionCase(name, (draw(ctx.array(shape)),), kwargs={"axis": axis})

    return draw()


@register_domain("squeeze")
def _squeeze(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        base = list(draw(ctx.shape(max_dims=2, min_side=2)))
        ones = draw(st.integers(1, 2))
        for _ in range(ones):
            base.insert(draw(st.integers(0, len(base))), 1)
        unit = [i for i, s in enumerate(base) if s == 1]
        axes = tuple(sorted(draw(st.lists(st.sampled_from(unit), min_size=1, unique=True))))
        axis = axes[0] if len(axes) == 1 and draw(st.booleans()) else axes
        return FunctionCase(name, (draw(ctx.array(tuple(base))),), kwargs={"axis": axis})

    return draw()


@register_domain("concat", "stack")
def _join(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        n = draw(st.integers(1, 3))
        shape = list(draw(ctx.shape(min_dims=1 if name == "concat" else 0)))
        ndim = len(shape)
        if name == "concat":
            axis = draw(st.integers(-ndim, ndim - 1))
            inputs = []
            for _ in range(n):
                shape[axis] = draw(st.integers(1, 3))
                inputs.append(draw(ctx.array(tuple(shape))))
        else:
            axis = draw(st.integers(-ndim - 1, ndim))
            inputs = [draw(ctx.array(tuple(shape))) for _ in range(n)]
        return FunctionCase(name, tuple(inputs), kwargs={"axis": axis}, sequence=True)

    return draw()


@register_domain("flip")
def _flip(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape())
        return FunctionCase(
            name, (draw(ctx.array(shape)),), kwargs={"axis": draw(_axes(len(shape)))}
        )

    return draw()


@register_domain("roll")
def _roll(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape(min_dims=1))
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        kwargs = {"shift": draw(st.integers(-5, 5)), "axis": axis}
        return FunctionCase(name, (draw(ctx.array(shape)),), kwargs=kwargs)

    return draw()


@register_domain("moveaxis")
def _moveaxis(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape(min_dims=1))
        ndim = len(shape)
        source, destination = draw(st.integers(0, ndim - 1)), draw(st.integers(-ndim, ndim - 1))
        return FunctionCase(name, (draw(ctx.array(shape)),), args=(source, destination))

    return draw()


@register_domain("tile")
def _tile(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape(max_dims=2))
        reps = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
        return FunctionCase(name, (draw(ctx.array(shape)),), args=(reps,))

    return draw()


@register_domain("repeat")
def _repeat(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape(min_dims=1))
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        kwargs = {"axis": axis}
        return FunctionCase(
            name, (draw(ctx.array(shape)),), args=(draw(st.integers(1, 3)),), kwargs=kwargs
        )

    return draw()


@register_domain("unstack")
def _unstack(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape(min_dims=1))
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        return FunctionCase(name, (draw(ctx.array(shape)),), kwargs={"axis": axis})

    return draw()


# -- searching and indexing ------------------------------------------------------------


@register_domain("where")
def _where(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shapes = draw(ctx.xps.mutually_broadcastable_shapes(3, max_dims=3, max_side=4))
        sc, s1, s2 = shapes.input_shapes
        condition = draw(ctx.typed_array(ctx.xp.bool, sc))
        return FunctionCase(name, (condition, draw(ctx.array(s1)), draw(ctx.array(s2))))

    return draw()


@register_domain("take")
def _take(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape(min_dims=1))
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        n = draw(st.integers(1, 5))
        elements = st.integers(0, shape[axis] - 1)
        indices = draw(ctx.typed_array(ctx.index_dtype(), (n,), elements))
        return FunctionCase(name, (draw(ctx.array(shape)), indices), kwargs={"axis": axis})

    return draw()


@register_domain("broadcast_arrays")
def _broadcast_arrays(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        n = draw(st.integers(1, 3))
        shapes = draw(ctx.xps.mutually_broadcastable_shapes(n, max_dims=3, max_side=3))
        return FunctionCase(name, tuple(draw(ctx.array(s)) for s in shapes.input_shapes))

    return draw()


@register_domain("meshgrid")
def _meshgrid(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        n = draw(st.integers(1, 3))
        inputs = tuple(draw(ctx.array((draw(st.integers(1, 3)),))) for _ in range(n))
        indexing = draw(st.sampled_from(["xy", "ij"]))
        return FunctionCase(name, inputs, kwargs={"indexing": indexing})

    return draw()


@register_domain("diff")
def _diff(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = list(draw(ctx.shape(min_dims=1)))
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        n = draw(st.integers(1, 2))
        shape[axis] = max(shape[axis], n + 1)
        kwargs = {"axis": axis, "n": n}
        return FunctionCase(name, (draw(ctx.array(tuple(shape))),), kwargs=kwargs)

    return draw()


@register_domain("tril", "triu")
def _triangle(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        x = draw(ctx.array(draw(ctx.shape(min_dims=2))))
        return FunctionCase(name, (x,), kwargs={"k": draw(st.integers(-2, 2))})

    return draw()


# -- sorting -------------------------------------------------------------------------


@register_domain("sort")
def _sort(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape(min_dims=1))
        x = draw(ctx.array(shape, unique=True))  # ties are kinks of sort
        kwargs = {
            "axis": draw(st.integers(-len(shape), len(shape) - 1)),
            "descending": draw(st.booleans()),
        }
        return FunctionCase(name, (x,), kwargs=kwargs)

    return draw()


@register_domain("take_along_axis")
def _take_along_axis(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape(min_dims=1))
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        index_shape = list(shape)
        index_shape[axis] = draw(st.integers(1, 4))
        elements = st.integers(0, shape[axis] - 1)
        indices = draw(ctx.typed_array(ctx.index_dtype(), tuple(index_shape), elements))
        return FunctionCase(name, (draw(ctx.array(shape)), indices), kwargs={"axis": axis})

    return draw()
