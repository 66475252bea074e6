"""Musculotendon paths, wrapping and the moment-arm matrix (seed 001, Eq. 149-195).

A :class:`Muscle` is a path of points fixed on bodies (:class:`PathPoint`),
points that exist only while a coordinate lies in a range
(:class:`ConditionalPathPoint`), points whose body-frame location is a function
of ``q`` (:class:`MovingPathPoint`), and wrap objects (:class:`WrapSphere`,
:class:`WrapCylinder`, :class:`WrapEllipsoid`, :class:`WrapTorus`) that the path
slides over. Its length ``L(q)`` is what :func:`muscle_lengths` returns; the
moment-arm matrix follows the biomechanics sign ``R = -dL/dq`` (nq, n_muscles),
so that the generalized force of the tensions ``F`` is ``R @ F``.

:func:`moment_arms` builds ``R`` by the seed's closed form (Eq. 195): every
musculotendon unit acts on the bodies of its attachment sequence Γ_k
(Definition 2) through its generalized line-of-action vectors E_ki
(Definition 3) and their moments Ê_ki (Definition 4); these are carried to the
generalized coordinates by γ_i (Eq. 176) and J^T ϑ β_i (Eq. 179-184).
``method="autodiff"`` returns ``-jax.jacfwd(muscle_lengths)`` instead; the tests
check that the two agree to round-off.

Wrapping follows OpenSim's semantics (GeometryPath::applyWrapObjects): a wrap
object is tried on every path segment in its PathWrap range, the first
segment the straight line would penetrate ("mandatory" wrap) wins, otherwise
the wrap that lengthens the path least; with several wrap objects the passes
repeat (at most 8) until the length changes by less than 0.5 mm. Where exact
parity with OpenSim is impossible or not attempted the deviation is documented
in docs/moment_arms.md and measured by the tests.

Path discontinuities are explicit: :func:`path_events` reports which
conditional points are active and which wraps are engaged at ``q``.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float

from ._errors import ModelError
from ._functions import AbstractJointFunction, Constant
from ._kinematics import body_transforms, joint_gradients, joint_values
from ._model import GROUND, Model
from ._spatial import body_fixed_xyz

__all__ = [
    "PathPoint", "ConditionalPathPoint", "MovingPathPoint", "ClampedCoordinate",
    "WrapSphere", "WrapCylinder", "WrapEllipsoid", "WrapTorus",
    "MuscleParameters", "Muscle", "muscle_lengths", "muscle_lengthening_speeds",
    "moment_arms", "moment_arm_derivatives", "path_events", "PathEvents",
    "moment_arm_sweep", "muscle_path_points",
]

# OpenSim's WrapAction codes.
INSIDE_RADIUS, NO_WRAP, WRAPPED, MANDATORY_WRAP = -1, 0, 1, 2
# OpenSim's ConditionalPathPoint is active iff range[0] - 1e-5 <= c <= range[1] + 1e-5
# (observed with OpenSim 4.6, tests/data/opensim/README.md).
CONDITIONAL_SLACK = 1e-5


def _f3(x, what):
    x = jnp.asarray(x, dtype=float) if not hasattr(x, "dtype") or not jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else jnp.asarray(x)
    if x.shape != (3,):
        raise ModelError(f"{what}: expected shape (3,), got {x.shape}.")
    return x


# ---------------------------------------------------------------------------
# NaN-safe vector helpers
# ---------------------------------------------------------------------------

def _norm(v):
    """|v| with a finite gradient at v = 0 (the gradient there is 0)."""
    s = jnp.sum(v * v, axis=-1)
    pos = s > 0.0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, s, 1.0)), 0.0)


def _unit(v):
    """v/|v|, or 0 for v = 0 (OpenSim's NormalizeOrZero), NaN-free."""
    n = _norm(v)
    return v / jnp.where(n > 0.0, n, 1.0)[..., None]


def _sqrt0(x):
    pos = x > 0.0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _acos(x):
    # Clip strictly inside [-1, 1] so that the gradient stays finite.
    return jnp.arccos(jnp.clip(x, -1.0 + 1e-15, 1.0 - 1e-15))


def _dsign(x):
    """OpenSim's DSIGN: +1 for x >= 0, -1 otherwise."""
    return jnp.where(x >= 0.0, 1, -1)


def _safe_div(a, b):
    ok = b != 0.0
    return jnp.where(ok, a / jnp.where(ok, b, 1.0), 0.0)


# ---------------------------------------------------------------------------
# Path points
# ---------------------------------------------------------------------------

class AbstractPathPoint(eqx.Module):
    """A point of a musculotendon path, on `body` ('ground' is the fixed frame)."""

    body: eqx.AbstractVar[str]
    name: eqx.AbstractVar[str]

    def location(self, q):
        """Location in the body frame at ``q`` (m)."""
        raise NotImplementedError

    def is_active(self, q):
        return jnp.asarray(True)


class PathPoint(AbstractPathPoint):
    """A point fixed at `location` (m, body frame) on `body`."""

    body: str = eqx.field(static=True)
    location_: Float[Array, "3"]
    name: str = eqx.field(static=True)

    def __init__(self, body: str, location: ArrayLike, name: str = ""):
        self.body = str(body)
        self.location_ = _f3(location, f"PathPoint {name!r} location")
        self.name = str(name)

    def location(self, q):
        return self.location_.astype(q.dtype)


class ConditionalPathPoint(AbstractPathPoint):
    """A fixed point that is part of the path only while ``range[0] - 1e-5 <= c(q) <= range[1] + 1e-5``
    (OpenSim's inclusive test with its 1e-5 slack, :data:`CONDITIONAL_SLACK`).

    `coordinate` is the OpenSim coordinate as a joint function of ``q`` (a
    dependent coordinate is its coupling function). The path length jumps where
    the point switches in or out; :func:`path_events` reports the state.
    """

    body: str = eqx.field(static=True)
    location_: Float[Array, "3"]
    coordinate: AbstractJointFunction
    range: Float[Array, "2"]
    name: str = eqx.field(static=True)

    def __init__(self, body: str, location: ArrayLike, coordinate: AbstractJointFunction,
                 range: ArrayLike, name: str = ""):
        self.body = str(body)
        self.location_ = _f3(location, f"ConditionalPathPoint {name!r} location")
        if not isinstance(coordinate, AbstractJointFunction):
            raise ModelError(f"ConditionalPathPoint {name!r}: coordinate must be a joint function of q.")
        self.coordinate = coordinate
        self.range = jnp.asarray(range, dtype=float)
        if self.range.shape != (2,):
            raise ModelError(f"ConditionalPathPoint {name!r}: range must have two values.")
        self.name = str(name)

    def location(self, q):
        return self.location_.astype(q.dtype)

    def is_active(self, q):
        c = self.coordinate(q)
        return (c >= self.range[0] - CONDITIONAL_SLACK) & (c <= self.range[1] + CONDITIONAL_SLACK)


class ClampedCoordinate(AbstractJointFunction):
    """``f(q) = clip(inner(q), lower, upper)``: OpenSim's MovingPathPoint evaluates its
    functions at the coordinate value clamped to the coordinate's range (observed
    with OpenSim 4.6 even for coordinates with ``clamped = false``)."""

    inner: AbstractJointFunction
    lower: Float[Array, ""]
    upper: Float[Array, ""]

    def __init__(self, inner: AbstractJointFunction, lower, upper):
        self.inner = inner
        self.lower = jnp.asarray(lower, dtype=float)
        self.upper = jnp.asarray(upper, dtype=float)

    def __call__(self, q):
        return jnp.clip(self.inner(q), self.lower, self.upper)

    def coordinate_indices(self):
        return self.inner.coordinate_indices()


class MovingPathPoint(AbstractPathPoint):
    """A point whose body-frame coordinates x, y, z are joint functions of ``q``."""

    body: str = eqx.field(static=True)
    x: AbstractJointFunction
    y: AbstractJointFunction
    z: AbstractJointFunction
    name: str = eqx.field(static=True)

    def __init__(self, body: str, x: AbstractJointFunction, y: AbstractJointFunction,
                 z: AbstractJointFunction, name: str = ""):
        self.body = str(body)
        for label, fn in (("x", x), ("y", y), ("z", z)):
            if not isinstance(fn, AbstractJointFunction):
                raise ModelError(f"MovingPathPoint {name!r}: {label} must be a joint function of q "
                                 f"(use jaxmb.Constant for a fixed coordinate).")
        self.x, self.y, self.z = x, y, z
        self.name = str(name)

    def location(self, q):
        return jnp.stack([self.x(q), self.y(q), self.z(q)]).astype(q.dtype)


# ---------------------------------------------------------------------------
# Wrap objects
# ---------------------------------------------------------------------------

_QUADRANTS = {"-x": (0, -1), "x": (0, 1), "+x": (0, 1), "-y": (1, -1), "y": (1, 1), "+y": (1, 1),
              "-z": (2, -1), "z": (2, 1), "+z": (2, 1), "all": (0, 0), "unassigned": (0, 0)}


def _quadrant(q: str, name: str):
    key = q.strip().lower()
    if key not in _QUADRANTS:
        raise ModelError(f"Wrap object {name!r}: quadrant {q!r} is not one of x, -x, y, -y, z, -z, all.")
    return _QUADRANTS[key]


class AbstractWrapObject(eqx.Module):
    """Common fields: the body, the pose of the wrap frame in it, OpenSim's quadrant
    (which side the path may wrap), and the PathWrap's point range and method.

    `range` holds OpenSim's 1-based (start, end) path-point indices; ``-1`` means
    the first (last) point.
    """

    name: eqx.AbstractVar[str]
    body: eqx.AbstractVar[str]
    translation: eqx.AbstractVar[Array]
    xyz_body_rotation: eqx.AbstractVar[Array]
    quadrant: eqx.AbstractVar[str]
    range: eqx.AbstractVar[tuple]
    method: eqx.AbstractVar[str]

    @property
    def wrap_axis(self) -> int:
        return _quadrant(self.quadrant, self.name)[0]

    @property
    def wrap_sign(self) -> int:
        return _quadrant(self.quadrant, self.name)[1]

    def pose(self, dtype):
        """(rotation, translation) of the wrap frame in the body frame."""
        return body_fixed_xyz(self.xyz_body_rotation.astype(dtype)), self.translation.astype(dtype)

    def wrap_line(self, p1, p2):
        """Wrap the segment p1-p2 (wrap-frame coordinates).

        Returns ``(code, r1, r2, wrap_length)`` with OpenSim's codes
        (-1 inside, 0 no wrap, 1 wrapped, 2 mandatory wrap), tangent points in
        the wrap frame and the length of the path on the surface.
        """
        raise NotImplementedError


def _wrap_common_init(self, name, body, translation, xyz_body_rotation, quadrant, range, method):
    self.name = str(name)
    self.body = str(body)
    self.translation = _f3(translation, f"wrap object {name!r} translation")
    self.xyz_body_rotation = _f3(xyz_body_rotation, f"wrap object {name!r} xyz_body_rotation")
    _quadrant(quadrant, name)
    self.quadrant = str(quadrant)
    self.range = (int(range[0]), int(range[1]))
    self.method = str(method)


class WrapSphere(AbstractWrapObject):
    """A sphere of `radius` (OpenSim WrapSphere: wraps when the segment crosses it)."""

    name: str = eqx.field(static=True)
    body: str = eqx.field(static=True)
    translation: Float[Array, "3"]
    xyz_body_rotation: Float[Array, "3"]
    radius: Float[Array, ""]
    quadrant: str = eqx.field(static=True)
    range: tuple = eqx.field(static=True)
    method: str = eqx.field(static=True)

    def __init__(self, name, body, radius, translation=(0.0, 0.0, 0.0), xyz_body_rotation=(0.0, 0.0, 0.0),
                 quadrant="all", range=(-1, -1), method="hybrid"):
        _wrap_common_init(self, name, body, translation, xyz_body_rotation, quadrant, range, method)
        self.radius = jnp.asarray(radius, dtype=float)

    def wrap_line(self, p1, p2):
        return _sphere_wrap(p1, p2, self.radius.astype(p1.dtype), self.wrap_axis, self.wrap_sign)


class WrapCylinder(AbstractWrapObject):
    """A cylinder of `radius` and `length` along the wrap frame's z axis."""

    name: str = eqx.field(static=True)
    body: str = eqx.field(static=True)
    translation: Float[Array, "3"]
    xyz_body_rotation: Float[Array, "3"]
    radius: Float[Array, ""]
    length: Float[Array, ""]
    quadrant: str = eqx.field(static=True)
    range: tuple = eqx.field(static=True)
    method: str = eqx.field(static=True)

    def __init__(self, name, body, radius, length, translation=(0.0, 0.0, 0.0),
                 xyz_body_rotation=(0.0, 0.0, 0.0), quadrant="all", range=(-1, -1), method="hybrid"):
        _wrap_common_init(self, name, body, translation, xyz_body_rotation, quadrant, range, method)
        self.radius = jnp.asarray(radius, dtype=float)
        self.length = jnp.asarray(length, dtype=float)

    def wrap_line(self, p1, p2):
        return _cylinder_wrap(p1, p2, self.radius.astype(p1.dtype), self.length.astype(p1.dtype),
                              self.wrap_axis, self.wrap_sign)


class WrapEllipsoid(AbstractWrapObject):
    """An ellipsoid with semi-axes `dimensions` (wrap frame x, y, z).

    OpenSim's algorithm: the wrapping plane through the segment ends and a
    surface point chosen by the PathWrap `method` (hybrid, midpoint, axial),
    tangent points by OpenSim's damped Gauss-Newton, and the surface length of
    OpenSim's 1 mm polyline (see docs/moment_arms.md, "Deviations and why").
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
        _wrap_common_init(self, name, body, translation, xyz_body_rotation, quadrant, range, method)
        self.dimensions = _f3(dimensions, f"WrapEllipsoid {name!r} dimensions")

    def wrap_line(self, p1, p2):
        prm = _wrap_params(self, p1.dtype)
        return _ellipsoid_wrap(p1, p2, prm, self.wrap_axis, self.wrap_sign)


class WrapTorus(AbstractWrapObject):
    """A torus in the wrap frame's xy plane; the path threads its hole.

    OpenSim 4.6's WrapTorus, reproduced: a point of the centre circle (radius
    `outer_radius`) near the segment is found by OpenSim's Levenberg-Marquardt
    search on OpenSim's residual (whose root is the point nearest the circle of
    radius 2 * outer_radius; docs/errata.md), and a 10 km cylinder of radius
    `inner_radius` tangent to the circle there (quadrant +x, towards the torus
    centre) wraps the segment. Like OpenSim's, it can wrap segments that pass
    beside the torus. Units: m.
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
        _wrap_common_init(self, name, body, translation, xyz_body_rotation, quadrant, range, method)
        self.inner_radius = jnp.asarray(inner_radius, dtype=float)
        self.outer_radius = jnp.asarray(outer_radius, dtype=float)

    def wrap_line(self, p1, p2):
        return _torus_wrap(p1, p2, self.inner_radius.astype(p1.dtype), self.outer_radius.astype(p1.dtype),
                           self.wrap_axis, self.wrap_sign)


# -- sphere ------------------------------------------------------------------

def _sphere_tangents(p, n, radius):
    """The two tangent points from p to the circle of `radius` in the plane normal to n."""
    d = _norm(p)
    y = _unit(-p)
    z = jnp.cross(n, y)
    ratio = radius / jnp.where(d > 0, d, 1.0)
    # arcsin' is infinite at 1 (p on or inside the sphere: INSIDE_RADIUS, never
    # selected, but a 0 * inf cotangent would poison reverse-mode gradients).
    out = ~(ratio < 1.0)
    a = jnp.where(out, 0.5 * jnp.pi, jnp.arcsin(jnp.where(out, 0.5, ratio)))
    reach = d * jnp.cos(a)
    ta = p + reach * (jnp.cos(a) * y + jnp.sin(a) * z)
    tb = p + reach * (jnp.cos(a) * y - jnp.sin(a) * z)
    return ta, tb


def _pick_shortest(r1a, r1b, r2a, r2b, c1, c2):
    """OpenSim's choice of the tangent pair with the largest dot product of the radii."""
    u1a, u1b, u2a, u2b = _unit(r1a - c1), _unit(r1b - c1), _unit(r2a - c2), _unit(r2b - c2)
    j1, j2, j3, j4 = u1a @ u2a, u1a @ u2b, u1b @ u2a, u1b @ u2b
    c_1 = (j1 > j2) & (j1 > j3) & (j1 > j4)
    c_2 = (~c_1) & (j2 > j3) & (j2 > j4)
    c_3 = (~c_1) & (~c_2) & (j3 > j4)
    r1 = jnp.where(c_1 | c_2, r1a, r1b)
    r2 = jnp.where(c_1 | c_3, r2a, jnp.where(c_2, r2b, jnp.where(c_3, r2a, r2b)))
    other1 = jnp.where(c_1 | c_2, r1b, r1a)
    other2 = jnp.where(c_1, r2b, jnp.where(c_2, r2a, jnp.where(c_3, r2b, r2a)))
    return r1, r2, other1, other2


def _sphere_wrap(p1, p2, radius, axis, sign):
    """OpenSim's WrapSphere; `axis` (0-2) and `sign` (-1, 0 = all, +1) may be traced."""
    d1, d2 = _norm(p1), _norm(p2)
    inside = (d1 < radius) | (d2 < radius)
    ri = p1 - p2
    mp = -p2
    a = ri @ ri
    b = -2.0 * (mp @ ri)
    c = mp @ mp - radius * radius
    disc = b * b - 4.0 * a * c
    sq = _sqrt0(disc)
    l1 = _safe_div(-b + sq, 2.0 * a)
    l2 = _safe_div(-b - sq, 2.0 * a)
    hit = (disc >= 0.0) & (l1 > 0.0) & (l1 < 1.0) & (l2 > 0.0) & (l2 < 1.0) & (l1 >= l2)
    p1p2 = _unit(p1 - p2)
    n = _unit(jnp.cross(p1p2, _unit(p2)))
    r1a, r1b = _sphere_tangents(p1, n, radius)
    r2a, r2b = _sphere_tangents(p2, n, radius)
    zero = jnp.zeros(3, p1.dtype)
    r1, r2, o1, o2 = _pick_shortest(r1a, r1b, r2a, r2b, zero, zero)
    code = jnp.where(hit, WRAPPED, NO_WRAP)
    # Quadrant-constrained wrap (computed always, selected where sign != 0).
    quad = jnp.asarray(sign) != 0
    s1, s2 = _dsign(p1[axis]), _dsign(p2[axis])
    either = (s1 == sign) | (s2 == sign)
    tt = -(((-p1) @ p1p2))
    mm = p1 + (-(p1 @ p1p2)) * p1p2
    mand = (mm @ mm < radius * radius) & (tt > 0.0) & (tt < 1.0)
    weak = (s1 != s2) & (_dsign(mm[axis]) != sign)
    code_q = jnp.where(either, jnp.where(mand, MANDATORY_WRAP, jnp.where(weak, WRAPPED, NO_WRAP)), code)
    code_q = jnp.where(hit, code_q, NO_WRAP)
    code = jnp.where(quad, code_q, code)
    need = quad & ((s1 != sign) | (s2 != sign))
    wrapaxis = jnp.zeros(3, p1.dtype).at[axis].set(jnp.asarray(sign, p1.dtype))
    summ = _unit(-p1 - p2)
    c1a = _unit(r1a) @ summ > _unit(r1b) @ summ
    c2a = _unit(r2a) @ summ > _unit(r2b) @ summ
    q1, q1o = jnp.where(c1a, r1a, r1b), jnp.where(c1a, r1b, r1a)
    q2, q2o = jnp.where(c2a, r2a, r2b), jnp.where(c2a, r2b, r2a)
    flip = _unit((q1 - p1) + (q2 - p2)) @ wrapaxis < 0.0
    q1, q2 = jnp.where(flip, q1o, q1), jnp.where(flip, q2o, q2)
    sum_musc = (q1 - p1) + (q2 - p2)
    sum_r = q1 + q2
    far_q = sum_r @ sum_musc < 0.0
    r1, r2 = jnp.where(need, q1, r1), jnp.where(need, q2, r2)
    far = need & far_q
    code = jnp.where(inside, INSIDE_RADIUS, code)
    angle = _acos(_unit(r1) @ _unit(r2))
    angle = jnp.where(far, -(2.0 * jnp.pi - angle), angle)  # OpenSim's sign, kept as is
    return code, r1, r2, radius * angle


# -- cylinder ----------------------------------------------------------------

def _closest_between_lines(p1, p2, p3, p4):
    """Closest points of the lines p1p2 and p3p4: (on first, s along p1->p2, on second, t)."""
    d1, d2, r = p2 - p1, p4 - p3, p1 - p3
    a, e, b = d1 @ d1, d2 @ d2, d1 @ d2
    c, f = d1 @ r, d2 @ r
    den = a * e - b * b
    s = _safe_div(b * f - c * e, den)
    t = _safe_div(a * f - b * c, den)
    return p1 + s * d1, s, p3 + t * d2, t


def _cylinder_tangents(p, radius):
    pa = jnp.array([0.0, 0.0, 1.0], p.dtype) * p[2]
    vv = p - pa
    dist0 = _norm(vv)
    vv = _unit(vv)
    sin_t = _safe_div(radius, dist0)
    dist = radius * sin_t
    pp = pa + dist * vv
    h = _sqrt0(radius * radius - dist * dist)
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
    return theta, axial, _sqrt0(xr * xr + axial * axial)


def _cyl_spiral_point(r1, theta, axial, sense, t):
    ang = sense * t * theta
    c, s = jnp.cos(ang), jnp.sin(ang)
    return jnp.stack([c * r1[0] - s * r1[1], s * r1[0] + c * r1[1], r1[2] + t * axial])


def _cyl_adjust(pt, r, w):
    """OpenSim's _adjust_tangent_point: when the line pt-r and the first spiral chord r-w meet
    the axis at angles more than 0.1 degree apart, slide r along the axis by 1.5 times the
    distance to where the line pt-w passes its generator line."""
    dn = jnp.array([0.0, 0.0, 1.0], r.dtype)
    alpha = _acos(_unit(r - pt) @ dn)
    omega = _acos(_unit(w - r) @ dn)
    need = jnp.abs(alpha - omega) > _CYL_TANGENCY
    pa = r + ((pt - r) @ dn) * dn
    wa = r + ((w - r) @ dn) * dn
    v1, v2 = _unit(w - pt), _unit(wa - pa)
    cr = jnp.cross(v1, v2)
    den = cr @ cr
    ok = den > _ROUNDOFF
    tt = _safe_div(jnp.linalg.det(jnp.stack([pa - pt, v1, cr])), jnp.where(ok, den, 1.0))
    inter = pa + tt * v2
    moved = r + 1.5 * (inter - r)
    need = need & ok
    return jnp.where(need, moved, r), need


def _cyl_multi_slide(p1, p2, r1, r2, radius, long_wrap, skip):
    """OpenSim's restarts of the spiral with slid tangent points, until no end needs
    sliding (at most _CYL_MAX_ADJUST); a while loop, so that lanes stop together as
    soon as all are done (usually after a few restarts) instead of running all 100.
    `skip`: a segment that does not wrap (its tangent points are not used) makes none."""
    sense = jnp.where(long_wrap, -1.0, 1.0)

    def cond(c):
        return ~c[2] & (c[3] < _CYL_MAX_ADJUST)

    def body(c):
        r1, r2, done, i = c
        theta, axial, wl = _cyl_spiral(r1, r2, radius, long_wrap)
        n = jnp.maximum(jnp.floor(_sg(wl) / _CYL_SEG), 1.0)
        t = 1.0 / n
        r1n, a1 = _cyl_adjust(p1, r1, _cyl_spiral_point(r1, theta, axial, sense, t))
        r2n, a2 = _cyl_adjust(p2, r2, _cyl_spiral_point(r1n, theta, axial, sense, 1.0 - t))
        go = ~done & (n >= 2.0) & (a1 | a2)
        return jnp.where(go, r1n, r1), jnp.where(go, r2n, r2), ~go, i + 1

    r1, r2, _, _ = jax.lax.while_loop(cond, body, (r1, r2, jnp.asarray(skip, bool), 0))
    return r1, r2


def _iterate_derivative(fn):
    """``fn(x, *aux)`` (x: a flat float array; aux: flags, not differentiated) differentiated
    as the iterations it actually makes, not as the point they converge to.

    OpenSim stops several wrap iterations at loose tolerances (the ellipsoid's
    Gauss-Newton at a squared residual of 1e-8, the torus's Levenberg-Marquardt at
    1e-4, the cylinder's restarts at 0.1 degree), so its lengths are functions of
    those iterates and -dL/dq is their derivative. The JVP rule forms the Jacobian
    ``d fn/dx`` by forward mode through fn's loops, from primal values only, and applies
    it linearly: reverse mode (the closed-form moment arms' ``jax.vjp``, ``jax.grad``)
    then transposes a matrix product instead of needing a reverse-differentiable
    loop of fixed length."""
    wrapped = jax.custom_jvp(fn)

    @wrapped.defjvp
    def _jvp(primals, tangents):
        x, *aux = primals

        def with_value(x):
            y = fn(x, *aux)
            return y, y

        jac, out = jax.jacfwd(with_value, has_aux=True)(x)
        return out, jac @ tangents[0]

    return wrapped


@_iterate_derivative
def _cyl_multi_adjust_flat(x, long_wrap, skip):
    return jnp.concatenate(_cyl_multi_slide(x[0:3], x[3:6], x[6:9], x[9:12], x[12], long_wrap, skip))


def _cyl_multi_adjust(p1, p2, r1, r2, radius, long_wrap, skip):
    """The tangent-point sliding OpenSim does when the muscle has several PathWraps,
    differentiable in both modes as the restarts actually made (:func:`_iterate_derivative`)."""
    out = _cyl_multi_adjust_flat(jnp.concatenate([p1, p2, r1, r2, jnp.reshape(radius, (1,))]), long_wrap, skip)
    return out[:3], out[3:]


def _cylinder_wrap(p1, p2, radius, length, axis, sign, single=True, skip=False):
    """OpenSim's WrapCylinder; `single` is False when the muscle has several PathWraps
    (OpenSim then slides the tangent points, see _cyl_multi_adjust); it may be traced.
    `skip` (may be traced): the caller does not use this segment's result, so no sliding."""
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
    r10, r20, _, _ = _pick_shortest(r1a, r1b, r2a, r2b, p11, p22)
    # Quadrant-constrained wrap (computed always; selected where sign != 0, which may be traced).
    quad = jnp.asarray(sign) != 0
    s1, s2 = _dsign(p1[axis]), _dsign(p2[axis])
    either = (s1 == sign) | (s2 == sign)
    weak = (s1 != s2) & (_dsign(near12[axis]) != sign)
    code_q = jnp.where(either, jnp.where(hit, MANDATORY_WRAP, jnp.where(weak, WRAPPED, NO_WRAP)), WRAPPED)
    r1am, r1bm, r2am, r2bm = r1a - p11, r1b - p11, r2a - p22, r2b - p22
    alpha = _acos(_safe_div(r1am @ r2bm, _norm(r1am) * _norm(r2bm)))
    beta = _acos(_safe_div(r1bm @ r2am, _norm(r1bm) * _norm(r2am)))
    on = lambda r: _dsign(r[axis]) == sign  # noqa: E731
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
    vv = _unit((r1 - p11) + (r2 - p22))
    t = _safe_div(p11_dist, p11_dist + p22_dist)
    mpt = p1 + t * (p2 - p1)
    axispt = dn * mpt[2]
    l1, l2 = _unit(p1 - axispt), _unit(p2 - axispt)
    pn = _unit(jnp.cross(l1, l2))
    vert1 = _unit(jnp.cross(dn, pn))
    vert2 = _unit(jnp.cross(pn, dn))
    apex1 = axispt + radius * vert1
    apex2 = axispt + radius * vert2
    dd1, dd2 = jnp.sum((mpt - apex1) ** 2), jnp.sum((mpt - apex2) ** 2)
    pick1 = jnp.where(far, ~(dd1 < dd2), dd1 < dd2)
    apex = jnp.where(pick1, apex1, apex2)
    pn = _unit(jnp.cross(_unit(p1 - apex), _unit(p2 - apex)))
    d = -(p1 @ pn)

    def slide(r, pfar, pnear):
        a_, b_ = r - 10.0 * dn, r + 10.0 * dn
        vec = b_ - a_
        dot = vec @ pn
        tt = _safe_div(-d - pn @ a_, dot)
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
        r1m, r2m = _cyl_multi_adjust(p1, p2, r1, r2, radius, long_wrap, skip | inside | (code == NO_WRAP))
        r1, r2 = jnp.where(single, r1, r1m), jnp.where(single, r2, r2m)
    _, _, wl = _cyl_spiral(r1, r2, radius, long_wrap)
    code = jnp.where(inside, INSIDE_RADIUS, code)
    return code, r1, r2, wl


# -- ellipsoid ---------------------------------------------------------------

# OpenSim's WrapEllipsoid (re-derived from its description; normalised coordinates,
# wrapping plane from a surface point c1, damped Gauss-Newton tangent points, a
# polyline surface path). Iterations that OpenSim stops at a tolerance run here in
# bounded while loops with OpenSim's stopping rules, and are differentiated as the
# iterates they stop at (:func:`_iterate_derivative`), since OpenSim's lengths, and
# so their derivatives, follow those iterates rather than the converged points.

_ELL_METHOD = {"hybrid": 0, "midpoint": 1, "axial": 2}
_MU_BLEND_MIN, _MU_BLEND_MAX = 0.7073, 0.9  # below: fan only; above: "Frans" (axis) only
_SV_BOUNDARY_BLEND = 0.3
_ROUNDOFF = 2e-13  # OpenSim's EQUAL_WITHIN_ERROR
_N_FAN = 300
_ELL_SEG = 0.001  # m, the surface polyline's segment length
_ELL_MAX_SEG = 499


def _sg(x):
    return jax.lax.stop_gradient(x)


def _newton_t(f_fp, t0, n=64, tol=1e-9):
    """Newton on t, at most n steps, stopping once |f| < tol (OpenSim's iteration)."""
    def cond(c):
        i, _, done = c
        return (i < n) & ~done

    def body(c):
        i, t, _ = c
        f, fp = f_fp(t)
        ok = jnp.abs(f) < tol
        return i + 1, jnp.where(ok, t, t - _safe_div(f, fp)), ok

    return jax.lax.while_loop(cond, body, (0, t0, jnp.zeros((), bool)))[1]


@_iterate_derivative
def _ellipse_lagrange(x):
    """OpenSim's Newton iterate for the Lagrange parameter t of the point of the ellipse
    (semi-axes x[0], x[1]) closest to (x[2], x[3]), differentiable as that iterate."""
    a, b, u, v = x
    a2, b2, au, bv = a * a, b * b, a * a * u * u, b * b * v * v

    def f_fp(t):
        P, Q = t + a2, t + b2
        return P * P * Q * Q - au * Q * Q - bv * P * P, 2.0 * (P * Q * (P + Q) - au * Q - bv * P)

    inside = (u / a) ** 2 + (v / b) ** 2 < 1.0
    return _newton_t(f_fp, jnp.where(inside, 0.0, jnp.maximum(a, b) * _sqrt0(u * u + v * v)))


def _ellipse_closest(a, b, u, v):
    """Closest point (x, y) of the ellipse (x/a)^2 + (y/b)^2 = 1 to (u, v), with OpenSim's
    special cases for points on an axis and its Newton iteration on the Lagrange parameter."""
    a2, b2 = a * a, b * b
    t = _ellipse_lagrange(jnp.stack([a, b, u, v]))
    xg, yg = _safe_div(a2 * u, t + a2), _safe_div(b2 * v, t + b2)
    near_x, near_y = jnp.abs(u) <= _ROUNDOFF, jnp.abs(v) <= _ROUNDOFF
    # Both near zero: the end of the shorter semi-axis.
    x_b = jnp.where(a < b, jnp.where(u < 0.0, -a, a), u)
    y_b = jnp.where(a < b, v, jnp.where(v < 0.0, -b, b))
    # On the y axis.
    top_x = (a >= b) | (jnp.abs(v) >= b - _safe_div(a2, b))
    y_x2 = _safe_div(b2 * v, b2 - a2)
    x_x = jnp.where(top_x, u, a * _sqrt0(jnp.abs(1.0 - (y_x2 / b) ** 2)))
    y_x = jnp.where(top_x, jnp.where(v >= 0.0, b, -b), y_x2)
    # On the x axis.
    top_y = (b >= a) | (jnp.abs(u) >= a - _safe_div(b2, a))
    x_y2 = _safe_div(a2 * u, a2 - b2)
    x_y = jnp.where(top_y, jnp.where(u >= 0.0, a, -a), x_y2)
    y_y = jnp.where(top_y, v, b * _sqrt0(jnp.abs(1.0 - (x_y2 / a) ** 2)))
    x = jnp.where(near_x & near_y, x_b, jnp.where(near_x, x_x, jnp.where(near_y, x_y, xg)))
    y = jnp.where(near_x & near_y, y_b, jnp.where(near_x, y_x, jnp.where(near_y, y_y, yg)))
    return x, y


_SECTION_AXES = ((1, 2), (2, 0), (0, 1))  # the in-plane axes of the section normal to axis 0, 1, 2


def _ellipsoid_closest_on_plane(a, p, axis):
    """OpenSim's reduction to the section x_axis = p_axis: keeps p[axis]. `axis` may be
    traced, so that one Newton loop serves whichever section is chosen (a loop per
    section made the ellipsoid wrap's compiled program several times larger)."""
    i, j = jnp.asarray(_SECTION_AXES)[axis]
    x, y = _ellipse_closest(a[i], a[j], p[i], p[j])
    return p.at[i].set(x).at[j].set(y)


@_iterate_derivative
def _ellipsoid_lagrange(x):
    """OpenSim's Newton iterate for the Lagrange parameter t of the point of the ellipsoid
    (semi-axes x[:3]) closest to x[3:], differentiable as that iterate."""
    a, p = x[:3], x[3:]
    a2 = a * a
    au, bv, cw = a2 * p * p

    def f_fp(t):
        P, Q, R = t + a2[0], t + a2[1], t + a2[2]
        f = P * P * Q * Q * R * R - au * Q * Q * R * R - bv * P * P * R * R - cw * P * P * Q * Q
        PQ, PR, QR, PQR = P * Q, P * R, Q * R, P * Q * R
        fp = 2.0 * (PQR * (QR + PR + PQ) - au * QR * (Q + R) - bv * PR * (P + R) - cw * PQ * (P + Q))
        return f, fp

    inside = jnp.sum((p / a) ** 2) < 1.0
    return _newton_t(f_fp, jnp.where(inside, 0.0, jnp.max(a) * _norm(p)))


def _ellipsoid_closest(a, p):
    """Closest point of the ellipsoid with semi-axes a to p (OpenSim's findClosestPoint)."""
    a2 = a * a
    t = _ellipsoid_lagrange(jnp.concatenate([a, p]))
    general = a2 * p / jnp.where(t + a2 != 0.0, t + a2, 1.0)
    # Points within round-off of a coordinate plane: the 2-D problem in that plane
    # (the section with the smallest sum of radii when several planes qualify).
    near = jnp.abs(p) <= _ROUNDOFF
    radsum = jnp.sum(a) - a
    axis = jnp.argmin(jnp.where(near, radsum, jnp.inf))
    return jnp.where(jnp.any(near), _ellipsoid_closest_on_plane(a, p, axis), general)


def _ell_residual(r, d1, p, a, vs, vs4):
    nr = 2.0 * r / (a * a)
    return jnp.stack([vs @ r + vs4, jnp.sum((r / a) ** 2) - 1.0, nr @ r + d1, nr @ p + d1])


def _ell_tangent_lm(r, p, a, vs, vs4):
    """OpenSim's damped Gauss-Newton for the tangent point from p in the plane (vs, vs4),
    started at r: 50 outer iterations at most, stops at ssq <= 1e-8."""
    d1 = -(2.0 * r / (a * a)) @ r
    ee = _ell_residual(r, d1, p, a, vs, vs4)
    ssq = ee @ ee
    ia2 = 1.0 / (a * a)

    def resid(r, d1):
        e = _ell_residual(r, d1, p, a, vs, vs4)
        return e @ e

    def outer(c):
        nit, r, d1, ssq, ssqo, alpha = c
        D = jnp.zeros((4, 4), r.dtype)
        D = D.at[:3, 0].set(vs).at[:3, 1].set(2.0 * r * ia2).at[:3, 2].set(4.0 * r * ia2)
        D = D.at[:3, 3].set(2.0 * p * ia2).at[3, 2].set(1.0).at[3, 3].set(1.0)
        ee = _ell_residual(r, d1, p, a, vs, vs4)
        pcos = _unit(p - r) @ _unit(p)
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
        return nit + 1, r, d1, ssq, ssq, alpha

    def cond(c):
        return (c[3] > 1e-8) & (c[0] < 50)

    init = (0, r, d1, ssq, ssq, jnp.asarray(0.01, r.dtype))
    return jax.lax.while_loop(cond, outer, init)[1]


@_iterate_derivative
def _ell_tangent_iterate(x):
    return _ell_tangent_lm(x[0:3], x[3:6], x[6:9], x[9:12], x[12])


def _ell_tangent(pe, r0, p, a, vs, vs4):
    """Tangent point from p (OpenSim's calcTangentPoint from r0), differentiable as
    OpenSim's stopped Gauss-Newton iterate (:func:`_iterate_derivative`): OpenSim's
    length follows that iterate, up to 1e-4 off the exact tangent point, and the
    exact point's derivative differs from the iterate's by up to ~1e-3 per unit."""
    r = _ell_tangent_iterate(jnp.concatenate([r0, p, a, vs, jnp.reshape(vs4, (1,))]))
    return jnp.where(jnp.abs(pe) < 1e-4, p, r)


def _ell_polyline(r1, r2, a, vs, vs4, n, far):
    """OpenSim's surface path: n segments at equal angles about a0 (the plane's point on the
    coordinate axis most normal to it), each point on the ray from a0; returns (length, w1, w2)."""
    imax = jnp.argmax(jnp.abs(vs))
    e = jnp.eye(3, dtype=r1.dtype)[imax]
    a0 = e * _safe_div(-vs4, vs @ e)
    ar1, ar2 = _unit(r1 - a0), _unit(r2 - a0)
    phi0 = _acos(ar1 @ ar2)
    nn = jnp.maximum(n, 1).astype(r1.dtype)
    dphi = jnp.where(far, -(2.0 * jnp.pi - phi0), phi0) / nn
    vsz = _unit(jnp.cross(ar1, ar2))
    vsy = jnp.cross(vsz, ar1)
    k = jnp.arange(1, _ELL_MAX_SEG, dtype=r1.dtype)  # interior points 1 .. 498
    phi = k * dphi
    ray = jnp.cos(phi)[:, None] * ar1 + jnp.sin(phi)[:, None] * vsy
    f1, f2 = ray / a, a0 / a
    aa = jnp.sum(f1 * f1, axis=-1)
    bb = 2.0 * (f1 @ f2)
    cc = f2 @ f2 - 1.0
    mu3 = _safe_div(-bb + _sqrt0(bb * bb - 4.0 * aa * cc), 2.0 * aa)
    s = a0 + mu3[:, None] * ray
    idx = jnp.arange(_ELL_MAX_SEG + 1)
    pts = jnp.concatenate([r1[None], s, r2[None]])
    pts = jnp.where((idx == 0)[:, None], r1, jnp.where((idx < n)[:, None], pts, r2))
    length = jnp.sum(_norm(pts[1:] - pts[:-1]))
    return length, pts[1], pts[jnp.clip(n - 1, 0, _ELL_MAX_SEG)]


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
    ppm = _unit(P1) @ _unit(P2) - 1.0
    f1, f2 = p1p2 / a, P2 / a
    aa = f1 @ f1
    bb = 2.0 * (f1 @ f2)
    cc = f2 @ f2 - 1.0
    disc = bb * bb - 4.0 * aa * cc
    sq = _sqrt0(disc)
    l1 = _safe_div(-bb + sq, 2.0 * aa)
    l2 = _safe_div(-bb - sq, 2.0 * aa)
    hit = (jnp.abs(ppm) >= 0.0001) & (disc >= 0.0) & (l1 > 0.0) & (l1 < 1.0) & (l2 > 0.0) & (l2 < 1.0)
    return factor, P1, P2, a, p1e, p2e, inside, hit


def _ellipsoid_code(p1, p2, dims):
    """The WrapAction of :func:`_ellipsoid_wrap` alone (cheap): an ellipsoid never returns
    WRAPPED, so GeometryPath's choice of segment needs only this (see :func:`_one_wrap`)."""
    *_, inside, hit = _ellipsoid_scaled(p1, p2, dims[:3])
    return jnp.where(inside, INSIDE_RADIUS, jnp.where(hit, MANDATORY_WRAP, NO_WRAP))


def _ellipsoid_wrap(p1, p2, dims, axis, sign):
    """OpenSim's WrapEllipsoid. `dims` is (3,) or (4,) = semi-axes and the PathWrap method
    (0 hybrid, 1 midpoint, 2 axial; hybrid when absent)."""
    method = dims[3] if dims.shape[0] > 3 else jnp.asarray(0.0, p1.dtype)
    dims = dims[:3]
    hybrid, axial = method == 0, method == 2
    factor, P1, P2, a, p1e, p2e, inside, hit = _ellipsoid_scaled(p1, p2, dims)
    # Where the segment does not wrap, go on with a stand-in segment that crosses the
    # ellipsoid, so that every quantity below (and its derivative) stays finite.
    ok = hit & ~inside
    P1 = jnp.where(ok, P1, a * jnp.array([1.5, 0.3, 0.1], p1.dtype))
    P2 = jnp.where(ok, P2, a * jnp.array([-1.5, 0.3, 0.1], p1.dtype))
    p1e = jnp.where(ok, p1e, 1.34)
    p2e = jnp.where(ok, p2e, 1.34)
    p1p2 = P1 - P2
    f1, f2 = p1p2 / a, P2 / a
    aa = f1 @ f1
    bb = 2.0 * (f1 @ f2)
    cc = f2 @ f2 - 1.0
    sq = _sqrt0(bb * bb - 4.0 * aa * cc)
    ri1 = P2 + _safe_div(-bb + sq, 2.0 * aa) * p1p2
    ri2 = P2 + _safe_div(-bb - sq, 2.0 * aa) * p1p2
    r1r2 = ri2 - ri1
    # (1) "Frans": the crossing of the segment with the coordinate plane most normal to it,
    # projected onto the section in that plane.
    mu = jnp.abs(_unit(p1p2))
    t = _safe_div(-ri1, r1r2)
    t_sv = ri1[None, :] + t[:, None] * r1r2[None, :]
    t_c1 = jax.vmap(lambda x, i: _ellipsoid_closest_on_plane(a, x, i))(t_sv, jnp.arange(3))
    best = jnp.argmax(mu)
    mub, tb = mu[best], t[best]
    s = jnp.where((tb < 0.0) | (tb > 1.0), 0.0,
                  jnp.where(tb < _SV_BOUNDARY_BLEND, tb / _SV_BOUNDARY_BLEND,
                            jnp.where(tb > 1.0 - _SV_BOUNDARY_BLEND, (1.0 - tb) / _SV_BOUNDARY_BLEND, 1.0)))
    mub = jnp.where(hybrid & (mub > _MU_BLEND_MIN) & (s < 1.0), _MU_BLEND_MIN + s * (mub - _MU_BLEND_MIN), mub)
    c1_frans = t_c1[best]
    # (2) "fan": the mean direction from the segment's inner points to their closest points.
    tt = jnp.arange(1, _N_FAN - 1, dtype=p1.dtype) / _N_FAN
    svs = ri1 + tt[:, None] * r1r2
    mid = ri1 + 0.5 * r1r2
    # The fan's points and the midpoint (method 1) in one batched closest-point solve.
    closest = jax.vmap(lambda x: _ellipsoid_closest(a, x))(jnp.concatenate([svs, mid[None]]))
    blades = _unit(closest[:-1] - svs)
    c_fan = _ellipsoid_closest(a, mid + _unit(jnp.sum(blades, axis=0)))
    wt = (mub - _MU_BLEND_MIN) / (_MU_BLEND_MAX - _MU_BLEND_MIN)
    c_blend = _ellipsoid_closest(a, wt * c1_frans + (1.0 - wt) * c_fan)
    use_fan = hybrid & (mub < _MU_BLEND_MAX)
    c1_h = jnp.where(use_fan, jnp.where(mub <= _MU_BLEND_MIN, c_fan, c_blend), c1_frans)
    fan_weight = jnp.where(use_fan, jnp.where(mub <= _MU_BLEND_MIN, 1.0, 1.0 - wt), -jnp.inf)
    c1_mid = closest[-1]
    c1 = jnp.where(method == 1, c1_mid, c1_h)
    use_c1 = ~axial | ((tb > 0.0) & (tb < 1.0))
    r1s, r2s = jnp.where(use_c1, c1, ri1), jnp.where(use_c1, c1, ri2)
    # Quadrant: mirror c1 onto the active side (towards the plane for a fan solution).
    flip = (sign != 0) & (_dsign(c1[axis]) != sign)
    mirrored = c1.at[axis].set(-c1[axis])
    fw = jnp.where(jnp.isinf(fan_weight), 1.0 - wt, fan_weight)
    fw = jnp.minimum(fw, 1.0)
    pulled = mirrored.at[axis].add(fw * (0.5 * (c1[axis] + mirrored[axis]) - mirrored[axis]))
    pulled = _ellipsoid_closest(a, pulled)
    r1s, r2s = jnp.where(flip, mirrored, r1s), jnp.where(flip, mirrored, r2s)
    c1 = jnp.where(flip, jnp.where(fw > 0.0, pulled, mirrored), c1)
    # The wrapping plane through p1, p2 and c1; tangent points within it.
    vs = _unit(jnp.cross(p1p2, P1 - c1))
    vs4 = -(vs @ c1)
    # Both tangent points in one batched solve (two Gauss-Newton loops compile to twice
    # the program).
    r1, r2 = jax.vmap(lambda pe, r0, p: _ell_tangent(pe, r0, p, a, vs, vs4))(
        jnp.stack([p1e, p2e]), jnp.stack([r1s, r2s]), jnp.stack([P1, P2]))
    # Surface path: a polyline of |r1 - r2| / 1 mm segments (at most 499).
    chord = _norm(r1 - r2)
    lm = chord / factor
    n = jnp.clip(jnp.floor(_sg(lm) / _ELL_SEG), 0, _ELL_MAX_SEG).astype(jnp.int32)
    lens, w1s, w2s = jax.vmap(lambda far: _ell_polyline(r1, r2, a, vs, vs4, n, far))(jnp.asarray([False, True]))
    (near_len, far_len), w1, w2 = lens, w1s[0], w2s[0]
    wrong = (_unit(P1 - r1) @ _unit(w1 - r1) > 0.0) | (_unit(P2 - r2) @ _unit(w2 - r2) > 0.0)
    far = (sign != 0) & (n >= 2) & wrong
    wl = jnp.where(lm < _ELL_SEG, chord, jnp.where(far, far_len, near_len))
    code = jnp.where(inside, INSIDE_RADIUS, jnp.where(hit, MANDATORY_WRAP, NO_WRAP))
    return code, r1 / factor, r2 / factor, wl / factor


# -- torus -------------------------------------------------------------------
#
# OpenSim's WrapTorus: the point of the torus's centre circle (radius `outer`,
# xy plane) nearest the segment is found by MINPACK's Levenberg-Marquardt
# (lmdif as modified in OpenSim's Lmdif.cpp: forward-difference Jacobian with
# a fixed step of 1e-5, initial step bound 0.2 when the start point is 0,
# ftol = xtol = 1e-4, at most 500 evaluations) on the residual of
# WrapTorus::calcCircleResids, started at each end of the segment; a cylinder of
# radius `inner`, 10 km long, quadrant "+x", tangent to the circle there, then
# wraps the segment. The residual is not d|x - circle|^2/du: its last term
# carries a factor 2, so that its root is the point nearest the circle of
# radius 2 * outer (docs/errata.md). jaxmb solves OpenSim's residual, so that
# its lengths are OpenSim's.

_TORUS_CYL_LENGTH = 10000.0
_LM_STEP = 1e-5  # OpenSim's fdjac2: a fixed forward-difference step
_LM_DWARF = 1.0e-38
_LM_MACHEP = 1.2e-16


def _torus_resid(u, p1, p2, outer):
    """WrapTorus::calcCircleResids at distance u from p1 along p1 -> p2 (as OpenSim writes it)."""
    return _torus_resid_fn(p1, p2, outer)(u)


def _torus_resid_fn(p1, p2, outer):
    """u -> WrapTorus::calcCircleResids(u), with the segment's coefficients computed once
    (the search evaluates it a few times per iteration)."""
    n = _unit(p2 - p1)
    c2 = 2.0 * (p1 @ n)
    c3 = p1[0] * n[0] + p1[1] * n[1]
    c4 = n[0] * n[0] + n[1] * n[1]
    c5 = p1[0] * p1[0] + p1[1] * p1[1]

    def resid(u):
        rho = _sqrt0(u * u * c4 + 2.0 * c3 * u + c5)
        # rho = 0 (the line through the torus axis) divides by zero in OpenSim; 0 here.
        return c2 + 2.0 * u - 2.0 * outer * _safe_div(2.0 * c4 * u + 2.0 * c3, rho)

    return resid


def _lmpar_1d(r, d, qtb, delta, par):
    """MINPACK's lmpar for one unknown: the Levenberg-Marquardt parameter and step x
    with |d x| close to delta (r: the 1x1 R factor, d: the scaling, qtb: Q^T f)."""
    x_gn = _safe_div(qtb, r)
    dxnorm = jnp.abs(d * x_gn)
    fp0 = dxnorm - delta
    gauss_newton = fp0 <= 0.1 * delta
    ok_r = r != 0.0
    w = _safe_div(d * _safe_div(d * x_gn, dxnorm), r)
    parl = jnp.where(ok_r, _safe_div(_safe_div(fp0, delta), w * w), 0.0)
    gnorm = jnp.abs(_safe_div(r * qtb, d))
    paru = gnorm / delta
    paru = jnp.where(paru == 0.0, _LM_DWARF / jnp.minimum(delta, 0.1), paru)
    par = jnp.minimum(jnp.maximum(par, parl), paru)
    par = jnp.where(par == 0.0, _safe_div(gnorm, dxnorm), par)

    def solve(par):
        # qrsolv: one Givens rotation eliminates sqrt(par) * d below r.
        sd = _sqrt0(par) * d
        small_r = jnp.abs(r) < jnp.abs(sd)
        cot = _safe_div(r, sd)
        tan = _safe_div(sd, r)
        sin_a = 0.5 / jnp.sqrt(0.25 + 0.25 * cot * cot)
        cos_b = 0.5 / jnp.sqrt(0.25 + 0.25 * tan * tan)
        c, s = jnp.where(small_r, sin_a * cot, cos_b), jnp.where(small_r, sin_a, cos_b * tan)
        sdiag = jnp.where(sd == 0.0, r, c * r + s * sd)
        x = _safe_div(jnp.where(sd == 0.0, qtb, c * qtb), sdiag)
        return x, sdiag

    def body(carry):
        it, par, parl, paru, fp, _, _ = carry
        it = it + 1
        par = jnp.where(par == 0.0, jnp.maximum(_LM_DWARF, 0.001 * paru), par)
        x, sdiag = solve(par)
        dxn = jnp.abs(d * x)
        fp_old, fp = fp, dxn - delta
        done = (jnp.abs(fp) <= 0.1 * delta) | ((parl == 0.0) & (fp <= fp_old) & (fp_old < 0.0)) | (it == 10)
        w = _safe_div(d * _safe_div(d * x, dxn), sdiag)
        parc = _safe_div(_safe_div(fp, delta), w * w)
        parl2 = jnp.where(fp > 0.0, jnp.maximum(parl, par), parl)
        paru2 = jnp.where(fp < 0.0, jnp.minimum(paru, par), paru)
        par2 = jnp.maximum(parl2, par + parc)
        return (it, jnp.where(done, par, par2), parl2, paru2, fp, x, done)

    init = (jnp.int32(0), par, parl, paru, fp0, x_gn, gauss_newton)
    _, par, _, _, _, x, _ = jax.lax.while_loop(lambda c: ~c[-1], body, init)
    return jnp.where(gauss_newton, x_gn, x), jnp.where(gauss_newton, 0.0, par)


def _lmdif_1d(fun, ftol=1e-4, xtol=1e-4, maxfev=500, factor=0.2):
    """The root (or least-squares point) of the scalar `fun` from x = 0 by OpenSim's lmdif_C
    for one residual and one unknown (MINPACK's decisions, OpenSim's modifications);
    differentiable in forward mode (the derivative of the iterate it stops at)."""
    zero = jnp.zeros(())
    f0 = fun(zero)

    def outer(c):
        # New Jacobian at x: MINPACK's qrfac of a 1x1 matrix gives R = -J, Q^T f = -f.
        x, fvec, fnorm, par, delta, diag, xnorm, it, nfev, _, _, _ = c
        jac = (fun(x + _LM_STEP) - fvec) / _LM_STEP
        acn = jnp.abs(jac)
        first = it == 1
        diag = jnp.where(first, jnp.where(acn == 0.0, 1.0, acn), diag)
        xnorm = jnp.where(first, jnp.abs(diag * x), xnorm)
        delta0 = factor * xnorm
        delta = jnp.where(first, jnp.where(jnp.abs(delta0) <= 1e-4, factor, delta0), delta)
        r = -jac
        qtf = jnp.where(jac != 0.0, -fvec, fvec)
        # MINPACK's scaled gradient norm (1 unless f or J is 0); gtol = 0 stops only at 0.
        gnorm = _safe_div(jnp.abs(r * _safe_div(qtf, fnorm)), acn)
        info = jnp.where(gnorm <= 0.0, 4, 0).astype(jnp.int32)
        diag = jnp.maximum(diag, acn)
        return (x, fvec, fnorm, par, delta, diag, xnorm, it, nfev, info, r, qtf)

    def inner(c):
        x, fvec, fnorm, par, delta, diag, xnorm, it, nfev, info, r, qtf = c
        xs, par = _lmpar_1d(r, diag, qtf, delta, par)
        p = -xs
        pnorm = jnp.abs(diag * p)
        delta = jnp.where(it == 1, jnp.minimum(delta, pnorm), delta)
        f1 = fun(x + p)
        nfev = nfev + 1
        fnorm1 = jnp.abs(f1)
        actred = jnp.where(0.1 * fnorm1 < fnorm, 1.0 - (fnorm1 / fnorm) ** 2, -1.0)
        t1 = jnp.abs(r * p) / fnorm
        t2 = _sqrt0(par) * pnorm / fnorm
        prered = t1 * t1 + t2 * t2 / 0.5
        dirder = -(t1 * t1 + t2 * t2)
        ratio = jnp.where(prered != 0.0, actred / jnp.where(prered != 0.0, prered, 1.0), 0.0)
        shrink = ratio <= 0.25
        tmp = jnp.where(actred >= 0.0, 0.5, 0.5 * dirder / (dirder + 0.5 * actred))
        tmp = jnp.where((0.1 * fnorm1 >= fnorm) | (tmp < 0.1), 0.1, tmp)
        grow = (par == 0.0) | (ratio >= 0.75)
        delta = jnp.where(shrink, tmp * jnp.minimum(delta, pnorm / 0.1), jnp.where(grow, pnorm / 0.5, delta))
        par = jnp.where(shrink, par / tmp, jnp.where(grow, 0.5 * par, par))
        success = ratio >= 1e-4
        x = jnp.where(success, x + p, x)
        fvec = jnp.where(success, f1, fvec)
        xnorm = jnp.where(success, jnp.abs(diag * x), xnorm)
        fnorm = jnp.where(success, fnorm1, fnorm)
        it = jnp.where(success, it + 1, it)
        small = (jnp.abs(actred) <= ftol) & (prered <= ftol) & (0.5 * ratio <= 1.0)
        info = jnp.where(small, 1, 0)
        info = jnp.where(delta <= xtol * xnorm, 2, info)
        info = jnp.where(small & (info == 2), 3, info)
        tiny = (jnp.abs(actred) <= _LM_MACHEP) & (prered <= _LM_MACHEP) & (0.5 * ratio <= 1.0)
        info = jnp.where(info != 0, info, jnp.where(nfev >= maxfev, 5, 0))
        info = jnp.where(info != 0, info,
                         jnp.where(tiny, 6, jnp.where(delta <= _LM_MACHEP * xnorm, 7, 0)))
        return (x, fvec, fnorm, par, delta, diag, xnorm, it, nfev, info.astype(jnp.int32), r, qtf), success

    def step(c):
        c, need_jac = c
        c = jax.lax.cond(need_jac, outer, lambda c: c, c)
        c2, success = inner(c)
        # gnorm == 0 (info 4) stops before the inner step.
        c = jax.tree_util.tree_map(lambda a, b: jnp.where(c[9] == 4, a, b), c, c2)
        return c, success

    state = (zero, f0, jnp.abs(f0), zero, zero, zero + 1.0, zero, jnp.int32(1), jnp.int32(1), jnp.int32(0), zero, zero)
    (c, _) = jax.lax.while_loop(lambda c: c[0][9] == 0, step, (state, jnp.asarray(True)))
    return c[0]  # x


@_iterate_derivative
def _torus_closest_u_flat(x):
    return _lmdif_1d(_torus_resid_fn(x[0:3], x[3:6], x[6]))


def _torus_closest_u(p1, p2, outer):
    """OpenSim's Levenberg-Marquardt result u (distance from p1 towards p2), differentiable
    as that iterate (:func:`_iterate_derivative`; OpenSim stops at ftol = xtol = 1e-4)."""
    return _torus_closest_u_flat(jnp.concatenate([p1, p2, jnp.reshape(outer, (1,))]))


def _torus_wrap(p1, p2, inner, outer, axis, sign, single=True, skip=False):
    """OpenSim's WrapTorus::wrapLine (see above); `single` as for _cylinder_wrap."""
    # From both ends in one batched Levenberg-Marquardt solve (two loops compile to
    # twice the program).
    u1, u2 = jax.vmap(_torus_closest_u, in_axes=(0, 0, None))(jnp.stack([p1, p2]), jnp.stack([p2, p1]), outer)
    a1, a2 = p1 + u1 * _unit(p2 - p1), p2 + u2 * _unit(p1 - p2)

    def dist2(x):  # squared distance to the circle (OpenSim compares the square roots)
        return x @ x + outer * outer - 2.0 * outer * _sqrt0(x[0] ** 2 + x[1] ** 2)

    dd1, dd2 = dist2(a1), dist2(a2)
    quad = jnp.asarray(sign) != 0
    on1, on2 = _dsign(a1[axis]) == sign, _dsign(a2[axis]) == sign
    pick2 = jnp.where(quad, jnp.where(on1 & on2, ~(dd1 < dd2), ~on1), ~(dd1 < dd2))
    valid = ~quad | on1 | on2
    a = jnp.where(pick2, a2, a1)
    rad = _sqrt0(a[0] ** 2 + a[1] ** 2)
    closest = jnp.array([a[0], a[1], 0.0]) * _safe_div(outer, rad)
    # Cylinder frame: x points from the circle point to the torus centre, y = -z_torus.
    cx = _unit(-closest)
    cy = jnp.array([0.0, 0.0, -1.0], p1.dtype)
    cz = jnp.cross(cx, cy)
    rot = jnp.stack([cx, cy, cz])  # rows: cylinder axes in torus coordinates
    origin = closest  # circle point, in torus coordinates

    def to_cyl(p):
        return rot @ (p - origin)

    code, r1, r2, wl = _cylinder_wrap(to_cyl(p1), to_cyl(p2), inner, jnp.asarray(_TORUS_CYL_LENGTH, p1.dtype),
                                      0, 1, single, skip)
    # OpenSim's WrapTorus returns "wrapped" whatever the cylinder says; a cylinder that
    # did not wrap leaves no wrap points (r1 = NaN: never the best segment), so the
    # segment counts as wrapped exactly where the cylinder wrapped it.
    code = jnp.where(valid & (code > 0), WRAPPED, NO_WRAP)
    back = lambda r: rot.T @ r + origin  # noqa: E731
    return code, back(r1), back(r2), wl


# ---------------------------------------------------------------------------
# Muscles
# ---------------------------------------------------------------------------

class MuscleParameters(eqx.Module):
    """Hill-type parameters shared by OpenSim's muscle models (SI units, rad)."""

    max_isometric_force: Float[Array, ""]
    optimal_fiber_length: Float[Array, ""]
    tendon_slack_length: Float[Array, ""]
    pennation_angle_at_optimal: Float[Array, ""]
    max_contraction_velocity: Float[Array, ""]

    def __init__(self, max_isometric_force=1000.0, optimal_fiber_length=0.1, tendon_slack_length=0.2,
                 pennation_angle_at_optimal=0.0, max_contraction_velocity=10.0):
        self.max_isometric_force = jnp.asarray(max_isometric_force, dtype=float)
        self.optimal_fiber_length = jnp.asarray(optimal_fiber_length, dtype=float)
        self.tendon_slack_length = jnp.asarray(tendon_slack_length, dtype=float)
        self.pennation_angle_at_optimal = jnp.asarray(pennation_angle_at_optimal, dtype=float)
        self.max_contraction_velocity = jnp.asarray(max_contraction_velocity, dtype=float)


class Muscle(eqx.Module):
    """A musculotendon unit: name, path points (origin first), wrap objects, parameters.

    `kind` names the OpenSim class it came from (e.g. ``"Millard2012EquilibriumMuscle"``).
    """

    name: str = eqx.field(static=True)
    points: tuple
    wraps: tuple
    parameters: MuscleParameters
    kind: str = eqx.field(static=True)

    def __init__(self, name: str, points: Sequence[AbstractPathPoint], wraps: Sequence[AbstractWrapObject] = (),
                 parameters: MuscleParameters | None = None, kind: str = "Muscle"):
        self.name = str(name)
        self.points = tuple(points)
        self.wraps = tuple(wraps)
        self.parameters = MuscleParameters() if parameters is None else parameters
        self.kind = str(kind)
        if len(self.points) < 2:
            raise ModelError(f"Muscle {name!r} needs at least two path points, got {len(self.points)}.")
        for p in self.points:
            if not isinstance(p, AbstractPathPoint):
                raise ModelError(f"Muscle {name!r}: {type(p).__name__} is not a path point.")
        if isinstance(self.points[0], ConditionalPathPoint) or isinstance(self.points[-1], ConditionalPathPoint):
            raise ModelError(f"Muscle {name!r}: the first and last path points may not be conditional.")
        for w in self.wraps:
            if not isinstance(w, AbstractWrapObject):
                raise ModelError(f"Muscle {name!r}: {type(w).__name__} is not a wrap object.")


# ---------------------------------------------------------------------------
# Path evaluation, vectorized over muscles
# ---------------------------------------------------------------------------
#
# All muscles of a model are evaluated together so that the traced graph does
# not grow with the number of muscles. The muscles are padded to P points and
# W wrap slots; every path has N = P + 2W nodes: its points, then the two
# tangent points of each wrap slot. A node is ordered along the path by a float
# key (points: their index; tangent points: inserted between the ends of the
# segment they wrap). Wrap slot s of all muscles is applied at once, one
# vmapped call per wrap type present in that slot, so the graph holds each wrap
# algorithm at most W times whatever the number of muscles. Body transforms are
# computed once per state and gathered (ground is an extra identity pose).

_WRAP_FN = {
    # `skip`: the segment is not a candidate (its result is not used), so the
    # multi-wrap cylinder sliding need not run on it.
    "WrapSphere": lambda p1, p2, prm, ax, sg, skip=False: _sphere_wrap(p1, p2, prm[0], ax, sg),
    "WrapCylinder": lambda p1, p2, prm, ax, sg, skip=False: _cylinder_wrap(p1, p2, prm[0], prm[1], ax, sg),
    "WrapEllipsoid": lambda p1, p2, prm, ax, sg, skip=False: _ellipsoid_wrap(p1, p2, prm, ax, sg),
    "WrapTorus": lambda p1, p2, prm, ax, sg, skip=False: _torus_wrap(p1, p2, prm[0], prm[1], ax, sg),
    "WrapTorusMulti": lambda p1, p2, prm, ax, sg, skip=False: _torus_wrap(p1, p2, prm[0], prm[1], ax, sg,
                                                                         False, skip),
    # A cylinder (also a torus's inner cylinder) on a muscle with several PathWraps
    # (OpenSim's singleWrap false): its own group, so that single-wrap cylinders are
    # compiled (and differentiated) without the tangent-point sliding loop.
    "WrapCylinderMulti": lambda p1, p2, prm, ax, sg, skip=False: _cylinder_wrap(p1, p2, prm[0], prm[1], ax, sg,
                                                                               False, skip),
}


# Each wrap algorithm is traced once per argument shapes: the forward resolution, the
# reverse sweep's jax.vjp and every slot of the same kind reuse the traced program
# (and its JVP and batched forms) instead of tracing the algorithm again.
_WRAP_FN = {kind: jax.jit(fn) for kind, fn in _WRAP_FN.items()}


def _wrap_params(w, dtype):
    if isinstance(w, WrapSphere):
        return jnp.stack([w.radius]).astype(dtype)
    if isinstance(w, WrapCylinder):
        return jnp.stack([w.radius, w.length]).astype(dtype)
    if isinstance(w, WrapEllipsoid):
        method = jnp.asarray([_ELL_METHOD.get(w.method.strip().lower(), 0)], dtype)
        return jnp.concatenate([w.dimensions.astype(dtype), method])
    if isinstance(w, WrapTorus):
        return jnp.stack([w.inner_radius, w.outer_radius]).astype(dtype)
    raise ModelError(f"Wrap object {w.name!r}: unsupported type {type(w).__name__}.")


def _wrap_kind(w):
    for k in _WRAP_FN:
        if type(w).__name__ == k:
            return k
    for k, cls in (("WrapSphere", WrapSphere), ("WrapCylinder", WrapCylinder),
                   ("WrapEllipsoid", WrapEllipsoid), ("WrapTorus", WrapTorus)):
        if isinstance(w, cls):
            return k
    raise ModelError(f"Wrap object {getattr(w, 'name', '?')!r}: unsupported type {type(w).__name__}.")


def _group_kind(w, n_wraps):
    """The key of `w`'s wrap function in _WRAP_FN on a muscle with `n_wraps` PathWraps."""
    kind = _wrap_kind(w)
    return kind + "Multi" if kind in ("WrapCylinder", "WrapTorus") and n_wraps > 1 else kind


class _Layout:
    """Static (numpy) description of the padded muscle paths of a model."""

    def __init__(self, muscles, body_names):
        nb = len(body_names)
        index = {b: i for i, b in enumerate(body_names)}
        index[GROUND] = nb

        def body_of(name):
            if name not in index:
                raise ModelError(f"Path point or wrap object on unknown body {name!r}; bodies: {body_names}.")
            return index[name]

        self.muscles = muscles
        self.nb = nb
        self.K = K = len(muscles)
        self.P = P = max((len(m.points) for m in muscles), default=2)
        self.W = W = max((len(m.wraps) for m in muscles), default=0)
        self.N = N = P + 2 * W
        self.npts = np.array([len(m.points) for m in muscles], int)
        self.nw = np.array([len(m.wraps) for m in muscles], int)
        self.valid = np.zeros((K, P), bool)
        self.pbody = np.full((K, P), nb, int)
        self.fixed, self.moving, self.cond = [], [], []
        for k, m in enumerate(muscles):
            for j, pt in enumerate(m.points):
                self.valid[k, j] = True
                self.pbody[k, j] = body_of(pt.body)
                (self.moving if isinstance(pt, MovingPathPoint) else self.fixed).append((k, j))
                if isinstance(pt, ConditionalPathPoint):
                    self.cond.append((k, j))
        self.wbody = np.full((K, W), nb, int)
        self.wpresent = np.zeros((K, W), bool)
        self.wstart = np.zeros((K, W), int)
        self.wend = np.zeros((K, W), int)
        for k, m in enumerate(muscles):
            n = len(m.points)
            for s, w in enumerate(m.wraps):
                self.wbody[k, s] = body_of(w.body)
                self.wpresent[k, s] = True
                start = 0 if w.range[0] < 1 else w.range[0] - 1
                end = n - 1 if w.range[1] < 1 else w.range[1] - 1
                self.wstart[k, s] = min(max(start, 0), n - 1)
                self.wend[k, s] = min(max(end, 0), n - 1)
        # Per wrap slot s, per wrap kind: the muscles whose s-th PathWrap is of that kind
        # (so that each slot computes exactly the wraps it has, no masked work).
        self.groups = []
        for s in range(W):
            at_s = {}
            for k, m in enumerate(muscles):
                if s < len(m.wraps):
                    at_s.setdefault(_group_kind(m.wraps[s], len(m.wraps)), []).append(k)
            self.groups.append([(kind, np.array(at_s[kind], int)) for kind in _WRAP_FN if kind in at_s])
        self.owner = np.concatenate([np.full(P, -1), np.repeat(np.arange(W), 2)]).astype(int)
        self.node_body = np.concatenate([self.pbody, np.repeat(self.wbody, 2, axis=1)], axis=1)
        self.multi = bool(np.any(self.nw > 1))


def _layout(model: Model) -> _Layout:
    return _Layout(model.muscles, model.body_names)


def _ext_poses(poses):
    """Rotations (nb+1, 3, 3) and origins (nb+1, 3) with ground appended as the last body."""
    rot = jnp.concatenate([poses[:, :3, :3], jnp.eye(3, dtype=poses.dtype)[None]])
    org = jnp.concatenate([poses[:, :3, 3], jnp.zeros((1, 3), poses.dtype)])
    return rot, org


def _point_locals(lay: _Layout, q):
    """Body-frame locations (K, P, 3) and activity (K, P) of all path points at q."""
    dt = q.dtype
    loc = jnp.zeros((lay.K, lay.P, 3), dt)
    if lay.fixed:
        k, j = np.array(lay.fixed).T
        loc = loc.at[k, j].set(jnp.stack([lay.muscles[a].points[b].location(q) for a, b in lay.fixed]).astype(dt))
    if lay.moving:
        k, j = np.array(lay.moving).T
        loc = loc.at[k, j].set(_moving_locals(lay, q))
    active = jnp.asarray(lay.valid)
    if lay.cond:
        k, j = np.array(lay.cond).T
        active = active.at[k, j].set(jnp.stack([lay.muscles[a].points[b].is_active(q) for a, b in lay.cond]))
    return loc, active


def _moving_locals(lay: _Layout, q):
    return jnp.stack([lay.muscles[a].points[b].location(q) for a, b in lay.moving]).astype(q.dtype)


def _wrap_groups(lay: _Layout, rot_e, org_e, dt):
    """Per wrap slot, per wrap kind: (kind, muscles ks (G,), frame rotations (G, 3, 3),
    origins (G, 3), params (G, n), axis (G,), sign (G,)), frames in ground."""
    out = []
    for s, slot in enumerate(lay.groups):
        per_kind = []
        for kind, ks in slot:
            ws = [lay.muscles[k].wraps[s] for k in ks]
            rw = jax.vmap(body_fixed_xyz)(jnp.stack([w.xyz_body_rotation.astype(dt) for w in ws]))
            tw = jnp.stack([w.translation.astype(dt) for w in ws])
            b = lay.wbody[ks, s]
            rot = jnp.einsum("gij,gjk->gik", rot_e[b], rw)
            org = jnp.einsum("gij,gj->gi", rot_e[b], tw) + org_e[b]
            prm = jnp.stack([_wrap_params(w, dt) for w in ws])
            per_kind.append((kind, ks, rot, org, prm, np.array([w.wrap_axis for w in ws], int),
                             np.array([w.wrap_sign for w in ws], int)))
        out.append(per_kind)
    return out


def _path_length_one(pos, active, key, wrap_len, owner):
    order = jnp.argsort(jnp.where(active, key, jnp.inf))
    p = pos[order]
    act = active[order]
    own = jnp.asarray(owner)[order]
    seg = _norm(p[1:] - p[:-1])
    both = act[1:] & act[:-1]
    same = (own[1:] == own[:-1]) & (own[1:] >= 0)
    wl = jnp.where(same, wrap_len[jnp.clip(own[1:], 0, None)] if wrap_len.shape[0] else 0.0, seg)
    return jnp.sum(jnp.where(both, wl, 0.0))


def _path_lengths(lay, state):
    pos, active, key, wrap_len = state
    return jax.vmap(lambda a, b, c, d: _path_length_one(a, b, c, d, lay.owner))(pos, active, key, wrap_len)


def _one_wrap(kind, s, P, owner, pos, active, key, wrap_len, rot, org, prm, axis, sign, start, end):
    """Apply wrap slot `s` (of kind `kind`) to one muscle's path (OpenSim's applyWrapObjects step).

    Returns the new ``(pos, active, key, wrap_len)`` and the record of this wrap
    computation for the closed-form moment arms: ``(engaged, node_a, node_b, p_a, p_b)``,
    the nodes (and their positions now) of the segment that was wrapped.
    """
    n1, n2 = P + 2 * s, P + 2 * s + 1
    active = active.at[n1].set(False).at[n2].set(False)
    idx = jnp.arange(P)
    inr = (idx >= start) & (idx <= end) & active[:P]
    any_active = jnp.any(inr)
    ks = jnp.min(jnp.where(inr, key[:P], jnp.inf))
    ke = jnp.max(jnp.where(inr, key[:P], -jnp.inf))
    order = jnp.argsort(jnp.where(active, key, jnp.inf))
    p = pos[order]
    act = active[order]
    k = key[order]
    own = jnp.asarray(owner)[order]
    a_, b_ = p[:-1], p[1:]
    cand = act[:-1] & act[1:] & (k[:-1] >= ks) & (k[1:] <= ke)
    cand = cand & ~((own[:-1] == own[1:]) & (own[:-1] >= 0))
    to_w = lambda x: (x - org) @ rot  # noqa: E731
    fn = _WRAP_FN[kind]
    if kind == "WrapEllipsoid":
        # An ellipsoid is either a mandatory wrap or none, so the segment GeometryPath
        # picks (the first mandatory one) follows from the cheap crossing test alone; the
        # costly wrap (fan of closest points, tangent iterations, polyline) runs once.
        code = jax.vmap(lambda x, y: _ellipsoid_code(to_w(x), to_w(y), prm))(a_, b_)
        mand = cand & (code == MANDATORY_WRAP)
        j = jnp.argmax(mand)
        engaged = jnp.any(mand) & any_active
        _, r1, r2, wl_j = fn(to_w(a_[j]), to_w(b_[j]), prm, axis, sign)
        r1g_j, r2g_j = r1 @ rot.T + org, r2 @ rot.T + org
    else:
        code, r1, r2, wl = jax.vmap(lambda x, y, c: fn(to_w(x), to_w(y), prm, axis, sign, ~c))(a_, b_, cand)
        r1g = r1 @ rot.T + org
        r2g = r2 @ rot.T + org
        change = _norm(a_ - r1g) + wl + _norm(b_ - r2g) - _norm(b_ - a_)
        mand = cand & (code == MANDATORY_WRAP)
        wrapped = cand & (code == WRAPPED)
        first_m = jnp.argmax(mand)
        masked = jnp.where(wrapped, change, jnp.inf)
        best_w = jnp.argmin(masked)
        has_m = jnp.any(mand)
        has_w = jnp.any(wrapped) & jnp.isfinite(jnp.min(masked))
        j = jnp.where(has_m, first_m, best_w)
        engaged = (has_m | has_w) & any_active
        r1g_j, r2g_j, wl_j = r1g[j], r2g[j], wl[j]
    ka, kb = k[j], k[j + 1]
    pos = pos.at[n1].set(jnp.where(engaged, r1g_j, pos[n1])).at[n2].set(jnp.where(engaged, r2g_j, pos[n2]))
    key = key.at[n1].set(ka + (kb - ka) / 3.0).at[n2].set(ka + 2.0 * (kb - ka) / 3.0)
    active = active.at[n1].set(engaged).at[n2].set(engaged)
    wrap_len = wrap_len.at[s].set(jnp.where(engaged, wl_j, 0.0))
    record = (engaged, order[j].astype(jnp.int32), order[j + 1].astype(jnp.int32), a_[j], b_[j])
    return (pos, active, key, wrap_len), record


def _empty_records(K, W, dt):
    """Per-slot records of one pass (see :func:`_one_wrap`), all "not engaged"."""
    return (jnp.zeros((K, W), bool), jnp.zeros((K, W), jnp.int32), jnp.zeros((K, W), jnp.int32),
            jnp.zeros((K, W, 3), dt), jnp.zeros((K, W, 3), dt))


def _wrap_pass(lay, groups, state):
    """One pass of every wrap slot in order (OpenSim's inner loop over the PathWrapSet).

    Slot by slot (unrolled: the slots are few), each wrap kind present at the slot is
    applied (vmapped) to the muscles whose wrap it is there. Returns the new state and
    the pass's records (K, W) of :func:`_one_wrap`.
    """
    rec = _empty_records(lay.K, lay.W, state[0].dtype)
    for s, slot in enumerate(groups):
        for kind, ks, rot, org, prm, axis, sign in slot:
            sub = tuple(x[ks] for x in state)
            fn = lambda *a, kind=kind, s=s: _one_wrap(kind, s, lay.P, lay.owner, *a)  # noqa: E731
            new, made = jax.vmap(fn)(*sub, rot, org, prm, jnp.asarray(axis), jnp.asarray(sign),
                                     jnp.asarray(lay.wstart[ks, s]), jnp.asarray(lay.wend[ks, s]))
            state = tuple(x.at[ks].set(y) for x, y in zip(state, new))
            rec = tuple(x.at[ks, s].set(y) for x, y in zip(rec, made))
    return state, rec


class _Resolved:
    """All muscle paths at one q: nodes (K, N) (points, then 2 per wrap slot), ordered by key."""

    def __init__(self, pos, active, key, wrap_len, engaged, rot, org, groups, history=None):
        # (K, N, 3) ground positions; a wrap tangent point's is OpenSim's cached one, from
        # the first pass that engaged its wrap (the straight segments use these)
        self.pos = pos
        self.active = active  # (K, N) bool
        self.key = key  # (K, N) order keys
        self.wrap_len = wrap_len  # (K, W) surface lengths
        self.engaged = engaged  # (K, W) bool
        self.rot, self.org = rot, org  # (nb+1, 3, 3), (nb+1, 3): body poses, ground last
        self.groups = groups
        # Every wrap computation, pass by pass: applied (T, K) (the pass was kept for the
        # muscle) and the records (T, K, W) of _one_wrap; None without wrap slots.
        self.history = history


def _resolve_all(lay: _Layout, q, poses) -> _Resolved:
    dt = q.dtype
    rot_e, org_e = _ext_poses(poses.astype(dt))
    loc, act = _point_locals(lay, q)
    b = lay.pbody
    pos = jnp.einsum("kpij,kpj->kpi", rot_e[b], loc) + org_e[b]
    K, W = lay.K, lay.W
    pos = jnp.concatenate([pos, jnp.zeros((K, 2 * W, 3), dt)], axis=1)
    active = jnp.concatenate([act, jnp.zeros((K, 2 * W), bool)], axis=1)
    key = jnp.tile(jnp.concatenate([jnp.arange(lay.P, dtype=dt), jnp.zeros(2 * W, dt)]), (K, 1))
    wrap_len = jnp.zeros((K, W), dt)
    state = (pos, active, key, wrap_len)
    groups = _wrap_groups(lay, rot_e, org_e, dt)
    history = None
    if W > 0 and not lay.multi:
        state, rec = _wrap_pass(lay, groups, state)
        history = (jnp.ones((1, K), bool),) + tuple(x[None] for x in rec)
        cached = state[0]
    elif W > 0:
        # Muscles with several wraps: up to 8 passes, each muscle stopping (as
        # OpenSim) once its length changes by less than 0.5 mm; one pass for the others.
        # OpenSim caches each path point's ground location once per state, and moving a
        # PathWrapPoint does not invalidate it: the straight segments (of the length, the
        # convergence check and the returned path) use each tangent point's position
        # from the first pass that engaged its wrap, the surface lengths the current
        # ones. `seen` (K, W) flags the slots engaged so far, `fpos` (K, 2W, 3) holds
        # their tangent points' first positions.
        single = jnp.asarray(lay.nw <= 1)
        P = lay.P

        def step(carry):
            st, last, done, seen, fpos = carry
            new, rec = _wrap_pass(lay, groups, st)
            new = tuple(jnp.where(done.reshape((-1,) + (1,) * (a.ndim - 1)), a, b) for a, b in zip(st, new))
            fresh = jnp.repeat(new[1][:, P::2] & ~seen & ~done[:, None], 2, axis=1)
            fpos = jnp.where(fresh[..., None], new[0][:, P:], fpos)
            seen = seen | (new[1][:, P::2] & ~done[:, None])
            cached = jnp.concatenate([new[0][:, :P], fpos], axis=1)
            length = _path_lengths(lay, (cached,) + new[1:])
            stop = done | single | (jnp.abs(length - last) < 0.0005)
            return (new, jnp.where(done, last, length), stop, seen, fpos), (~done,) + rec

        def skip(carry):
            return carry, (jnp.zeros(K, bool),) + _empty_records(K, W, dt)

        def body(carry, _):
            return jax.lax.cond(jnp.all(carry[2]), skip, step, carry)

        init = (state, jnp.full(K, jnp.inf, dt), jnp.zeros(K, bool), jnp.zeros((K, W), bool),
                jnp.zeros((K, 2 * W, 3), dt))
        (state, _, _, _, fpos), history = jax.lax.scan(body, init, None, length=8)
        cached = jnp.concatenate([state[0][:, :P], fpos], axis=1)
    else:
        cached = state[0]
    pos, active, key, wrap_len = state
    return _Resolved(cached, active, key, wrap_len, active[:, lay.P::2], rot_e, org_e, groups, history)


def _lengths(model: Model, q, poses):
    if not model.muscles:
        return jnp.zeros(0, q.dtype)
    lay = _layout(model)
    r = _resolve_all(lay, q, poses)
    return _path_lengths(lay, (r.pos, r.active, r.key, r.wrap_len))


def muscle_lengths(model: Model, q: Float[Array, " nq"]) -> Float[Array, " n_muscles"]:
    """Musculotendon path lengths ``L(q)`` (m), in the order of ``model.muscle_names``."""
    q = jnp.asarray(q)
    return _lengths(model, q, body_transforms(model, q))


def muscle_lengthening_speeds(model: Model, q, qd) -> Float[Array, " n_muscles"]:
    """``dL/dt = (dL/dq) q' = -Rᵀ q'`` (m/s)."""
    q, qd = jnp.asarray(q), jnp.asarray(qd)
    return jax.jvp(lambda x: muscle_lengths(model, x), (q,), (qd,))[1]


class PathEvents(eqx.Module):
    """Discrete path state at q: `conditional_active[k]` is a bool per path point of
    muscle k (True for non-conditional points), `wrap_engaged[k]` a bool per wrap."""

    conditional_active: tuple
    wrap_engaged: tuple


def path_events(model: Model, q) -> PathEvents:
    """Which conditional points are active and which wraps are engaged at ``q``.

    The path length is continuous but its derivative (and, where a conditional
    point switches, the length itself) jumps where any of these change; compare
    two states by ``jaxmb.path_event_signature``.
    """
    q = jnp.asarray(q)
    if not model.muscles:
        return PathEvents((), ())
    lay = _layout(model)
    r = _resolve_all(lay, q, body_transforms(model, q))
    act = tuple(r.active[k, :lay.npts[k]] for k in range(lay.K))
    eng = tuple(r.engaged[k, :lay.nw[k]] for k in range(lay.K))
    return PathEvents(act, eng)


def path_event_signature(model: Model, q) -> Bool[Array, " n_events"]:
    """All of :func:`path_events` flattened to one bool vector (for comparing states)."""
    ev = path_events(model, q)
    parts = list(ev.conditional_active) + list(ev.wrap_engaged)
    return jnp.concatenate([jnp.ravel(p) for p in parts]) if parts else jnp.zeros(0, bool)


def muscle_path_points(model: Model, q, muscle: str | int):
    """Ground positions (n, 3) of the active path, with wrap tangent points, in path order."""
    q = jnp.asarray(q)
    k = model.muscle_names.index(muscle) if isinstance(muscle, str) else int(muscle)
    lay = _layout(model)
    r = _resolve_all(lay, q, body_transforms(model, q))
    active, key = np.asarray(r.active[k]), np.asarray(r.key[k])
    order = [i for i in np.argsort(np.where(active, key, np.inf)) if active[i]]
    return r.pos[k][np.asarray(order)]


# ---------------------------------------------------------------------------
# The moment-arm matrix: seed 001, Eq. 149-195
# ---------------------------------------------------------------------------

def _joint_frames(model: Model, poses):
    """Ground axis a_j and a point c_j on the axis of every joint (for Eq. 176, 179)."""
    axes, centres = [], []
    for i, (j, p) in enumerate(zip(model.joints, model.parents)):
        pre = j.parent_offset()
        if p >= 0:
            pre = poses[p] @ pre
        axes.append(pre[:3, :3] @ j.axis.astype(poses.dtype))
        centres.append(pre[:3, 3])
    return jnp.stack(axes), jnp.stack(centres)


def _gamma_beta(model: Model, poses, axes, centres):
    """γ_i (nb, nj, 3) and β_i (nb, nj, 3) per body, in body-i coordinates.

    Row j of γ_i is the velocity of body i's origin per unit ḟ_j (Eq. 176):
    ``a_j × (o_i - c_j)`` for a revolute joint, ``a_j`` for a prismatic one; row j
    of β_i is ``a_j`` (Eq. 179) for revolute joints in Anc(i) ∪ {i}, 0 otherwise
    (the ϑ of Eq. 178 is folded into β). Both are zero for joints outside the chain.
    """
    nb = model.n_bodies
    chain = np.zeros((nb, nb), bool)
    for i in range(nb):
        chain[i, list(model.ancestors(i) + (i,))] = True
    revolute = np.array([j.kind == "revolute" for j in model.joints])
    rot, o = poses[:, :3, :3], poses[:, :3, 3]
    lever = jnp.cross(axes[None, :, :], o[:, None, :] - centres[None, :, :])  # (i, j, 3)
    g_ground = jnp.where(revolute[None, :, None], lever, axes[None, :, :])
    b_ground = jnp.where(revolute[None, :, None], axes[None, :, :], 0.0)
    g_ground = jnp.where(chain[:, :, None], g_ground, 0.0)
    b_ground = jnp.where(chain[:, :, None], b_ground, 0.0)
    gam = jnp.einsum("ick,ijc->ijk", rot, g_ground)
    bet = jnp.einsum("ick,ijc->ijk", rot, b_ground)
    return gam, bet


def _span_length(kind, pa, pb, prm, axis, sign):
    """Length of a wrapped span p_a -> r1 -> (surface) -> r2 -> p_b, in the wrap frame."""
    _, r1, r2, wl = _WRAP_FN[kind](pa, pb, prm, axis, sign)
    return _norm(pa - r1) + wl + _norm(pb - r2)


def _pull_sorted(P, W, owner, pos, active, key):
    """Unit pulls of the straight segments at every node (path order) and each wrap's neighbours."""
    N = pos.shape[0]
    order = jnp.argsort(jnp.where(active, key, jnp.inf))
    inv = jnp.argsort(order)
    p = pos[order]
    own = jnp.asarray(owner)[order]
    nact = jnp.sum(active)
    idx = jnp.arange(N)
    has_next = idx + 1 < nact
    has_prev = (idx > 0) & (idx < nact)
    nxt, prv = jnp.clip(idx + 1, 0, N - 1), jnp.clip(idx - 1, 0, N - 1)
    surf = jnp.concatenate([(own[:-1] == own[1:]) & (own[:-1] >= 0), jnp.zeros(1, bool)])
    surf_prev = jnp.concatenate([jnp.zeros(1, bool), surf[:-1]])
    to_next = jnp.where((has_next & ~surf)[:, None], _unit(p[nxt] - p), 0.0)
    to_prev = jnp.where((has_prev & ~surf_prev)[:, None], _unit(p[prv] - p), 0.0)
    pull = to_next + to_prev
    s1 = inv[P + 2 * np.arange(W)]
    s2 = inv[P + 2 * np.arange(W) + 1]
    ia, ib = prv[s1], nxt[s2]
    return pull, p, inv, s1, s2, ia, ib, p[ia], p[ib]


def _wrap_reverse_sweep(lay, r, grad, dt):
    """Push ``dL/d(node)`` back through every wrap computation, last first.

    ``grad`` (K, N, 3) holds ``∂L/∂p`` of the final path's straight segments at every
    node. Walking the history of wrap computations (passes and slots) backwards,
    each engaged computation ``(p_a, p_b) -> (r1, r2, wrap length)`` takes the
    gradient held by its tangent points (plus 1 for its length, if it is the one
    that counts) and passes it to the nodes it was computed from, through the wrap
    construction's local Jacobian (``jax.vjp`` of the wrap function). Its wrap body
    takes the reactions: by rigid invariance of the construction, pulls ``-∂L/∂r1``
    at r1, ``-∂L/∂r2`` at r2, ``+∂L/∂p_a`` at p_a and ``+∂L/∂p_b`` at p_b. This is
    the chain rule of the actual computation, so it holds when one wrap's tangent
    point feeds the next wrap and when the passes of the multi-wrap loop end
    before the path is consistent.

    The straight segments of the final path use each tangent point's cached position
    (:class:`_Resolved`), set by the first engaged computation of its wrap: the
    gradient ``grad`` holds on tangent points goes to that computation, while the
    gradient of the current positions (which later computations wrapped from) goes
    to the last computation before them.

    Returns ``(grad, force, moment)``: the gradient left on the path points and,
    per wrap slot, the total pull (K, W, 3) on the wrap body and its moment about
    the ground origin (K, W, 3).
    """
    applied, eng, node_a, node_b, p_a, p_b = r.history
    T, K, W, P = applied.shape[0], lay.K, lay.W, lay.P
    zero3 = jnp.zeros((K, W, 3), dt)
    # The first pass that engaged each slot (-1: none) and the gradient on its cached tangent points.
    hit = applied[:, :, None] & eng
    first = jnp.where(jnp.any(hit, axis=0), jnp.argmax(hit, axis=0), -1)
    gcache = grad[:, P:].reshape(K, W, 2, 3)
    grad = grad.at[:, P:].set(0.0)

    def slot_back(carry, t, s, kind, ks, rot, org, prm, axis, sign):
        grad, live, force, moment = carry
        n1 = P + 2 * s
        made = applied[t, ks]  # this slot was (re)computed in pass t
        on = made & eng[t, ks, s]
        cache = jnp.where((first[ks, s] == t)[:, None, None], gcache[ks, s], 0.0)
        g1 = grad[ks, n1] + cache[:, 0]
        g2 = grad[ks, n1 + 1] + cache[:, 1]
        wbar = jnp.where(live[ks, s], 1.0, 0.0).astype(dt)

        def back(pa, pb, rot_, org_, prm_, ax_, sg_, g1_, g2_, wb_, on_):
            def world(a, b):
                _, r1, r2, wl = _WRAP_FN[kind]((a - org_) @ rot_, (b - org_) @ rot_, prm_, ax_, sg_, ~on_)
                return r1 @ rot_.T + org_, r2 @ rot_.T + org_, wl
            (r1g, r2g, _), vjp = jax.vjp(world, pa, pb)
            ga, gb = vjp((g1_, g2_, wb_))
            return r1g, r2g, ga, gb

        pa, pb = p_a[t, ks, s], p_b[t, ks, s]
        r1g, r2g, ga, gb = jax.vmap(back)(pa, pb, rot, org, prm, jnp.asarray(axis), jnp.asarray(sign),
                                          g1, g2, wbar, on)
        o3 = on[:, None]
        ga = jnp.where(o3, ga, 0.0)
        gb = jnp.where(o3, gb, 0.0)
        g1 = jnp.where(o3, g1, 0.0)
        g2 = jnp.where(o3, g2, 0.0)
        force = force.at[ks, s].add(ga + gb - g1 - g2)
        moment = moment.at[ks, s].add(jnp.cross(pa, ga) + jnp.cross(pb, gb)
                                      - jnp.cross(r1g, g1) - jnp.cross(r2g, g2))
        # The tangent points' gradient is used up; it goes on to the segment's nodes.
        clear = jnp.where(made[:, None], 0.0, 1.0).astype(dt)
        grad = grad.at[ks, n1].multiply(clear).at[ks, n1 + 1].multiply(clear)
        grad = grad.at[ks, node_a[t, ks, s]].add(ga).at[ks, node_b[t, ks, s]].add(gb)
        live = live.at[ks, s].set(live[ks, s] & ~made)
        return grad, live, force, moment

    def step(carry, t):
        for s in reversed(range(W)):
            for group in r.groups[s]:
                carry = slot_back(carry, t, s, *group)
        return carry, None

    def maybe(carry, t):
        # Most muscles converge in two or three of the eight passes: skip the passes no
        # muscle ran (a select under vmap, a real branch otherwise).
        return jax.lax.cond(jnp.any(applied[t]), step, lambda c, _: (c, None), carry, t)

    init = (grad, jnp.ones((K, W), bool), zero3, zero3)
    (grad, _, force, moment), _ = jax.lax.scan(maybe if T > 1 else step, init, jnp.arange(T)[::-1])
    return grad, force, moment


def gmlav_loads(model: Model, q, poses):
    """The generalized line-of-action loads of all muscles at q (Definitions 3-4).

    Returns ``(pull (K, N, 3), points (K, N, 3), wrap_force (K, W, 3),
    wrap_moment (K, W, 3), resolved, layout)``: for every path node (points, then
    r1/r2 of each wrap slot) the ground unit pull of a unit tension and its point
    of application (zero at tangent points, which belong to no body), and per wrap
    slot the total pull on the wrap object's body and its moment about the ground
    origin. Each straight segment pulls its end points towards each other (the
    GMLAV E and its reciprocal Ē); a wrap computation passes the pulls on its
    tangent points to the nodes it was computed from (``-∂L/∂p`` through the wrap
    construction, :func:`_wrap_reverse_sweep`) and loads the wrap object's body
    with the reactions.
    """
    dt = q.dtype
    lay = _layout(model)
    r = _resolve_all(lay, q, poses)
    K, W = lay.K, lay.W
    pre = jax.vmap(lambda a, b, c: _pull_sorted(lay.P, W, lay.owner, a, b, c))(r.pos, r.active, r.key)
    pull_s, inv = pre[0], pre[2]
    pull = jnp.take_along_axis(pull_s, inv[..., None], axis=1)  # node order
    force = jnp.zeros((K, W, 3), dt)
    moment = jnp.zeros((K, W, 3), dt)
    if W > 0:
        grad, force, moment = _wrap_reverse_sweep(lay, r, -pull, dt)
        pull = -grad.at[:, lay.P:].set(0.0)
    return pull, r.pos, force, moment, r, lay


def _closed_form(model: Model, q, with_lengths=False):
    dt = q.dtype
    poses = body_transforms(model, q)
    axes, centres = _joint_frames(model, poses)
    gamma, beta = _gamma_beta(model, poses, axes, centres)
    jgrad = joint_gradients(model, q)
    pull, pos, wforce, wmoment, r, lay = gmlav_loads(model, q, poses)
    lengths = _path_lengths(lay, (r.pos, r.active, r.key, r.wrap_len)) if with_lengths else None
    nb, K, W = lay.nb, lay.K, lay.W
    # All loads of muscle k: pulls at the nodes, then per wrap slot a force and moment.
    bodies = np.concatenate([lay.node_body, lay.wbody], axis=1)  # (K, N + W)
    rn, on_ = r.rot[lay.node_body], r.org[lay.node_body]
    rw, ow = r.rot[lay.wbody], r.org[lay.wbody]
    f_loc = jnp.concatenate([jnp.einsum("knji,knj->kni", rn, pull),
                             jnp.einsum("knji,knj->kni", rw, wforce)], axis=1)  # Rᵀ f
    m_loc = jnp.concatenate([jnp.einsum("knji,knj->kni", rn, jnp.cross(pos - on_, pull)),
                             jnp.einsum("knji,knj->kni", rw, wmoment - jnp.cross(ow, wforce))], axis=1)
    onehot = (bodies[..., None] == np.arange(nb)[None, None, :]).astype(float)  # ground dropped
    E = jnp.einsum("knb,kni->kbi", onehot.astype(dt), f_loc)  # E_ki, body-i coordinates
    Eh = jnp.einsum("knb,kni->kbi", onehot.astype(dt), m_loc)  # Ê_ki
    per_joint = jnp.einsum("ijc,kic->jk", gamma, E) + jnp.einsum("ijc,kic->jk", beta, Eh)
    R = jgrad.T @ per_joint
    if lay.moving:
        # Extension of Eq. 195: the virtual work of a MovingPathPoint's motion on its body.
        km, jm = np.array(lay.moving).T
        J = jax.jacfwd(lambda x: _moving_locals(lay, x))(q)  # (M, 3, nq)
        rm = r.rot[lay.pbody[km, jm]]
        local_pull = jnp.einsum("mji,mj->mi", rm, pull[km, jm])
        contrib = jnp.einsum("mcq,mc->qm", J, local_pull)
        R = R + contrib @ (km[:, None] == np.arange(K)[None, :]).astype(dt)
    return (lengths, R) if with_lengths else R


def moment_arms(model: Model, q: Float[Array, " nq"], method: str = "closed_form") -> Float[Array, "nq n_muscles"]:
    """Moment-arm matrix ``R = -dL/dq`` (nq, n_muscles).

    `method="closed_form"` (default) is seed 001's Eq. 195 built from the
    generalized musculotendon line-of-action vectors (Definition 3-5) and the
    kinematic coefficients γ_i (Eq. 176) and β_i (Eq. 179), with two extensions
    that make it equal ``-dL/dq`` exactly: a MovingPathPoint adds the virtual
    work of its motion relative to its body, and a wrapped span pulls its end
    points along the gradient of the span length (the tangent lines, when the
    wrap's tangent points are exact) and loads the wrap object's body with the
    reactions. `method="autodiff"` is ``-jax.jacfwd(muscle_lengths)``.
    """
    q = jnp.asarray(q)
    if method == "autodiff":
        return -jax.jacfwd(lambda x: muscle_lengths(model, x))(q).T
    if method != "closed_form":
        raise ValueError(f"method must be 'closed_form' or 'autodiff', got {method!r}.")
    if not model.muscles:
        return jnp.zeros((model.nq, 0), q.dtype)
    return _closed_form(model, q)


def muscle_lengths_and_moment_arms(model: Model, q: Float[Array, " nq"]
                                   ) -> tuple[Float[Array, " n_muscles"], Float[Array, "nq n_muscles"]]:
    """``(L(q), R(q))``: :func:`muscle_lengths` and the closed-form :func:`moment_arms`
    from one resolution of the paths (the wrap iterations run once, not twice), for
    callers that need both, e.g. muscle forces and their joint moments ``R F``."""
    q = jnp.asarray(q)
    if not model.muscles:
        return jnp.zeros(0, q.dtype), jnp.zeros((model.nq, 0), q.dtype)
    return _closed_form(model, q, with_lengths=True)


def moment_arm_derivatives(model: Model, q) -> Float[Array, "nq n_muscles nq"]:
    """``dR/dq`` by autodiff of the autodiff moment arms, shape (nq, n_muscles, nq)."""
    q = jnp.asarray(q)
    return jax.jacfwd(lambda x: moment_arms(model, x, method="autodiff"))(q)


def moment_arm_sweep(model: Model, coordinate_name: str, n: int = 181, q0=None, method: str = "closed_form"):
    """Moment arms about one coordinate while it sweeps its range (others at `q0`).

    Returns ``(values (n,), moment arms (n, n_muscles))``; the moment arm is the
    row of R for that coordinate. An unbounded range sweeps ±π.
    """
    k = model.coordinate_index(coordinate_name)
    lo, hi = float(model.q_lower[k]), float(model.q_upper[k])
    if not np.isfinite(lo):
        lo = -np.pi
    if not np.isfinite(hi):
        hi = np.pi
    values = jnp.linspace(lo, hi, n)
    base = model.q_default if q0 is None else jnp.asarray(q0)
    qs = jnp.tile(base, (n, 1)).at[:, k].set(values)
    fn = jax.jit(jax.vmap(lambda x: moment_arms(model, x, method=method)[k]))
    return values, fn(qs)
