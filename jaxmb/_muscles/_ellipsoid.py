"""OpenSim's WrapEllipsoid.

Re-derived from OpenSim's description: normalised coordinates, the wrapping plane
through the segment ends and a surface point c1 chosen by the PathWrap method,
tangent points by OpenSim's damped Gauss-Newton, and a polyline surface path.
Iterations that OpenSim stops at a tolerance run here in bounded while loops with
OpenSim's stopping rules (the closest-point Newton solves, a few thousand lanes per
wrap, each lane stopping on its own: `iterate_lanes`), and are differentiated as the
iterates they stop at
(`iterate_derivative`; the closest-point Newton by sensitivities carried in its loop,
`_newton_derivative`), since OpenSim's lengths, and so their derivatives,
follow those iterates rather than the converged points.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
from jaxtyping import Array, Float

from .._batching import iterate_lanes
from .._safe import acos, dsign, norm, safe_div, sqrt0, unit
from ._checks import positive, vector3
from ._wrap_base import (INSIDE_RADIUS, MANDATORY_WRAP, NO_WRAP, ROUNDOFF, WRAP_METHODS, AbstractWrapObject,
                         WrapAlgorithm, init_common, iterate_derivative, quadric_tangency)

_MU_BLEND_MIN, _MU_BLEND_MAX = 0.7073, 0.9  # below: fan only; above: "Frans" (axis) only
_SV_BOUNDARY_BLEND = 0.3
_N_FAN = 300
_ELL_SEG = 0.001  # m, the surface polyline's segment length
_ELL_MAX_SEG = 499


def _newton_lane(f_fp, tol, t, args):
    """One step of OpenSim's Newton on t for one lane: none once |f| < tol (then done)."""
    f, fp = f_fp(*args, t)
    ok = jnp.abs(f) < tol
    return jnp.where(ok, t, t - safe_div(f, fp)), ok


def _newton_sens_lane(f_fp, tol, live, carry, args):
    """`_newton_lane` carrying the sensitivities g = dt/d(args[i]) (i in `live`) through the
    step N(t) = t - f/f': g <- dN/dt g + dN/d(args)."""
    t, g = carry

    def newton(t, *xs):
        full = list(args)
        for i, x in zip(live, xs):
            full[i] = x
        f, fp = f_fp(*full, t)
        return t - safe_div(f, fp)

    nt, *ng = jax.grad(newton, argnums=tuple(range(len(live) + 1)))(t, *(args[i] for i in live))
    t_new, ok = _newton_lane(f_fp, tol, t, args)
    g = jax.tree.map(lambda gi, ni: jnp.where(ok, gi, nt * gi + ni), g, tuple(ng))
    return (t_new, g), ok


_NEWTON_STEPS, _NEWTON_TOL = 64, 1e-9  # OpenSim's closest-point Newton: at most 64 steps, |f| < 1e-9


def _newton_derivative(f_fp, t0_fn):
    """``lagrange(a, x, skip)``: OpenSim's Newton iterate for the Lagrange parameter t of the
    closest point, on ``f_fp(a, x, t) -> (f, df/dt)`` from ``t0_fn(a, x)`` (`skip`: the
    caller discards t, no step is made), each lane stopping on its own (`iterate_lanes`),
    differentiated as that iterate (as `iterate_derivative`) by sensitivities carried in
    the loop: with the step N(t) = t - f/f' and t_(j+1) = N(t_j), g_j = d t_j / d(a, x)
    follows g_(j+1) = dN/dt g_j + dN/d(a, x), from g_0 = d t0 / d(a, x).

    The iterate stops at |f| < 1e-9, not at round-off, and where Newton converges
    slowly (points near the medial axis) its derivative differs from the root's (the
    implicit function theorem's) by several per cent, so the loop is not cut short.
    But no tangent enters it: one gradient of N (a few dozen flops) per step and lane,
    and the tangents, however many, cost a dot product each (forward mode through the
    loop carried every tangent through every step of every lane)."""

    @jax.custom_jvp
    def lagrange(a, x, skip=False):
        step = functools.partial(_newton_lane, f_fp, _NEWTON_TOL)
        return iterate_lanes(step, _NEWTON_STEPS, t0_fn(a, x), (a, x), skip)

    @functools.partial(lagrange.defjvp, symbolic_zeros=True)
    def _jvp(primals, tangents):
        a, x, skip = primals
        # Only the inputs with a tangent (the semi-axes have none along q).
        live = tuple(i for i in (0, 1) if not isinstance(tangents[i], SymbolicZero))
        if not live:
            return lagrange(a, x, skip), jnp.zeros_like(x[0])
        t0, g0 = jax.value_and_grad(t0_fn, argnums=live)(a, x)
        step = functools.partial(_newton_sens_lane, f_fp, _NEWTON_TOL, live)
        t, g = iterate_lanes(step, _NEWTON_STEPS, (t0, g0), (a, x), skip)
        return t, sum(gi @ tangents[i] for gi, i in zip(g, live))

    return lagrange


def _ellipse_f_fp(ab, uv, t):
    (a, b), (u, v) = ab, uv
    a2, b2, au, bv = a * a, b * b, a * a * u * u, b * b * v * v
    P, Q = t + a2, t + b2
    return P * P * Q * Q - au * Q * Q - bv * P * P, 2.0 * (P * Q * (P + Q) - au * Q - bv * P)


def _ellipse_t0(ab, uv):
    (a, b), (u, v) = ab, uv
    inside = (u / a) ** 2 + (v / b) ** 2 < 1.0
    return jnp.where(inside, 0.0, jnp.maximum(a, b) * sqrt0(u * u + v * v))


# OpenSim's Newton iterate for the Lagrange parameter t of the point of the ellipse (semi-axes
# ab) closest to uv, differentiable as that iterate (only the few lanes of a batch that take
# a section run it: the rest skip).
_ellipse_lagrange = _newton_derivative(_ellipse_f_fp, _ellipse_t0)


def _ellipse_closest(a, b, u, v, skip=False):
    """Closest point (x, y) of the ellipse (x/a)^2 + (y/b)^2 = 1 to (u, v), with OpenSim's
    special cases for points on an axis and its Newton iteration on the Lagrange parameter
    (`skip`: the caller discards the result, no iteration is made)."""
    a2, b2 = a * a, b * b
    t = _ellipse_lagrange(jnp.stack([a, b]), jnp.stack([u, v]), jnp.asarray(skip, bool))
    xg, yg = safe_div(a2 * u, t + a2), safe_div(b2 * v, t + b2)
    near_x, near_y = jnp.abs(u) <= ROUNDOFF, jnp.abs(v) <= ROUNDOFF
    # Both near zero: the end of the shorter semi-axis.
    x_b = jnp.where(a < b, jnp.where(u < 0.0, -a, a), u)
    y_b = jnp.where(a < b, v, jnp.where(v < 0.0, -b, b))
    # On the y axis.
    top_x = (a >= b) | (jnp.abs(v) >= b - safe_div(a2, b))
    y_x2 = safe_div(b2 * v, b2 - a2)
    x_x = jnp.where(top_x, u, a * sqrt0(jnp.abs(1.0 - (y_x2 / b) ** 2)))
    y_x = jnp.where(top_x, jnp.where(v >= 0.0, b, -b), y_x2)
    # On the x axis.
    top_y = (b >= a) | (jnp.abs(u) >= a - safe_div(b2, a))
    x_y2 = safe_div(a2 * u, a2 - b2)
    x_y = jnp.where(top_y, jnp.where(u >= 0.0, a, -a), x_y2)
    y_y = jnp.where(top_y, v, b * sqrt0(jnp.abs(1.0 - (x_y2 / a) ** 2)))
    x = jnp.where(near_x & near_y, x_b, jnp.where(near_x, x_x, jnp.where(near_y, x_y, xg)))
    y = jnp.where(near_x & near_y, y_b, jnp.where(near_x, y_x, jnp.where(near_y, y_y, yg)))
    return x, y


_SECTION_AXES = ((1, 2), (2, 0), (0, 1))  # the in-plane axes of the section normal to axis 0, 1, 2


def _ellipsoid_closest_on_plane(a, p, axis, skip=False):
    """OpenSim's reduction to the section x_axis = p_axis: keeps p[axis]. `axis` may be
    traced, so that one Newton loop serves whichever section is chosen (a loop per
    section made the ellipsoid wrap's compiled program several times larger)."""
    i, j = jnp.asarray(_SECTION_AXES)[axis]
    x, y = _ellipse_closest(a[i], a[j], p[i], p[j], skip)
    return p.at[i].set(x).at[j].set(y)


def _ellipsoid_f_fp(a, p, t):
    """OpenSim's polynomial in the Lagrange parameter t of the point of the ellipsoid
    (semi-axes a) closest to p, and its derivative."""
    a2 = a * a
    au, bv, cw = a2 * p * p
    P, Q, R = t + a2[0], t + a2[1], t + a2[2]
    f = P * P * Q * Q * R * R - au * Q * Q * R * R - bv * P * P * R * R - cw * P * P * Q * Q
    PQ, PR, QR, PQR = P * Q, P * R, Q * R, P * Q * R
    fp = 2.0 * (PQR * (QR + PR + PQ) - au * QR * (Q + R) - bv * PR * (P + R) - cw * PQ * (P + Q))
    return f, fp


def _ellipsoid_t0(a, p):
    inside = jnp.sum((p / a) ** 2) < 1.0
    return jnp.where(inside, 0.0, jnp.max(a) * norm(p))


def _ellipsoid_newton_plain(a, p):
    """OpenSim's Newton iterate for the Lagrange parameter t of the point of the ellipsoid
    (semi-axes a) closest to p, as one plain loop (no derivative rule, no lane compaction:
    the reference the tests hold `_ellipsoid_lagrange` to)."""
    def body(c):
        i, t, _ = c
        t, ok = _newton_lane(_ellipsoid_f_fp, _NEWTON_TOL, t, (a, p))
        return i + 1, t, ok

    cond = lambda c: (c[0] < _NEWTON_STEPS) & ~c[2]  # noqa: E731
    return jax.lax.while_loop(cond, body, (0, _ellipsoid_t0(a, p), False))[1]


# Differentiable as that iterate, by sensitivities carried in the loop (`_newton_derivative`):
# the fan's ~300 solves carry no tangents through their batched loop.
_ellipsoid_lagrange = _newton_derivative(_ellipsoid_f_fp, _ellipsoid_t0)


def _ellipsoid_closest(a, p, section=-1, skip=False):
    """Closest point of the ellipsoid with semi-axes a to p (OpenSim's findClosestPoint);
    with `section` 0, 1 or 2 (may be traced) the closest point of the section through p
    normal to that axis instead (OpenSim's reduction to a plane, forced), so that one
    batched call serves both kinds of query. `skip` (may be traced): the caller does not
    use the point; no Newton step is made (a finite point from the starting value)."""
    a2 = a * a
    forced = section >= 0
    # A forced section does not read the general solve: its lanes make no step there.
    t = _ellipsoid_lagrange(a, p, skip | forced)
    general = a2 * p / jnp.where(t + a2 != 0.0, t + a2, 1.0)
    # Points within round-off of a coordinate plane: the 2-D problem in that plane
    # (the section with the smallest sum of radii when several planes qualify).
    near = jnp.abs(p) <= ROUNDOFF
    radsum = jnp.sum(a) - a
    axis = jnp.where(forced, section, jnp.argmin(jnp.where(near, radsum, jnp.inf)))
    # Off the planes (almost always) the section's Newton iteration is skipped: under vmap
    # (the fan's 299 points) it would otherwise run for every lane.
    on_plane = jnp.any(near) | forced
    return jnp.where(on_plane, _ellipsoid_closest_on_plane(a, p, axis, ~on_plane | skip), general)


def _ell_residual(r, d1, p, a, vs, vs4):
    nr = 2.0 * r / (a * a)
    return jnp.stack([vs @ r + vs4, jnp.sum((r / a) ** 2) - 1.0, nr @ r + d1, nr @ p + d1])


def _ell_tangent_outer(carry, args):
    """One outer iteration of OpenSim's damped Gauss-Newton for the tangent point (see
    `_ell_tangent_lm`); done once the squared residual is at most 1e-8."""
    r, d1, ssq, ssqo, alpha = carry
    p, a, vs, vs4 = args
    ia2 = 1.0 / (a * a)

    def resid(r, d1):
        e = _ell_residual(r, d1, p, a, vs, vs4)
        return e @ e

    D = jnp.zeros((4, 4), r.dtype)
    D = D.at[:3, 0].set(vs).at[:3, 1].set(2.0 * r * ia2).at[:3, 2].set(4.0 * r * ia2)
    D = D.at[:3, 3].set(2.0 * p * ia2).at[3, 2].set(1.0).at[3, 3].set(1.0)
    ee = _ell_residual(r, d1, p, a, vs, vs4)
    pcos = unit(p - r) @ unit(p)
    dd = jnp.where(pcos > 0.1, 1.0 - pcos ** 100, 1.0)
    v = -(D @ ee)
    H = D @ D.T
    diag = jnp.diag(H)
    off = H - jnp.diag(diag)

    def c1(s):
        return (s[3] >= s[4]) & (s[6] < 1000)

    def b1(s):
        r, d1, vt, ssq, ssqo, alpha, n = s
        Hd = off + jnp.diag(diag * (1.0 + alpha))
        vt = dd * (jnp.linalg.inv(Hd) @ v) / 16.0
        r, d1 = r + vt[:3], d1 + vt[3]
        return r, d1, vt, resid(r, d1), ssq, alpha * 4.0, n + 1

    s = (r, d1, jnp.zeros(4, r.dtype), ssq, ssqo, alpha, 0)
    r, d1, vt, ssq, ssqo, alpha, _ = jax.lax.while_loop(c1, b1, s)
    alpha = alpha / 8.0

    def c2(s):
        return (s[2] <= s[3]) & (s[5] < 1000)

    def b2(s):
        r, d1, ssq, ssqo, fakt, n = s
        fakt = fakt * 2.0
        r, d1 = r + vt[:3] * fakt, d1 + vt[3] * fakt
        return r, d1, resid(r, d1), ssq, fakt, n + 1

    r, d1, ssq, ssqo, fakt, _ = jax.lax.while_loop(c2, b2, (r, d1, ssq, ssqo, jnp.asarray(0.5, r.dtype), 0))
    r, d1 = r - vt[:3] * fakt, d1 - vt[3] * fakt
    ssq = resid(r, d1)
    return (r, d1, ssq, ssq, alpha), ~(ssq > 1e-8)


def _ell_tangent_lm(r, p, a, vs, vs4, skip=False):
    """OpenSim's damped Gauss-Newton for the tangent point from p in the plane (vs, vs4),
    started at r: 50 outer iterations at most, stops at ssq <= 1e-8; each lane on its own
    (`iterate_lanes`: the two tangent points of every wrap of a batch stop apart); none
    where `skip`."""
    d1 = -(2.0 * r / (a * a)) @ r
    ee = _ell_residual(r, d1, p, a, vs, vs4)
    ssq = ee @ ee
    init = (r, d1, ssq, ssq, jnp.asarray(0.01, r.dtype))
    return iterate_lanes(_ell_tangent_outer, 50, init, (p, a, vs, vs4), ~(ssq > 1e-8) | skip)[0]


@iterate_derivative(n_in=2)
def _ell_tangent_iterate(x, a, skip=False):
    return _ell_tangent_lm(x[0:3], x[3:6], a, x[6:9], x[9], skip)


def _ell_tangent(pe, r0, p, a, vs, vs4, skip):
    """Tangent point from p (OpenSim's calcTangentPoint from r0), differentiable as
    OpenSim's stopped Gauss-Newton iterate (`iterate_derivative`): OpenSim's
    length follows that iterate, up to 1e-4 off the exact tangent point, and the
    exact point's derivative differs from the iterate's by up to ~1e-3 per unit."""
    r = _ell_tangent_iterate(jnp.concatenate([r0, p, vs, jnp.reshape(vs4, (1,))]), a, skip)
    return jnp.where(jnp.abs(pe) < 1e-4, p, r)


def _ell_fan_frame(r1, r2, vs, vs4):
    """OpenSim's surface-path frame: a0 (the plane's point on the coordinate axis most
    normal to it), the unit ray to r1, the in-plane normal to it towards r2, and the
    angle between the rays to r1 and r2."""
    imax = jnp.argmax(jnp.abs(vs))
    e = jnp.eye(3, dtype=r1.dtype)[imax]
    a0 = e * safe_div(-vs4, vs @ e)
    ar1, ar2 = unit(r1 - a0), unit(r2 - a0)
    vsz = unit(jnp.cross(ar1, ar2))
    return a0, ar1, jnp.cross(vsz, ar1), acos(ar1 @ ar2)


def _ell_surface_points(a, a0, ar1, vsy, phi):
    """The ellipsoid's points on the rays from a0 at angles `phi` (m,) from ar1: (m, 3)."""
    ray = jnp.cos(phi)[:, None] * ar1[None] + jnp.sin(phi)[:, None] * vsy[None]
    f1, f2 = ray / a[None], a0 / a
    aa = jnp.sum(f1 * f1, axis=-1)
    bb = 2.0 * (f1 @ f2)
    cc = f2 @ f2 - 1.0
    mu3 = safe_div(-bb + sqrt0(bb * bb - 4.0 * aa * cc), 2.0 * aa)
    return a0[None] + mu3[:, None] * ray


def _ell_polyline(r1, r2, a, vs, vs4, n, sign, P1, P2):
    """OpenSim's surface path: n segments at equal angles about a0, each point on the ray
    from a0, the short way round unless (with a quadrant) its first or last segment
    points back towards the segment end, then the long way; returns its length.

    The short way's end segments decide, so that only the chosen polyline (499 points)
    is evaluated. Its derivative is one reverse pass (`_ell_polyline_length`)."""
    return _ell_polyline_length(jnp.concatenate([r1, r2, vs, jnp.reshape(vs4, (1,))]), a, n, sign, P1, P2)


def _ell_far_side(r1, r2, a, a0, ar1, vsy, phi0, n, sign, P1, P2):
    """OpenSim's far-side rule: with a quadrant, the polyline goes the long way round
    where the short way's first or last segment points back towards its segment end."""
    nn = jnp.maximum(n, 1).astype(r1.dtype)
    dphi_near = phi0 / nn
    ends = _ell_surface_points(a, a0, ar1, vsy, jnp.stack([dphi_near, (n - 1).astype(r1.dtype) * dphi_near]))
    w1 = jnp.where(n >= 2, ends[0], r2)
    w2 = jnp.where(n >= 2, ends[1], r1)
    wrong = (unit(P1 - r1) @ unit(w1 - r1) > 0.0) | (unit(P2 - r2) @ unit(w2 - r2) > 0.0)
    return (sign != 0) & (n >= 2) & wrong


def _ell_polyline_plain(x, a, n, sign, P1, P2):
    r1, r2, vs, vs4 = x[0:3], x[3:6], x[6:9], x[9]
    a0, ar1, vsy, phi0 = _ell_fan_frame(r1, r2, vs, vs4)
    nn = jnp.maximum(n, 1).astype(r1.dtype)
    far = _ell_far_side(r1, r2, a, a0, ar1, vsy, phi0, n, sign, P1, P2)
    dphi = jnp.where(far, -(2.0 * jnp.pi - phi0) / nn, phi0 / nn)
    k = jnp.arange(1, _ELL_MAX_SEG, dtype=r1.dtype)  # interior points 1 .. 498
    s = _ell_surface_points(a, a0, ar1, vsy, k * dphi)
    idx = jnp.arange(_ELL_MAX_SEG + 1, dtype=jnp.asarray(n).dtype)
    pts = jnp.concatenate([r1[None], s, r2[None]])
    pts = jnp.where((idx == 0)[:, None], r1[None], jnp.where((idx < n)[:, None], pts, r2[None]))
    return jnp.sum(norm(pts[1:] - pts[:-1]))


_ell_polyline_length = jax.custom_jvp(_ell_polyline_plain)


@_ell_polyline_length.defjvp
def _ell_polyline_length_jvp(primals, tangents):
    # A scalar of 10 live inputs (and the semi-axes): its gradient by one reverse pass,
    # applied to however many tangent directions come (forward mode through the 499
    # points costs one pass per direction). P1, P2, n and sign only pick branches.
    x, a, *aux = primals
    length, (gx, ga) = jax.value_and_grad(_ell_polyline_plain, argnums=(0, 1))(x, a, *aux)
    return length, gx @ tangents[0] + ga @ tangents[1]


def _ellipsoid_scaled(p1, p2, dims):
    """OpenSim's WrapEllipsoid::wrapLine up to its early returns: the segment and the
    semi-axes scaled by 3 / (sum of the semi-axes), the ends' surface functions, and
    whether an end is inside (`inside`) or the segment crosses the ellipsoid (`hit`)."""
    factor = 3.0 / (dims[0] + dims[1] + dims[2])
    P1, P2, a = p1 * factor, p2 * factor, dims * factor
    p1e = jnp.sum((P1 / a) ** 2) - 1.0
    p2e = jnp.sum((P2 / a) ** 2) - 1.0
    inside = (p1e < -0.0001) | (p2e < -0.0001)
    p1p2 = P1 - P2
    ppm = unit(P1) @ unit(P2) - 1.0
    f1, f2 = p1p2 / a, P2 / a
    aa = f1 @ f1
    bb = 2.0 * (f1 @ f2)
    cc = f2 @ f2 - 1.0
    disc = bb * bb - 4.0 * aa * cc
    sq = sqrt0(disc)
    l1 = safe_div(-bb + sq, 2.0 * aa)
    l2 = safe_div(-bb - sq, 2.0 * aa)
    hit = (jnp.abs(ppm) >= 0.0001) & (disc >= 0.0) & (l1 > 0.0) & (l1 < 1.0) & (l2 > 0.0) & (l2 < 1.0)
    return factor, P1, P2, a, p1e, p2e, inside, hit


def _ellipsoid_code(p1, p2, dims):
    """The WrapAction of `_ellipsoid_wrap` alone (cheap): an ellipsoid never returns
    WRAPPED, so GeometryPath's choice of segment needs only this (its algorithm's `code`)."""
    *_, inside, hit = _ellipsoid_scaled(p1, p2, dims[:3])
    return jnp.where(inside, INSIDE_RADIUS, jnp.where(hit, MANDATORY_WRAP, NO_WRAP))


def _ellipsoid_wrap(p1, p2, dims, axis, sign, skip=False, far_side=False):
    """OpenSim's WrapEllipsoid. `dims` is (3,) or (4,) = semi-axes and the PathWrap method
    (0 hybrid, 1 midpoint, 2 axial; hybrid when absent). `skip` (may be traced): the
    caller does not use the result, so the iterations make no step (finite values).
    `far_side` (static): return only whether the surface path goes the long way round
    (`_ell_far_side`), a discrete state of the path (`jaxmb.path_events`)."""
    method = dims[3] if dims.shape[0] > 3 else jnp.asarray(0.0, p1.dtype)
    dims = dims[:3]
    hybrid, axial = method == 0, method == 2
    factor, P1, P2, a, p1e, p2e, inside, hit = _ellipsoid_scaled(p1, p2, dims)
    # Where the segment does not wrap, go on with a stand-in segment that crosses the
    # ellipsoid, so that every quantity below (and its derivative) stays finite.
    ok = hit & ~inside
    # Nor do its iterations run (OpenSim returns before them): under `vmap` (the fan's
    # points, the muscles of a pass) the lanes left to step are then those that wrap.
    skip = skip | ~ok
    P1 = jnp.where(ok, P1, a * jnp.array([1.5, 0.3, 0.1], p1.dtype))
    P2 = jnp.where(ok, P2, a * jnp.array([-1.5, 0.3, 0.1], p1.dtype))
    p1e = jnp.where(ok, p1e, 1.34)
    p2e = jnp.where(ok, p2e, 1.34)
    p1p2 = P1 - P2
    f1, f2 = p1p2 / a, P2 / a
    aa = f1 @ f1
    bb = 2.0 * (f1 @ f2)
    cc = f2 @ f2 - 1.0
    sq = sqrt0(bb * bb - 4.0 * aa * cc)
    ri1 = P2 + safe_div(-bb + sq, 2.0 * aa) * p1p2
    ri2 = P2 + safe_div(-bb - sq, 2.0 * aa) * p1p2
    r1r2 = ri2 - ri1
    # (1) "Frans": the crossing of the segment with the coordinate plane most normal to it,
    # projected onto the section in that plane.
    mu = jnp.abs(unit(p1p2))
    t = safe_div(-ri1, r1r2)
    t_sv = ri1[None, :] + t[:, None] * r1r2[None, :]
    best = jnp.argmax(mu)
    mub, tb = mu[best], t[best]
    s = jnp.where((tb < 0.0) | (tb > 1.0), 0.0,
                  jnp.where(tb < _SV_BOUNDARY_BLEND, tb / _SV_BOUNDARY_BLEND,
                            jnp.where(tb > 1.0 - _SV_BOUNDARY_BLEND, (1.0 - tb) / _SV_BOUNDARY_BLEND, 1.0)))
    mub = jnp.where(hybrid & (mub > _MU_BLEND_MIN) & (s < 1.0), _MU_BLEND_MIN + s * (mub - _MU_BLEND_MIN), mub)
    wt = (mub - _MU_BLEND_MIN) / (_MU_BLEND_MAX - _MU_BLEND_MIN)
    use_fan = hybrid & (mub < _MU_BLEND_MAX)
    # (2) "fan": the mean direction from the segment's inner points to their closest points.
    # The fan's points, the midpoint (method 1) and the three sections of (1) in one
    # batched closest-point solve (each call site of a solve is a program of its own).
    # A query whose point the choice below does not read makes no Newton step: the fan
    # where the hybrid method takes the axis point instead (more than half of MoBL-ARMS's
    # wrapping ellipsoids), the midpoint but for method 1, the sections but `best`.
    tt = jnp.arange(1, _N_FAN - 1, dtype=p1.dtype) / _N_FAN
    svs = ri1[None] + tt[:, None] * r1r2[None]
    mid = ri1 + 0.5 * r1r2
    queries = jnp.concatenate([svs, mid[None], t_sv])
    sections = jnp.concatenate([jnp.full(_N_FAN - 1, -1), jnp.arange(3)])
    unread = jnp.concatenate([jnp.broadcast_to(~use_fan, (_N_FAN - 2,)), jnp.reshape(method != 1, (1,)),
                              jnp.arange(3) != best])
    closest = jax.vmap(lambda x, i, u: _ellipsoid_closest(a, x, i, skip | u))(queries, sections, unread)
    t_c1 = closest[_N_FAN - 1:]
    c1_frans = t_c1[best]
    blades = unit(closest[:_N_FAN - 2] - svs)
    c1_mid = closest[_N_FAN - 2]
    fan_weight = jnp.where(use_fan, jnp.where(mub <= _MU_BLEND_MIN, 1.0, 1.0 - wt), -jnp.inf)
    fw = jnp.minimum(jnp.where(jnp.isinf(fan_weight), 1.0 - wt, fan_weight), 1.0)

    def choose_c1(c_fan, c_blend):
        c1_h = jnp.where(use_fan, jnp.where(mub <= _MU_BLEND_MIN, c_fan, c_blend), c1_frans)
        c1 = jnp.where(method == 1, c1_mid, c1_h)
        # Quadrant: mirror c1 onto the active side (towards the plane for a fan solution).
        mirrored = c1.at[axis].set(-c1[axis])
        pulled = mirrored.at[axis].add(fw * (0.5 * (c1[axis] + mirrored[axis]) - mirrored[axis]))
        return c1, mirrored, pulled

    # Three closest points in turn, each from the one before: the fan's direction (c_fan),
    # the blend of the two choices (c_blend), and the mirrored c1 pulled towards the plane.
    # One solve in a loop of three compiles to a third of the program of three call sites.
    def step(carry, i):
        c_fan, c_blend = carry
        c1, _, pulled = choose_c1(c_fan, c_blend)
        query = jnp.where(i == 0, mid + unit(jnp.sum(blades, axis=0)),
                          jnp.where(i == 1, wt * c1_frans + (1.0 - wt) * c_fan, pulled))
        # Each point is read only where the choice below takes it: the fan's direction
        # where the fan is used, the blend where it is used above its lower bound, the
        # pulled point where c1 lies off the quadrant and the fan's weight is positive.
        unread = jnp.where(i == 0, ~use_fan, jnp.where(i == 1, ~use_fan | (mub <= _MU_BLEND_MIN),
                                                        ~((sign != 0) & (dsign(c1[axis]) != sign) & (fw > 0.0))))
        c = _ellipsoid_closest(a, query, skip=skip | unread)
        return (jnp.where(i == 0, c, c_fan), jnp.where(i == 1, c, c_blend)), c

    # c1_frans stands in until a point is known (a surface point: every step stays finite).
    (c_fan, c_blend), chain = jax.lax.scan(step, (c1_frans, c1_frans), jnp.arange(3))
    c1, mirrored, _ = choose_c1(c_fan, c_blend)
    pulled = chain[2]
    use_c1 = ~axial | ((tb > 0.0) & (tb < 1.0))
    r1s, r2s = jnp.where(use_c1, c1, ri1), jnp.where(use_c1, c1, ri2)
    flip = (sign != 0) & (dsign(c1[axis]) != sign)
    r1s, r2s = jnp.where(flip, mirrored, r1s), jnp.where(flip, mirrored, r2s)
    c1 = jnp.where(flip, jnp.where(fw > 0.0, pulled, mirrored), c1)
    # The wrapping plane through p1, p2 and c1; tangent points within it.
    vs = unit(jnp.cross(p1p2, P1 - c1))
    vs4 = -(vs @ c1)
    # Both tangent points in one batched solve (two Gauss-Newton loops compile to twice
    # the program).
    r1, r2 = jax.vmap(lambda pe, r0, p: _ell_tangent(pe, r0, p, a, vs, vs4, skip))(
        jnp.stack([p1e, p2e]), jnp.stack([r1s, r2s]), jnp.stack([P1, P2]))
    # Surface path: a polyline of |r1 - r2| / 1 mm segments (at most 499).
    chord = norm(r1 - r2)
    lm = chord / factor
    n = jnp.clip(jnp.floor(jax.lax.stop_gradient(lm) / _ELL_SEG), 0, _ELL_MAX_SEG).astype(jnp.int32)
    if far_side:
        return ~(lm < _ELL_SEG) & _ell_far_side(r1, r2, a, *_ell_fan_frame(r1, r2, vs, vs4), n, sign, P1, P2)
    wl = jnp.where(lm < _ELL_SEG, chord, _ell_polyline(r1, r2, a, vs, vs4, n, sign, P1, P2))
    code = jnp.where(inside, INSIDE_RADIUS, jnp.where(hit, MANDATORY_WRAP, NO_WRAP))
    return code, r1 / factor, r2 / factor, wl / factor


# An ellipsoid is either a mandatory wrap or none, so the segment GeometryPath picks
# (the first mandatory one) follows from the cheap crossing test alone. The same
# algorithm whatever the number of PathWraps.
_ELLIPSOID = WrapAlgorithm(jax.jit(lambda p1, p2, prm, ax, sg, skip=False: _ellipsoid_wrap(p1, p2, prm, ax, sg, skip)),
                           code=_ellipsoid_code, iterates=True, gathers_live=True,
                           far_side=jax.jit(lambda p1, p2, prm, ax, sg: _ellipsoid_wrap(p1, p2, prm, ax, sg, far_side=True)),
                           tangency=lambda p1, p2, r1, r2, prm: quadric_tangency(p1, p2, r1, r2, prm[:3] ** -2))


class WrapEllipsoid(AbstractWrapObject):
    """An ellipsoid with semi-axes `dimensions` (m; wrap frame x, y, z).

    OpenSim's algorithm: the wrapping plane through the segment ends and a
    surface point chosen by the PathWrap `method` (hybrid, midpoint, axial),
    tangent points by OpenSim's damped Gauss-Newton, and the surface length of
    OpenSim's 1 mm polyline (see the OpenSim-parity page).

    **Arguments:**

    - `dimensions`: (3,) semi-axes, m, positive.
    - `name`, `body`, `translation`, `xyz_body_rotation`, `quadrant`, `range`, `method`:
      as for every wrap object (`AbstractWrapObject`).

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for non-positive or non-finite sizes, an unknown quadrant or method.
    """

    name: str = eqx.field(static=True)
    body: str = eqx.field(static=True)
    translation: Float[Array, "3"]
    xyz_body_rotation: Float[Array, "3"]
    dimensions: Float[Array, "3"]
    quadrant: str = eqx.field(static=True)
    range: tuple = eqx.field(static=True)
    method: str = eqx.field(static=True)

    def __init__(self, name, body, dimensions, translation=(0.0, 0.0, 0.0),
                 xyz_body_rotation=(0.0, 0.0, 0.0), quadrant="all", range=(-1, -1), method="hybrid"):
        init_common(self, name, body, translation, xyz_body_rotation, quadrant, range, method)
        what = f"WrapEllipsoid {name!r} dimensions"
        self.dimensions = positive(vector3(dimensions, what), what)

    def wrap_parameters(self, dtype):
        """The semi-axes and the PathWrap method's code (0 hybrid, 1 midpoint, 2 axial)."""
        method = jnp.asarray([WRAP_METHODS[self.method.strip().lower()]], dtype)
        return jnp.concatenate([self.dimensions.astype(dtype), method])

    def turn_radius(self, dtype):
        return jnp.asarray(jnp.max(self.dimensions), dtype)

    def algorithm(self, n_wraps):
        return _ELLIPSOID
