"""Segmented quintic Bezier curves y(x), the curve family of Millard et al. (2013) and of
OpenSim's ``SmoothSegmentedFunction``: C2 curves built from "corners" (two points, the slopes
there and a curviness), extrapolated linearly outside their domain.

A curve is a stack of ``n`` quintic Bezier segments, control points ``px, py`` of shape
``(n, 6)``, each segment ``(x(u), y(u))``, ``u in [0, 1]``. Its value at ``x`` needs the ``u``
with ``x(u) = x``: a safeguarded Newton iteration of fixed length (no per-lane while loop under
`jax.vmap`), whose derivative is given by the implicit-function theorem through a
`jax.custom_jvp` (``du = (dx - x(u; dpx)) / x'(u)``; the Bezier polynomial is linear in its
control points), so `jax.grad` and `jax.jacfwd` of any order are exact, with respect to ``x``
and to the control points.

Reference: Millard, M., Uchida, T., Seth, A., Delp, S. L. (2013). Flexing computational muscle:
modeling and simulation of musculotendon dynamics. J Biomech Eng 135(2):021005 (the curves'
construction, appendix); OpenSim's ``SegmentedQuinticBezierToolkit``.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._safe import safe_div

_U_ITERATIONS = 12
"""Safeguarded Newton steps on u. From the chord guess the iteration converges quadratically on
these monotone segments (x'(u) >= 5 c (x_C - x_0) > 0): 8 steps reach round-off (|x(u) - x|
within 9 ulps) on every curve of MoBL-ARMS's 50 and Rajagopal et al. (2016)'s 80 muscles, 6 do
not (5e7 ulps); 12 leave margin."""

_ROOT_EPS = 1.4901161193847656e-08  # sqrt(SimTK::Eps)


def _monomial_matrix(n):
    """M with ``B(u) = sum_k (M @ p)[k] u^k`` for the Bernstein form of degree `n`."""
    m = np.zeros((n + 1, n + 1))
    for i in range(n + 1):  # control point i: C(n,i) u^i (1-u)^(n-i)
        for j in range(n - i + 1):
            m[i + j, i] = math.comb(n, i) * math.comb(n - i, j) * (-1) ** j
    return m


_TO_MONOMIAL = _monomial_matrix(5)
_TO_MONOMIAL_DU = (np.arange(1, 6)[:, None] * _TO_MONOMIAL[1:])  # coefficients of dB/du


def corner_control_points(x0, y0, dydx0, x1, y1, dydx1, curviness, xp=jnp):
    """The 6 control points (x, y) of a quintic Bezier "corner" from (x0, y0) with slope dydx0
    to (x1, y1) with slope dydx1 (Millard et al. 2013, appendix; OpenSim's
    ``calcQuinticBezierCornerControlPoints``): the two tangent lines meet at (xC, yC); the inner
    control points are doubled at ``p0 + c (pC - p0)`` and ``p1 + c (pC - p1)``, ``c`` the
    (already scaled) curviness. Returns ``(px, py)``, each ``(6,)``; `xp` is the array module
    (NumPy for concrete parameters, `jax.numpy` to differentiate through the construction)."""
    parallel = xp.abs(dydx0 - dydx1) <= _ROOT_EPS
    denominator = xp.where(parallel, 1.0, dydx0 - dydx1)
    xc = xp.where(parallel, 0.5 * (x0 + x1), (y1 - y0 - x1 * dydx1 + x0 * dydx0) / denominator)
    yc = (xc - x1) * dydx1 + y1
    xm0, ym0 = x0 + curviness * (xc - x0), y0 + curviness * (yc - y0)
    xm1, ym1 = x1 + curviness * (xc - x1), y1 + curviness * (yc - y1)
    return xp.stack([x0, xm0, xm0, xm1, xm1, x1]), xp.stack([y0, ym0, ym0, ym1, ym1, y1])


def corner_is_c_shaped(x0, y0, dydx0, x1, y1, dydx1) -> bool:
    """OpenSim's check that a corner is C-shaped (the tangents meet between the ends): the
    chord is longer than either end's distance to the tangents' intersection. Concrete values."""
    dydx0, dydx1 = float(dydx0), float(dydx1)
    if abs(dydx0 - dydx1) > _ROOT_EPS:
        xc = (y1 - y0 - x1 * dydx1 + x0 * dydx0) / (dydx0 - dydx1)
    else:
        xc = 0.5 * (x0 + x1)
    yc = (xc - x1) * dydx1 + y1
    a = (xc - x0) ** 2 + (yc - y0) ** 2
    b = (xc - x1) ** 2 + (yc - y1) ** 2
    c = (x1 - x0) ** 2 + (y1 - y0) ** 2
    return bool(c > a and c > b)


def _horner(u, coefficients):
    c = jnp.unstack(coefficients, axis=-1)
    out = c[-1]
    for ck in c[-2::-1]:
        out = out * u + ck
    return out


def bezier(u, p):
    """Quintic Bezier polynomial with control points ``p`` (..., 6) at ``u`` (monomial form,
    Horner's rule, as OpenSim expands it)."""
    return _horner(u, p @ _TO_MONOMIAL.T.astype(p.dtype))


def bezier_du(u, p):
    """``d bezier / du``."""
    return _horner(u, p @ _TO_MONOMIAL_DU.T.astype(p.dtype))


@jax.custom_jvp
def bezier_parameter(x, px):
    """The ``u in [0, 1]`` with ``bezier(u, px) = x`` on a monotone segment (``x`` within it):
    safeguarded Newton from the chord guess, `_U_ITERATIONS` steps."""
    x0, x5 = px[..., 0], px[..., 5]
    u = jnp.clip(safe_div(x - x0, x5 - x0), 0.0, 1.0)

    def step(_, carry):
        u, lo, hi = carry
        f = bezier(u, px) - x
        lo = jnp.where(f < 0.0, u, lo)
        hi = jnp.where(f < 0.0, hi, u)
        newton = u - safe_div(f, bezier_du(u, px))
        inside = (newton >= lo) & (newton <= hi)
        return jnp.where(inside, newton, 0.5 * (lo + hi)), lo, hi

    u, _, _ = jax.lax.fori_loop(0, _U_ITERATIONS, step, (u, jnp.zeros_like(u), jnp.ones_like(u)))
    return u


@bezier_parameter.defjvp
def _bezier_parameter_jvp(primals, tangents):
    x, px = primals
    dx, dpx = tangents
    u = bezier_parameter(x, px)
    return u, safe_div(dx - bezier(u, dpx), bezier_du(u, px))


def segmented_curve(x: Float[ArrayLike, "*b"], px: Float[Array, "n 6"], py: Float[Array, "n 6"],
                    dydx0: Float[ArrayLike, ""], dydx1: Float[ArrayLike, ""]
                    ) -> tuple[Float[Array, "*b"], Float[Array, "*b"]]:
    """(value, dy/dx) of the segmented quintic Bezier curve ``(px, py)`` at ``x``, linear beyond
    its ends with slopes `dydx0` (below ``px[0, 0]``) and `dydx1` (above ``px[-1, 5]``), as
    OpenSim's ``SmoothSegmentedFunction::calcValueAndFirstDerivative``; inside, the slope is
    ``(dy/du) / (dx/du)``. Differentiable (any order) in ``x`` and the control points."""
    x = jnp.asarray(x)
    xa, xb = px[0, 0], px[-1, 5]
    xc = jnp.where(x < xa, xa, jnp.where(x > xb, xb, x))  # (not jnp.clip: its gradient is 1/2 at the ends)
    starts = jnp.reshape(px[1:, 0], (1,) * xc.ndim + (px.shape[0] - 1,))
    idx = jnp.clip(jnp.sum(xc[..., None] >= starts, axis=-1), 0, px.shape[0] - 1)
    pxi, pyi = px[idx], py[idx]
    u = bezier_parameter(xc, pxi)
    y = bezier(u, pyi)
    slope = safe_div(bezier_du(u, pyi), bezier_du(u, pxi))
    below, above = x < xa, x > xb
    value = jnp.where(below, py[0, 0] + dydx0 * (x - xa), jnp.where(above, py[-1, 5] + dydx1 * (x - xb), y))
    return value, jnp.where(below, dydx0, jnp.where(above, dydx1, slope))


class SegmentedQuinticCurve(eqx.Module):
    """A segmented quintic Bezier curve ``y(x)`` as array leaves: control points `px`, `py`
    ``(n, 6)`` and the slopes of its linear extrapolation below and above its domain. Calling it
    gives ``(y, dy/dx)`` (`segmented_curve`)."""

    px: Float[Array, "n 6"]
    py: Float[Array, "n 6"]
    slope_below: Float[Array, ""]
    slope_above: Float[Array, ""]

    def __call__(self, x):
        return segmented_curve(x, self.px, self.py, self.slope_below, self.slope_above)
