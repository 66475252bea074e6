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


class FourierSeries(AbstractJointFunction):
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

    def coordinate_indices(self):
        return (self.index,)

    def vectorisable(self):
        return True

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

    @staticmethod
    def _outputs(method, derivatives, index, q, qd=None):
        """What `method` returns, from ``(f, df/dx, d²f/dx²)`` at ``x = q[index]``."""
        value, d1, d2 = derivatives
        if method == "__call__":
            return value
        if method == "gradient":
            return jnp.zeros_like(q).at[index].set(d1)
        if method == "hessian":
            return jnp.zeros((q.shape[0],) * 2, dtype=q.dtype).at[index, index].set(d2)
        rates = _univariate_rates(derivatives, q, qd, index)
        return rates[:3] if method == "rates" else rates

    def _evaluate(self, method, q, qd=None):
        return self._outputs(method, self._derivatives(q[self.index]), self.index, q, qd)

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
        """Series with the same `omega`, order and coordinate share their harmonics: one
        :meth:`_derivatives` for all m of them (a (3, m, 2K) x (2K,) product), then each
        series' outputs. Measured on Andrews' squeezer's pre-modeled right-hand side
        against a ``vmap`` over the series: 4.40 -> 3.66 µs, 2.75 -> 2.17 µs per state
        under vmap (benchmarks/andrews_rhs.py)."""
        q = args[0]
        derivatives = stacked._derivatives(q[stacked.index])
        return jax.vmap(lambda d: cls._outputs(method, d, stacked.index, *args))(derivatives)


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
