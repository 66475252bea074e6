"""OpenSim's WrapCylinder: a cylinder along the wrap frame's z axis, the path a helix on it.

On a muscle with several PathWraps OpenSim restarts the helix with slid tangent
points (`_cyl_multi_slide`); that variant is its own algorithm, so that
single-wrap cylinders compile (and differentiate) without the sliding loop. With
``sliding="geodesic"`` the sliding is replaced by the point it aims at, in closed form
(`_cyl_geodesic`): the tangent-continuous helix, the shortest path over the cylinder.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._batching import iterate_lanes
from .._errors import ModelError
from .._safe import acos, dsign, norm, safe_div, sqrt0, unit
from ._checks import positive, scalar
from ._wrap_base import (INSIDE_RADIUS, MANDATORY_WRAP, NO_WRAP, ROUNDOFF, WRAPPED, AbstractWrapObject,
                         WrapAlgorithm, init_common, iterate_derivative, pick_shortest, quadric_tangency)


def _closest_between_lines(p1, p2, p3, p4):
    """Closest points of the lines p1p2 and p3p4: (on first, s along p1->p2, on second, t)."""
    d1, d2, r = p2 - p1, p4 - p3, p1 - p3
    a, e, b = d1 @ d1, d2 @ d2, d1 @ d2
    c, f = d1 @ r, d2 @ r
    den = a * e - b * b
    s = safe_div(b * f - c * e, den)
    t = safe_div(a * f - b * c, den)
    return p1 + s * d1, s, p3 + t * d2, t


def _cylinder_tangents(p, radius):
    pa = jnp.array([0.0, 0.0, 1.0], p.dtype) * p[2]
    vv = p - pa
    dist0 = norm(vv)
    vv = unit(vv)
    sin_t = safe_div(radius, dist0)
    dist = radius * sin_t
    pp = pa + dist * vv
    h = sqrt0(radius * radius - dist * dist)
    uu = jnp.cross(jnp.array([0.0, 0.0, 1.0], p.dtype), vv)
    return pp + h * uu, pp - h * uu, pa, dist0


_CYL_TANGENCY = 0.1 * np.pi / 180.0  # OpenSim's TANGENCY_THRESHOLD
_CYL_MAX_ADJUST = 100
_CYL_SEG = 0.002  # m


def _cyl_spiral(r1, r2, radius, long_wrap):
    """OpenSim's spiral from r1 to r2 (cylinder frame): signed angle, axial rise, length."""
    uu = r1.at[2].set(0.0)
    vv = r2.at[2].set(0.0)
    y, x = uu[0] * vv[1] - uu[1] * vv[0], uu @ vv
    ok = x * x + y * y > 0.0
    theta = jnp.arctan2(jnp.where(ok, y, 0.0), jnp.where(ok, x, 1.0))
    theta = jnp.where(long_wrap, 2.0 * jnp.pi - theta, theta)
    axial = r2[2] - r1[2]
    xr = radius * theta
    return theta, axial, sqrt0(xr * xr + axial * axial)


def _cyl_spiral_point(r1, theta, axial, sense, t):
    ang = sense * t * theta
    c, s = jnp.cos(ang), jnp.sin(ang)
    return jnp.stack([c * r1[0] - s * r1[1], s * r1[0] + c * r1[1], r1[2] + t * axial])


def _cyl_adjust(pt, r, w):
    """OpenSim's _adjust_tangent_point: when the line pt-r and the first spiral chord r-w meet
    the axis at angles more than 0.1 degree apart, slide r along the axis by 1.5 times the
    distance to where the line pt-w passes its generator line."""
    dn = jnp.array([0.0, 0.0, 1.0], r.dtype)
    alpha = acos(unit(r - pt) @ dn)
    omega = acos(unit(w - r) @ dn)
    need = jnp.abs(alpha - omega) > _CYL_TANGENCY
    pa = r + ((pt - r) @ dn) * dn
    wa = r + ((w - r) @ dn) * dn
    v1, v2 = unit(w - pt), unit(wa - pa)
    cr = jnp.cross(v1, v2)
    den = cr @ cr
    ok = den > ROUNDOFF
    tt = safe_div(jnp.linalg.det(jnp.stack([pa - pt, v1, cr])), jnp.where(ok, den, 1.0))
    inter = pa + tt * v2
    moved = r + 1.5 * (inter - r)
    need = need & ok
    return jnp.where(need, moved, r), need


def _cyl_restart(carry, args):
    """One of OpenSim's restarts of the spiral with slid tangent points; done once no end
    needs sliding (or the spiral has fewer than two segments)."""
    r1, r2 = carry
    p1, p2, radius, long_wrap = args
    sense = jnp.where(long_wrap, -1.0, 1.0)
    theta, axial, wl = _cyl_spiral(r1, r2, radius, long_wrap)
    n = jnp.maximum(jnp.floor(jax.lax.stop_gradient(wl) / _CYL_SEG), 1.0)
    t = 1.0 / n
    r1n, a1 = _cyl_adjust(p1, r1, _cyl_spiral_point(r1, theta, axial, sense, t))
    r2n, a2 = _cyl_adjust(p2, r2, _cyl_spiral_point(r1n, theta, axial, sense, 1.0 - t))
    go = (n >= 2.0) & (a1 | a2)
    return (jnp.where(go, r1n, r1), jnp.where(go, r2n, r2)), ~go


def _cyl_multi_slide(p1, p2, r1, r2, radius, long_wrap, skip):
    """OpenSim's restarts of the spiral with slid tangent points, until no end needs
    sliding (at most _CYL_MAX_ADJUST), each segment on its own (`iterate_lanes`: usually
    a few restarts, a few segments of a batch many more). `skip`: a segment that does not
    wrap (its tangent points are not used) makes none."""
    return iterate_lanes(_cyl_restart, _CYL_MAX_ADJUST, (r1, r2), (p1, p2, radius, long_wrap), skip)


@iterate_derivative
def _cyl_multi_adjust_flat(x, long_wrap, skip):
    return jnp.concatenate(_cyl_multi_slide(x[0:3], x[3:6], x[6:9], x[9:12], x[12], long_wrap, skip))


def _cyl_multi_adjust(p1, p2, r1, r2, radius, long_wrap, skip):
    """The tangent-point sliding OpenSim does when the muscle has several PathWraps,
    differentiable in both modes as the restarts actually made (`iterate_derivative`)."""
    out = _cyl_multi_adjust_flat(jnp.concatenate([p1, p2, r1, r2, jnp.reshape(radius, (1,))]), long_wrap, skip)
    return out[:3], out[3:]


def _cyl_geodesic(p1, p2, r1, r2, radius, long_wrap):
    """The tangent points' axial positions that OpenSim's sliding aims at, in closed form
    (cylinder frame, axis z; r1, r2 keep their x and y).

    Unrolled into the plane, the path p1 -> r1 -> helix -> r2 -> p2 is tangent-continuous
    (the straight parts meet the axis at the helix's angle, `_cyl_adjust`'s test) exactly
    when it is one straight line: its axial coordinate then rises in proportion to the
    path's length across the axis, ``h1 = |p1 - r1|_xy``, the arc ``radius |theta|``,
    ``h2 = |p2 - r2|_xy``, so that

        z(r1) = z(p1) + (z(p2) - z(p1)) h1 / (h1 + radius |theta| + h2),
        z(r2) = z(p2) - (z(p2) - z(p1)) h2 / (h1 + radius |theta| + h2),

    and the whole path is ``sqrt((h1 + radius |theta| + h2)^2 + (z(p2) - z(p1))^2)``: the
    geodesic over the cylinder between tangent lines, the shortest path with these
    tangent points' x and y (do Carmo, Differential Geometry of Curves and Surfaces,
    section 4-4: a cylinder is locally isometric to the plane)."""
    h1 = sqrt0((p1[0] - r1[0]) ** 2 + (p1[1] - r1[1]) ** 2)
    h2 = sqrt0((p2[0] - r2[0]) ** 2 + (p2[1] - r2[1]) ** 2)
    theta, _, _ = _cyl_spiral(r1, r2, radius, long_wrap)
    across = h1 + radius * jnp.abs(theta) + h2
    rise = p2[2] - p1[2]
    return r1.at[2].set(p1[2] + rise * safe_div(h1, across)), r2.at[2].set(p2[2] - rise * safe_div(h2, across))


def cylinder_wrap(p1, p2, radius, length, axis, sign, single=True, skip=False, sliding="opensim"):
    """OpenSim's WrapCylinder; `single` is False when the muscle has several PathWraps
    (OpenSim then slides the tangent points, see `_cyl_multi_adjust`); it may be traced.
    `skip` (may be traced): the caller does not use this segment's result, so no sliding.
    `sliding` (static): ``"opensim"``, OpenSim's restarts; ``"geodesic"``, the point they
    aim at (`_cyl_geodesic`)."""
    dn = jnp.array([0.0, 0.0, 1.0], p1.dtype)
    r2_ = radius * radius
    inside = (p1[0] ** 2 + p1[1] ** 2 < r2_) | (p2[0] ** 2 + p2[1] ** 2 < r2_)
    near12, t12, near00, _ = _closest_between_lines(
        p1, p2, jnp.array([0.0, 0.0, -0.5], p1.dtype) * length, jnp.array([0.0, 0.0, 0.5], p1.dtype) * length)
    hit = (jnp.sum((near12 - near00) ** 2) < r2_) & (t12 > 0.0) & (t12 < 1.0)
    r1a, r1b, p11, p11_dist = _cylinder_tangents(p1, radius)
    r2a, r2b, p22, p22_dist = _cylinder_tangents(p2, radius)
    # sign == 0 ("all"): the shortest tangent pair, a mandatory wrap when the segment hits.
    code0 = jnp.where(hit, MANDATORY_WRAP, NO_WRAP)
    r10, r20, _, _ = pick_shortest(r1a, r1b, r2a, r2b, p11, p22)
    # Quadrant-constrained wrap (computed always; selected where sign != 0, which may be traced).
    quad = jnp.asarray(sign) != 0
    s1, s2 = dsign(p1[axis]), dsign(p2[axis])
    either = (s1 == sign) | (s2 == sign)
    weak = (s1 != s2) & (dsign(near12[axis]) != sign)
    code_q = jnp.where(either, jnp.where(hit, MANDATORY_WRAP, jnp.where(weak, WRAPPED, NO_WRAP)), WRAPPED)
    r1am, r1bm, r2am, r2bm = r1a - p11, r1b - p11, r2a - p22, r2b - p22
    alpha = acos(safe_div(r1am @ r2bm, norm(r1am) * norm(r2bm)))
    beta = acos(safe_div(r1bm @ r2am, norm(r1bm) * norm(r2am)))
    on = lambda r: dsign(r[axis]) == sign  # noqa: E731
    a_on, b_on, r2a_on, r2b_on = on(r1a), on(r1b), on(r2a), on(r2b)
    ab = alpha > beta
    # Choice "B": r1 = r1b, r2 = r2a; choice "A": r1 = r1a, r2 = r2b.
    case1 = a_on & b_on
    case2 = a_on & ~b_on
    case3 = ~a_on & b_on
    case4 = ~a_on & ~b_on
    use_b = jnp.where(case1, r2a_on,
            jnp.where(case2, False,
            jnp.where(case3, True,
            jnp.where(r2a_on, True, jnp.where(r2b_on, False, ~ab)))))
    far_q = jnp.where(case4 & ~r2a_on & ~r2b_on, True, jnp.where(use_b, ~ab, ab))
    r1q = jnp.where(use_b, r1b, r1a)
    r2q = jnp.where(use_b, r2a, r2b)
    sum_musc = (r1q - p1) + (r2q - p2)
    sum_r = (r1q - p11) + (r2q - p22)
    long_wrap = quad & (sum_r @ sum_musc < 0.0)
    far = quad & far_q
    code = jnp.where(quad, code_q, code0)
    r1, r2 = jnp.where(quad, r1q, r10), jnp.where(quad, r2q, r20)
    # Apex of the wrap, then slide r1/r2 along the axis into the plane p1, p2, apex.
    t = safe_div(p11_dist, p11_dist + p22_dist)
    mpt = p1 + t * (p2 - p1)
    axispt = dn * mpt[2]
    l1, l2 = unit(p1 - axispt), unit(p2 - axispt)
    pn = unit(jnp.cross(l1, l2))
    vert1 = unit(jnp.cross(dn, pn))
    vert2 = unit(jnp.cross(pn, dn))
    apex1 = axispt + radius * vert1
    apex2 = axispt + radius * vert2
    dd1, dd2 = jnp.sum((mpt - apex1) ** 2), jnp.sum((mpt - apex2) ** 2)
    pick1 = jnp.where(far, ~(dd1 < dd2), dd1 < dd2)
    apex = jnp.where(pick1, apex1, apex2)
    pn = unit(jnp.cross(unit(p1 - apex), unit(p2 - apex)))
    d = -(p1 @ pn)

    def slide(r, pfar, pnear):
        a_, b_ = r - 10.0 * dn, r + 10.0 * dn
        vec = b_ - a_
        dot = vec @ pn
        tt = safe_div(-d - pn @ a_, dot)
        ok = (jnp.abs(dot) >= 1e-8) & (tt >= -1e-8) & (tt <= 1.0 + 1e-8)
        rp = a_ + tt * vec
        closer = (rp[2] - pfar[2]) ** 2 < (pnear[2] - pfar[2]) ** 2
        return jnp.where(ok & closer, rp, r)

    r1 = slide(r1, p22, p11)
    r2 = slide(r2, p11, p22)
    half = 0.5 * length
    beyond = ((r1[2] < -half) | (r1[2] > half)) & ((r2[2] < -half) | (r2[2] > half))
    code = jnp.where(beyond, NO_WRAP, code)
    # Helical path length (OpenSim's _make_spiral_path), after the multi-wrap sliding.
    if not (isinstance(single, bool) and single):
        if sliding == "geodesic":
            r1m, r2m = _cyl_geodesic(p1, p2, r1, r2, radius, long_wrap)
        else:
            r1m, r2m = _cyl_multi_adjust(p1, p2, r1, r2, radius, long_wrap, skip | inside | (code == NO_WRAP))
        r1, r2 = jnp.where(single, r1, r1m), jnp.where(single, r2, r2m)
    _, _, wl = _cyl_spiral(r1, r2, radius, long_wrap)
    code = jnp.where(inside, INSIDE_RADIUS, code)
    return code, r1, r2, wl


def _cylinder_tangency(p1, p2, r1, r2, prm):
    # Across the axis only: the sliding moves the tangent points along it.
    return quadric_tangency(p1, p2, r1, r2, jnp.stack([prm[0] ** -2, prm[0] ** -2, jnp.zeros_like(prm[0])]))


_CYLINDER = WrapAlgorithm(jax.jit(
    lambda p1, p2, prm, ax, sg, skip=False: cylinder_wrap(p1, p2, prm[0], prm[1], ax, sg)),
    tangency=_cylinder_tangency)
# On a muscle with several PathWraps (OpenSim's singleWrap false). `skip`: the segment
# is not a candidate (its result is not used), so the sliding need not run on it.
_CYLINDER_MULTI = WrapAlgorithm(jax.jit(
    lambda p1, p2, prm, ax, sg, skip=False: cylinder_wrap(p1, p2, prm[0], prm[1], ax, sg, False, skip)),
    unrefined=_CYLINDER, iterates=True, tangency=_cylinder_tangency)
# The same with the sliding's aim in closed form: no iteration, every segment computed.
_CYLINDER_GEODESIC = WrapAlgorithm(jax.jit(
    lambda p1, p2, prm, ax, sg, skip=False: cylinder_wrap(p1, p2, prm[0], prm[1], ax, sg, False, skip, "geodesic")),
    tangency=_cylinder_tangency)


def checked_sliding(sliding, what: str) -> str:
    """`sliding` if it names a multi-wrap cylinder sliding, else a ModelError naming `what`."""
    if sliding not in ("opensim", "geodesic"):
        raise ModelError(f"{what}: sliding {sliding!r} is not 'opensim' or 'geodesic'.")
    return sliding


class WrapCylinder(AbstractWrapObject):
    """A cylinder of `radius` and `length` (m) along the wrap frame's z axis.

    OpenSim's WrapCylinder: tangent lines from the segment ends and a helix on the surface.

    On a muscle with several PathWraps OpenSim then slides the tangent points along the
    axis until the straight parts meet it at the helix's angle, within 0.1 degree
    (`sliding="opensim"`, the constructor's default: OpenSim's restarts, differentiated as
    the restarts made). ``sliding="geodesic"`` takes the point that sliding aims at, in closed form:
    the tangent-continuous helix, the shortest path over the cylinder (`_cyl_geodesic`).
    It has no iteration, so it runs and compiles faster; it differs from OpenSim where
    OpenSim stops short of it (docs/opensim-parity.md, "Converged wrap geometry").
    `load_osim` sets it on every cylinder unless given ``wrap_geometry="opensim"``.

    **Arguments:**

    - `radius`, `length`: m, positive.
    - `name`, `body`, `translation`, `xyz_body_rotation`, `quadrant`, `range`, `method`:
      as for every wrap object (`AbstractWrapObject`).
    - `sliding`: ``"opensim"`` or ``"geodesic"`` (above); only muscles with several
      PathWraps slide.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for non-positive or non-finite sizes, an unknown quadrant, method or
    sliding.
    """

    name: str = eqx.field(static=True)
    body: str = eqx.field(static=True)
    translation: Float[Array, "3"]
    xyz_body_rotation: Float[Array, "3"]
    radius: Float[Array, ""]
    length: Float[Array, ""]
    quadrant: str = eqx.field(static=True)
    range: tuple = eqx.field(static=True)
    method: str = eqx.field(static=True)
    sliding: str = eqx.field(static=True)

    def __init__(self, name, body, radius, length, translation=(0.0, 0.0, 0.0),
                 xyz_body_rotation=(0.0, 0.0, 0.0), quadrant="all", range=(-1, -1), method="hybrid",
                 sliding="opensim"):
        init_common(self, name, body, translation, xyz_body_rotation, quadrant, range, method)
        self.sliding = checked_sliding(sliding, f"WrapCylinder {name!r}")
        self.radius = positive(scalar(radius, f"WrapCylinder {name!r} radius"), f"WrapCylinder {name!r} radius")
        self.length = positive(scalar(length, f"WrapCylinder {name!r} length"), f"WrapCylinder {name!r} length")

    def wrap_parameters(self, dtype):
        return jnp.stack([self.radius, self.length]).astype(dtype)

    def turn_radius(self, dtype):
        return jnp.asarray(self.radius, dtype)

    def algorithm(self, n_wraps):
        if n_wraps == 1:
            return _CYLINDER
        return _CYLINDER_GEODESIC if self.sliding == "geodesic" else _CYLINDER_MULTI
