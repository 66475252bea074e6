"""OpenSim's function classes that have no jaxmb counterpart, as joint functions of one
coordinate, and the coefficients of OpenSim's SimmSpline.

Each evaluates as OpenSim 4.x does (opensim-core ``OpenSim/Common``):

* ``PiecewiseLinearFunction`` (`PiecewiseLinear`): linear interpolation, linear
  extrapolation with the first/last segment's slope. Not differentiable at the knots
  (the derivative there is that of one of the adjacent segments).
* ``PiecewiseConstantFunction`` (`PiecewiseConstant`): ``y_k`` on
  ``(x_k, x_{k+1})``, ``y_0`` at and below ``x_0``, ``y_{n-1}`` at and above
  ``x_{n-1}``. Its derivative is zero everywhere (the jumps are invisible to gradients).
* ``GCVSpline`` (`GCVSpline`): Woltring's GCVSPL natural smoothing spline,
  fitted in NumPy exactly as OpenSim/Simbody fit it (`._gcvspl`), evaluated in JAX
  from one polynomial per interval.
* ``SimmSpline`` and ``NaturalCubicSpline``: a [`jaxmb.CubicSpline`][jaxmb.CubicSpline] with the
  Forsythe-Malcolm-Moler end conditions (`fmm_spline_coefficients`).
"""

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._errors import ModelError
from .._typing import RealLike
from ._base import AbstractJointFunction, _check_finite, coordinate_index, read_coordinate
from ._gcvspl import gcvspline_fit
from ._splines import _cubic_spline_coefficients


def _knots(kind: str, index: int, x, y, minimum: int) -> tuple[np.ndarray, np.ndarray]:
    """`x`, `y` as float64 NumPy arrays, checked: 1-D, equal length >= `minimum`,
    finite, `x` strictly increasing."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 1 or x.shape != y.shape or x.shape[0] < minimum:
        raise ModelError(f"{kind} of coordinate {index}: x and y must be 1-D of equal length >= {minimum}, "
                         f"got shapes {x.shape} and {y.shape}.")
    _check_finite(f"{kind} of coordinate {index}", "the knots must be finite numbers.", x=x, y=y)
    if not np.all(np.diff(x) > 0):
        raise ModelError(f"{kind} of coordinate {index}: x must be strictly increasing, got {x}; sort the "
                         "knots and remove duplicates.")
    return x, y


def fmm_spline_coefficients(x: RealLike, y: RealLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Polynomial coefficients ``(b, c, d)`` of OpenSim's SimmSpline through ``(x, y)``,
    in NumPy (float64): on ``[x_i, x_{i+1}]`` the spline is
    ``y_i + b_i t + c_i t² + d_i t³``. The end conditions of Forsythe, Malcolm and
    Moler (1977); two points give a line, three a parabola. The same fit as
    ``jaxmb.CubicSpline.fit(..., end_condition="not-a-knot-fmm")``.
    """
    x, y = _knots("SimmSpline", 0, x, y, minimum=2)
    return _cubic_spline_coefficients(np, x, y, "not-a-knot-fmm")


class _AbstractKnotFunction(AbstractJointFunction):
    """A function of one coordinate ``x = q[index]`` given at knots ``(x_k, y_k)``, the
    knots checked on construction (at least `_minimum_knots`, finite, `x` strictly
    increasing); the final classes define only how it interpolates."""

    index: int = eqx.field(static=True)
    x: Float[Array, " n"]
    y: Float[Array, " n"]
    _minimum_knots: ClassVar[int]

    def __init__(self, index: int, x: RealLike, y: RealLike):
        self.index = coordinate_index(index, type(self).__name__)
        x, y = _knots(type(self).__name__, self.index, x, y, minimum=self._minimum_knots)
        self.x, self.y = jnp.asarray(x), jnp.asarray(y)

    def coordinate_indices(self):
        return (self.index,)


class PiecewiseLinear(_AbstractKnotFunction):
    """Piecewise-linear interpolation of one coordinate (OpenSim's PiecewiseLinearFunction).

    ``f(q) = y_k + (x - x_k) s_k`` on ``[x_k, x_{k+1}]`` with ``x = q[index]`` and
    ``s_k`` the segment slope; outside the knots it continues with the first/last
    slope. Continuous, but not smooth: the gradient jumps at the knots and the
    Hessian is zero.

    **Arguments:**

    - `index`: the coordinate ``x = q[index]`` (rad or m).
    - `x`: (n,) knots, strictly increasing, n >= 2, in the coordinate's units.
    - `y`: (n,) values at the knots, in the joint variable's units.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for data of the wrong shape, non-finite, or `x` not increasing.
    """

    _minimum_knots: ClassVar[int] = 2

    def __call__(self, q):
        xq = read_coordinate(q, self.index, type(self).__name__)
        n = self.x.shape[0]
        k = jnp.clip(jnp.searchsorted(self.x, xq, side="right") - 1, 0, n - 2)
        slope = (self.y[k + 1] - self.y[k]) / (self.x[k + 1] - self.x[k])
        return self.y[k] + (xq - self.x[k]) * slope


class PiecewiseConstant(_AbstractKnotFunction):
    """Step function of one coordinate (OpenSim's PiecewiseConstantFunction).

    ``f = y_0`` for ``x <= x_0``, ``y_k`` for ``x_k < x < x_{k+1}``, ``y_{n-1}`` for
    ``x >= x_{n-1}`` (``x = q[index]``). Its gradient and Hessian are zero
    everywhere: the jumps do not show up in derivatives.

    **Arguments:**

    - `index`: the coordinate ``x = q[index]`` (rad or m).
    - `x`: (n,) knots, strictly increasing, n >= 1, in the coordinate's units.
    - `y`: (n,) values at the knots, in the joint variable's units.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for data of the wrong shape, non-finite, or `x` not increasing.
    """

    _minimum_knots: ClassVar[int] = 1

    def __call__(self, q):
        xq = read_coordinate(q, self.index, type(self).__name__)
        n = self.x.shape[0]
        k = jnp.clip(jnp.searchsorted(self.x, xq, side="right") - 1, 0, n - 1)
        val = self.y[k]
        val = jnp.where(xq <= self.x[0], self.y[0], val)
        return jnp.where(xq >= self.x[-1], self.y[-1], val).astype(q.dtype)


class GCVSpline(AbstractJointFunction):
    """OpenSim's GCVSpline of one coordinate: a piecewise polynomial ``f(q) = s(q[index])``.

    ``s`` is a natural spline of degree ``2m-1`` with knots ``x`` (length ``n``); it is
    stored as ``n + 1`` polynomials in ascending powers: ``coefficients[0]`` in powers
    of ``t - x_0`` for ``t < x_0``, ``coefficients[k + 1]`` in powers of ``t - x_k`` for
    ``x_k <= t < x_{k+1}`` (the last for ``t >= x_{n-1}``). Intervals are closed on
    the left, as in GCVSPL's ``splder``, so at a knot a derivative the spline does
    not have continuously (order ``>= 2m-1``) is the right-hand one.

    Build it with `fit` from the data of an OpenSim ``<GCVSpline>``. The fit is
    NumPy preprocessing; evaluation is JAX (any derivative order by autodiff).

    The spline is Woltring's (1986) GCVSPL, as OpenSim ports it.

    **Arguments:**

    - `index`: the coordinate ``x = q[index]`` (rad or m).
    - `x`: (n,) knots, strictly increasing, n >= 2.
    - `coefficients`: (n + 1, 2m) the pieces' polynomial coefficients (ascending
      powers), in joint units per (coordinate unit)^power; usually from `fit`.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for shapes that do not match, non-finite data, or `x` not
    increasing.
    """

    index: int = eqx.field(static=True)
    x: Float[Array, " n"]
    coefficients: Float[Array, "n_plus_1 order"]

    def __init__(self, index: int, x: RealLike, coefficients: RealLike):
        self.index = coordinate_index(index, type(self).__name__)
        x = np.asarray(x, dtype=float)
        coefficients = np.asarray(coefficients, dtype=float)
        if x.ndim != 1 or x.size < 2 or coefficients.ndim != 2 or coefficients.shape[0] != x.size + 1:
            raise ModelError(f"GCVSpline of coordinate {index}: need n >= 2 knots and (n + 1, order) "
                             f"coefficients, got shapes {x.shape} and {coefficients.shape}.")
        _check_finite(f"GCVSpline of coordinate {index}", "build it with GCVSpline.fit from finite data.",
                      x=x, coefficients=coefficients)
        if not np.all(np.diff(x) > 0):
            raise ModelError(f"GCVSpline of coordinate {index}: x must be strictly increasing, got {x}.")
        self.x = jnp.asarray(x)
        self.coefficients = jnp.asarray(coefficients)

    @classmethod
    def fit(cls, index: int, x: RealLike, y: RealLike, half_order: int,
            error_variance: RealLike = 0.0) -> "GCVSpline":
        """OpenSim's ``GCVSpline`` with properties ``half_order``, ``error_variance``,
        ``x``, ``y``, as a function of ``q[index]``.

        **Arguments:**

        - `index`: the coordinate ``q[index]``.
        - `x`, `y`: the data (1-D, equal length, finite; `x` strictly increasing).
        - `half_order`: ``m`` (degree ``2m - 1``).
        - `error_variance`: 0 interpolates; positive selects the smoothing from the
          known variance, negative by generalized cross-validation.

        **Returns:** the `GCVSpline`. Raises [`jaxmb.ModelError`][jaxmb.ModelError] where
        OpenSim fails (``half_order < 1``, fewer than ``2 half_order`` points, ``x``
        not strictly increasing) and for NaN or inf in the data.
        """
        _check_finite(f"GCVSpline.fit of coordinate {index}",
                      "remove the samples with NaN or inf before fitting.",
                      x=np.asarray(x, dtype=float), y=np.asarray(y, dtype=float),
                      error_variance=np.asarray(error_variance, dtype=float))
        try:
            _, pieces = gcvspline_fit(x, y, half_order, error_variance)
        except ValueError as e:
            raise ModelError(f"GCVSpline of coordinate {index}: {e}.") from None
        return cls(index, x, pieces)

    def coordinate_indices(self):
        return (self.index,)

    def __call__(self, q):
        xq = read_coordinate(q, self.index, type(self).__name__)
        k = jnp.searchsorted(self.x, xq, side="right")  # interval k - 1, row k
        tau = xq - self.x[jnp.maximum(k - 1, 0)]
        row = self.coefficients[k]
        val = row[-1]
        for r in range(self.coefficients.shape[1] - 2, -1, -1):
            val = row[r] + tau * val
        return val
