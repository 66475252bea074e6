"""Interpolating splines of one coordinate: the cubic spline (natural, or with the
end conditions of OpenSim's SimmSpline) and the C² quintic Hermite spline."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import flag, float_array
from .._errors import ModelError
from .._typing import RealLike
from ._base import _AbstractUnivariateFunction, _check_finite, _is_traced, coordinate_index

_END_CONDITIONS = ("natural", "not-a-knot-fmm")


def _cubic_spline_coefficients(xp, x, y, end_condition: str):
    """``(b, c, d)`` of the interpolating cubic spline through ``(x_k, y_k)``: on
    ``[x_i, x_{i+1}]`` it is ``y_i + b_i t + c_i t² + d_i t³``, ``t = x - x_i``; the last
    entries continue the last interval (its slope at ``x_{n-1}``).

    The second moments ``σ_i = s''(x_i)/6`` solve the interior rows
    ``h_{i-1} σ_{i-1} + 2 (h_{i-1} + h_i) σ_i + h_i σ_{i+1} = Δ_i - Δ_{i-1}`` with
    ``h_i = x_{i+1} - x_i`` and ``Δ_i = (y_{i+1} - y_i)/h_i``, and the end rows:

    * ``"natural"``: ``s'' = 0`` at both ends.
    * ``"not-a-knot-fmm"`` (OpenSim's SimmSpline and NaturalCubicSpline;
      Forsythe, Malcolm and Moler 1977): the spline's third derivative at each end
      equals that of the cubic through the four points nearest that end; with three
      points, a parabola.

    Two points give the line through them. `xp` is the array namespace: ``numpy``
    for concrete data (an importer fits hundreds of splines without compiling a
    kernel for each shape), ``jax.numpy`` for traced data (the fit is then
    differentiable in ``y`` and runs under jit/vmap). The same arithmetic either way.
    """
    n = x.shape[0]
    h = xp.diff(x)
    delta = xp.diff(y) / h
    if n == 2:
        return xp.stack([delta[0], delta[0]]), xp.zeros(2, y.dtype), xp.zeros(2, y.dtype)
    one, zero = xp.ones(1, y.dtype), xp.zeros(1, y.dtype)
    if end_condition == "natural":
        first, upper0, last, lower_n = one, zero, one, zero
        rhs_first, rhs_last = zero, zero
    else:
        first, upper0, last, lower_n = -h[:1], h[:1], -h[-1:], h[-1:]
        rhs_first, rhs_last = zero, zero
        if n > 3:
            def third_divided_difference(j):  # of the data at x_j .. x_{j+3}
                d2_a = (delta[j + 1] - delta[j]) / (x[j + 2] - x[j])
                d2_b = (delta[j + 2] - delta[j + 1]) / (x[j + 3] - x[j + 1])
                return (d2_b - d2_a) / (x[j + 3] - x[j])

            rhs_first = (h[0] ** 2 * third_divided_difference(0))[None]
            rhs_last = (-(h[-1] ** 2) * third_divided_difference(n - 4))[None]
    diag = xp.concatenate([first, 2.0 * (h[:-1] + h[1:]), last])
    upper = xp.concatenate([upper0, h[1:]])
    lower = xp.concatenate([h[:-1], lower_n])
    a = xp.diag(diag) + xp.diag(upper, 1) + xp.diag(lower, -1)
    rhs = xp.concatenate([rhs_first, delta[1:] - delta[:-1], rhs_last])
    sigma = xp.linalg.solve(a, rhs)
    b_int = delta - h * (sigma[1:] + 2.0 * sigma[:-1])
    d_int = (sigma[1:] - sigma[:-1]) / h
    # Slope at the last knot, from the last interval's cubic.
    b_last = delta[-1] + h[-1] * (sigma[-2] + 2.0 * sigma[-1])
    b = xp.concatenate([b_int, b_last[None]])
    d = xp.concatenate([d_int, d_int[-1:]])
    return b, 3.0 * sigma, d


def _cubic_derivatives(x, y, b, c, d, xq):
    """Value, first and second derivative at the scalar ``xq`` of the cubic pieces
    ``(x, y, b, c, d)``, continued linearly with the end slopes outside the knots."""
    n = x.shape[0]
    k = jnp.clip(jnp.searchsorted(x, xq, side="right") - 1, 0, n - 2)
    below = xq < x[0]
    above = xq > x[-1]
    t = xq - x[k]
    val = y[k] + t * (b[k] + t * (c[k] + t * d[k]))
    d1 = b[k] + t * (2.0 * c[k] + 3.0 * t * d[k])
    d2 = 2.0 * c[k] + 6.0 * t * d[k]
    # Linear extrapolation with the end slopes (no division: NaN-safe gradients).
    lo = y[0] + b[0] * (xq - x[0])
    hi = y[-1] + b[-1] * (xq - x[-1])
    val = jnp.where(below, lo, jnp.where(above, hi, val))
    d1 = jnp.where(below, b[0], jnp.where(above, b[-1], d1))
    d2 = jnp.where(below | above, jnp.zeros_like(d2), d2)
    return val, d1, d2


# A stack of splines (parameters with a leading axis) maps over it.
_stacked_cubic_derivatives = jnp.vectorize(_cubic_derivatives, signature="(n),(n),(n),(n),(n),()->(),(),()")


class CubicSpline(_AbstractUnivariateFunction):
    """Interpolating cubic spline of one coordinate, ``f(q) = s(q[index])``.

    On ``[x_i, x_{i+1}]``: ``s = y_i + b_i t + c_i t² + d_i t³``, ``t = x - x_i``.
    Outside ``[x_0, x_{n-1}]`` it continues linearly with the end slope (as OpenSim's
    SimmSpline and NaturalCubicSpline do), so f stays C¹ there and its Hessian is 0.

    Build it with `fit` (``end_condition="natural"`` for a natural cubic spline,
    ``"not-a-knot-fmm"`` for OpenSim's SimmSpline end conditions). The polynomial
    coefficients ``y, b, c, d`` are the array leaves; ``fit`` is differentiable in
    the data ``y``.

    **Arguments:**

    - `index`: the coordinate ``x = q[index]`` (rad or m).
    - `x`: (n,) knots, strictly increasing, in the coordinate's units.
    - `y`, `b`, `c`, `d`: (n,) the pieces' coefficients, in joint units per
      (coordinate unit)^0..3; usually from `fit`.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for non-finite knots or coefficients, arrays of
    different shapes or fewer than two knots, knots not strictly increasing.
    """

    index: int = eqx.field(static=True)
    x: Float[Array, " n"]
    y: Float[Array, " n"]
    b: Float[Array, " n"]
    c: Float[Array, " n"]
    d: Float[Array, " n"]

    def __init__(self, index, x, y, b, c, d):
        self.index = coordinate_index(index, type(self).__name__)
        self.x, self.y, self.b, self.c, self.d = (
            float_array(v) for v in (x, y, b, c, d)
        )
        _check_finite(f"CubicSpline of coordinate {self.index}",
                      "the knots and coefficients must be finite numbers; build the spline with "
                      "CubicSpline.fit from finite samples whose knots are not so close that the slopes "
                      "between them overflow.",
                      x=self.x, y=self.y, b=self.b, c=self.c, d=self.d)
        # Knots out of order, or a single one, evaluated to numbers (a lookup finds no piece).
        shapes = {np.shape(v) for v in (self.x, self.y, self.b, self.c, self.d)}
        if len(shapes) != 1 or self.x.ndim < 1 or self.x.shape[-1] < 2:
            raise ModelError(f"CubicSpline of coordinate {self.index}: x, y, b, c and d must be arrays of one shape "
                             f"(n,) with n >= 2, got shapes {sorted(shapes)}; build the spline with CubicSpline.fit.")
        if not _is_traced(self.x) and not bool(np.all(np.diff(np.asarray(self.x), axis=-1) > 0)):
            raise ModelError(f"CubicSpline of coordinate {self.index}: the knots x must be strictly increasing.")

    @classmethod
    def fit(
        cls, index: int, x: RealLike, y: RealLike, end_condition: str = "natural"
    ) -> "CubicSpline":
        """Fit the spline through the samples ``(x_k, y_k)`` (x strictly increasing).

        **Arguments:**

        - `index`: the coordinate ``q[index]`` the spline is a function of.
        - `x`, `y`: the samples, 1-D of equal length ``n >= 2``, finite.
        - `end_condition`: ``"natural"`` or ``"not-a-knot-fmm"`` (OpenSim's SimmSpline).

        **Returns:** the `CubicSpline` (a line for two samples).
        """
        if end_condition not in _END_CONDITIONS:
            raise ModelError(
                f"Unknown spline end condition {end_condition!r}; use 'natural' or 'not-a-knot-fmm'."
            )
        x = float_array(x)
        y = float_array(y)
        if x.ndim != 1 or x.shape != y.shape or x.shape[0] < 2:
            raise ModelError(
                f"Spline of coordinate {index}: x and y must be 1-D of equal length >= 2, "
                f"got shapes {np.shape(x)} and {np.shape(y)}."
            )
        _check_finite(f"CubicSpline.fit of coordinate {index}",
                      "remove the samples with NaN or inf (or fill them in) before fitting.", x=x, y=y)
        message = f"Spline of coordinate {index}: x must be strictly increasing; sort the samples and remove duplicates."
        if not _is_traced(x) and not bool(np.all(np.diff(np.asarray(x)) > 0)):
            raise ModelError(message)
        if _is_traced(x):  # under jit the knots' order is known when the program runs
            x = eqx.error_if(x, ~jnp.all(jnp.diff(x) > 0), message)
        if _is_traced(x) or _is_traced(y):
            b, c, d = _cubic_spline_coefficients(jnp, x, y, end_condition)
        else:
            xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
            b, c, d = (jnp.asarray(v, dtype=y.dtype)
                       for v in _cubic_spline_coefficients(np, xs, ys, end_condition))
        return cls(index=index, x=x, y=y, b=b, c=c, d=d)

    def _derivatives(self, xq):
        """Value, first and second derivative of s at the scalar ``xq`` (of a stack of
        splines, parameters (m, n), outputs (m,))."""
        return _stacked_cubic_derivatives(self.x, self.y, self.b, self.c, self.d, xq)


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
    h³ p'''/6``); formed in float64 they carry the data's rounding, and the second
    derivative, ``(2 c2 + 6 c3 t + ...)/h²``, multiplies that by up to 60/h², so at a
    knot the two pieces would disagree by as much. Exactly combined, neighbouring
    pieces meet to an ulp of each coefficient."""
    n = data.shape[0] - 1
    out = np.empty((n, 6))
    for j in range(n):
        d = (*data[j], *data[j + 1])
        for i in range(6):
            out[j, i] = math.fsum(t for w, v in zip(_QUINTIC_HERMITE[i], d) if w for t in _exact_products(w, v))
    return out


class QuinticSpline(_AbstractUnivariateFunction):
    """C² piecewise quintic of one coordinate on a uniform grid, ``f(q) = s(q[index])``.

    On the k-th interval ``[x_k, x_k + h]``, with ``t = (x - x_k)/h``,
    ``s = slope·x + Σ_{i=0}^{5} c_{k,i} t^i``: the quintic Hermite interpolant of the
    value, first and second derivative at the two knots (`fit`), so ``s``, ``s'``
    and ``s''`` are continuous and exact at every knot, with interpolation error
    O(h⁶), O(h⁵), O(h⁴).

    Why it exists: it is the cheapest closed-form joint function to evaluate. The
    interval comes from a floor on the uniform grid (no search), its six coefficients
    from one gather, and the value and both derivatives from short polynomials; no
    transcendental function. Pre-modeling a loop with it
    (``premodel(..., kind="quintic")``) takes the knot data from the loop itself:
    the solved variables and their exact gradient and Hessian (implicit
    differentiation, `LoopClosure.derivatives`).

    ``periodic=True`` repeats the grid's span (a crank's revolution); `slope` adds a
    secular term as `FourierSeries` does (a relative angle that gains turns with
    the crank). Otherwise ``s`` continues linearly outside ``[x_0, x_n]`` with the end
    slope, as `CubicSpline` does. `x0`, `step` and `periodic` are static (the
    grid is a fixed part of the basis); the coefficients and the slope are array leaves.

    **Arguments:**

    - `index`: the coordinate ``x = q[index]`` (rad or m).
    - `x0`, `step`: the grid's first knot and spacing (concrete; `step` > 0), in the
      coordinate's units.
    - `coefficients`: (n, 6) the pieces' coefficients in powers of ``t``, in the joint
      variable's units; usually from `fit`.
    - `periodic`: repeat ``[x0, x0 + n step]``.
    - `slope`: the secular term, joint units per coordinate unit.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for a traced or non-positive grid, coefficients of another
    shape, or non-finite values.
    """

    index: int = eqx.field(static=True)
    x0: float = eqx.field(static=True)
    step: float = eqx.field(static=True)
    periodic: bool = eqx.field(static=True)
    coefficients: Float[Array, "n 6"]
    slope: Float[Array, ""]

    def __init__(self, index: int, x0: float, step: float, coefficients, *, periodic: bool = False,
                 slope: RealLike = 0.0):
        self.index = coordinate_index(index, type(self).__name__)
        try:
            self.x0, self.step = float(x0), float(step)
        except (TypeError, jax.errors.ConcretizationTypeError):
            raise ModelError("QuinticSpline: x0 and step must be concrete numbers (the grid is a static part "
                             "of the basis); build the spline outside jit/vmap.") from None
        if not (np.isfinite(self.x0) and np.isfinite(self.step) and self.step > 0.0):
            raise ModelError(f"QuinticSpline of coordinate {index}: the grid needs a finite x0 and a positive "
                             f"step, got x0 = {self.x0}, step = {self.step}.")
        self.periodic = flag(periodic, f"{type(self).__name__}: periodic")
        self.coefficients = float_array(coefficients)
        if self.coefficients.ndim != 2 or self.coefficients.shape[1] != 6 or self.coefficients.shape[0] < 1:
            raise ModelError(f"QuinticSpline of coordinate {index}: coefficients must have shape (n, 6) with "
                             f"n >= 1 intervals, got {self.coefficients.shape}.")
        self.slope = float_array(slope)
        _check_finite(f"QuinticSpline of coordinate {self.index}",
                      "the coefficients and slope must be finite; fit the spline with "
                      "QuinticSpline.fit from finite data.", coefficients=self.coefficients, slope=self.slope)

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

        **Arguments:**

        - `index`: the coordinate ``q[index]`` the spline is a function of.
        - `x`: the uniform grid, n + 1 knots (concrete: it fixes the basis).
        - `y`, `dydx`, `d2ydx2`: value, first and second derivative at the knots
          (shape of `x`, finite).
        - `periodic`: whether the grid spans one period.
        - `slope`: the secular term.

        **Returns:** the `QuinticSpline`.
        """
        try:
            xs = np.asarray(x, dtype=float)
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
            raise ModelError("QuinticSpline.fit: the grid x must be concrete (it fixes the basis).") from None
        if xs.ndim != 1 or xs.shape[0] < 2:
            raise ModelError(f"QuinticSpline.fit of coordinate {index}: x must be 1-D with at least 2 knots, "
                             f"got shape {xs.shape}.")
        fix = "remove the NaN or inf from the data (resample it, or fill the gaps) before fitting."
        _check_finite(f"QuinticSpline.fit of coordinate {index}", fix, x=xs)
        n = xs.shape[0] - 1
        step = (xs[-1] - xs[0]) / n
        if not step > 0 or np.max(np.abs(np.diff(xs) - step)) > 1e-9 * step:
            raise ModelError(f"QuinticSpline.fit of coordinate {index}: x must be a uniform, increasing grid "
                             "(use np.linspace); resample non-uniform data or use CubicSpline.")
        arrays = [float_array(a) for a in (y, dydx, d2ydx2)]
        if any(a.shape != xs.shape for a in arrays):
            raise ModelError(f"QuinticSpline.fit of coordinate {index}: y, dydx and d2ydx2 must have x's shape "
                             f"{xs.shape}, got {[a.shape for a in arrays]}.")
        slope = float_array(slope)
        y, dydx, d2ydx2 = arrays
        _check_finite(f"QuinticSpline.fit of coordinate {index}", fix, y=y, dydx=dydx, d2ydx2=d2ydx2,
                      slope=slope)
        grid = jnp.asarray(xs, dtype=y.dtype)
        data = jnp.stack([y - slope * grid, step * (dydx - slope), step**2 * d2ydx2], axis=1)
        if not _is_traced(data):
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
            kf = jnp.clip(knot, 0, n - 1)
            k = kf.astype(jnp.int32)
            # Outside the grid u - k runs past [0, 1]: the end piece's value and slope
            # at the end knot, continued linearly (below). `where`, not `clip`: at a
            # knot itself clip would pass autodiff half the derivative.
            past = u - kf
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
