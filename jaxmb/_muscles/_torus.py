"""OpenSim's WrapTorus.

By default (`search="opensim"`) the circle point is OpenSim's iterate, below; with
`search="converged"` it is where that search converges (`_torus_landscape`,
`_torus_closest_u_converged`). OpenSim's iterate:
the point of the torus's centre circle (radius `outer`,
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

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._checks import is_concrete
from .._errors import ModelError
from .._safe import dsign, safe_div, sqrt0, unit
from ._checks import positive, scalar
from ._cylinder import checked_sliding, cylinder_wrap
from ._lm import lmdif_1d
from ._wrap_base import NO_WRAP, WRAPPED, AbstractWrapObject, WrapAlgorithm, init_common, iterate_derivative

_TORUS_CYL_LENGTH = 10000.0


def _torus_resid(args, u):
    """WrapTorus::calcCircleResids at distance u from p1 along p1 -> p2 (as OpenSim writes
    it); ``args = (p1, p2, outer)``, the form `lmdif_1d` takes."""
    return _torus_resid_fn(*args)(u)


def _segment(p1, p2):
    """n = unit(p2 - p1), c3 = (p1.n)_xy, c4 = |n_xy|^2, c5 = |p1_xy|^2, e = (p1 x n)_z."""
    n = unit(p2 - p1)
    return (n, p1[0] * n[0] + p1[1] * n[1], n[0] * n[0] + n[1] * n[1], p1[0] * p1[0] + p1[1] * p1[1],
            p1[0] * n[1] - p1[1] * n[0])


def _torus_resid_fn(p1, p2, outer):
    """u -> WrapTorus::calcCircleResids(u), with the segment's coefficients computed once
    (the search evaluates it a few times per iteration)."""
    n, c3, c4, c5, _ = _segment(p1, p2)
    c2 = 2.0 * (p1 @ n)

    def resid(u):
        rho = sqrt0(u * u * c4 + 2.0 * c3 * u + c5)
        # rho = 0 (the line through the torus axis) divides by zero in OpenSim; 0 here.
        return c2 + 2.0 * u - 2.0 * outer * safe_div(2.0 * c4 * u + 2.0 * c3, rho)

    return resid


@iterate_derivative
def _torus_closest_u_flat(x, skip):
    return lmdif_1d(_torus_resid, (x[0:3], x[3:6], x[6]), skip)


def _torus_closest_u(p1, p2, outer, skip=False):
    """OpenSim's Levenberg-Marquardt result u (distance from p1 towards p2), differentiable
    as that iterate (`iterate_derivative`; OpenSim stops at ftol = xtol = 1e-4). `skip`
    (may be traced): the result is not read; no iteration (u = 0)."""
    return _torus_closest_u_flat(jnp.concatenate([p1, p2, jnp.reshape(outer, (1,))]), jnp.asarray(skip, bool))


_NEWTON_STEPS = 12  # safeguarded Newton steps of the converged search (machine precision)


def _torus_landscape(p1, p2, outer):
    """A bracket of the residual's root that a search from u = 0 converges to.

    With h = resid / 2 = (u - um) - 2 r s / rho (um = -p1.n, s = c4 u + c3, rho the
    distance of p1 + u n from the torus axis, e = (p1 x n)_z), h' = 1 - 2 r e^2 / rho^3
    is negative only on the dip rho^3 < 2 r e^2, i.e. between uL,R = (-c3 -+ sw) / c4
    with sw^2 = c4 (2 r e^2)^(2/3) - e^2, so h is monotone on (-inf, uL], [uL, uR] and
    [uR, inf), and every root lies in [um - 2 r sqrt(c4), um + 2 r sqrt(c4)]. The root
    taken is the one on the monotone piece that holds u = 0, where a descent of resid^2
    from there (what Levenberg-Marquardt is) converges. Where that piece has none, the
    residual has exactly one root, on a rising piece, and that root is taken: a descent
    would stall at the dip end (resid' = 0, no root), which OpenSim's search sometimes
    leaves by a long step and sometimes stops near (docs/opensim-parity.md, WrapTorus).

    Returns ``(lo, hi, increasing, start)``: the bracket (h(lo) <= 0 <= h(hi) where
    `increasing`, reversed on the dip) and a start from which Newton does not overshoot
    on the rising pieces (the left one is concave, the right one convex).
    """
    n, c3, c4, _, e = _segment(p1, p2)
    um = -(p1 @ n)
    reach = 2.0 * outer * sqrt0(c4)
    resid = _torus_resid_fn(p1, p2, outer)
    u_left, u_right = _dip_ends(c3, c4, e, outer)
    dip = u_left < u_right
    f_left, f_right = resid(u_left), resid(u_right)
    lo_all, hi_all = um - reach, um + reach
    on_a, on_c = u_left >= 0.0, u_right <= 0.0
    # The piece with the root: the dip's own only where it holds u = 0 and a root; the
    # right piece where the left has none (f(uR) <= f(uL) < 0), and the converse.
    root_b = dip & ~on_a & ~on_c & (f_left >= 0.0) & (f_right <= 0.0)
    root_c = ~root_b & jnp.where(on_a, f_left < 0.0, jnp.where(on_c, f_right <= 0.0, f_right < 0.0))
    lo = jnp.where(root_b, u_left, jnp.where(root_c, u_right, jnp.minimum(lo_all, u_left)))
    hi = jnp.where(root_b, u_right, jnp.where(root_c, jnp.maximum(hi_all, u_right), u_left))
    start = jnp.where(root_b, 0.5 * (lo + hi), jnp.where(root_c, hi, lo))
    # No dip: one rising piece, concave left of the axis point u0 = -c3 / c4, convex right.
    u0 = jnp.clip(safe_div(-c3, c4), lo_all, hi_all)
    start_nodip = jnp.where(resid(u0) >= 0.0, lo_all, hi_all)
    return (jnp.where(dip, lo, lo_all), jnp.where(dip, hi, hi_all), ~root_b,
            jnp.where(dip, start, start_nodip))


def _dip_ends(c3, c4, e, outer):
    """uL, uR (uL < uR only where h' < 0 somewhere: the dip); NaN-free."""
    e2 = e * e
    e2_safe = jnp.where(e2 > 0.0, e2, 1.0)
    sw2 = jnp.where(e2 > 0.0, c4 * jnp.cbrt(2.0 * outer * e2_safe) ** 2 - e2, 0.0)
    sw = sqrt0(sw2)
    return safe_div(-c3 - sw, c4), safe_div(-c3 + sw, c4)


@jax.custom_jvp
def _torus_closest_u_converged(p1, p2, outer):
    """The root of OpenSim's residual its search from p1 converges to (`_torus_landscape`),
    by `_NEWTON_STEPS` bracketed Newton steps, differentiated there by the implicit
    function theorem, not through the steps: du = -(d resid/dx) dx / (d resid/du)."""
    lo, hi, increasing, u = _torus_landscape(p1, p2, outer)
    resid = _torus_resid_fn(p1, p2, outer)
    _, c3, c4, c5, e = _segment(p1, p2)
    e2 = e * e

    def step(_, c):
        u, lo, hi = c
        f = resid(u)
        rho = sqrt0(u * u * c4 + 2.0 * c3 * u + c5)
        df = 2.0 - 4.0 * outer * safe_div(e2, rho * rho * rho)
        left = (f < 0.0) == increasing  # u lies left of the root
        lo, hi = jnp.where(left & (f != 0.0), u, lo), jnp.where(left | (f == 0.0), hi, u)
        un = u - safe_div(f, df)
        ok = (df != 0.0) & (un >= lo) & (un <= hi)
        return jnp.where(ok, un, 0.5 * (lo + hi)), lo, hi

    return jax.lax.fori_loop(0, _NEWTON_STEPS, step, (u, lo, hi))[0]


@_torus_closest_u_converged.defjvp
def _torus_closest_u_converged_jvp(primals, tangents):
    u = _torus_closest_u_converged(*primals)  # (so that higher orders are the root's too)
    _, df_dx = jax.jvp(lambda a, b, c: _torus_resid_fn(a, b, c)(u), primals, tangents)
    f_u = jax.grad(lambda v: _torus_resid_fn(*primals)(v))(u)
    return u, -safe_div(df_dx, f_u)


def _torus_wrap(p1, p2, inner, outer, axis, sign, single=True, skip=False, converged=True, sliding="opensim"):
    """OpenSim's WrapTorus::wrapLine (the module docstring); `single`, `skip`, `sliding` as
    for `cylinder_wrap`; `converged`: the search's converged point, else OpenSim's iterate."""
    # From both ends in one batched solve (two loops compile to twice the program).
    closest = _torus_closest_u_converged if converged else functools.partial(_torus_closest_u, skip=skip)
    u1, u2 = jax.vmap(closest, in_axes=(0, 0, None))(jnp.stack([p1, p2]), jnp.stack([p2, p1]), outer)
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
                                      0, 1, single, skip, sliding)
    # OpenSim's WrapTorus returns "wrapped" whatever the cylinder says; a cylinder that
    # did not wrap leaves no wrap points (r1 = NaN: never the best segment), so the
    # segment counts as wrapped exactly where the cylinder wrapped it.
    code = jnp.where(valid & (code > 0), WRAPPED, NO_WRAP)
    back = lambda r: rot.T @ r + origin  # noqa: E731
    return code, back(r1), back(r2), wl


def _algorithm(single, converged, sliding="opensim", unrefined=None):
    restarts = not single and sliding == "opensim"
    return WrapAlgorithm(jax.jit(lambda p1, p2, prm, ax, sg, skip=False: _torus_wrap(
        p1, p2, prm[0], prm[1], ax, sg, single, skip, converged, sliding)),
        unrefined=unrefined, iterates=restarts or not converged)


# A single-wrap torus does not slide: one algorithm per search. On a muscle with several
# PathWraps the inner cylinder slides its tangent points (single=False): OpenSim's
# restarts refine the single-wrap torus's tangent points (`unrefined`); the geodesic
# sliding is in closed form and computed on every segment.
_SEARCHES = ("converged", "opensim")
_SINGLE = {search: _algorithm(True, search == "converged") for search in _SEARCHES}
_MULTI = {(search, sliding): _algorithm(False, search == "converged", sliding,
                                        _SINGLE[search] if sliding == "opensim" else None)
          for search in _SEARCHES for sliding in ("opensim", "geodesic")}


class WrapTorus(AbstractWrapObject):
    """A torus in the wrap frame's xy plane; the path threads its hole.

    OpenSim 4.6's WrapTorus: a point of the centre circle (radius `outer_radius`)
    near the segment is found by a search on OpenSim's residual (whose root is the
    point nearest the circle of radius 2 * outer_radius; see the errata page), and a
    10 km cylinder of radius `inner_radius` tangent to the circle there (quadrant +x,
    towards the torus centre) wraps the segment. Like OpenSim's, it can wrap segments
    that pass beside the torus. Units: m.

    The search (`search`): ``"opensim"`` (default) takes the iterate OpenSim's
    search stops at (MINPACK's lmdif as OpenSim modifies it, ftol = xtol = 1e-4),
    differentiated as that iterate; ``"converged"`` takes the point that
    Levenberg-Marquardt search converges to, by a bracket and a fixed number of
    safeguarded Newton steps, differentiated by the implicit function theorem
    (cheaper to run and to compile, no per-lane loop). They
    differ where OpenSim's search stalls or leaves the point it was converging to
    (docs/opensim-parity.md, WrapTorus).

    **Arguments:**

    - `inner_radius`: the tube's radius, m, positive.
    - `outer_radius`: the centre circle's radius, m, positive.
    - `name`, `body`, `translation`, `xyz_body_rotation`, `quadrant`, `range`, `method`:
      as for every wrap object (`AbstractWrapObject`).
    - `search`: ``"opensim"`` or ``"converged"`` (above).
    - `sliding`: the inner cylinder's sliding on a muscle with several PathWraps,
      ``"opensim"`` or ``"geodesic"`` (`WrapCylinder`).

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for non-positive or non-finite sizes, an `inner_radius`
    not below `outer_radius`, an unknown quadrant, method, search or sliding.
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
    search: str = eqx.field(static=True)
    sliding: str = eqx.field(static=True)

    def __init__(self, name, body, inner_radius, outer_radius, translation=(0.0, 0.0, 0.0),
                 xyz_body_rotation=(0.0, 0.0, 0.0), quadrant="all", range=(-1, -1), method="hybrid",
                 search="opensim", sliding="opensim"):
        init_common(self, name, body, translation, xyz_body_rotation, quadrant, range, method)
        if search not in ("converged", "opensim"):
            raise ModelError(f"WrapTorus {name!r}: search {search!r} is not 'converged' or 'opensim'.")
        self.search = search
        self.sliding = checked_sliding(sliding, f"WrapTorus {name!r}")
        for label, value in (("inner_radius", inner_radius), ("outer_radius", outer_radius)):
            what = f"WrapTorus {name!r} {label}"
            setattr(self, label, positive(scalar(value, what), what))
        if is_concrete(self.inner_radius) and is_concrete(self.outer_radius) and not (
                float(self.inner_radius) < float(self.outer_radius)):
            # The tube would be as wide as the centre circle or wider: no hole for a path to thread.
            raise ModelError(f"WrapTorus {name!r}: inner_radius (the tube's radius, {float(self.inner_radius):g} m) "
                             f"must be less than outer_radius (the centre circle's, {float(self.outer_radius):g} m).")

    def wrap_parameters(self, dtype):
        return jnp.stack([self.inner_radius, self.outer_radius]).astype(dtype)

    def turn_radius(self, dtype):
        return jnp.asarray(self.inner_radius, dtype)

    def algorithm(self, n_wraps):
        return _SINGLE[self.search] if n_wraps == 1 else _MULTI[(self.search, self.sliding)]
