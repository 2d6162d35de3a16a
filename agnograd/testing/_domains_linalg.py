"""Input domains of the standard's linear algebra and FFT functions.

Matrix functions are differentiable only away from singular or degenerate inputs,
so these domains check the drawn matrices on the host (``hypothesis.assume``):
singular values away from zero for ``inv``, ``solve``, ``pinv`` and ``qr``, and apart
from each other for ``svd`` and the spectral norms; separated eigenvalues for
``eigh``, and for ``eig`` also well-conditioned eigenvectors. ``cholesky`` and
``eigh`` read a symmetric input, so they are called on ``x @ x.mT`` and
``(x + x.mT) / 2``, which every ``x`` maps into; ``svd`` and ``eigh`` decide the
signs of their vectors by convention, so only what the convention does not decide
(``U * U``, the values) is compared. ``eig`` decides a phase per eigenvector and
orders its eigenvalues as the backend does: its outputs are compared through sums
over the eigenpairs, which depend on neither (``V diag(w) V^H``, power sums of ``w``).
"""

from __future__ import annotations

from typing import Any

import array_api_compat
import numpy
from hypothesis import assume
from hypothesis import strategies as st

from agnograd.testing._cases import Context, FunctionCase, register_domain

_NORMS = ("backward", "ortho", "forward")


def _host(x: Any) -> numpy.ndarray:
    from agnograd.testing._numerical import host64

    return host64(x)


def _singular_values(x: Any) -> numpy.ndarray:
    return numpy.linalg.svd(_host(x), compute_uv=False)


def _well_conditioned(x: Any, floor: float = 0.3) -> None:
    """Reject matrices with a singular value below ``floor`` (near-singular)."""
    assume(bool(numpy.all(_singular_values(x) > floor)))


def _separated(values: numpy.ndarray, gap: float = 0.2) -> None:
    """Reject inputs whose sorted ``values`` (last axis) come closer than ``gap``."""
    values = numpy.sort(values, axis=-1)
    assume(bool(numpy.all(numpy.diff(values, axis=-1) > gap)))


# -- transforms of inputs and outputs ---------------------------------------------------


def gram(x: Any) -> tuple[Any, ...]:
    """``x @ x.mT``: symmetric, and positive definite for a well-conditioned ``x``."""
    xp = array_api_compat.array_namespace(x)
    return (xp.matmul(x, xp.matrix_transpose(x)),)


def symmetric(x: Any) -> tuple[Any, ...]:
    """``(x + x.mT) / 2``: a symmetric input for ``eigh`` and ``eigvalsh``."""
    xp = array_api_compat.array_namespace(x)
    return ((x + xp.matrix_transpose(x)) / 2,)


def without_signs_svd(result: Any) -> tuple[Any, ...]:
    """``(U * U, S, Vh * Vh)``: what does not depend on svd's choice of signs."""
    u, s, vh = result
    return (u * u, s, vh * vh)


def without_signs_eigh(result: Any) -> tuple[Any, ...]:
    """``(w, V * V)``: what does not depend on eigh's choice of signs."""
    w, v = result
    return (w, v * v)


def without_gauge_eig(result: Any) -> tuple[Any, ...]:
    """``(sum(w**2), V diag(w) V^H)``: what depends neither on the phase eig gives
    each (unit-norm) eigenvector nor on the order of the eigenpairs."""
    w, v = result
    xp = array_api_compat.array_namespace(w, v)
    vh = xp.conj(xp.matrix_transpose(v))
    return (xp.sum(w * w, axis=-1), (v * xp.expand_dims(w, axis=-2)) @ vh)


def power_sums(w: Any) -> tuple[Any, ...]:
    """``(sum(w**2), sum(w**3))``: what does not depend on the order of eigvals' ``w``."""
    xp = array_api_compat.array_namespace(w)
    return (xp.sum(w * w, axis=-1), xp.sum(w * w * w, axis=-1))


# -- linear algebra ------------------------------------------------------------------


@register_domain("matmul", "linalg.matmul")
def _matmul(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        n, k, m = (draw(st.integers(1, 3)) for _ in range(3))
        batch = draw(ctx.xps.mutually_broadcastable_shapes(2, max_dims=2, max_side=3))
        b1, b2 = batch.input_shapes
        kind = draw(st.sampled_from(["matrix", "vector-left", "vector-right", "vectors"]))
        s1 = (k,) if kind in ("vector-left", "vectors") else (*b1, n, k)
        s2 = (k,) if kind in ("vector-right", "vectors") else (*b2, k, m)
        return FunctionCase(name, (draw(ctx.array(s1)), draw(ctx.array(s2))))

    return draw()


@register_domain("vecdot", "linalg.vecdot")
def _vecdot(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        k = draw(st.integers(1, 4))
        shapes = draw(ctx.xps.mutually_broadcastable_shapes(2, max_dims=2, max_side=3))
        s1, s2 = ((*s, k) for s in shapes.input_shapes)
        return FunctionCase(name, (draw(ctx.array(s1)), draw(ctx.array(s2))))

    return draw()


@register_domain("tensordot", "linalg.tensordot")
def _tensordot(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        contracted = tuple(draw(ctx.shape(max_dims=2)))
        s1 = (*draw(ctx.shape(max_dims=2)), *contracted)
        s2 = (*contracted, *draw(ctx.shape(max_dims=2)))
        inputs = (draw(ctx.array(s1)), draw(ctx.array(s2)))
        return FunctionCase(name, inputs, kwargs={"axes": len(contracted)})

    return draw()


@register_domain("linalg.outer")
def _outer(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    vector = ctx.shape(min_dims=1, max_dims=1)
    return st.tuples(ctx.array(vector), ctx.array(vector)).map(lambda xs: FunctionCase(name, xs))


@register_domain("linalg.cross")
def _cross(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = list(draw(ctx.shape(max_dims=2, max_side=3)))
        position = draw(st.integers(0, len(shape)))
        shape.insert(position, 3)
        axis = position - len(shape)  # the standard wants a negative axis here
        inputs = (draw(ctx.array(tuple(shape))), draw(ctx.array(tuple(shape))))
        return FunctionCase(name, inputs, kwargs={"axis": axis})

    return draw()


@register_domain("linalg.diagonal", "linalg.trace")
def _diagonal(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        x = draw(ctx.array(draw(ctx.shape(min_dims=2))))
        return FunctionCase(name, (x,), kwargs={"offset": draw(st.integers(-2, 2))})

    return draw()


def _square(ctx: Context, draw: Any, *, min_side: int = 1) -> Any:
    n = draw(st.integers(min_side, 3))
    batch = draw(ctx.shape(max_dims=1, max_side=2))
    return draw(ctx.array((*batch, n, n)))


@register_domain("linalg.det", "linalg.slogdet", "linalg.inv", "linalg.matrix_power")
def _square_matrix(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        x = _square(ctx, draw)
        if name == "linalg.matrix_power":
            return FunctionCase(name, (x,), args=(draw(st.integers(0, 3)),))
        if name == "linalg.det" and x.shape[-1] > 1 and draw(st.booleans()):
            # Singular by construction (the first row repeated last), where det is
            # differentiable too. Not merely near singular: the second derivative of
            # a matrix of tiny entries is lost to rounding in any float arithmetic.
            x = ctx.xp.concat((x[..., :-1, :], x[..., :1, :]), axis=-2)
        else:  # log|det| and the inverse blow up near singular
            _well_conditioned(x)
        return FunctionCase(name, (x,))

    return draw()


@register_domain("linalg.solve")
def _solve(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        a = _square(ctx, draw)
        _well_conditioned(a)
        b = draw(ctx.array((*a.shape[:-1], draw(st.integers(1, 3)))))
        return FunctionCase(name, (a, b))

    return draw()


@register_domain("linalg.cholesky")
def _cholesky(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        x = _square(ctx, draw)
        _well_conditioned(x, 0.5)
        kwargs = {"upper": draw(st.booleans())}
        return FunctionCase(name, (x,), kwargs=kwargs, pre=gram)

    return draw()


@register_domain("linalg.eigh", "linalg.eigvalsh")
def _eigh(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        x = _square(ctx, draw)
        a = _host(x)
        _separated(numpy.linalg.eigvalsh((a + numpy.swapaxes(a, -1, -2)) / 2))
        post = without_signs_eigh if name == "linalg.eigh" else None
        return FunctionCase(name, (x,), pre=symmetric, post=post)

    return draw()


@register_domain("linalg.eig", "linalg.eigvals")
def _eig(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        n = draw(st.integers(1, 3))
        shape = (*draw(ctx.shape(max_dims=1, max_side=2)), n, n)
        x = draw(ctx.complex_array(shape) if draw(st.booleans()) else ctx.array(shape))
        # Eigenvalues apart in the complex plane (so a real x keeps its real and its
        # conjugate pairs under perturbation) and eigenvectors far from parallel.
        w, v = numpy.linalg.eig(_host(x))
        gaps = numpy.abs(w[..., :, None] - w[..., None, :]) + 10 * numpy.eye(n)
        assume(bool(numpy.all(gaps > 0.3)))
        assume(bool(numpy.all(numpy.linalg.cond(v) < 10)))
        # LAPACK balances first: an entry as tiny as 1e-212 next to ones gives
        # eigenvectors that do not satisfy A v = w v (a matrix no rule can follow).
        a = _host(x)
        assume(bool(numpy.allclose(a @ v, v * w[..., None, :], atol=1e-8)))
        post = without_gauge_eig if name == "linalg.eig" else power_sums
        return FunctionCase(name, (x,), post=post)

    return draw()


def _matrix(ctx: Context, draw: Any, *, tall: bool = False) -> Any:
    m, n = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    if tall and m < n:
        m, n = n, m
    batch = draw(ctx.shape(max_dims=1, max_side=2))
    return draw(ctx.array((*batch, m, n)))


@register_domain("linalg.qr", "linalg.pinv")
def _full_rank(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        x = _matrix(ctx, draw, tall=name == "linalg.qr")
        _well_conditioned(x)
        return FunctionCase(name, (x,))

    return draw()


@register_domain("linalg.svd", "linalg.svdvals")
def _svd(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        x = _matrix(ctx, draw)
        _well_conditioned(x, 0.2)
        _separated(_singular_values(x))
        if name == "linalg.svdvals":
            return FunctionCase(name, (x,))
        kwargs = {"full_matrices": False}  # the extra columns of U are any basis
        return FunctionCase(name, (x,), kwargs=kwargs, post=without_signs_svd)

    return draw()


@register_domain("linalg.matrix_norm")
def _matrix_norm(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        x = _matrix(ctx, draw)
        order = draw(st.sampled_from(["fro", "nuc", 2, -2, 1, -1, numpy.inf, -numpy.inf]))
        if order in ("nuc", 2, -2):
            _well_conditioned(x, 0.2)
            _separated(_singular_values(x))
        kwargs = {"keepdims": draw(st.booleans()), "ord": order}
        return FunctionCase(name, (x,), kwargs=kwargs)

    return draw()


@register_domain("linalg.vector_norm")
def _vector_norm(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape(min_dims=1))
        x = draw(ctx.array(shape, 0.1, 2.0, both_signs=True))
        ndim = len(shape)
        axis = draw(
            st.none()
            | st.integers(-ndim, ndim - 1)
            | st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple)
        )
        kwargs = {
            "axis": axis,
            "keepdims": draw(st.booleans()),
            "ord": draw(st.sampled_from([2, 1, 3, numpy.inf])),
        }
        return FunctionCase(name, (x,), kwargs=kwargs)

    return draw()


# -- FFT ---------------------------------------------------------------------------


def _signal(ctx: Context, draw: Any, shape: tuple[int, ...], complex_input: bool) -> Any:
    return draw(ctx.complex_array(shape) if complex_input else ctx.array(shape))


@register_domain("fft.fft", "fft.ifft", "fft.rfft", "fft.ihfft", "fft.irfft", "fft.hfft")
def _fft(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    # The standard's complex transforms take complex input only; rfft and ihfft real.
    complex_in = name not in ("fft.rfft", "fft.ihfft")
    to_real = name in ("fft.irfft", "fft.hfft")  # the default length is 2 (m - 1)

    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = list(draw(ctx.shape(min_dims=1, max_dims=2)))
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        if to_real:
            shape[axis] = max(shape[axis], 2)
        m = shape[axis]
        x = _signal(ctx, draw, tuple(shape), complex_in)
        lengths = [None, 2 * m - 1] if to_real else [None, m + 1, max(m - 1, 1)]
        kwargs = {
            "n": draw(st.sampled_from(lengths)),
            "axis": axis,
            "norm": draw(st.sampled_from(_NORMS)),
        }
        return FunctionCase(name, (x,), kwargs=kwargs)

    return draw()


@register_domain("fft.fftn", "fft.ifftn", "fft.rfftn", "fft.irfftn")
def _fftn(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    complex_in = name != "fft.rfftn"
    to_real = name == "fft.irfftn"

    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = list(draw(ctx.shape(min_dims=1, max_dims=3, max_side=3)))
        ndim = len(shape)
        axes = draw(
            st.none() | st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True)
        )
        last = (axes or list(range(ndim)))[-1]
        if to_real:
            shape[last] = max(shape[last], 2)
        x = _signal(ctx, draw, tuple(shape), complex_in)
        kwargs: dict[str, Any] = {"norm": draw(st.sampled_from(_NORMS))}
        if axes is not None:
            kwargs["axes"] = tuple(axes)
            if not to_real and draw(st.booleans()):
                kwargs["s"] = tuple(shape[a] + draw(st.integers(-1, 1)) or 1 for a in axes)
        return FunctionCase(name, (x,), kwargs=kwargs)

    return draw()


@register_domain("fft.fftshift", "fft.ifftshift")
def _fftshift(ctx: Context, name: str) -> st.SearchStrategy[FunctionCase]:
    @st.composite
    def draw(draw: Any) -> FunctionCase:
        shape = draw(ctx.shape(min_dims=1))
        ndim = len(shape)
        x = _signal(ctx, draw, shape, draw(st.booleans()))
        axes = draw(
            st.none()
            | st.integers(-ndim, ndim - 1)
            | st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple)
        )
        return FunctionCase(name, (x,), kwargs={"axes": axes})

    return draw()
