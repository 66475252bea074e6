"""Fourier series of one coordinate, with an optional secular (linear) term."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import float_array, is_concrete, is_count
from .._errors import ModelError
from .._spatial import own_buffer
from .._typing import RealLike
from ._base import _AbstractUnivariateFunction, _check_finite, coordinate_index


class FourierSeries(_AbstractUnivariateFunction):
    """``f(q) = a0 + c x + Σ_{k=1}^{K} [a_k cos(k ω x) + b_k sin(k ω x)]`` with ``x = q[index]``.

    The fitted shoulder and knee rhythms of Ehsani's pre-modeling approach (Ehsani
    2016). The
    secular term ``c x`` (`slope`, default 0) lets a relative angle that gains a
    full turn per revolution of a crank (Andrews' squeezer's Θ) be represented
    exactly. Use `fit` for a least-squares fit to samples.

    The fundamental `omega` (rad per unit of ``x``) is a static float, a fixed part
    of the basis like the period of the data it was fitted over; the amplitudes and
    the slope are array leaves (differentiable). Series of one model with the same
    `omega` and order are evaluated together from one set of harmonics
    (`_evaluate_alike`): the six fitted angles of a pre-modeled loop cost
    little more than one.

    **Arguments:**

    - `index`: the coordinate ``x = q[index]`` (rad or m).
    - `a0`: the constant term, in the joint variable's units (rad or m).
    - `a`, `b`: (K,) the cosine and sine amplitudes, same units.
    - `omega`: the fundamental ω, rad per unit of ``x`` (concrete, finite, non-zero).
    - `slope`: the secular term ``c``, joint units per unit of ``x``.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for a traced, zero or non-finite `omega`, amplitudes of unequal
    length, a non-scalar `a0` or `slope`, or non-finite values.
    """

    index: int = eqx.field(static=True)
    a0: Float[Array, ""]
    a: Float[Array, " K"]
    b: Float[Array, " K"]
    omega: float = eqx.field(static=True)
    slope: Float[Array, ""]

    def __init__(self, index: int, a0, a, b, omega, slope=0.0):
        self.index = coordinate_index(index, type(self).__name__)
        self.a0 = float_array(a0)
        self.a = float_array(a)
        self.b = float_array(b)
        try:
            self.omega = float(omega)
        except (TypeError, jax.errors.ConcretizationTypeError):
            raise ModelError("FourierSeries: omega must be a concrete number (it is a static part of the "
                             "basis); build the series outside jit/vmap, or fit the amplitudes a, b "
                             "instead.") from None
        if not np.isfinite(self.omega) or self.omega == 0.0:
            raise ModelError(f"FourierSeries: omega must be a finite, non-zero frequency, got {self.omega}.")
        self.slope = float_array(slope)
        if self.a.shape != self.b.shape or self.a.ndim != 1:
            raise ModelError("FourierSeries: a and b must be 1-D arrays of equal length.")
        if self.a0.ndim or self.slope.ndim:  # they broadcast into a vector-valued "joint variable"
            raise ModelError(f"FourierSeries: a0 and slope must be scalars, got shapes {self.a0.shape} and "
                             f"{self.slope.shape}.")
        _check_finite(f"FourierSeries of coordinate {self.index}",
                      "the constant, amplitudes and slope must be finite; fit the series with "
                      "FourierSeries.fit from finite samples.", a0=self.a0, a=self.a, b=self.b, slope=self.slope)

    @classmethod
    def fit(cls, index: int, x: RealLike, y: RealLike, order: int, omega: float,
            slope: RealLike = 0.0) -> "FourierSeries":
        """Least-squares fit of an order-``order`` series with fundamental ``omega`` to
        ``y - slope x`` (the secular term is given, not fitted).

        **Arguments:**

        - `index`: the coordinate ``q[index]`` the series is a function of.
        - `x`, `y`: the samples (1-D, equal length, finite).
        - `order`: the number of harmonics K.
        - `omega`: the fundamental (rad per unit of ``x``).
        - `slope`: the secular term ``c``.

        **Returns:** the fitted `FourierSeries`.
        """
        x = float_array(x)
        y = float_array(y)
        _check_finite(f"FourierSeries.fit of coordinate {index}",
                      "remove the samples with NaN or inf (or fill them in) before fitting.",
                      x=x, y=y, slope=slope)
        if x.ndim != 1 or x.shape != y.shape:
            raise ModelError(f"FourierSeries.fit of coordinate {index}: x and y must be 1-D of equal length, "
                             f"got shapes {x.shape} and {y.shape}.")
        if not is_count(order, 0):
            raise ModelError(f"FourierSeries.fit of coordinate {index}: order (the number of harmonics) must be an "
                             f"integer >= 0, got {order!r}.")
        if np.ndim(slope) != 0:
            raise ModelError(f"FourierSeries.fit of coordinate {index}: slope must be a scalar, got shape "
                             f"{np.shape(slope)}.")
        if is_concrete(x) and np.unique(np.asarray(x)).size < 2 * order + 1:
            # lstsq would return the minimum-norm series through the samples: not a fit
            raise ModelError(f"FourierSeries.fit of coordinate {index}: order {order} has {2 * order + 1} "
                             f"coefficients, more than the {np.unique(np.asarray(x)).size} distinct samples can "
                             "determine; lower the order or give more samples.")
        y = y - float_array(slope) * x
        k = jnp.arange(1, order + 1, dtype=x.dtype)
        phase = omega * x[:, None] * k[None, :]
        basis = jnp.concatenate([jnp.ones_like(x)[:, None], jnp.cos(phase), jnp.sin(phase)], axis=1)
        coef = jnp.linalg.lstsq(basis, y)[0]
        return cls(index, coef[0], coef[1 : order + 1], coef[order + 1 :], omega, slope)

    def _derivatives(self, xq):
        """``(f, df/dx, d²f/dx²)`` at the scalar ``x = xq``, of this series or of a stack
        of series of one `omega` (amplitudes (m, K), outputs (m,)): the harmonics
        ``cos kωx, sin kωx`` once (`_harmonics`), then every sum as one product
        with them. Why: on CPU, elementwise harmonics that several reductions read are fused into each of
        them and recomputed there, and a stack of series would compute its own
        harmonics per series; a matrix-vector product reads one set once."""
        n = self.a.shape[-1]
        kw = jnp.broadcast_to(jnp.arange(1, n + 1, dtype=self.a.dtype) * self.omega, self.a.shape)  # (m, K) if stacked
        harmonics = jnp.concatenate(_harmonics(n, self.omega * xq))
        cos_sin = jnp.concatenate([self.a, self.b], axis=-1)
        coef = jnp.stack([cos_sin,                                               # f
                          jnp.concatenate([kw * self.b, -kw * self.a], axis=-1),  # df/dx
                          -jnp.concatenate([kw, kw], axis=-1) ** 2 * cos_sin])    # d²f/dx²
        sums = coef @ harmonics
        return self.a0 + self.slope * xq + sums[0], self.slope + sums[1], sums[2]


def _harmonics(n: int, theta) -> tuple[Array, Array]:
    """``(cos kθ, sin kθ)`` for k = 1..n (two (n,) arrays) at the scalar ``θ``.

    ``e^{ikθ}`` is the product of the powers ``e^{i 2^b θ}`` over the set bits b of k:
    ``2 (1 + floor(log2 n))`` sines and cosines and at most that many complex
    products per harmonic, instead of 2n transcendental functions (on CPU, in float64,
    the costliest part of a pre-modeled right-hand side). The error
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
