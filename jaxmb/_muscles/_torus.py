"""OpenSim's WrapTorus.

The point of the torus's centre circle (radius `outer`,
xy plane) nearest the segment is found by MINPACK's Levenberg-Marquardt
(lmdif as modified in OpenSim's Lmdif.cpp: forward-difference Jacobian with
a fixed step of 1e-5, initial step bound 0.2 when the start point is 0,
ftol = xtol = 1e-4, at most 500 evaluations) on the residual of
WrapTorus::calcCircleResids, started at each end of the segment; a cylinder of
radius `inner`, 10 km long, quadrant "+x", tangent to the circle there, then
wraps the segment. The residual is not d|x - circle|^2/du: its last term
carries a factor 2, so that its root is the point nearest the circle of
radius 2 * outer (see the errata page). jaxmb solves OpenSim's residual, so that
its lengths are OpenSim's.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._safe import dsign, safe_div, sqrt0, unit
from ._checks import positive, scalar
from ._cylinder import cylinder_wrap
from ._lm import lmdif_1d
from ._wrap_base import NO_WRAP, WRAPPED, AbstractWrapObject, WrapAlgorithm, init_common, iterate_derivative

_TORUS_CYL_LENGTH = 10000.0


def _torus_resid(u, p1, p2, outer):
    """WrapTorus::calcCircleResids at distance u from p1 along p1 -> p2 (as OpenSim writes it)."""
    return _torus_resid_fn(p1, p2, outer)(u)


def _torus_resid_fn(p1, p2, outer):
    """u -> WrapTorus::calcCircleResids(u), with the segment's coefficients computed once
    (the search evaluates it a few times per iteration)."""
    n = unit(p2 - p1)
    c2 = 2.0 * (p1 @ n)
    c3 = p1[0] * n[0] + p1[1] * n[1]
    c4 = n[0] * n[0] + n[1] * n[1]
    c5 = p1[0] * p1[0] + p1[1] * p1[1]

    def resid(u):
        rho = sqrt0(u * u * c4 + 2.0 * c3 * u + c5)
        # rho = 0 (the line through the torus axis) divides by zero in OpenSim; 0 here.
        return c2 + 2.0 * u - 2.0 * outer * safe_div(2.0 * c4 * u + 2.0 * c3, rho)

    return resid


@iterate_derivative
def _torus_closest_u_flat(x):
    return lmdif_1d(_torus_resid_fn(x[0:3], x[3:6], x[6]))


def _torus_closest_u(p1, p2, outer):
    """OpenSim's Levenberg-Marquardt result u (distance from p1 towards p2), differentiable
    as that iterate (`iterate_derivative`; OpenSim stops at ftol = xtol = 1e-4)."""
    return _torus_closest_u_flat(jnp.concatenate([p1, p2, jnp.reshape(outer, (1,))]))


def _torus_wrap(p1, p2, inner, outer, axis, sign, single=True, skip=False):
    """OpenSim's WrapTorus::wrapLine (the module docstring); `single`, `skip` as for `cylinder_wrap`."""
    # From both ends in one batched Levenberg-Marquardt solve (two loops compile to
    # twice the program).
    u1, u2 = jax.vmap(_torus_closest_u, in_axes=(0, 0, None))(jnp.stack([p1, p2]), jnp.stack([p2, p1]), outer)
    a1, a2 = p1 + u1 * unit(p2 - p1), p2 + u2 * unit(p1 - p2)

    def dist2(x):  # squared distance to the circle (OpenSim compares the square roots)
        return x @ x + outer * outer - 2.0 * outer * sqrt0(x[0] ** 2 + x[1] ** 2)

    dd1, dd2 = dist2(a1), dist2(a2)
    quad = jnp.asarray(sign) != 0
    on1, on2 = dsign(a1[axis]) == sign, dsign(a2[axis]) == sign
    pick2 = jnp.where(quad, jnp.where(on1 & on2, ~(dd1 < dd2), ~on1), ~(dd1 < dd2))
    valid = ~quad | on1 | on2
    a = jnp.where(pick2, a2, a1)
    rad = sqrt0(a[0] ** 2 + a[1] ** 2)
    closest = jnp.array([a[0], a[1], 0.0]) * safe_div(outer, rad)
    # Cylinder frame: x points from the circle point to the torus centre, y = -z_torus.
    cx = unit(-closest)
    cy = jnp.array([0.0, 0.0, -1.0], p1.dtype)
    cz = jnp.cross(cx, cy)
    rot = jnp.stack([cx, cy, cz])  # rows: cylinder axes in torus coordinates
    origin = closest  # circle point, in torus coordinates

    def to_cyl(p):
        return rot @ (p - origin)

    code, r1, r2, wl = cylinder_wrap(to_cyl(p1), to_cyl(p2), inner, jnp.asarray(_TORUS_CYL_LENGTH, p1.dtype),
                                      0, 1, single, skip)
    # OpenSim's WrapTorus returns "wrapped" whatever the cylinder says; a cylinder that
    # did not wrap leaves no wrap points (r1 = NaN: never the best segment), so the
    # segment counts as wrapped exactly where the cylinder wrapped it.
    code = jnp.where(valid & (code > 0), WRAPPED, NO_WRAP)
    back = lambda r: rot.T @ r + origin  # noqa: E731
    return code, back(r1), back(r2), wl


_TORUS = WrapAlgorithm(jax.jit(lambda p1, p2, prm, ax, sg, skip=False: _torus_wrap(p1, p2, prm[0], prm[1], ax, sg)))
# On a muscle with several PathWraps: the inner cylinder slides its tangent points.
_TORUS_MULTI = WrapAlgorithm(jax.jit(
    lambda p1, p2, prm, ax, sg, skip=False: _torus_wrap(p1, p2, prm[0], prm[1], ax, sg, False, skip)))


class WrapTorus(AbstractWrapObject):
    """A torus in the wrap frame's xy plane; the path threads its hole.

    OpenSim 4.6's WrapTorus, reproduced: a point of the centre circle (radius
    `outer_radius`) near the segment is found by OpenSim's Levenberg-Marquardt
    search on OpenSim's residual (whose root is the point nearest the circle of
    radius 2 * outer_radius; see the errata page), and a 10 km cylinder of radius
    `inner_radius` tangent to the circle there (quadrant +x, towards the torus
    centre) wraps the segment. Like OpenSim's, it can wrap segments that pass
    beside the torus. Units: m.

    **Arguments:**

    - `inner_radius`: the tube's radius, m, positive.
    - `outer_radius`: the centre circle's radius, m, positive.
    - `name`, `body`, `translation`, `xyz_body_rotation`, `quadrant`, `range`, `method`:
      as for every wrap object (`AbstractWrapObject`).

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for non-positive or non-finite sizes, an unknown quadrant or method.
    """

    name: str = eqx.field(static=True)
    body: str = eqx.field(static=True)
    translation: Float[Array, "3"]
    xyz_body_rotation: Float[Array, "3"]
    inner_radius: Float[Array, ""]
    outer_radius: Float[Array, ""]
    quadrant: str = eqx.field(static=True)
    range: tuple = eqx.field(static=True)
    method: str = eqx.field(static=True)

    def __init__(self, name, body, inner_radius, outer_radius, translation=(0.0, 0.0, 0.0),
                 xyz_body_rotation=(0.0, 0.0, 0.0), quadrant="all", range=(-1, -1), method="hybrid"):
        init_common(self, name, body, translation, xyz_body_rotation, quadrant, range, method)
        for label, value in (("inner_radius", inner_radius), ("outer_radius", outer_radius)):
            what = f"WrapTorus {name!r} {label}"
            setattr(self, label, positive(scalar(value, what), what))

    def wrap_parameters(self, dtype):
        return jnp.stack([self.inner_radius, self.outer_radius]).astype(dtype)

    def turn_radius(self, dtype):
        return jnp.asarray(self.inner_radius, dtype)

    def algorithm(self, n_wraps):
        return _TORUS_MULTI if n_wraps > 1 else _TORUS
