"""Joint functions ``f_i(q)``: a joint variable as a smooth function of the coordinates.

Seed 001, section 3-1: every joint variable ``f_i`` (angle of a revolute joint,
displacement of a prismatic one) is a smooth function of the minimal generalized
coordinates ``q``; kinematics and dynamics need its value, gradient ``∇f_i``
(nq,) and Hessian ``H_i`` (nq, nq). Every class here is an equinox pytree whose
numeric parameters are array leaves (so ``jax.grad`` with respect to spline
coefficients or Fourier amplitudes works) and whose coordinate indices are static.

Gradients and Hessians come from JAX autodiff by default. Splines and Fourier
series also have closed forms (:meth:`gradient`, :meth:`hessian`), which the
tests check against autodiff.
"""

import abc
import math
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Scalar

from ._typing import RealLike

from ._errors import ModelError
from ._spatial import own_buffer


def _as_float_array(x) -> Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(float)
    return x


class AbstractJointFunction(eqx.Module):
    """A scalar function ``f(q)`` of the generalized-coordinate vector ``q`` (nq,).

    Subclasses implement :meth:`__call__` and :meth:`coordinate_indices`;
    :meth:`gradient` and :meth:`hessian` default to autodiff.

    A model evaluates joint functions of the same kind and shape together
    (``jax.vmap`` over their stacked parameters) where :meth:`vectorisable` says so.
    """

    def vectorisable(self) -> bool:
        """Whether several functions of this kind and shape may be evaluated as one
        batched function (the parameters stacked; the static fields equal). False by
        default: it is right for pure parametric functions, not for functions with
        per-trace caches (loop closures) or trivial ones (coordinates, constants)."""
        return False

    @abc.abstractmethod
    def __call__(self, q: Float[Array, " nq"]) -> Scalar:
        """Value ``f(q)``."""

    @abc.abstractmethod
    def coordinate_indices(self) -> tuple[int, ...]:
        """Indices of the coordinates this function depends on. A model checks them
        against its coordinates, and the dynamics of small models skip the derivatives
        with respect to the others (zero by this contract), so list every coordinate
        the function reads."""

    def gradient(self, q: Float[Array, " nq"]) -> Float[Array, " nq"]:
        """``∇f(q)``, shape (nq,)."""
        return jax.grad(self.__call__)(q)

    def hessian(self, q: Float[Array, " nq"]) -> Float[Array, "nq nq"]:
        """``H(q) = ∂²f/∂q²``, shape (nq, nq)."""
        return jax.hessian(self.__call__)(q)

    def rates(self, q: Float[Array, " nq"], qd: Float[Array, " nq"]) -> tuple[Scalar, Scalar, Scalar]:
        """``(f, f' = ∇f·q', q'ᵀ H q')`` along a motion (seed 001 Eq. 57's velocity
        product), by nested forward-mode derivatives (no Hessian is formed)."""
        inner = lambda x: jax.jvp(self.__call__, (x,), (qd,))  # noqa: E731
        (f, fd), (_, fdd) = jax.jvp(inner, (q,), (qd,))
        return f, fd, fdd

    def rates_and_gradient(self, q: Float[Array, " nq"], qd: Float[Array, " nq"]
                           ) -> tuple[Scalar, Scalar, Scalar, Float[Array, " nq"]]:
        """``(*rates(q, q'), ∇f(q))``: what a right-hand side of the dynamics needs.
        Subclasses whose rates already hold ``∇f`` (closed-form functions, loop
        closures) return it from the same evaluation instead of a second one."""
        return (*self.rates(q, qd), self.gradient(q))

    @classmethod
    def _evaluate_alike(cls, stacked: "AbstractJointFunction", method: str, *args) -> Any:
        """``method(*args)`` of several :meth:`vectorisable` functions of this kind at
        once: `stacked` holds their parameters stacked along a leading axis (their
        static fields are equal), and so does every output. By default ``jax.vmap``
        over the stack; a kind whose functions share work overrides this."""
        return jax.vmap(lambda fn: getattr(fn, method)(*args))(stacked)


class Coordinate(AbstractJointFunction):
    """``f(q) = q[index]``: the joint variable is a generalized coordinate itself."""

    index: int = eqx.field(static=True)

    def __call__(self, q):
        return q[self.index]

    def coordinate_indices(self):
        return (self.index,)

    def rates_and_gradient(self, q, qd):
        return q[self.index], qd[self.index], jnp.zeros((), q.dtype), jnp.zeros_like(q).at[self.index].set(1.0)


class Constant(AbstractJointFunction):
    """``f(q) = value``: a locked joint (OpenSim's locked coordinate or Constant)."""

    value: Float[Array, ""]

    def __init__(self, value: RealLike):
        self.value = _as_float_array(value)

    def __call__(self, q):
        return self.value.astype(q.dtype)

    def coordinate_indices(self):
        return ()


class Linear(AbstractJointFunction):
    """``f(q) = offset + Σ_k weights[k] q[indices[k]]`` (affine in several coordinates).

    The double pendulum's relative elbow angle ``θ2 - θ1`` is
    ``Linear((0, 1), (-1.0, 1.0))``.
    """

    indices: tuple[int, ...] = eqx.field(static=True)
    weights: Float[Array, " k"]
    offset: Float[Array, ""]

    def __init__(self, indices: Sequence[int], weights: RealLike, offset: RealLike = 0.0):
        self.indices = tuple(int(i) for i in indices)
        self.weights = _as_float_array(weights)
        self.offset = _as_float_array(offset)
        if self.weights.shape != (len(self.indices),):
            raise ModelError(
                f"Linear joint function: {len(self.indices)} indices but weights of "
                f"shape {self.weights.shape}; give one weight per coordinate index."
            )

    def vectorisable(self):
        return True

    def __call__(self, q):
        idx = jnp.asarray(self.indices, dtype=int)
        return self.offset + jnp.dot(self.weights, q[idx])

    def coordinate_indices(self):
        return self.indices


class Polynomial(AbstractJointFunction):
    """``f(q) = Σ_k coefficients[k] x^k`` with ``x = q[index]`` (lowest order first).

    OpenSim's PolynomialFunction lists the highest order first: reverse it.
    """

    index: int = eqx.field(static=True)
    coefficients: Float[Array, " k"]

    def __init__(self, index: int, coefficients: RealLike):
        self.index = int(index)
        self.coefficients = _as_float_array(coefficients)
        if self.coefficients.ndim != 1 or self.coefficients.shape[0] == 0:
            raise ModelError("Polynomial joint function needs a non-empty 1-D coefficient array.")

    def vectorisable(self):
        return True

    def __call__(self, q):
        return jnp.polyval(self.coefficients[::-1], q[self.index])

    def coordinate_indices(self):
        return (self.index,)


def _spline_second_moments(x: Array, y: Array, end_condition: str) -> Array:
    """Solve for ``σ_i = s''(x_i)/6`` of an interpolating cubic spline.

    Interior rows: ``h_{i-1} σ_{i-1} + 2 (h_{i-1} + h_i) σ_i + h_i σ_{i+1} = Δ_i - Δ_{i-1}``
    with ``h_i = x_{i+1} - x_i`` and ``Δ_i = (y_{i+1} - y_i)/h_i``.

    End conditions:
    * ``"natural"``: ``s'' = 0`` at both ends.
    * ``"not-a-knot-fmm"`` (OpenSim's SimmSpline, Forsythe-Malcolm-Moler): the
      spline's third derivative at each end equals that of the cubic through the
      four points nearest that end; with three points, a parabola.

    The tridiagonal system is assembled with vectorised ops and solved densely, so
    the fit is differentiable in ``y`` and can be traced (jit/vmap over samples).
    """
    n = x.shape[0]
    h = jnp.diff(x)
    delta = jnp.diff(y) / h
    one, zero = jnp.ones(1, y.dtype), jnp.zeros(1, y.dtype)
    interior_rhs = delta[1:] - delta[:-1]
    if end_condition == "natural":
        first, upper0, last, lower_n = one, zero, one, zero
        rhs_first, rhs_last = zero, zero
    elif end_condition == "not-a-knot-fmm":
        first, upper0, last, lower_n = -h[:1], h[:1], -h[-1:], h[-1:]
        rhs_first, rhs_last = zero, zero
        if n > 3:
            d2_first = (delta[1] - delta[0]) / (x[2] - x[0])
            d2_second = (delta[2] - delta[1]) / (x[3] - x[1])
            d3_start = (d2_second - d2_first) / (x[3] - x[0])
            d2_last = (delta[n - 2] - delta[n - 3]) / (x[n - 1] - x[n - 3])
            d2_prev = (delta[n - 3] - delta[n - 4]) / (x[n - 2] - x[n - 4])
            d3_end = (d2_last - d2_prev) / (x[n - 1] - x[n - 4])
            rhs_first = (h[0] ** 2 * d3_start)[None]
            rhs_last = (-(h[-1] ** 2) * d3_end)[None]
    else:
        raise ModelError(
            f"Unknown spline end condition {end_condition!r}; use 'natural' or 'not-a-knot-fmm'."
        )
    diag = jnp.concatenate([first, 2.0 * (h[:-1] + h[1:]), last])
    upper = jnp.concatenate([upper0, h[1:]])
    lower = jnp.concatenate([h[:-1], lower_n])
    a = jnp.diag(diag) + jnp.diag(upper, 1) + jnp.diag(lower, -1)
    rhs = jnp.concatenate([rhs_first, interior_rhs, rhs_last])
    return jnp.linalg.solve(a, rhs)


class CubicSpline(AbstractJointFunction):
    """Interpolating cubic spline of one coordinate, ``f(q) = s(q[index])``.

    On ``[x_i, x_{i+1}]``: ``s = y_i + b_i t + c_i t² + d_i t³``, ``t = x - x_i``.
    Outside ``[x_0, x_{n-1}]`` it continues linearly with the end slope (as OpenSim's
    SimmSpline and NaturalCubicSpline do), so f stays C¹ there and its Hessian is 0.

    Build it with :meth:`fit` (``end_condition="natural"`` for a natural cubic spline,
    ``"not-a-knot-fmm"`` for OpenSim's SimmSpline end conditions). The polynomial
    coefficients ``y, b, c, d`` are the array leaves; ``fit`` is differentiable in
    the data ``y``.
    """

    index: int = eqx.field(static=True)
    x: Float[Array, " n"]
    y: Float[Array, " n"]
    b: Float[Array, " n"]
    c: Float[Array, " n"]
    d: Float[Array, " n"]

    @classmethod
    def fit(
        cls, index: int, x: RealLike, y: RealLike, end_condition: str = "natural"
    ) -> "CubicSpline":
        """Fit the spline through the samples ``(x_k, y_k)`` (x strictly increasing)."""
        x = _as_float_array(x)
        y = _as_float_array(y)
        if x.ndim != 1 or x.shape != y.shape or x.shape[0] < 2:
            raise ModelError(
                f"Spline of coordinate {index}: x and y must be 1-D of equal length >= 2, "
                f"got shapes {np.shape(x)} and {np.shape(y)}."
            )
        try:  # the knots can be checked only when they are concrete (not traced)
            increasing = bool(np.all(np.diff(np.asarray(x)) > 0))
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
            increasing = True
        if not increasing:
            raise ModelError(
                f"Spline of coordinate {index}: x must be strictly increasing; sort the "
                "samples and remove duplicates."
            )
        n = x.shape[0]
        if n == 2:
            slope = (y[1] - y[0]) / (x[1] - x[0])
            b = jnp.stack([slope, slope])
            zero = jnp.zeros(2, dtype=y.dtype)
            return cls(index=index, x=x, y=y, b=b, c=zero, d=zero)
        sigma = _spline_second_moments(x, y, end_condition)
        h = jnp.diff(x)
        delta = jnp.diff(y) / h
        b_int = delta - h * (sigma[1:] + 2.0 * sigma[:-1])
        d_int = (sigma[1:] - sigma[:-1]) / h
        # Slope at the last knot, from the last interval's cubic.
        b_last = b_int[-1] + 2.0 * (3.0 * sigma[-2]) * h[-1] + 3.0 * d_int[-1] * h[-1] ** 2
        b = jnp.concatenate([b_int, b_last[None]])
        c = 3.0 * sigma
        d = jnp.concatenate([d_int, d_int[-1:]])
        return cls(index=index, x=x, y=y, b=b, c=c, d=d)

    def __init__(self, index, x, y, b, c, d):
        self.index = int(index)
        self.x, self.y, self.b, self.c, self.d = (
            _as_float_array(v) for v in (x, y, b, c, d)
        )

    def coordinate_indices(self):
        return (self.index,)

    def _locate(self, xq):
        n = self.x.shape[0]
        k = jnp.clip(jnp.searchsorted(self.x, xq, side="right") - 1, 0, n - 2)
        below = xq < self.x[0]
        above = xq > self.x[-1]
        return k, below, above

    def _derivatives(self, xq):
        """Value, first and second derivative of s at the scalar ``xq``."""
        k, below, above = self._locate(xq)
        t = xq - self.x[k]
        val = self.y[k] + t * (self.b[k] + t * (self.c[k] + t * self.d[k]))
        d1 = self.b[k] + t * (2.0 * self.c[k] + 3.0 * t * self.d[k])
        d2 = 2.0 * self.c[k] + 6.0 * t * self.d[k]
        # Linear extrapolation with the end slopes (no division: NaN-safe gradients).
        lo = self.y[0] + self.b[0] * (xq - self.x[0])
        hi = self.y[-1] + self.b[-1] * (xq - self.x[-1])
        val = jnp.where(below, lo, jnp.where(above, hi, val))
        d1 = jnp.where(below, self.b[0], jnp.where(above, self.b[-1], d1))
        d2 = jnp.where(below | above, jnp.zeros_like(d2), d2)
        return val, d1, d2

    def vectorisable(self):
        return True

    def __call__(self, q):
        return self._derivatives(q[self.index])[0]

    def gradient(self, q):
        """Closed form ``s'(x) e_index``."""
        return jnp.zeros_like(q).at[self.index].set(self._derivatives(q[self.index])[1])

    def hessian(self, q):
        """Closed form ``s''(x) e_index e_indexᵀ``."""
        nq = q.shape[0]
        d2 = self._derivatives(q[self.index])[2]
        return jnp.zeros((nq, nq), dtype=q.dtype).at[self.index, self.index].set(d2)

    def rates(self, q, qd):
        return self.rates_and_gradient(q, qd)[:3]

    def rates_and_gradient(self, q, qd):
        return _univariate_rates(self._derivatives(q[self.index]), q, qd, self.index)


def _univariate_outputs(method: str, derivatives, index: int, q, qd=None):
    """What `method` of a function of ``x = q[index]`` alone returns, from
    ``(f, df/dx, d²f/dx²)`` at that x."""
    value, d1, d2 = derivatives
    if method == "__call__":
        return value
    if method == "gradient":
        return jnp.zeros_like(q).at[index].set(d1)
    if method == "hessian":
        return jnp.zeros((q.shape[0],) * 2, dtype=q.dtype).at[index, index].set(d2)
    rates = _univariate_rates(derivatives, q, qd, index)
    return rates[:3] if method == "rates" else rates


class _UnivariateFunction(AbstractJointFunction):
    """A function of one coordinate, ``f(q) = s(q[index])``, whose subclass gives
    ``_derivatives(x) = (s, s', s'')`` in closed form; every method follows from one
    call. Functions of one kind, coordinate and static fields share that call when
    stacked (:meth:`_evaluate_alike`): ``_derivatives`` must then accept parameters
    with a leading stack axis and return (m,) outputs. For Fourier series that shares
    the harmonics: Andrews' squeezer's pre-modeled right-hand side 4.40 -> 3.66 µs,
    2.75 -> 2.17 µs per state under vmap, against a ``vmap`` over the six series
    (benchmarks/andrews_rhs.py)."""

    index: eqx.AbstractVar[int]

    @abc.abstractmethod
    def _derivatives(self, xq) -> tuple[Array, Array, Array]:
        """``(s, ds/dx, d²s/dx²)`` at the scalar ``x = xq``."""

    def coordinate_indices(self):
        return (self.index,)

    def vectorisable(self):
        return True

    def _evaluate(self, method, q, qd=None):
        return _univariate_outputs(method, self._derivatives(q[self.index]), self.index, q, qd)

    def __call__(self, q):
        return self._evaluate("__call__", q)

    def gradient(self, q):
        return self._evaluate("gradient", q)

    def hessian(self, q):
        return self._evaluate("hessian", q)

    def rates(self, q, qd):
        return self._evaluate("rates", q, qd)

    def rates_and_gradient(self, q, qd):
        return self._evaluate("rates_and_gradient", q, qd)

    @classmethod
    def _evaluate_alike(cls, stacked, method, *args):
        q = args[0]
        derivatives = stacked._derivatives(q[stacked.index])
        return jax.vmap(lambda d: _univariate_outputs(method, d, stacked.index, *args))(derivatives)


class FourierSeries(_UnivariateFunction):
    """``f(q) = a0 + c x + Σ_{k=1}^{K} [a_k cos(k ω x) + b_k sin(k ω x)]`` with ``x = q[index]``.

    The fitted shoulder and knee rhythms of the seed's pre-modeling approach. The
    secular term ``c x`` (`slope`, default 0) lets a relative angle that gains a
    full turn per revolution of a crank (Andrews' squeezer's Θ) be represented
    exactly. Use :meth:`fit` for a least-squares fit to samples.

    The fundamental `omega` (rad per unit of ``x``) is a static float, a fixed part
    of the basis like the period of the data it was fitted over; the amplitudes and
    the slope are array leaves (differentiable). Series of one model with the same
    `omega` and order are evaluated together from one set of harmonics
    (:meth:`_evaluate_alike`): the six fitted angles of a pre-modeled loop cost
    little more than one.
    """

    index: int = eqx.field(static=True)
    a0: Float[Array, ""]
    a: Float[Array, " K"]
    b: Float[Array, " K"]
    omega: float = eqx.field(static=True)
    slope: Float[Array, ""]

    def __init__(self, index: int, a0, a, b, omega, slope=0.0):
        self.index = int(index)
        self.a0 = _as_float_array(a0)
        self.a = _as_float_array(a)
        self.b = _as_float_array(b)
        try:
            self.omega = float(omega)
        except (TypeError, jax.errors.ConcretizationTypeError):
            raise ModelError("FourierSeries: omega must be a concrete number (it is a static part of the "
                             "basis); build the series outside jit/vmap, or fit the amplitudes a, b "
                             "instead.") from None
        if not np.isfinite(self.omega) or self.omega == 0.0:
            raise ModelError(f"FourierSeries: omega must be a finite, non-zero frequency, got {self.omega}.")
        self.slope = _as_float_array(slope)
        if self.a.shape != self.b.shape or self.a.ndim != 1:
            raise ModelError("FourierSeries: a and b must be 1-D arrays of equal length.")

    @classmethod
    def fit(cls, index: int, x: RealLike, y: RealLike, order: int, omega: float,
            slope: RealLike = 0.0) -> "FourierSeries":
        """Least-squares fit of an order-``order`` series with fundamental ``omega`` to
        ``y - slope x`` (the secular term is given, not fitted)."""
        x = _as_float_array(x)
        y = _as_float_array(y) - _as_float_array(slope) * x
        k = jnp.arange(1, order + 1, dtype=x.dtype)
        phase = omega * x[:, None] * k[None, :]
        basis = jnp.concatenate([jnp.ones_like(x)[:, None], jnp.cos(phase), jnp.sin(phase)], axis=1)
        coef = jnp.linalg.lstsq(basis, y)[0]
        return cls(index, coef[0], coef[1 : order + 1], coef[order + 1 :], omega, slope)

    def _derivatives(self, xq):
        """``(f, df/dx, d²f/dx²)`` at the scalar ``x = xq``, of this series or of a stack
        of series of one `omega` (amplitudes (m, K), outputs (m,)): the harmonics
        ``cos kωx, sin kωx`` once (:func:`_harmonics`), then every sum as one product
        with them. Why: on
        CPU, elementwise harmonics that several reductions read are fused into each of
        them and recomputed there, and a stack of series would compute its own
        harmonics per series; a matrix-vector product reads one set once."""
        n = self.a.shape[-1]
        kw = jnp.arange(1, n + 1, dtype=self.a.dtype) * self.omega
        harmonics = jnp.concatenate(_harmonics(n, self.omega * xq))
        cos_sin = jnp.concatenate([self.a, self.b], axis=-1)
        coef = jnp.stack([cos_sin,                                               # f
                          jnp.concatenate([kw * self.b, -kw * self.a], axis=-1),  # df/dx
                          -jnp.concatenate([kw, kw]) ** 2 * cos_sin])             # d²f/dx²
        sums = coef @ harmonics
        return self.a0 + self.slope * xq + sums[0], self.slope + sums[1], sums[2]


def _harmonics(n: int, theta) -> tuple[Array, Array]:
    """``(cos kθ, sin kθ)`` for k = 1..n (two (n,) arrays) at the scalar ``θ``.

    ``e^{ikθ}`` is the product of the powers ``e^{i 2^b θ}`` over the set bits b of k:
    ``2 (1 + floor(log2 n))`` sines and cosines and at most that many complex
    products per harmonic, instead of 2n transcendental functions (on CPU, in float64,
    the costliest part of a pre-modeled right-hand side: one value of Andrews'
    pre-modeled loop 0.63 -> 0.46 µs, scripts/check_rhs_parts.py). The error
    grows by an ulp or two per product, and the angles ``2^b θ`` are exact, so the
    result is closer to the exact values than ``cos(kθ)`` of the rounded ``kθ``
    (4e-16 against 2e-13 at θ = 123.4, n = 24; tests/test_functions.py).
    """
    if n == 0:  # a series of order 0 is its constant and secular terms alone
        empty = jnp.zeros((0,), jnp.result_type(theta))
        return empty, empty
    bits = n.bit_length()
    angles = theta * jnp.asarray(2.0 ** np.arange(bits), dtype=jnp.result_type(theta))
    # Computed once, not again for each of the n harmonics that read them.
    cos_p, sin_p = own_buffer(jnp.stack([jnp.cos(angles), jnp.sin(angles)]))
    k = np.arange(1, n + 1)
    re = im = None
    for b in range(bits):
        on = ((k >> b) & 1).astype(bool)
        c, s = jnp.where(on, cos_p[b], 1.0), jnp.where(on, sin_p[b], 0.0)
        re, im = (c, s) if re is None else (re * c - im * s, re * s + im * c)
    return re, im


def _univariate_rates(derivatives, q, qd, index):
    """``(f, f', q'ᵀ H q', ∇f)`` of a function of ``x = q[index]`` alone from
    ``(f, df/dx, d²f/dx²)``."""
    value, d1, d2 = derivatives
    xd = qd[index]
    return value, d1 * xd, d2 * xd * xd, jnp.zeros_like(q).at[index].set(d1)


# Quintic Hermite interpolation on [0, 1] in powers of t (rows: coefficients of
# t^0..t^5; columns: the data p0, p0', p0'', p1, p1', p1'' with derivatives in t).
_QUINTIC_HERMITE = np.array([
    [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.5, 0.0, 0.0, 0.0],
    [-10.0, -6.0, -1.5, 10.0, -4.0, 0.5],
    [15.0, 8.0, 1.5, -15.0, 7.0, -1.0],
    [-6.0, -3.0, -0.5, 6.0, -3.0, 0.5],
])


def _exact_products(weight: float, value: float) -> list[float]:
    """``weight * value`` as a list of floats that sum to it exactly: `weight` is a
    multiple of 1/2 below 16, written as a sum of signed powers of two, so every term
    is `value` scaled by a power of two (exact)."""
    terms, w = [], abs(weight)
    for e in range(4, -2, -1):
        if w >= 2.0**e:
            terms.append(np.copysign(2.0**e, weight) * value)
            w -= 2.0**e
    assert w == 0.0, weight
    return terms


def _quintic_coefficients(data: np.ndarray) -> np.ndarray:
    """(n, 6) power coefficients of the quintic Hermite pieces through the knot data
    `data` (n + 1, 3) = (p, h p', h² p''), each the correctly rounded value of the exact
    combination of the (float64) data (``math.fsum`` of exact products).

    Why exact: the higher coefficients are small differences of O(1) data (``c3 ≈
    h³ p'''/6``); formed in float64 they carry the data's rounding, ~1e-16, and the
    second derivative, ``(2 c2 + 6 c3 t + ...)/h²``, multiplies that by up to 60/h²
    (6e-10 at h = 2π/256), and at a knot the two pieces then disagree by as much.
    Exactly combined, neighbouring pieces meet to an ulp of each coefficient."""
    n = data.shape[0] - 1
    out = np.empty((n, 6))
    for j in range(n):
        d = (*data[j], *data[j + 1])
        for i in range(6):
            out[j, i] = math.fsum(t for w, v in zip(_QUINTIC_HERMITE[i], d) if w for t in _exact_products(w, v))
    return out


class QuinticSpline(_UnivariateFunction):
    """C² piecewise quintic of one coordinate on a uniform grid, ``f(q) = s(q[index])``.

    On the k-th interval ``[x_k, x_k + h]``, with ``t = (x - x_k)/h``,
    ``s = slope·x + Σ_{i=0}^{5} c_{k,i} t^i``: the quintic Hermite interpolant of the
    value, first and second derivative at the two knots (:meth:`fit`), so ``s``, ``s'``
    and ``s''`` are continuous and exact at every knot, with interpolation error
    O(h⁶), O(h⁵), O(h⁴).

    Why it exists: it is the cheapest closed-form joint function to evaluate. The
    interval comes from a floor on the uniform grid (no search), its six coefficients
    from one gather, and the value and both derivatives from short polynomials; no
    transcendental function. Pre-modeling a loop with it
    (``premodel(..., kind="quintic")``) takes the knot data from the loop itself:
    the solved variables and their exact gradient and Hessian (implicit
    differentiation, :meth:`LoopClosure.derivatives`). On Andrews' squeezer the six
    dependent angles over a crank revolution in 512 intervals match the loop to 4e-15
    rad (second derivatives to 7e-11) and cost 0.2 µs per right-hand side against 1.1
    µs for the order-24 Fourier series (``scripts/check_rhs_parts.py``).

    ``periodic=True`` repeats the grid's span (a crank's revolution); `slope` adds a
    secular term as :class:`FourierSeries` does (a relative angle that gains turns with
    the crank). Otherwise ``s`` continues linearly outside ``[x_0, x_n]`` with the end
    slope, as :class:`CubicSpline` does. `x0`, `step` and `periodic` are static (the
    grid is a fixed part of the basis); the coefficients and the slope are array leaves.
    """

    index: int = eqx.field(static=True)
    x0: float = eqx.field(static=True)
    step: float = eqx.field(static=True)
    periodic: bool = eqx.field(static=True)
    coefficients: Float[Array, "n 6"]
    slope: Float[Array, ""]

    def __init__(self, index: int, x0: float, step: float, coefficients, *, periodic: bool = False,
                 slope: RealLike = 0.0):
        self.index = int(index)
        try:
            self.x0, self.step = float(x0), float(step)
        except (TypeError, jax.errors.ConcretizationTypeError):
            raise ModelError("QuinticSpline: x0 and step must be concrete numbers (the grid is a static part "
                             "of the basis); build the spline outside jit/vmap.") from None
        if not (np.isfinite(self.x0) and np.isfinite(self.step) and self.step > 0.0):
            raise ModelError(f"QuinticSpline of coordinate {index}: the grid needs a finite x0 and a positive "
                             f"step, got x0 = {self.x0}, step = {self.step}.")
        self.periodic = bool(periodic)
        self.coefficients = _as_float_array(coefficients)
        if self.coefficients.ndim != 2 or self.coefficients.shape[1] != 6 or self.coefficients.shape[0] < 1:
            raise ModelError(f"QuinticSpline of coordinate {index}: coefficients must have shape (n, 6) with "
                             f"n >= 1 intervals, got {self.coefficients.shape}.")
        self.slope = _as_float_array(slope)

    @classmethod
    def fit(cls, index: int, x: RealLike, y: RealLike, dydx: RealLike, d2ydx2: RealLike, *,
            periodic: bool = False, slope: RealLike = 0.0) -> "QuinticSpline":
        """The quintic Hermite spline through values `y`, first derivatives `dydx` and
        second derivatives `d2ydx2` at the uniform grid `x` (n + 1 knots).

        `slope` is the secular term (given, not fitted): the pieces interpolate
        ``y - slope·x``. With ``periodic=True`` the grid spans one period, and the data
        at its two ends must agree (after the secular term). Concrete data give
        coefficients exact to rounding; traced data (inside ``jax.grad``, say) give
        the same spline in float64 arithmetic, whose second derivative is then good to
        about 1e-16·60/h² rather than to the data's precision.
        """
        try:
            xs = np.asarray(x, dtype=float)
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
            raise ModelError("QuinticSpline.fit: the grid x must be concrete (it fixes the basis).") from None
        if xs.ndim != 1 or xs.shape[0] < 2:
            raise ModelError(f"QuinticSpline.fit of coordinate {index}: x must be 1-D with at least 2 knots, "
                             f"got shape {xs.shape}.")
        n = xs.shape[0] - 1
        step = (xs[-1] - xs[0]) / n
        if not step > 0 or np.max(np.abs(np.diff(xs) - step)) > 1e-9 * step:
            raise ModelError(f"QuinticSpline.fit of coordinate {index}: x must be a uniform, increasing grid "
                             "(use np.linspace); resample non-uniform data or use CubicSpline.")
        arrays = [_as_float_array(a) for a in (y, dydx, d2ydx2)]
        if any(a.shape != xs.shape for a in arrays):
            raise ModelError(f"QuinticSpline.fit of coordinate {index}: y, dydx and d2ydx2 must have x's shape "
                             f"{xs.shape}, got {[a.shape for a in arrays]}.")
        slope = _as_float_array(slope)
        y, dydx, d2ydx2 = arrays
        grid = jnp.asarray(xs, dtype=y.dtype)
        data = jnp.stack([y - slope * grid, step * (dydx - slope), step**2 * d2ydx2], axis=1)
        if not isinstance(data, jax.core.Tracer):
            data = np.asarray(data, dtype=float)
            if periodic:
                scale = np.maximum(1.0, np.abs(data).max(axis=0))
                if np.any(np.abs(data[-1] - data[0]) > 1e-8 * scale):
                    raise ModelError(
                        f"QuinticSpline.fit of coordinate {index}: periodic data must repeat at the grid's "
                        f"ends (after the secular term slope·x); the value, h·slope and h²·curvature differ "
                        f"by {np.abs(data[-1] - data[0])}. Sample exactly one period, or give the slope of a "
                        "variable that gains turns per period.")
            coefficients = jnp.asarray(_quintic_coefficients(data), dtype=y.dtype)
        else:
            hermite = jnp.asarray(_QUINTIC_HERMITE, dtype=data.dtype)
            coefficients = jnp.concatenate([data[:-1], data[1:]], axis=1) @ hermite.T
        return cls(index, float(xs[0]), step, coefficients, periodic=periodic, slope=slope)

    def _derivatives(self, xq):
        """``(s, ds/dx, d²s/dx²)`` at the scalar ``x = xq``, of this spline or of a
        stack of splines on one grid (coefficients (m, n, 6), outputs (m,)): the
        interval and ``t`` once, one gather of the interval's coefficients, Horner."""
        n = self.coefficients.shape[-2]
        u = (xq - self.x0) / self.step
        knot = jnp.floor(u)
        if self.periodic:
            k = jnp.mod(knot.astype(jnp.int32), n)
            t = u - knot
        else:
            k = jnp.clip(knot, 0, n - 1).astype(jnp.int32)
            # Outside the grid u - k runs past [0, 1]: the end piece's value and slope
            # at the end knot, continued linearly (below). `where`, not `clip`: at a
            # knot itself clip would pass autodiff half the derivative.
            past = u - k
            t = jnp.where(past < 0.0, 0.0, jnp.where(past > 1.0, 1.0, past))
        c0, c1, c2, c3, c4, c5 = jnp.moveaxis(jnp.take(self.coefficients, k, axis=-2), -1, 0)
        h = self.step
        value = c0 + t * (c1 + t * (c2 + t * (c3 + t * (c4 + t * c5))))
        d1 = (c1 + t * (2.0 * c2 + t * (3.0 * c3 + t * (4.0 * c4 + t * (5.0 * c5))))) / h
        d2 = (2.0 * c2 + t * (6.0 * c3 + t * (12.0 * c4 + t * (20.0 * c5)))) / h**2
        if not self.periodic:
            outside = (past - t) * h  # distance past the end knot (0 inside)
            value = value + d1 * outside
            d2 = jnp.where(outside == 0.0, d2, jnp.zeros_like(d2))
        return value + self.slope * xq, d1 + self.slope, d2


class Composed(AbstractJointFunction):
    """``f(q) = outer(inner(q))``: a univariate ``outer`` applied to another joint function.

    ``outer`` is itself a joint function of a one-element vector (index 0), e.g. a
    spline; this is how an OpenSim transform-axis function of a coupled
    (dependent) coordinate is expressed.
    """

    outer: AbstractJointFunction
    inner: AbstractJointFunction

    def vectorisable(self):
        return self.outer.vectorisable() and self.inner.vectorisable()

    def __call__(self, q):
        return self.outer(jnp.reshape(self.inner(q), (1,)))

    def coordinate_indices(self):
        return self.inner.coordinate_indices()


class Scaled(AbstractJointFunction):
    """``f(q) = scale * inner(q)`` (OpenSim's MultiplierFunction)."""

    inner: AbstractJointFunction
    scale: Float[Array, ""]

    def __init__(self, inner: AbstractJointFunction, scale: RealLike):
        self.inner = inner
        self.scale = _as_float_array(scale)

    def vectorisable(self):
        return self.inner.vectorisable()

    def __call__(self, q):
        return self.scale * self.inner(q)

    def coordinate_indices(self):
        return self.inner.coordinate_indices()


class JaxFunction(AbstractJointFunction):
    """Any user JAX callable ``fn(q, params) -> scalar``.

    ``params`` is a pytree of arrays (differentiable leaves); ``coordinates`` lists
    the coordinate indices ``fn`` reads (used only to validate the model).
    Example, a shoulder rhythm of two coordinates::

        JaxFunction(lambda q, p: p[0] * q[0] + p[1] * q[0] * q[1], jnp.array([0.4, 0.1]), (0, 1))
    """

    fn: Callable[[Array, Any], Array] = eqx.field(static=True)
    params: Any
    coordinates: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, fn: Callable[[Array, Any], Array], params: Any = None, coordinates: Sequence[int] = ()):
        self.fn = fn
        self.params = params
        self.coordinates = tuple(int(c) for c in coordinates)

    def __call__(self, q):
        return jnp.asarray(self.fn(q, self.params)).reshape(())

    def coordinate_indices(self):
        return self.coordinates
